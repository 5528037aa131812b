"""One request end to end: conductor → validate/re-sample → execute → fallback → trace.

:class:`Orchestrator` owns a pool of workers, a conductor and the fallback pipeline (one call to
a configured default worker). Every request, however it ends, leaves exactly one complete
:class:`~podium.records.RunRecord` in the trace store.

Fallback reasons recorded: ``invalid_plan`` (no valid workflow after the re-samples),
``conductor_error`` (the conductor's runtime failed), ``worker_error`` (a step failed after its
retries), ``empty_output`` (the last step returned nothing), ``cost_cap`` (a call's reservation
did not fit the cost cap), ``deadline`` (the workflow ran out of time; the fallback then gets the
time kept back by ``Limits.fallback_reserve``), ``pii_protection`` (PII protection refused a
third-party call or its reply: :class:`~podium.errors.PIIProtectionError`).

Each request has one :class:`~podium.workers.base.CallContext` that every call it makes carries:
its budget, and one vault of PII placeholders for all its steps and conductor calls (never
stored; a nested request shares its parent's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Literal, Protocol

from podium.budget import CostTally, Limits, RequestBudget
from podium.conductor.base import Conductor, DirectConductor, PreviousRound
from podium.errors import ConfigError, CostCapExceeded, DeadlineExceeded, EmptyOutput, PodiumError
from podium.executor import StepCallback, StepLog, WorkflowFailed, execute, run_step
from podium.pii.protection import CallLog
from podium.pii.vault import Vault
from podium.records import CANCELLED, FallbackInfo, RecordSink, RunRecord, StepRecord, utc_at, utc_now
from podium.request import (
    EventHook,
    Fallback,
    OrchestratorConfig,
    RequestLog,
    failed_attempt,
    is_blank,
    validate_question,
)
from podium.streaming import AnswerStream
from podium.workers.base import CallContext, Worker
from podium.workers.budget_guard import budget_guarded
from podium.workflow import Step, Workflow

__all__ = [
    "EventHook",
    "Fallback",
    "Orchestrator",
    "OrchestratorConfig",
    "RecordExporter",
    "is_blank",
    "validate_question",
]

_log = logging.getLogger("podium")


class RecordExporter(Protocol):
    """Something that ships each finished :class:`~podium.records.RunRecord` elsewhere (e.g.
    :class:`podium.telemetry.Telemetry`, OpenTelemetry spans). ``export`` is called once per
    request, after the record is stored, and must not block on the network."""

    def export(self, record: RunRecord) -> None: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Orchestrator:
    """Runs requests over a pool: the data it runs with (frozen; a variant is
    ``dataclasses.replace(orchestrator, conductor=..., config=...)`` or :meth:`subset`) and the
    engine (:meth:`run`).

    Attributes:
        pool: the workers, in pool order (``Model i`` = ``pool[i]``); wrap them with
            :func:`podium.workers.stack.stack_pool` for budgets, retries and failover. Each is
            kept under a budget guard (one is added where none is), so caps hold on any pool.
        conductor: the policy that writes workflows.
        fallback: the fallback pipeline.
        config: the per-request settings (:class:`OrchestratorConfig`; default: its defaults).
        traces: where records go; None keeps them in memory only.
        exporter: also hands every finished record to this (after the trace store); its
            failures are logged, never raised into the request.

    Raises ConfigError for a fallback worker outside the pool.
    """

    pool: Sequence[Worker]
    conductor: Conductor
    fallback: Fallback
    config: OrchestratorConfig = dataclasses.field(default_factory=OrchestratorConfig)
    traces: RecordSink | None = dataclasses.field(default=None, kw_only=True)
    exporter: RecordExporter | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not 0 <= self.fallback.worker < len(self.pool):
            raise ConfigError(f"fallback worker index {self.fallback.worker} is outside the pool")
        # caps hold whether or not stack() was applied (a guard already there is kept as it is)
        object.__setattr__(self, "pool", tuple(budget_guarded(w) for w in self.pool))

    def subset(self, workers: Sequence[int]) -> Orchestrator:
        """A copy whose pool is ``pool[workers[0]], pool[workers[1]], …`` (``Model i`` of the copy
        is ``pool[workers[i]]``), sharing workers, traces and period budgets; the fallback worker
        must be among them.

        Raises ConfigError for an index outside the pool, a repeated index, or a subset without
        the fallback worker.
        """
        chosen, pool = list(workers), self.pool
        if not chosen or len(set(chosen)) != len(chosen) or not all(0 <= i < len(pool) for i in chosen):
            raise ConfigError(f"workers must be distinct pool indices 0..{len(pool) - 1}, got {chosen}")
        if self.fallback.worker not in chosen:
            name = pool[self.fallback.worker].info.name
            raise ConfigError(f"the allowed workers must include the fallback worker {name!r}")
        fallback = Fallback(chosen.index(self.fallback.worker), self.fallback.subtask)
        return dataclasses.replace(self, pool=[pool[i] for i in chosen], fallback=fallback)

    def _keep(self, record: RunRecord) -> None:
        """Hand a finished record to the trace store, then to the exporter."""
        if self.traces:
            self.traces.write(record)
        if self.exporter is not None:
            try:
                self.exporter.export(record)
            except Exception:  # telemetry never fails a request; the record is stored already
                _log.exception("exporting request %s failed", record.id)

    def refuse(
        self,
        question: str,
        refusal: Exception,
        *,
        request_id: str | None = None,
        tags: Sequence[str] = (),
        subject: str | None = None,
        waited_s: float = 0.0,
    ) -> RunRecord:
        """The trace of a request refused before any work (e.g. a busy server's HTTP 503, a key
        whose budget is used up): status ``error``, its error ``Type: message`` of ``refusal``
        as a failed step's is, no conductor attempt, no step, no cost;
        stored and exported like any other request, so refusals are counted where requests are.
        ``waited_s``: seconds it waited before the refusal (for a slot): its trace starts that
        long ago, so its start and wall time are the client's.

        Raises ConfigError for a request id that is not 32 lowercase hex characters."""
        context = CallContext(budget=RequestBudget())
        request = RequestLog(_request_id(request_id), question, "run", context, lambda _e, _d: None)
        request.tags, request.subject = tuple(tags), subject
        if waited_s > 0:
            request.started_at, request.t0 = utc_at(time.time() - waited_s), request.t0 - waited_s
        request.end("error", error=f"{type(refusal).__name__}: {refusal}")
        return self._finish(request)

    def close(self) -> None:
        """Wait until this orchestrator's trace writes are stored (the trace store writes
        behind the requests, :mod:`podium.trace.writer`). The store itself stays open: it may be
        shared (variants of one orchestrator, a server); its owner closes it."""
        if self.traces is not None:
            self.traces.flush()

    async def run(
        self,
        question: str,
        *,
        mode: Literal["run", "plan"] = "run",
        on_event: EventHook | None = None,
        limits: Limits | None = None,
        budget: RequestBudget | None = None,
        context: CallContext | None = None,
        request_id: str | None = None,
        tags: Sequence[str] = (),
        subject: str | None = None,
        stream: AnswerStream | None = None,
    ) -> RunRecord:
        """Answer ``question`` (or, with ``mode="plan"``, only write its workflow).

        Args:
            limits: this request's limits (default: the orchestrator's).
            budget: this request's budget (a server builds it with the key's period budgets);
                overrides ``limits``.
            context: run inside an enclosing request's context (a conductor worker's nested
                request shares its parent's budget — deadline and cost cap — and PII vault), or
                with an evaluation task id for replay workers (``CallContext(task_id=…)``);
                its budget, when set, overrides ``budget`` and ``limits``.
            request_id: the trace id to use (32 lowercase hex; default: a new uuid4), so a
                server can hand the id out before the request ends.
            tags, subject: stored with the trace (see :class:`~podium.records.RunRecord`).
            stream: receives the answer's text while it is generated: the last step of the
                first round when no review round follows or the conductor keeps its answer
                in them (:meth:`~podium.conductor.base.Conductor.keeps_answer`; a review
                round that may replace the answer streams nothing live), or the fallback
                pipeline when nothing was streamed before it. The caller completes it from the record's
                answer with :meth:`~podium.streaming.AnswerStream.close`.

        Returns the request's RunRecord, also handed to the trace store (which stores it
        behind the request: :meth:`close` or the store's ``flush`` waits for it). Every request ends
        with an answer (status ``ok`` / ``fallback``) or status ``error`` and a typed error
        message; the deadline bounds everything, the cost cap every call.
        Raises InvalidQuestion before any work for bad input; ConfigError (e.g. a model not
        installed) after recording the failed request in the trace store.
        """
        question = validate_question(question, max_chars=self.config.max_question_chars)
        outer = context or CallContext()
        budget = outer.budget or budget or RequestBudget(limits or self.config.limits, self.config.periods)
        vault = Vault() if outer.vault is None else outer.vault
        request = RequestLog(
            id=_request_id(request_id),
            question=question,
            mode=mode,
            started_at=utc_now(),
            # only the answering step streams (the executor puts the stream on that step's call)
            context=outer.replace(budget=budget, vault=vault, calls=None, stream=None, ticket=None, tally=None),
            emit=on_event or (lambda _e, _d: None),
            tags=tuple(tags),
            subject=subject,
            stream=stream,
        )
        if self.traces:
            self.traces.begin(
                request.id,
                question,
                started_at=request.started_at,
                pool=self.config.pool_name,
                conductor=self.conductor.name,
                mode=mode,
                tags=request.tags,
                subject=subject,
            )
        try:
            await self._serve(request)
        except _PeriodBudgetSpent as spent:  # no fallback: it would draw on the same budget
            request.fallback = None
            request.end("error", error=f"CostCapExceeded: {spent.cause}", cause=spent.cause)
        except BaseException as exc:  # record the request (one trace, always), then let it surface
            error = CANCELLED if isinstance(exc, asyncio.CancelledError) else f"{type(exc).__name__}: {exc}"
            request.end("error", error=error, cause=exc if isinstance(exc, Exception) else None)
            self._finish(request)
            raise
        return self._finish(request)

    def _finish(self, request: RequestLog) -> RunRecord:
        """The request's trace record, handed to the trace store and the exporter."""
        workers = tuple(w.info.name for w in self.pool)
        record = request.record(pool=self.config.pool_name, workers=workers, conductor=self.conductor.name)
        self._keep(record)
        return record

    async def _serve(self, request: RequestLog) -> None:
        """Plan, execute, review, fall back: fills ``request`` (its status, answer and error
        say how it ended). Raises _PeriodBudgetSpent, ConfigError, cancellation."""
        workflow, request.fallback = await self._plan(request)
        if workflow is not None:
            request.workflows.append(workflow)
        if request.mode == "plan":
            if workflow is None:
                request.end("error", error=f"no valid workflow after {len(request.attempts)} attempt(s)")
            return
        if workflow is not None:
            # a review round may replace the answer: it streams live only if the conductor keeps it
            live = self.config.recursion_rounds == 0 or self.conductor.keeps_answer(
                workflow, self.pool, self.config.max_steps
            )
            try:
                done = await self._execute_round(request, workflow, 0, (), request.stream if live else None)
                request.steps.extend(done)
                answer = done[-1].output
                if not answer:
                    request.fallback = FallbackInfo("empty_output", f"step {len(done) - 1} returned no text")
                else:
                    first = PreviousRound(0, workflow, answer, tuple(s.output for s in done))
                    request.end("ok", await self._recurse(request, first, done))
            except WorkflowFailed as exc:
                request.steps.extend(exc.records)
                request.fallback = FallbackInfo(exc.fallback_reason, _detail(exc, request.budget.limits))
                _stop_if_period_budget(exc.cause)
        if request.fallback is not None:
            request.emit("fallback", {"reason": request.fallback.reason, "detail": request.fallback.detail})
            await self._fallback(request)

    async def _execute_round(
        self,
        request: RequestLog,
        workflow: Workflow,
        round_: int,
        previous_steps: Sequence[StepRecord],
        stream: AnswerStream | None = None,
    ) -> tuple[StepRecord, ...]:
        """One round's workflow within the workflow's time. Raises WorkflowFailed."""
        hook: StepCallback = lambda event, index, step: request.emit(  # noqa: E731 - a one-line adapter
            f"step_{event}", {"index": index, "step": step, "round": round_}
        )
        log = StepLog()
        try:
            return await execute(
                workflow,
                request.question,
                self.pool,
                on_step=hook,
                timeout_s=_until(request.budget.workflow_deadline()),
                round=round_,
                previous=previous_steps,
                stream=stream,
                context=request.context,
                log=log,
            )
        except asyncio.CancelledError:  # the request's trace keeps the steps that ran, cut-off ones too
            request.steps.extend(log.records[i] for i in sorted(log.records))
            raise

    async def _recurse(self, request: RequestLog, previous: PreviousRound, previous_steps: Sequence[StepRecord]) -> str:
        """Further rounds; returns the answer to keep. A round that keeps the answer (empty
        workflow), finds no valid plan, fails or runs out of time ends the recursion with the
        previous answer — it never turns an answered request into a failed one."""
        for round_ in range(1, self.config.recursion_rounds + 1):
            try:
                workflow, stopped = await self._plan(request, previous=previous)
            except _PeriodBudgetSpent:  # a review round is optional: keep the answer
                break
            if workflow is None or stopped is not None:
                break
            request.workflows.append(workflow)
            if len(workflow) == 0:
                request.emit("keep_answer", {"round": round_})
                break
            try:
                done = await self._execute_round(request, workflow, round_, previous_steps)
            except WorkflowFailed as exc:
                request.steps.extend(exc.records)
                break
            request.steps.extend(done)
            if not done[-1].output:
                break
            previous = PreviousRound(round_, workflow, done[-1].output, tuple(s.output for s in done))
            previous_steps = done
        return previous.answer

    async def _fallback(self, request: RequestLog) -> None:
        """Run the fallback pipeline if time is left; ends the request."""
        try:
            request.budget.check_deadline()
        except DeadlineExceeded as exc:
            request.end("error", error=f"DeadlineExceeded: {exc} (no time left for the fallback pipeline)", cause=exc)
            return
        stream = request.stream
        fresh = stream if stream is not None and not stream.sent else None  # never mix two texts
        step = Step(self.fallback.worker, self.fallback.subtask, ())
        context = request.context.replace(stream=fresh)
        log = StepLog()
        try:
            record = await run_step(0, step, request.question, self.pool, log, phase="fallback", context=context)
        finally:
            request.steps.extend(log.records.values())  # a record however the step ended
        if record.error or not record.output:
            failure = log.errors.get(0)
            cause = failure if isinstance(failure, Exception) else EmptyOutput(record.worker)
            request.end(
                "error", error=record.error or "EmptyOutput: the fallback pipeline returned no text", cause=cause
            )
        else:
            request.end("fallback", record.output)

    async def _plan(
        self, request: RequestLog, previous: PreviousRound | None = None
    ) -> tuple[Workflow | None, FallbackInfo | None]:
        """Sample up to ``1 + resamples`` workflows within the workflow's time; the first valid
        one wins (a :class:`DirectConductor` is asked once: it has nothing to sample)."""
        round_ = 0 if previous is None else previous.round + 1
        budget, attempts, emit = request.budget, request.attempts, request.emit
        for k in range(self.config.resamples + 1):
            emit("plan_start", {"attempt": k, "round": round_})
            started, started_at = time.perf_counter(), utc_now()
            tally = CostTally()  # what its calls' budget guards settled (USD): a failed attempt's cost
            calls = CallLog()  # an external conductor model: what it was sent, and who received it
            try:
                budget.check_room()  # a conductor's own calls cannot be reserved: none after an overshoot
                async with asyncio.timeout(_until(budget.workflow_deadline())):
                    attempt = await self.conductor.plan(
                        request.question,
                        self.pool,
                        max_steps=self.config.max_steps,
                        attempt=k,
                        previous=previous,
                        context=request.context.replace(calls=calls, tally=tally),
                    )
                attempt = dataclasses.replace(attempt, started_at=started_at, finished_at=utc_now())
                # its own cost, as it is incurred (an impossible one: InvalidCost, the conductor's error)
                if budget.shared:  # a database transaction: off the event loop
                    await asyncio.to_thread(budget.settle_plan, attempt.cost_usd, tally, by=self.conductor.name)
                else:
                    budget.settle_plan(attempt.cost_usd, tally, by=self.conductor.name)
            except TimeoutError:
                detail = "the conductor did not finish within the workflow's time"
                # the cut-off call is part of the trace too (its tokens are unknown)
                attempts.append(
                    failed_attempt(k, round_, "deadline", detail, (), tally.settled_usd, started, started_at, calls)
                )
                return None, FallbackInfo("deadline", detail)
            except ConfigError:
                raise
            except PodiumError as exc:
                _stop_if_period_budget(exc)
                # a provider or model failure of the conductor's own call is a conductor error;
                # budgets and PII protection keep their own reasons
                reason = "conductor_error" if exc.fallback_reason in ("worker_error", None) else exc.fallback_reason
                cost = tally.settled_usd  # e.g. its first pass ran, the second did not fit
                error = f"{type(exc).__name__}: {exc}"
                if calls.disclosures or cost > 0:  # data left, or money was spent: keep it on record
                    sent = calls.sent or ()
                    attempts.append(failed_attempt(k, round_, reason, error, sent, cost, started, started_at, calls))
                return None, FallbackInfo(reason, f"conductor: {error}")
            if calls.disclosures:
                attempt = dataclasses.replace(
                    attempt, messages=calls.sent or attempt.messages, disclosures=tuple(calls.disclosures.values())
                )
            attempts.append(attempt)
            emit(
                "plan_end", {"attempt": k, "round": round_, "ok": attempt.workflow is not None, "error": attempt.error}
            )
            if attempt.workflow is not None:
                return attempt.workflow, None
            if isinstance(self.conductor, DirectConductor):
                break  # it writes the same workflow for the same question: asking again is no re-sample
        last = attempts[-1]
        return None, FallbackInfo("invalid_plan", f"{last.error_kind}: {last.error} (after {len(attempts)} attempts)")


class _PeriodBudgetSpent(Exception):
    """A period budget (a key's, the pool's) refused a call: the request ends without the
    fallback pipeline, which would draw on the same budget; the caller must hear it (serve
    answers 429), not get a cheaper answer silently."""

    def __init__(self, cause: CostCapExceeded) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _detail(exc: WorkflowFailed, limits: Limits) -> str:
    """Why the workflow ended, as the fallback's detail; for the time limit, how it relates to the
    request's deadline (the steps get the deadline less planning and the fallback's reserve)."""
    if not exc.timed_out or limits.deadline_s is None:
        return str(exc)
    return (
        f"{exc}; the steps get the request's {limits.deadline_s:g} s deadline less planning and the "
        f"{limits.fallback_reserve:.0%} kept for the fallback pipeline"
    )


def _stop_if_period_budget(exc: BaseException | None) -> None:
    """Raises _PeriodBudgetSpent when ``exc`` is a period budget's refusal."""
    if isinstance(exc, CostCapExceeded) and exc.by_period_budget:
        raise _PeriodBudgetSpent(exc)


def _request_id(given: str | None) -> str:
    """``given``, or a new uuid4 (hex) for None. Raises ConfigError for an id that is not 32
    lowercase hex characters."""
    if given is not None and not (len(given) == 32 and all(c in "0123456789abcdef" for c in given)):
        raise ConfigError(f"request id {given!r} is not 32 lowercase hex characters")
    return given or uuid.uuid4().hex


def _until(deadline: float | None) -> float | None:
    """Seconds from now (monotonic) until ``deadline``, or None."""
    return None if deadline is None else deadline - time.monotonic()
