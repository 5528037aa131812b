"""The executor: turns a :class:`~podium.workflow.Workflow` into step records.

Dependencies come from access lists — a step waits for every step it may see — and independent
steps run concurrently on asyncio. (In-process models serialise their own calls per model, so two
steps on one local model queue while steps on different models overlap.) Each step's worker
receives exactly :func:`podium.messages.worker_messages` built from the steps its access list
grants, and nothing else.

If a step fails, the steps that have not started are cancelled and :class:`WorkflowFailed` carries
every record made so far, so the caller can trace them and run the fallback pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Literal

from podium.errors import PodiumError
from podium.messages import GrantedStep, worker_messages
from podium.records import StepRecord, utc_now
from podium.workers.base import Completion, Worker
from podium.workflow import Step, Workflow

__all__ = ["StepCallback", "WorkflowFailed", "execute", "run_step"]

StepCallback = Callable[[str, int, Step], None]
"""Progress hook: called with (``"start"`` | ``"end"``, step index, step)."""


class WorkflowFailed(PodiumError):
    """A step failed; ``records`` holds every step record made (failed one included)."""

    def __init__(self, message: str, records: tuple[StepRecord, ...], cause: BaseException) -> None:
        super().__init__(message)
        self.records = records
        self.cause = cause


async def run_step(
    index: int,
    step: Step,
    question: str,
    pool: Sequence[Worker],
    done: dict[int, StepRecord],
    *,
    phase: Literal["workflow", "fallback"] = "workflow",
) -> StepRecord:
    """Execute one step whose visible steps are all in ``done``; never raises for worker errors
    (they are recorded in ``StepRecord.error``)."""
    worker = pool[step.worker]
    visible = step.visible(index)
    granted = [GrantedStep(j, done[j].subtask, done[j].output) for j in visible]
    messages = worker_messages(question, granted, step.subtask, system_prompt=getattr(worker, "system_prompt", None))
    started_at, t0 = utc_now(), time.perf_counter()
    result, error = Completion(""), None
    try:
        result = await worker.complete(messages)
    except (PodiumError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    return StepRecord(
        index=index,
        phase=phase,
        worker_index=step.worker,
        worker=worker.name,
        subtask=step.subtask,
        access=step.to_json()["access"],
        visible=visible,
        messages=tuple(messages),
        output=result.text.strip(),
        usage=result.usage,
        cost_usd=result.cost_usd,
        latency_s=time.perf_counter() - t0,
        started_at=started_at,
        finished_at=utc_now(),
        finish_reason=result.finish_reason,
        error=error,
    )


async def execute(
    workflow: Workflow,
    question: str,
    pool: Sequence[Worker],
    *,
    on_step: StepCallback | None = None,
) -> tuple[StepRecord, ...]:
    """Run every step of ``workflow`` over ``pool``; returns records in step order.

    Raises WorkflowFailed (with the records made so far) when a step's worker fails.
    """
    done: dict[int, StepRecord] = {}
    finished: dict[int, asyncio.Event] = {i: asyncio.Event() for i in range(len(workflow))}

    async def one(index: int, step: Step) -> None:
        for dep in step.visible(index):
            await finished[dep].wait()
        if on_step:
            on_step("start", index, step)
        record = await run_step(index, step, question, pool, done)
        done[index] = record
        if on_step:
            on_step("end", index, step)
        if record.error is not None:
            raise _StepError(record.error)
        finished[index].set()

    tasks = [asyncio.create_task(one(i, s)) for i, s in enumerate(workflow.steps)]
    try:
        await asyncio.gather(*tasks)
    except _StepError as exc:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        records = tuple(done[i] for i in sorted(done))
        raise WorkflowFailed(f"a step failed: {exc}", records, exc) from None
    return tuple(done[i] for i in range(len(workflow)))


class _StepError(Exception):
    pass
