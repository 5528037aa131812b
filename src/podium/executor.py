"""The executor: turns a :class:`~podium.workflow.Workflow` into step records.

Dependencies come from access lists — a step waits for every step it may see — and independent
steps run concurrently on asyncio. (In-process models serialise their own calls per model, so two
steps on one local model queue while steps on different models overlap.) Each step's worker
receives exactly :func:`podium.messages.worker_messages` built from the steps its access list
grants, and nothing else.

If a step fails, or the workflow's deadline passes, the other steps are cancelled and
:class:`WorkflowFailed` carries every record made — steps cut off midway included, with their
exact messages and ``error_type="Cancelled"`` — so the caller can trace them and run the
fallback pipeline. No record is ever dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from podium.errors import DeadlineExceeded, PodiumError, WorkflowFailed
from podium.messages import GrantedStep, worker_messages
from podium.pii.protection import CallLog
from podium.records import StepRecord, utc_now
from podium.roles import step_settings
from podium.streaming import AnswerStream
from podium.workers.base import NO_CONTEXT, Call, CallContext, Completion, Worker, WorkerSettings
from podium.workflow import ALL, Step, Workflow

__all__ = ["StepCallback", "StepLog", "WorkflowFailed", "execute", "run_step"]

StepCallback = Callable[[str, int, Step], None]
"""Progress hook: called with (``"start"`` | ``"end"``, step index, step)."""


async def run_step(
    index: int,
    step: Step,
    question: str,
    pool: Sequence[Worker],
    log: StepLog,
    *,
    phase: Literal["workflow", "fallback"] = "workflow",
    round: int = 0,
    previous: Sequence[StepRecord] = (),
    settings: WorkerSettings | None = None,
    context: CallContext = NO_CONTEXT,
) -> StepRecord:
    """Execute one step whose visible steps are all in ``log``; adds the step's record (and a
    failed call's exception) to ``log`` and returns the record.

    Args:
        log: the workflow's steps so far; this step's record goes in it however the step ends.
        context: the request's context for the step's call (its budget, PII vault and, for the
            answering step, the answer stream); the step adds its own disclosure log.
        round: the recursion round of this step.
        previous: the previous round's steps; a step with access ``"all"`` sees them too
            (Nielsen et al. 2026 §3.2), tagged with their round.
        settings: this step's decoding settings (a ``sample`` step's own temperature and seed,
            :func:`podium.roles.step_settings`); None: the worker's own.

    The record's ``messages`` are the exact messages sent: pseudonymized ones when the worker is
    external (:mod:`podium.workers.pii_guard`), with its ``disclosures``.
    Worker errors do not raise: they are recorded in ``StepRecord.error`` / ``error_type``.
    Configuration errors (a model not installed, an API key not set) are raised after putting the
    step's record in ``log``, as is cancellation (``error_type="Cancelled"``); a prompt over the
    context window (ContextOverflow) is a step error like any other.
    """
    worker = pool[step.worker]
    visible = step.visible(index)
    earlier = [s for s in previous if s.phase == "workflow"] if step.access == ALL else []
    granted = [GrantedStep(s.index, s.subtask, s.output, s.round) for s in earlier]
    granted += [GrantedStep(j, log.records[j].subtask, log.records[j].output) for j in visible]
    messages = worker_messages(question, granted, step.subtask, system_prompt=worker.info.system_prompt)
    started_at, t0 = utc_now(), time.perf_counter()
    calls = CallLog()  # what an external worker was sent (pseudonymized) and who received it

    def record(result: Completion, error: BaseException | None) -> StepRecord:
        return StepRecord(
            index=index,
            phase=phase,
            worker_index=step.worker,
            worker=result.served_by or worker.info.name,
            subtask=step.subtask,
            access=step.to_json()["access"],
            visible=visible,
            messages=calls.sent or tuple(messages),
            output=result.text.strip(),
            usage=result.usage,
            cost_usd=result.cost_usd,
            latency_s=result.latency_s if result.cached else time.perf_counter() - t0,
            started_at=started_at,
            finished_at=utc_now(),
            finish_reason=result.finish_reason,
            error=_describe(error),
            error_type=None if error is None else _error_type(error),
            round=round,
            visible_previous=tuple((s.round, s.index) for s in earlier),
            disclosures=tuple(calls.disclosures.values()),
        )

    try:
        result = await worker.complete(Call(messages, settings, context=context.replace(calls=calls)))
    except (asyncio.CancelledError, PodiumError, OSError) as exc:
        failed = record(Completion(""), exc)
        # a setup problem (missing model or key) is to fix, not to fall back from: its class has no
        # fallback reason (a ContextOverflow has one: the plan granted more than the window holds)
        log.add(failed, exc)
        if isinstance(exc, asyncio.CancelledError) or (isinstance(exc, PodiumError) and exc.fallback_reason is None):
            raise
        return failed
    return log.add(record(result, None))


class StepLog:
    """The steps of one workflow run (or of the fallback pipeline) so far, for one request.

    Attributes:
        records: each finished step's record, by step index.
        errors: each failed step's exception, by step index (what the caller's policy acts on:
            the fallback reason, the error type).
    """

    def __init__(self) -> None:
        self.records: dict[int, StepRecord] = {}
        self.errors: dict[int, BaseException] = {}

    def add(self, record: StepRecord, error: BaseException | None = None) -> StepRecord:
        """Keep ``record`` (and ``error``, the failed call's exception) under its step index;
        returns ``record``."""
        self.records[record.index] = record
        if error is not None:
            self.errors[record.index] = error
        return record


def _describe(error: BaseException | None) -> str | None:
    """A step's error as its record shows it: ``Type: message``; ``cancelled`` for a cancellation
    (which has no message; :func:`execute` adds why)."""
    if error is None:
        return None
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    return f"{type(error).__name__}: {error}"


def _error_type(error: BaseException) -> str:
    return "Cancelled" if isinstance(error, asyncio.CancelledError) else type(error).__name__


async def execute(
    workflow: Workflow,
    question: str,
    pool: Sequence[Worker],
    *,
    on_step: StepCallback | None = None,
    timeout_s: float | None = None,
    round: int = 0,
    previous: Sequence[StepRecord] = (),
    stream: AnswerStream | None = None,
    context: CallContext = NO_CONTEXT,
    log: StepLog | None = None,
) -> tuple[StepRecord, ...]:
    """Run every step of ``workflow`` over ``pool``; returns records in step order.

    Args:
        timeout_s: the workflow's time limit, seconds (None = none).
        round, previous: the recursion round and the previous round's step records.
        stream: where the last step's text goes while it is generated (see
            :mod:`podium.streaming`); no other step's text ever reaches it.
        context: the request's context for every call (budget, PII vault).
        log: where each step's record goes as it ends (default: a new one); a caller that is
            cancelled (Ctrl-C, a client gone) reads the steps that ran from it, the cancelled
            ones included (``error_type="Cancelled"``).

    Raises WorkflowFailed (with every record made) when a step's worker fails or the time
    limit passes; CancelledError once every running step has recorded its cancellation.
    """
    log = StepLog() if log is None else log
    finished: dict[int, asyncio.Event] = {i: asyncio.Event() for i in range(len(workflow))}

    async def one(index: int, step: Step) -> None:
        for dep in step.visible(index):
            await finished[dep].wait()
        if on_step:
            on_step("start", index, step)
        settings = step_settings(workflow.steps, index, pool[step.worker].info.settings)
        record = await run_step(
            index,
            step,
            question,
            pool,
            log,
            round=round,
            previous=previous,
            settings=settings,
            context=context.replace(stream=stream if index == len(workflow) - 1 else None),
        )
        if on_step:
            on_step("end", index, step)
        if record.error is not None:
            raise _StepError(record.error_type or "Error", record.error, log.errors.get(index))
        finished[index].set()

    tasks = [asyncio.create_task(one(i, s)) for i, s in enumerate(workflow.steps)] if len(workflow) > 1 else []
    try:
        async with asyncio.timeout(timeout_s):
            if tasks:
                await asyncio.gather(*tasks)
            else:  # one step runs in the request's own task: no task to create, nothing to gather
                await one(0, workflow.steps[0])
    except (_StepError, TimeoutError, asyncio.CancelledError) as exc:
        for task in tasks:  # every running step records its cancellation before this returns
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(exc, asyncio.CancelledError):
            raise
        why = "another step failed" if isinstance(exc, _StepError) else "the steps' time ran out"
        records = tuple(  # a cut-off step says why it was cut off, not a bare "CancelledError:"
            replace(r, error=f"cancelled: {why}") if r.error_type == "Cancelled" else r
            for _, r in sorted(log.records.items())
        )
        if isinstance(exc, _StepError):
            raise WorkflowFailed(f"step failed: {exc.message}", records, exc.error_type, exc.cause) from None
        raise WorkflowFailed(
            f"the steps ran out of time ({timeout_s:.1f} s were left for them)",
            records,
            DeadlineExceeded.__name__,
            timed_out=True,
        ) from None
    return tuple(log.records[i] for i in range(len(workflow)))


class _StepError(Exception):
    def __init__(self, error_type: str, message: str, cause: BaseException | None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.cause = cause
