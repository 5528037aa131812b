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
import re
import time
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.conductor.base import Conductor, PreviousRound
from podium.errors import ConfigError, CostCapExceeded, DeadlineExceeded, EmptyOutput, InvalidQuestion, PodiumError
from podium.executor import StepCallback, WorkflowFailed, execute, run_step
from podium.pii.session import CallLog
from podium.pii.vault import Vault
from podium.records import FallbackInfo, PlanAttempt, RecordSink, RunRecord, StepRecord, Totals, utc_now
from podium.streaming import AnswerStream
from podium.text import is_invisible
from podium.workers.base import CallContext, Worker
from podium.workers.resilience import budget_guarded
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

EventHook = Callable[[str, dict[str, Any]], None]
"""Progress hook: ``(event, data)`` with events ``plan_start``, ``plan_end``, ``step_start``,
``step_end``, ``keep_answer``, ``fallback``; ``data`` carries ``round`` where it applies."""


class RecordExporter(Protocol):
    """Something that ships each finished :class:`~podium.records.RunRecord` elsewhere (e.g.
    :class:`podium.telemetry.Telemetry`, OpenTelemetry spans). ``export`` is called once per
    request, after the record is stored, and must not block on the network."""

    def export(self, record: RunRecord) -> None: ...


@dataclass(frozen=True)
class Fallback:
    """The fallback pipeline: one call to pool worker ``worker`` with ``subtask``."""

    worker: int
    subtask: str


@dataclass(frozen=True)
class OrchestratorConfig:
    """What an orchestrator does per request, as data: frozen, changed by
    :func:`dataclasses.replace` (:meth:`Orchestrator.derive` does it for a kind of request).

    Attributes:
        pool_name: shown in traces.
        max_steps: workflow step limit (1 or more).
        resamples: extra conductor attempts after an invalid plan (0 or more).
        max_question_chars: longer questions are refused (1 or more).
        limits: default per-request limits (deadline, step timeout, cost cap).
        periods: period budgets (e.g. per day) every request draws on.
        recursion_rounds: extra rounds after the first (Nielsen et al. 2026 §3.2): the
            conductor reviews its workflow and answer and either keeps the answer (three empty
            lists) or writes a new workflow whose ``"all"`` steps also see the previous round.

    Raises ConfigError for a count outside its range.
    """

    pool_name: str = "pool"
    max_steps: int = 5
    resamples: int = 2
    max_question_chars: int = 20_000
    limits: Limits = field(default_factory=Limits)
    periods: tuple[PeriodBudget, ...] = ()
    recursion_rounds: int = 1

    def __post_init__(self) -> None:
        for name, low in (("max_steps", 1), ("resamples", 0), ("max_question_chars", 1), ("recursion_rounds", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer of {low} or more, got {value!r}")
        object.__setattr__(self, "periods", tuple(self.periods))


_SURROGATE = re.compile("[\ud800-\udfff]")


_BLANK = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories that carry no visible text on their own: controls (NUL …), format
characters (zero-width space, BOM …), spaces and separators, and combining marks."""


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing a reader could see: empty, or only characters of
    :data:`_BLANK`'s categories or invisible (:func:`podium.text.is_invisible`: also Hangul
    fillers and variation selectors). Linear."""
    return all(unicodedata.category(ch) in _BLANK or is_invisible(ch) for ch in text)


def validate_question(question: object, *, max_chars: int) -> str:
    """The question, stripped; raises InvalidQuestion if it is not text, empty, longer than
    ``max_chars`` characters, or not valid Unicode — a lone surrogate, which is what Python makes
    of bytes that are not UTF-8 in argv or stdin (nothing is sent to any worker then)."""
    if not isinstance(question, str):
        raise InvalidQuestion(f"the question must be text, got {type(question).__name__}")
    bad = _SURROGATE.search(question)
    if bad is not None:
        raise InvalidQuestion(
            f"the question is not valid text: character {bad.start()} is a byte that is not UTF-8 or a lone "
            "surrogate; give the question as UTF-8 text"
        )
    text = question.strip()
    if is_blank(text):
        raise InvalidQuestion(
            "the question is empty (nothing but spaces, control or invisible characters); give it some text "
            "(podium run: as an argument or on stdin)"
        )
    if len(text) > max_chars:
        raise InvalidQuestion(
            f"the question is {len(text):,} characters; the limit is {max_chars:,} "
            "(raise max_question_chars in the pool file, or shorten it)"
        )
    return text


class Orchestrator:
    """Runs requests over a pool.

    Args:
        pool: the workers, in pool order (``Model i`` = ``pool[i]``); wrap them with
            :func:`podium.workers.resilience.harden` for budgets, retries and failover.
        conductor: the policy that writes workflows.
        fallback: the fallback pipeline.
        config: the per-request settings (:class:`OrchestratorConfig`; default: its defaults).
        traces: where records go; None keeps them in memory only.
        exporter: also hands every finished record to this (after the trace store); its
            failures are logged, never raised into the request.
        pool_name, max_steps, resamples, max_question_chars, limits, periods, recursion_rounds:
            for short, replace that field of ``config`` (None: keep it).

    Raises ConfigError for a fallback worker outside the pool or a setting out of range.
    """

    def __init__(
        self,
        pool: Sequence[Worker],
        conductor: Conductor,
        fallback: Fallback,
        config: OrchestratorConfig | None = None,
        *,
        traces: RecordSink | None = None,
        exporter: RecordExporter | None = None,
        pool_name: str | None = None,
        max_steps: int | None = None,
        resamples: int | None = None,
        max_question_chars: int | None = None,
        limits: Limits | None = None,
        periods: Sequence[PeriodBudget] | None = None,
        recursion_rounds: int | None = None,
    ) -> None:
        if not 0 <= fallback.worker < len(pool):
            raise ConfigError(f"fallback worker index {fallback.worker} is outside the pool")
        given: dict[str, Any] = {
            "pool_name": pool_name,
            "max_steps": max_steps,
            "resamples": resamples,
            "max_question_chars": max_question_chars,
            "limits": limits,
            "periods": tuple(periods) if periods is not None else None,
            "recursion_rounds": recursion_rounds,
        }
        self.config = replace(config or OrchestratorConfig(), **{k: v for k, v in given.items() if v is not None})
        self.pool = [budget_guarded(w) for w in pool]  # caps hold whether or not harden() was applied
        self.conductor = conductor
        self.fallback = fallback
        self.traces = traces
        self.exporter = exporter

    # the config's fields, read-only: change them with derive() or a new config
    @property
    def pool_name(self) -> str:
        return self.config.pool_name

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    @property
    def resamples(self) -> int:
        return self.config.resamples

    @property
    def max_question_chars(self) -> int:
        return self.config.max_question_chars

    @property
    def limits(self) -> Limits:
        return self.config.limits

    @property
    def periods(self) -> tuple[PeriodBudget, ...]:
        return self.config.periods

    @property
    def recursion_rounds(self) -> int:
        return self.config.recursion_rounds

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
        reason: str,
        *,
        request_id: str | None = None,
        tags: Sequence[str] = (),
        subject: str | None = None,
    ) -> RunRecord:
        """The trace of a request refused before any work (e.g. a busy server's HTTP 503):
        status ``error`` with ``reason`` as its error, no conductor attempt, no step, no cost;
        stored and exported like any other request, so refusals are counted where requests are.

        Raises ConfigError for a request id that is not 32 lowercase hex characters."""
        if request_id is not None and not _is_request_id(request_id):
            raise ConfigError(f"request id {request_id!r} is not 32 lowercase hex characters")
        now = utc_now()
        record = RunRecord(
            id=request_id or uuid.uuid4().hex,
            question=question,
            pool=self.pool_name,
            workers=tuple(w.info.name for w in self.pool),
            conductor=self.conductor.name,
            mode="run",
            started_at=now,
            finished_at=now,
            status="error",
            answer="",
            attempts=(),
            workflows=(),
            steps=(),
            totals=Totals(),
            error=reason,
            tags=tuple(tags),
            subject=subject,
        )
        self._keep(record)
        return record

    def close(self) -> None:
        """Wait until this orchestrator's trace writes are stored (the trace store writes
        behind the requests, :mod:`podium.trace.writer`). The store itself stays open: it may be
        shared (derived orchestrators, a server); its owner closes it."""
        if self.traces is not None:
            self.traces.flush()

    def derive(
        self,
        *,
        workers: Sequence[int] | None = None,
        conductor: Conductor | None = None,
        recursion_rounds: int | None = None,
        max_steps: int | None = None,
        limits: Limits | None = None,
    ) -> Orchestrator:
        """A copy for one kind of request, sharing workers, traces and period budgets.

        Args:
            workers: pool indices the conductor may use, in this order (``Model i`` of the
                copy is ``pool[workers[i]]``); the fallback worker must be among them.
            conductor, recursion_rounds, max_steps, limits: replace this orchestrator's.

        Raises ConfigError for an index outside the pool, a repeated index, or a subset
        without the fallback worker.
        """
        fallback = self.fallback
        pool = self.pool
        if workers is not None:
            chosen = list(workers)
            if not chosen or len(set(chosen)) != len(chosen) or not all(0 <= i < len(pool) for i in chosen):
                raise ConfigError(f"workers must be distinct pool indices 0..{len(pool) - 1}, got {chosen}")
            if fallback.worker not in chosen:
                name = pool[fallback.worker].info.name
                raise ConfigError(f"the allowed workers must include the fallback worker {name!r}")
            fallback = Fallback(chosen.index(fallback.worker), fallback.subtask)
            pool = [pool[i] for i in chosen]
        changes: dict[str, Any] = {"max_steps": max_steps, "recursion_rounds": recursion_rounds, "limits": limits}
        config = replace(self.config, **{k: v for k, v in changes.items() if v is not None})
        return Orchestrator(
            pool, conductor or self.conductor, fallback, config, traces=self.traces, exporter=self.exporter
        )

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
                first round when no review rounds follow (a review round may replace the
                answer, so with rounds > 0 nothing streams live), or the fallback pipeline
                when nothing was streamed before it. The caller completes it from the record's
                answer with :meth:`~podium.streaming.AnswerStream.close`.

        Returns the request's RunRecord, also handed to the trace store (which stores it
        behind the request: :meth:`close` or the store's ``flush`` waits for it). Every request ends
        with an answer (status ``ok`` / ``fallback``) or status ``error`` and a typed error
        message; the deadline bounds everything, the cost cap every call.
        Raises InvalidQuestion before any work for bad input; ConfigError (e.g. a model not
        installed) after recording the failed request in the trace store.
        """
        question = validate_question(question, max_chars=self.max_question_chars)
        outer = context or CallContext()
        budget = outer.budget or budget or RequestBudget(limits or self.limits, self.periods)
        if request_id is not None and not _is_request_id(request_id):
            raise ConfigError(f"request id {request_id!r} is not 32 lowercase hex characters")
        live = stream if self.recursion_rounds == 0 else None  # a review round may replace the answer
        meta = _Meta(request_id or uuid.uuid4().hex, tuple(tags), subject, live)
        # only the answering step streams (the executor puts the stream on that step's call)
        vault = Vault() if outer.vault is None else outer.vault
        request = outer.replace(budget=budget, vault=vault, calls=None, stream=None, ticket=None)
        return await self._run(question, mode, on_event or (lambda _e, _d: None), request, meta)

    async def _run(
        self, question: str, mode: Literal["run", "plan"], emit: EventHook, context: CallContext, meta: _Meta
    ) -> RunRecord:
        request_id = meta.request_id
        budget = _budget(context)
        started_at, t0 = utc_now(), time.perf_counter()
        if self.traces:
            self.traces.begin(
                request_id,
                question,
                started_at=started_at,
                pool=self.pool_name,
                conductor=self.conductor.name,
                mode=mode,
                tags=meta.tags,
                subject=meta.subject,
            )
        attempts: list[PlanAttempt] = []
        steps: list[StepRecord] = []
        workflows: list[Workflow] = []
        fallback: FallbackInfo | None = None
        status: Literal["ok", "fallback", "error"] = "ok"
        answer, error = "", None
        cause: Exception | None = None

        def finish() -> RunRecord:
            record = RunRecord(
                id=request_id,
                question=question,
                pool=self.pool_name,
                workers=tuple(w.info.name for w in self.pool),
                conductor=self.conductor.name,
                mode=mode,
                started_at=started_at,
                finished_at=utc_now(),
                status=status,
                answer=answer,
                attempts=tuple(attempts),
                workflows=tuple(workflows),
                steps=tuple(steps),
                totals=Totals.of(tuple(attempts), tuple(steps), time.perf_counter() - t0, tuple(budget.incidents)),
                fallback=fallback,
                error=error,
                tags=meta.tags,
                subject=meta.subject,
                cause=cause if status == "error" else None,
            )
            self._keep(record)
            return record

        try:
            workflow, fallback = await self._plan(question, attempts, emit, context)
            if workflow is not None:
                workflows.append(workflow)
            if mode == "plan":
                if workflow is None:
                    status, error = "error", f"no valid workflow after {len(attempts)} attempt(s)"
                return finish()
            if workflow is not None:
                try:
                    done = await self._execute_round(workflow, question, 0, (), emit, context, meta.stream)
                    steps.extend(done)
                    answer = done[-1].output
                    if not answer:
                        fallback = FallbackInfo("empty_output", f"step {len(done) - 1} returned no text")
                    else:
                        first = PreviousRound(0, workflow, answer, tuple(s.output for s in done))
                        answer = await self._recurse(question, first, done, attempts, steps, workflows, emit, context)
                except WorkflowFailed as exc:
                    steps.extend(exc.records)
                    fallback = FallbackInfo(exc.fallback_reason, str(exc))
                    _stop_if_period_budget(exc.cause)
            if fallback is not None:
                emit("fallback", {"reason": fallback.reason, "detail": fallback.detail})
                answer, status, error, cause = await self._fallback(question, steps, context, meta.stream)
            return finish()
        except _PeriodBudgetSpent as spent:  # no fallback: it would draw on the same budget
            status, error, fallback, cause = "error", f"CostCapExceeded: {spent.cause}", None, spent.cause
            return finish()
        except BaseException as exc:  # record the request (one trace, always), then let it surface
            status, error = "error", f"{type(exc).__name__}: {exc}"
            cause = exc if isinstance(exc, Exception) else None
            finish()
            raise

    async def _execute_round(
        self,
        workflow: Workflow,
        question: str,
        round_: int,
        previous_steps: Sequence[StepRecord],
        emit: EventHook,
        context: CallContext,
        stream: AnswerStream | None = None,
    ) -> tuple[StepRecord, ...]:
        """One round's workflow within the workflow's time. Raises WorkflowFailed."""
        hook: StepCallback = lambda event, index, step: emit(  # noqa: E731 - a one-line adapter
            f"step_{event}", {"index": index, "step": step, "round": round_}
        )
        return await execute(
            workflow,
            question,
            self.pool,
            on_step=hook,
            timeout_s=_until(_budget(context).workflow_deadline()),
            round=round_,
            previous=previous_steps,
            stream=stream,
            context=context,
        )

    async def _recurse(
        self,
        question: str,
        previous: PreviousRound,
        previous_steps: Sequence[StepRecord],
        attempts: list[PlanAttempt],
        steps: list[StepRecord],
        workflows: list[Workflow],
        emit: EventHook,
        context: CallContext,
    ) -> str:
        """Further rounds; returns the answer to keep. A round that keeps the answer (empty
        workflow), finds no valid plan, fails or runs out of time ends the recursion with the
        previous answer — it never turns an answered request into a failed one."""
        for round_ in range(1, self.recursion_rounds + 1):
            try:
                workflow, stopped = await self._plan(question, attempts, emit, context, previous=previous)
            except _PeriodBudgetSpent:  # a review round is optional: keep the answer
                break
            if workflow is None or stopped is not None:
                break
            workflows.append(workflow)
            if len(workflow) == 0:
                emit("keep_answer", {"round": round_})
                break
            try:
                done = await self._execute_round(workflow, question, round_, previous_steps, emit, context)
            except WorkflowFailed as exc:
                steps.extend(exc.records)
                break
            steps.extend(done)
            if not done[-1].output:
                break
            previous = PreviousRound(round_, workflow, done[-1].output, tuple(s.output for s in done))
            previous_steps = done
        return previous.answer

    async def _fallback(
        self, question: str, steps: list[StepRecord], context: CallContext, stream: AnswerStream | None
    ) -> tuple[str, Literal["fallback", "error"], str | None, Exception | None]:
        """Run the fallback pipeline if time is left; returns (answer, status, error, the typed
        error when it failed)."""
        try:
            _budget(context).check_deadline()
        except DeadlineExceeded as exc:
            return "", "error", f"DeadlineExceeded: {exc} (no time left for the fallback pipeline)", exc
        fresh = stream if stream is not None and not stream.sent else None  # never mix two texts
        step = Step(self.fallback.worker, self.fallback.subtask, ())
        errors: dict[int, BaseException] = {}
        record = await run_step(
            0, step, question, self.pool, {}, phase="fallback", context=context.replace(stream=fresh), errors=errors
        )
        steps.append(record)
        if record.error or not record.output:
            failure = errors.get(0)
            cause = failure if isinstance(failure, Exception) else EmptyOutput(record.worker)
            return "", "error", record.error or "EmptyOutput: the fallback pipeline returned no text", cause
        return record.output, "fallback", None, None

    async def _plan(
        self,
        question: str,
        attempts: list[PlanAttempt],
        emit: EventHook,
        context: CallContext,
        previous: PreviousRound | None = None,
    ) -> tuple[Workflow | None, FallbackInfo | None]:
        """Sample up to ``1 + resamples`` workflows within the workflow's time; the first valid
        one wins."""
        round_ = 0 if previous is None else previous.round + 1
        budget = _budget(context)
        for k in range(self.resamples + 1):
            emit("plan_start", {"attempt": k, "round": round_})
            started, started_at = time.perf_counter(), utc_now()
            spent_before = budget.ledger.spent_usd  # what a failed attempt already cost (USD)
            calls = CallLog()  # an external conductor model: what it was sent, and who received it
            try:
                async with asyncio.timeout(_until(budget.workflow_deadline())):
                    attempt = await self.conductor.plan(
                        question,
                        self.pool,
                        max_steps=self.max_steps,
                        attempt=k,
                        previous=previous,
                        context=context.replace(calls=calls),
                    )
                attempt = dataclasses.replace(attempt, started_at=started_at, finished_at=utc_now())
            except TimeoutError:
                detail = "the conductor did not finish within the workflow's time"
                attempts.append(  # the cut-off call is part of the trace too (its tokens are unknown)
                    PlanAttempt(
                        k,
                        (),
                        "",
                        None,
                        round=round_,
                        error_kind="deadline",
                        error=detail,
                        latency_s=time.perf_counter() - started,
                        cost_usd=budget.ledger.spent_usd - spent_before,
                        started_at=started_at,
                        finished_at=utc_now(),
                        disclosures=tuple(calls.disclosures.values()),
                    )
                )
                return None, FallbackInfo("deadline", detail)
            except ConfigError:
                raise
            except PodiumError as exc:
                _stop_if_period_budget(exc)
                # a provider or model failure of the conductor's own call is a conductor error;
                # budgets and PII protection keep their own reasons
                reason = "conductor_error" if exc.fallback_reason == "worker_error" else exc.fallback_reason
                cost = budget.ledger.spent_usd - spent_before  # e.g. its first pass ran, the second did not fit
                if calls.disclosures or cost > 0:  # data left, or money was spent: keep it on record
                    attempts.append(
                        PlanAttempt(
                            k,
                            calls.sent or (),
                            "",
                            None,
                            round=round_,
                            error_kind=reason,
                            error=f"{type(exc).__name__}: {exc}",
                            latency_s=time.perf_counter() - started,
                            cost_usd=cost,
                            started_at=started_at,
                            finished_at=utc_now(),
                            disclosures=tuple(calls.disclosures.values()),
                        )
                    )
                return None, FallbackInfo(reason, f"conductor: {type(exc).__name__}: {exc}")
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
        last = attempts[-1]
        return None, FallbackInfo("invalid_plan", f"{last.error_kind}: {last.error} (after {len(attempts)} attempts)")


@dataclass(frozen=True)
class _Meta:
    """What the caller says about a request: its id, tags and data subject."""

    request_id: str
    tags: tuple[str, ...]
    subject: str | None
    stream: AnswerStream | None


class _PeriodBudgetSpent(Exception):
    """A period budget (a key's, the pool's) refused a call: the request ends without the
    fallback pipeline, which would draw on the same budget; the caller must hear it (serve
    answers 429), not get a cheaper answer silently."""

    def __init__(self, cause: CostCapExceeded) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _stop_if_period_budget(exc: BaseException | None) -> None:
    """Raises _PeriodBudgetSpent when ``exc`` is a period budget's refusal."""
    if isinstance(exc, CostCapExceeded) and exc.by_period_budget:
        raise _PeriodBudgetSpent(exc)


def _budget(context: CallContext) -> RequestBudget:
    """The request's budget (:meth:`Orchestrator.run` gives every request's context one)."""
    assert context.budget is not None
    return context.budget


def _is_request_id(value: str) -> bool:
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def _until(deadline: float | None) -> float | None:
    """Seconds from now (monotonic) until ``deadline``, or None."""
    return None if deadline is None else deadline - time.monotonic()
