"""podium's exceptions: one root, branches that say who is at fault.

::

    PodiumError                                                 fallback reason
    ├── ConfigError            your input is wrong: fix it and retry        (none: raised)
    │   ├── InvalidQuestion    empty, oversized or unreadable question
    │   ├── ModelNotInstalled  an embedded model file is missing or fails its sha256
    │   ├── ContextOverflow    a prompt does not fit the worker's context window; in a
    │   │                      workflow's step: a step failure instead (worker_error)
    │   ├── TraceStoreError    the trace database cannot be opened, read or written
    │   ├── StoreError         the shared store (SQLite/PostgreSQL) is unreachable or behind
    │   ├── TaskSetError       a task set file is missing, unreadable or malformed
    │   ├── MetricInputError   a metric was given input it cannot be computed from
    │   ├── NotReplayable      a plan whose steps cannot all repeat their recorded requests
    │   └── ReviewFileError    a review file cannot be imported (each bad row named)
    │                          (each defined beside its code: podium.trace.backend,
    │                          podium.store.engine, podium.eval.tasks, podium.eval.metrics,
    │                          podium.conductor.compose, podium.traffic.review)
    ├── ModelBehaviourError    a model did something unusable               worker_error
    │   ├── PlanParseError     the conductor's text is not a valid workflow (has ``kind``)
    │   └── EmptyOutput        a worker returned nothing
    ├── ProviderError          the worker's runtime or transport failed     worker_error
    │   ├── WorkerTimeout      the call outlived its step or request deadline   (transient)
    │   ├── RateLimited        429, with ``retry_after`` when the provider said  (transient)
    │   ├── ServerError        5xx                                               (transient)
    │   ├── TransportError     connection refused / reset / DNS                  (transient)
    │   ├── ClientError        other 4xx (bad request, auth): retrying won't help
    │   ├── WorkerUnavailable  the circuit breaker has taken the worker out for a cool-down
    │   └── InvalidCost        a worker or conductor reported a cost that cannot be true
    │                          (NaN, infinite, negative): its result is not used; not retried
    ├── BudgetError            a limit the caller set was reached
    │   ├── CostCapExceeded    a call's worst-case cost does not fit the remaining budget   cost_cap
    │   ├── DeadlineExceeded   the request's deadline passed (seconds)      deadline
    │   └── ServerBusy         the server's admission limit: no slot and no room to wait
    │                          (podium.serve.admission; answered 503 and traced, never a fallback)
    ├── PIIProtectionError     podium refused a third-party call or its reply   pii_protection
    │                          (fail closed): PII detection failed, or a reply names a
    │                          placeholder it never issued
    ├── UnknownPlaceholder     a reply names a placeholder its vault never issued
    │                          (podium.pii.vault; the PII guard raises PIIProtectionError for it)
    └── WorkflowFailed         a workflow could not finish: its step records and the error
                               that ended it (``cause``); the orchestrator runs the fallback
                               pipeline with the cause's reason

Each class's ``fallback_reason`` is the reason a trace records when that error sends a request
to the fallback pipeline (``FallbackInfo.reason``); a failing conductor call records
``conductor_error`` instead of ``worker_error``. ``podium serve`` answers errors in OpenAI's
error shape (``podium.serve.wire.ApiError``, an HTTP answer, never raised out of the server).

Every error carries fields, not just a string, so callers and traces can act on them.
Vendor exceptions are translated once, in the worker backend that raised them.

Outside this tree, by Python's convention: ``ValueError`` and ``TypeError`` mean a programming
error in a call to podium's library code (an argument out of range, e.g. ``stack_pool`` given
lists of different lengths), and pydantic validators raise ``ValueError`` as pydantic requires
(a pool file's errors reach the user as one :class:`ConfigError` naming each field). Parsers may
raise ``ValueError`` inside a function that turns it into a ``ConfigError`` naming the file. No
``ValueError`` is how podium reports bad user input or a model's output: a command prints a
ConfigError's message and exits 2, and a conductor's bad plan is a traced attempt. (One place
records one: the shadow proxy stores an upstream reply it cannot read as
``ValueError: …`` in that shadow record's ``error``; the client got the upstream's reply as is.)
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "TRANSIENT_ERRORS",
    "BudgetError",
    "ClientError",
    "ConfigError",
    "ContextOverflow",
    "CostCapExceeded",
    "DeadlineExceeded",
    "EmptyOutput",
    "FallbackReason",
    "InvalidCost",
    "InvalidQuestion",
    "ModelBehaviourError",
    "ModelNotInstalled",
    "PIIProtectionError",
    "PlanErrorKind",
    "PlanParseError",
    "PodiumError",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "TransportError",
    "WorkerTimeout",
    "WorkerUnavailable",
    "WorkflowFailed",
]


FallbackReason = Literal[
    "invalid_plan", "conductor_error", "worker_error", "empty_output", "cost_cap", "deadline", "pii_protection"
]
"""Why the fallback pipeline ran (``FallbackInfo.reason``, a trace's ``fallback_reason``):
``invalid_plan`` (no valid workflow within the attempts), ``conductor_error`` (the conductor's own
call failed), ``worker_error`` (a step's worker failed), ``empty_output`` (the last step returned
no text), ``cost_cap`` / ``deadline`` (the request's own cap or deadline stopped the workflow),
``pii_protection`` (PII protection failed closed)."""


class PodiumError(Exception):
    """Root of every error podium raises on purpose.

    Attributes:
        fallback_reason: the fallback reason a trace records when this error sends a request to
            the fallback pipeline (class attribute; see the tree above); None for an error
            that is never a fallback but raised to the caller, wherever it happens.
    """

    fallback_reason: FallbackReason | None = "worker_error"


class ConfigError(PodiumError):
    """Configuration or usage error: the caller's input is wrong and names the fix (raised,
    never a fallback: ``fallback_reason`` is None)."""

    fallback_reason: FallbackReason | None = None


class InvalidQuestion(ConfigError):
    """The question is empty, too long, or not text."""


class ModelNotInstalled(ConfigError):
    """An embedded local model file is missing or its sha256 does not match.

    Attributes:
        model: the embedded model id, e.g. ``"qwen2.5-coder-1.5b-instruct"``.
        install_command: the shell command that installs it.
    """

    def __init__(self, message: str, *, model: str, install_command: str) -> None:
        super().__init__(message)
        self.model = model
        self.install_command = install_command


class ContextOverflow(ConfigError):
    """A prompt plus ``max_tokens`` exceeds a worker's context window (tokens).

    Raised as a configuration error where the pool's ``n_ctx`` cannot hold the conductor's own
    prompt (fix the pool file). Inside a workflow it is a step failure instead (the plan granted
    a step more than its worker holds): the executor records it and the fallback pipeline runs
    with reason ``worker_error``."""

    fallback_reason: FallbackReason | None = "worker_error"

    def __init__(self, message: str, *, worker: str, prompt_tokens: int, n_ctx: int) -> None:
        super().__init__(message)
        self.worker = worker
        self.prompt_tokens = prompt_tokens
        self.n_ctx = n_ctx


class ModelBehaviourError(PodiumError):
    """A model produced output podium cannot use."""


PlanErrorKind = Literal[
    "unparseable",
    "missing_field",
    "length_mismatch",
    "unknown_worker",
    "invalid_access",
    "invalid_subtask",
    "empty_workflow",
    "too_many_steps",
    "unsafe_subtask",
]


class PlanParseError(ModelBehaviourError):
    """The conductor's output is not a valid workflow.

    Attributes:
        kind: which rule failed, one of :data:`PlanErrorKind` (the kinds used in
            ``shared/data/plans/conductor_outputs.jsonl``).
    """

    def __init__(self, kind: PlanErrorKind, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind: PlanErrorKind = kind
        self.detail = message


class EmptyOutput(ModelBehaviourError):
    """A worker returned only whitespace."""

    def __init__(self, worker: str) -> None:
        super().__init__(f"worker {worker!r} returned an empty output")
        self.worker = worker


class ProviderError(PodiumError):
    """The worker's runtime or transport failed.

    Attributes:
        worker: the worker's name in the pool.
        status: HTTP status or ``None`` for in-process runtimes.
        retry_after: seconds the provider asked to wait, if it said.
    """

    def __init__(
        self,
        message: str,
        *,
        worker: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.worker = worker
        self.status = status
        self.retry_after = retry_after


class WorkerTimeout(ProviderError):
    """The call outlived its deadline (step or request). Transient."""


class RateLimited(ProviderError):
    """HTTP 429. ``retry_after`` holds the seconds the provider asked for, if any. Transient."""


class ServerError(ProviderError):
    """HTTP 5xx or an internal runtime failure. Transient."""


class TransportError(ProviderError):
    """The connection failed (refused, reset, DNS). Transient."""


class ClientError(ProviderError):
    """HTTP 4xx other than 429 (bad request, auth, not found). Not retried."""


class WorkerUnavailable(ProviderError):
    """The worker is in a circuit-breaker cool-down until ``retry_after`` seconds from now."""


class InvalidCost(ProviderError):
    """A worker (or a conductor) reported a cost that cannot be true: not a number, infinite or
    negative (a bug in its backend or price table). Its result is not used, so such a cost never
    reaches a trace or a ledger (:func:`podium.budget.checked_cost`); the call was answered and may
    have been billed, so its worst-case reservation is kept. Not retried."""


TRANSIENT_ERRORS: tuple[type[ProviderError], ...] = (WorkerTimeout, RateLimited, ServerError, TransportError)
"""Provider errors worth retrying with backoff."""


class BudgetError(PodiumError):
    """A limit the caller configured (cost cap, deadline) was reached."""


class CostCapExceeded(BudgetError):
    """A call's reservation (worst-case cost, USD) does not fit the remaining budget.

    Attributes:
        needed_usd: the refused reservation, USD.
        remaining_usd: what was left of the budget, USD.
        scope: ``"request"`` (the request's own cap) or the period budget's name (e.g.
            ``"pool:local/day"``, ``"key:team-a/day"``).
        retry_after_s: a period budget's refusal: seconds until its next period starts (when
            it has room again at the latest); None for the request's cap, or when unknown.
    """

    fallback_reason: FallbackReason = "cost_cap"

    def __init__(
        self, message: str, *, needed_usd: float, remaining_usd: float, scope: str, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.needed_usd = needed_usd
        self.remaining_usd = remaining_usd
        self.scope = scope
        self.retry_after_s = retry_after_s

    @property
    def by_period_budget(self) -> bool:
        """Whether a period budget (a pool's or a key's) refused, not the request's own cap:
        the request then ends without the fallback, and ``podium serve`` answers 429."""
        return self.scope != "request"


class DeadlineExceeded(BudgetError):
    """The request's deadline passed.

    Attributes:
        deadline_s: the request's latency budget, seconds.
    """

    fallback_reason: FallbackReason = "deadline"

    def __init__(self, message: str, *, deadline_s: float) -> None:
        super().__init__(message)
        self.deadline_s = deadline_s


class PIIProtectionError(PodiumError):
    """PII protection failed closed: nothing was sent, or the reply was not used.

    Not retried and not a provider fault, so the step fails and the fallback pipeline runs
    (fallback reason ``pii_protection``).

    Attributes:
        worker: the external worker concerned.
        reason: ``"detection_failed"`` (the analyzer raised; nothing was sent) or
            ``"unknown_placeholder"`` (the reply names a placeholder this request never issued).
    """

    fallback_reason: FallbackReason = "pii_protection"

    def __init__(
        self, message: str, *, worker: str, reason: Literal["detection_failed", "unknown_placeholder"]
    ) -> None:
        super().__init__(message)
        self.worker = worker
        self.reason = reason


class WorkflowFailed(PodiumError):
    """A step failed or the workflow's time limit passed.

    Attributes:
        records: every step record made (``podium.records.StepRecord``), in step order, failed
            and cut-off ones included.
        error_type: the class name of the error that ended the workflow (e.g.
            ``"WorkerTimeout"``, ``"CostCapExceeded"``, ``"DeadlineExceeded"``), as traces
            record it.
        cause: the exception the failing step's worker raised (None for the workflow's own
            time limit).
        timed_out: True when the workflow's own time limit ended it (``error_type``
            ``"DeadlineExceeded"``, no cause).
        fallback_reason: the cause's reason (``deadline`` for the time limit; ``worker_error``
            for a cause outside podium's tree, e.g. an OSError).
    """

    fallback_reason: FallbackReason = "worker_error"

    def __init__(
        self,
        message: str,
        records: tuple[Any, ...],
        error_type: str,
        cause: BaseException | None = None,
        *,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.records = records
        self.error_type = error_type
        self.cause = cause
        self.timed_out = timed_out
        if isinstance(cause, PodiumError) and cause.fallback_reason is not None:
            self.fallback_reason = cause.fallback_reason
        elif timed_out:
            self.fallback_reason = DeadlineExceeded.fallback_reason
