"""What a request is, as data: the orchestrator's per-request settings (:class:`OrchestratorConfig`,
:class:`Fallback`), the question checked at the edge (:func:`validate_question`), and the
:class:`RequestLog` the orchestrator fills as it plans, executes and falls back — what was
asked, every plan attempt, workflow and step so far, and how it ended — which becomes the
trace's :class:`~podium.records.RunRecord` however the request ends.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.errors import ConfigError, InvalidQuestion
from podium.pii.protection import CallLog
from podium.records import FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals, utc_now
from podium.streaming import AnswerStream
from podium.text import is_invisible
from podium.workers.base import CallContext, Message
from podium.workflow import Workflow

__all__ = [
    "EventHook",
    "Fallback",
    "OrchestratorConfig",
    "RequestLog",
    "failed_attempt",
    "is_blank",
    "validate_question",
]

EventHook = Callable[[str, dict[str, Any]], None]
"""Progress hook: ``(event, data)`` with events ``plan_start``, ``plan_end``, ``step_start``,
``step_end``, ``keep_answer``, ``fallback``; ``data`` carries ``round`` where it applies."""

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


@dataclass(frozen=True)
class Fallback:
    """The fallback pipeline: one call to pool worker ``worker`` with ``subtask``."""

    worker: int
    subtask: str


@dataclass(frozen=True)
class OrchestratorConfig:
    """What an orchestrator does per request, as data: frozen, changed by
    :func:`dataclasses.replace`, as the :class:`~podium.orchestrator.Orchestrator` that holds it is.

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

    def updated(self, **changes: Any) -> OrchestratorConfig:
        """This config with each given field replaced, except those given as None (kept): a
        serving preset's or a request's optional settings. Raises TypeError for an unknown
        field, ConfigError for a value out of range."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass
class RequestLog:
    """A request in flight and everything it has done so far (mutable; one per request).

    Attributes:
        id: the trace id (32 lowercase hex).
        question: the validated question.
        mode: ``"run"`` (answer) or ``"plan"`` (only write the workflow).
        context: what every call of the request carries (:class:`~podium.workers.base.CallContext`:
            its budget and PII vault; never a step's log or stream).
        emit: the caller's progress hook.
        tags, subject: stored with the trace.
        stream: where the answer's text goes while it is generated, or None.
        started_at: UTC ISO 8601 start time; t0: its ``time.perf_counter()``.
        attempts, workflows, steps: every plan attempt, accepted workflow and step record so
            far, in order (the fallback pipeline's step included).
        fallback: why the fallback pipeline ran, or None.
        status, answer, error: how the request ended (``"ok"``, ``""``, None until then).
        cause: the typed error that ended it with status ``error`` (a server maps it to an HTTP
            status), or None.
    """

    id: str
    question: str
    mode: Literal["run", "plan"]
    context: CallContext
    emit: EventHook
    tags: tuple[str, ...] = ()
    subject: str | None = None
    stream: AnswerStream | None = None
    started_at: str = field(default_factory=utc_now)
    t0: float = field(default_factory=time.perf_counter)
    attempts: list[PlanAttempt] = field(default_factory=list)
    workflows: list[Workflow] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    fallback: FallbackInfo | None = None
    status: Literal["ok", "fallback", "error"] = "ok"
    answer: str = ""
    error: str | None = None
    cause: Exception | None = None

    @property
    def budget(self) -> RequestBudget:
        """The request's budget (the orchestrator gives every request one)."""
        assert self.context.budget is not None
        return self.context.budget

    def end(
        self,
        status: Literal["ok", "fallback", "error"],
        answer: str = "",
        error: str | None = None,
        cause: Exception | None = None,
    ) -> None:
        """Say how the request ended (``cause``: the typed error, for status ``error``)."""
        self.status, self.answer, self.error, self.cause = status, answer, error, cause

    def record(self, *, pool: str, workers: tuple[str, ...], conductor: str) -> RunRecord:
        """The trace record of the request as it stands now (finished now)."""
        attempts, steps = tuple(self.attempts), tuple(self.steps)
        return RunRecord(
            id=self.id,
            question=self.question,
            pool=pool,
            workers=workers,
            conductor=conductor,
            mode=self.mode,
            started_at=self.started_at,
            finished_at=utc_now(),
            status=self.status,
            answer=self.answer,
            attempts=attempts,
            workflows=tuple(self.workflows),
            steps=steps,
            totals=Totals.of(attempts, steps, time.perf_counter() - self.t0, tuple(self.budget.incidents)),
            fallback=self.fallback,
            error=self.error,
            tags=self.tags,
            subject=self.subject,
            cause=self.cause if self.status == "error" else None,
        )


def failed_attempt(
    attempt: int,
    round_: int,
    kind: str,
    error: str,
    messages: Sequence[Message],
    cost_usd: float,
    started: float,
    started_at: str,
    calls: CallLog,
) -> PlanAttempt:
    """The record of a plan attempt that raised: what it was sent (``messages``, pseudonymized
    when the conductor is external), what its calls settled on the budget (USD), when
    (``started``: its perf_counter time), and who received data."""
    return PlanAttempt(
        attempt,
        tuple(messages),
        "",
        None,
        round=round_,
        error_kind=kind,
        error=error,
        latency_s=time.perf_counter() - started,
        cost_usd=cost_usd,
        started_at=started_at,
        finished_at=utc_now(),
        disclosures=tuple(calls.disclosures.values()),
    )
