"""Typed records of one request: conductor attempts, executed steps, totals, the run.

These frozen dataclasses are what the trace store persists and what ``--json`` prints. Times are
UTC ISO 8601 strings; durations are seconds; costs are USD.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from podium.errors import FallbackReason
from podium.workers.base import Message, Usage
from podium.workflow import Workflow

__all__ = [
    "CANCELLED",
    "BudgetIncident",
    "Disclosure",
    "FallbackInfo",
    "PlanAttempt",
    "RecordSink",
    "RunRecord",
    "StepRecord",
    "Totals",
    "plain_json",
    "utc_at",
    "utc_now",
]


def utc_now() -> str:
    """Current time, UTC, ISO 8601 with milliseconds (e.g. ``2026-11-30T02:20:22.123Z``),
    truncated to the millisecond (:func:`utc_at` of ``time.time()``)."""
    return utc_at(time.time())


def utc_at(epoch_s: float) -> str:
    """The time ``epoch_s`` (seconds since the Unix epoch), as :func:`utc_now` writes it. A
    request stamps about six times; the date and time of a second are formatted once."""
    global _SECOND
    second = int(epoch_s)
    if second != _SECOND[0]:
        _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_SECOND[1]}.{int((epoch_s - second) * 1000):03d}Z"


_SECOND: tuple[int, str] = (-1, "")
"""The second :func:`utc_now` last formatted, and its text (one tuple: replaced whole)."""

CANCELLED = "Cancelled: stopped before it finished (the client went away, Ctrl-C or a shutdown)"
"""The error of a request that was cancelled (status ``error``); ``podium trace list --status
cancelled`` finds these by its first word."""


@dataclass(frozen=True)
class Disclosure:
    """One third-party recipient of a call: who received data and which PII it carried.

    Recorded for workers marked ``external`` in the pool file (never for local ones), before
    the call is sent, so a call that fails after sending is still on record; never holds PII
    values unless the pool file's ``[pii] record_values`` is on.

    Attributes:
        recipient: the worker's name in the pool file.
        provider: who runs the endpoint (pool file ``provider``; default: the endpoint's host).
        endpoint: the API root called (e.g. ``https://api.openai.com/v1``), None if unknown.
        region: where the provider processes the data (pool file ``region``), None if not set.
        masked: PII kind → placeholders in the outbound payload (pseudonymized before sending).
        clear: PII kind → values sent in clear (a worker with ``allow_pii = true``).
        scanned: whether PII detection ran on the payload (False: protection off, or detection
            failed for a worker that allows PII).
        blocked: why podium refused to send (fail closed), else None: nothing was sent then.
        values: placeholder → original; empty unless ``record_values`` is on.
    """

    recipient: str
    provider: str | None = None
    endpoint: str | None = None
    region: str | None = None
    masked: dict[str, int] = field(default_factory=dict)
    clear: dict[str, int] = field(default_factory=dict)
    scanned: bool = False
    blocked: str | None = None
    values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Disclosure:
        """Rebuild from :func:`dataclasses.asdict` form (as stored in traces)."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass(frozen=True)
class PlanAttempt:
    """One conductor call.

    Attributes:
        attempt: 0 for the first sample, k for the k-th re-sample.
        round: the recursion round (0 = the first workflow).
        messages: the exact prompt messages sent to the conductor.
        raw_output: everything the conductor wrote (reasoning and lists).
        workflow: the validated workflow, or None when parsing failed.
        error_kind: the PlanParseError kind when parsing failed (``unparseable``, ...).
        error: the human-readable parse error.
        usage: conductor tokens (all passes of this attempt).
        cost_usd: USD, from the conductor worker's price table.
        latency_s: seconds.
        constrained: whether grammar-constrained decoding was used.
        started_at, finished_at: UTC ISO 8601, stamped by the orchestrator around the conductor
            call ("" when unknown, e.g. traces stored before these were recorded).
        disclosures: third-party recipients of this attempt's calls (an external conductor
            model), see :class:`Disclosure`.
    """

    attempt: int
    messages: tuple[Message, ...]
    raw_output: str
    workflow: Workflow | None
    round: int = 0
    error_kind: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    constrained: bool = False
    started_at: str = ""
    finished_at: str = ""
    disclosures: tuple[Disclosure, ...] = ()


@dataclass(frozen=True)
class StepRecord:
    """One executed step.

    Attributes:
        index: step index in its workflow (the fallback pipeline's single step is index 0).
        phase: ``"workflow"`` for the conductor's plan, ``"fallback"`` for the fallback pipeline.
        worker_index: the pool index (``Model i``); worker: its name.
        subtask: the instruction; access: ``"all"`` or the granted indices as written.
        visible: the step indices (this round) whose outputs were included in its message.
        round: the recursion round (0 = the first workflow).
        visible_previous: (round, index) of the previous round's steps included (access
            ``"all"`` in a later round).
        messages: the exact messages sent (pseudonymized ones for an external worker).
        output: the worker's text ("" on error), placeholders restored to the originals.
        usage, cost_usd, latency_s: tokens, USD, seconds.
        error: error type and message when the call failed, else None.
        error_type: the error's class name (``"WorkerTimeout"``, ``"CostCapExceeded"``,
            ``"Cancelled"`` for a step cut off by the deadline or a failing sibling), else None.
        started_at, finished_at: UTC ISO 8601.
        disclosures: third-party recipients of this step's calls (workers marked ``external``),
            with the PII kinds each received masked or in clear; see :class:`Disclosure`.
    """

    index: int
    phase: Literal["workflow", "fallback"]
    worker_index: int
    worker: str
    subtask: str
    access: Any
    visible: tuple[int, ...]
    messages: tuple[Message, ...]
    output: str
    usage: Usage
    cost_usd: float
    latency_s: float
    started_at: str
    finished_at: str
    finish_reason: str = "stop"
    error: str | None = None
    error_type: str | None = None
    round: int = 0
    visible_previous: tuple[tuple[int, int], ...] = ()
    disclosures: tuple[Disclosure, ...] = ()


@dataclass(frozen=True)
class BudgetIncident:
    """A cost over what the budget allowed for it: a worker call that cost more than its
    reservation — the provider reported more tokens than the worst case allowed (more than
    ``max_tokens``, or a prompt over the byte bound) — or a conductor's own cost, which podium
    cannot reserve, over what a capped ledger (the request's cap, a period budget) had left.

    Attributes:
        worker: the worker's name (the conductor's, for ``role="conductor"``).
        reserved_usd: what was reserved for the call (for a conductor: what the ledger had
            left), USD; actual_usd: what it cost, USD.
        role: ``"worker"`` or ``"conductor"``.
    """

    worker: str
    reserved_usd: float
    actual_usd: float
    role: Literal["worker", "conductor"] = "worker"


@dataclass(frozen=True)
class Totals:
    """Totals of a request. Worker figures exclude the conductor, which is counted apart.

    Attributes:
        worker_calls, input_tokens, cached_input_tokens, output_tokens, cost_usd: over all
            executed steps (cached input tokens are included in input tokens, priced apart).
        conductor_calls, conductor_input_tokens, conductor_output_tokens, conductor_cost_usd:
            the conductor's own inference over all attempts.
        total_cost_usd: workers plus conductor, USD.
        wall_time_s: the request's wall time, seconds.
        incidents: calls that cost more than their reservation (:class:`BudgetIncident`).
        estimated_calls: steps and conductor attempts whose provider reported no usage: their
            tokens (and so costs) in these totals are podium's estimates (``Usage.estimated``).
    """

    worker_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    conductor_calls: int = 0
    conductor_input_tokens: int = 0
    conductor_cached_input_tokens: int = 0
    conductor_output_tokens: int = 0
    conductor_cost_usd: float = 0.0
    total_cost_usd: float = 0.0
    wall_time_s: float = 0.0
    incidents: tuple[BudgetIncident, ...] = ()
    estimated_calls: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Totals:
        """Read the plain-JSON form (traces written before ``incidents`` existed included)."""
        incidents = tuple(BudgetIncident(**i) for i in data.get("incidents", ()))
        return cls(**{**data, "incidents": incidents})

    @classmethod
    def of(
        cls,
        attempts: tuple[PlanAttempt, ...],
        steps: tuple[StepRecord, ...],
        wall_time_s: float,
        incidents: tuple[BudgetIncident, ...] = (),
    ) -> Totals:
        calls = [s for s in steps if s.error is None or s.usage.input_tokens]
        worker_cost = sum(s.cost_usd for s in steps)
        conductor_cost = sum(a.cost_usd for a in attempts)
        return cls(
            worker_calls=len(calls),
            input_tokens=sum(s.usage.input_tokens for s in steps),
            cached_input_tokens=sum(s.usage.cached_input_tokens for s in steps),
            output_tokens=sum(s.usage.output_tokens for s in steps),
            cost_usd=worker_cost,
            conductor_calls=len(attempts),
            conductor_input_tokens=sum(a.usage.input_tokens for a in attempts),
            conductor_cached_input_tokens=sum(a.usage.cached_input_tokens for a in attempts),
            conductor_output_tokens=sum(a.usage.output_tokens for a in attempts),
            conductor_cost_usd=conductor_cost,
            total_cost_usd=worker_cost + conductor_cost,
            wall_time_s=wall_time_s,
            incidents=incidents,
            estimated_calls=sum(s.usage.estimated for s in steps) + sum(a.usage.estimated for a in attempts),
        )


@dataclass(frozen=True)
class FallbackInfo:
    """Why the fallback pipeline ran (``reason``, see :data:`podium.errors.FallbackReason`) and
    what happened (``detail``, text for people)."""

    reason: FallbackReason
    detail: str


@dataclass(frozen=True)
class RunRecord:
    """The complete record of one request — exactly one per request, however it ends.

    Attributes:
        id: request id (also the trace id).
        status: ``"ok"`` (the workflow answered), ``"fallback"`` (the fallback pipeline
            answered) or ``"error"`` (no answer; see ``error``).
        answer: the answer: the last step's output of the last round that produced one
            ("" when status is error).
        workflows: the accepted workflow of each round, in order (empty when no valid plan
            was found; a later round's empty workflow means "keep the answer").
        mode: ``"run"`` (plan and execute) or ``"plan"`` (plan only).
        workers: the pool's worker names in pool order (``Model i`` = ``workers[i]``).
        tags: caller-given labels (use case, ``shadow``, ...) for search, slices and reports.
        subject: the data subject's key (e.g. a customer id) when the caller gives one, so
            ``podium trace purge --subject`` can erase that person's requests.
        cause: the typed error that ended a request with status error (e.g. a period budget's
            :class:`~podium.errors.CostCapExceeded`, with its ``scope`` and ``retry_after_s``),
            so its caller can act on the error's type and fields, never its text (``podium
            serve`` picks the HTTP status from it); None otherwise. Kept in memory for the
            caller that ran the request only: not stored in traces, not in :meth:`to_json`, not
            compared (a stored record reads back with None).
    """

    id: str
    question: str
    pool: str
    workers: tuple[str, ...]
    conductor: str
    mode: Literal["run", "plan"]
    started_at: str
    finished_at: str
    status: Literal["ok", "fallback", "error"]
    answer: str
    attempts: tuple[PlanAttempt, ...]
    workflows: tuple[Workflow, ...]
    steps: tuple[StepRecord, ...]
    totals: Totals
    fallback: FallbackInfo | None = None
    error: str | None = None
    tags: tuple[str, ...] = ()
    subject: str | None = None
    cause: Exception | None = field(default=None, compare=False, repr=False, metadata={"stored": False})

    @property
    def workflow(self) -> Workflow | None:
        """The first round's workflow, or None."""
        return self.workflows[0] if self.workflows else None

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (workflows in their storage form)."""
        data: dict[str, Any] = plain_json(self)
        data["workflows"] = [w.to_json() for w in self.workflows]
        for attempt, raw in zip(self.attempts, data["attempts"], strict=False):
            raw["workflow"] = attempt.workflow.to_json() if attempt.workflow is not None else None
        return data


_LEAVES = (str, int, float, bool, type(None))

_STORED: dict[type, tuple[str, ...] | None] = {}
"""Per class: its stored fields' names (a dataclass; a field with ``metadata={"stored": False}``
is left out), or None (not a dataclass). Filled on first use: ``plain_json`` runs for every record
written, and reading the fields of every object each time cost more than the rest of it."""


def _stored_fields(cls: type) -> tuple[str, ...] | None:
    try:
        return _STORED[cls]
    except KeyError:
        names = None
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("stored", True))
        _STORED[cls] = names
        return names


def plain_json(obj: Any) -> Any:
    """A record or any part of one (a dataclass, tuple, list, dict or leaf) as plain JSON values:
    dataclasses as dicts of their stored fields, tuples as lists; leaves unchanged."""
    cls = type(obj)
    if cls in _LEAVES:
        return obj
    names = _stored_fields(cls)  # a dataclass instance (a dataclass itself is a type: not one)
    if names is not None:
        return {name: plain_json(getattr(obj, name)) for name in names}
    if isinstance(obj, (list, tuple)):
        return [plain_json(x) for x in obj]
    if isinstance(obj, dict):
        return {k: plain_json(v) for k, v in obj.items()}
    return obj


class RecordSink(Protocol):
    """Where the orchestrator writes its requests (the record-sink interface; docs/scale-out.md):
    ``begin`` when a request starts (a ``running`` row), ``write`` once it finished (the whole
    :class:`RunRecord`, replacing that row), ``flush`` to wait until everything written so far
    is stored. :class:`podium.trace.store.TraceStore` (SQLite) implements it; the core never
    imports a concrete store."""

    def begin(
        self,
        request_id: str,
        question: str,
        *,
        started_at: str,
        pool: str,
        conductor: str,
        mode: str,
        tags: tuple[str, ...] = (),
        subject: str | None = None,
    ) -> None:
        """Record that request ``request_id`` started (ISO-8601 UTC ``started_at``)."""

    def write(self, record: RunRecord) -> None:
        """Record a finished request."""

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) until everything written is stored; False when
        the time ran out."""
