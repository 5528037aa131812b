"""The worker interface: declared data (:class:`WorkerInfo`) and one async method from a
:class:`Call` to a :class:`Completion`.

Every backend (in-process llama.cpp, OpenAI-compatible HTTP, the native provider APIs, the
tools) implements :class:`Worker`. Wrappers (budget guard, retries, failover, PII guard,
request cache) are workers wrapping workers (:mod:`podium.workers.wrapper`), so the executor
never knows they exist. What a call needs from its request — budget, PII vault, disclosure
log, answer stream — travels on the call as a :class:`CallContext`, never in hidden state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

from podium.unicode import stream_safe, valid_text

if TYPE_CHECKING:
    from podium.budget import CallTicket, CostTally, RequestBudget
    from podium.pii.protection import CallLog
    from podium.pii.vault import Vault
    from podium.streaming import TextSink

__all__ = [
    "NO_CONTEXT",
    "Call",
    "CallContext",
    "Completion",
    "CountsTokens",
    "Message",
    "Preloads",
    "Price",
    "PricedPerCall",
    "Usage",
    "Worker",
    "WorkerInfo",
    "WorkerSettings",
    "token_count",
]


class Message(TypedDict):
    """A chat message, as in the OpenAI chat format."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Usage:
    """Token counts of one call.

    Attributes:
        input_tokens: prompt tokens sent, including cached ones.
        output_tokens: generated tokens.
        cached_input_tokens: prompt tokens served from the runtime's or provider's prefix cache
            (in-process llama.cpp: the prefix shared with the previous call on the same model);
            billed at ``Price.cached_input``.
        reasoning_tokens: hidden reasoning tokens the provider reports; already counted in
            ``output_tokens`` (and billed there), shown apart for traces.
        estimated: the provider reported no usage, so the counts are podium's estimate (see
            :mod:`podium.workers.openai_compat`: the model's tokenizer where podium has it, else
            an upper bound from UTF-8 bytes); a sum is estimated if any part is.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False

    @classmethod
    def reported(
        cls, input_tokens: object, output_tokens: object, cached: object = 0, reasoning: object = 0
    ) -> Usage | None:
        """The usage a provider reported, or None when it cannot be true: a count that is not a
        whole number of 0 or more (negative, NaN, infinite, fractional, text that is not
        digits; ``None`` counts as 0), or more cached than prompt tokens, or more reasoning
        than output tokens. A backend then estimates the call as if nothing was reported, so
        the budget keeps the worst case: a lying provider can neither crash a request nor
        pay money back into a ledger."""
        counts = [token_count(v) for v in (input_tokens, output_tokens, cached, reasoning)]
        if any(c is None for c in counts):
            return None
        i, o, c, r = (int(x or 0) for x in counts)
        return cls(i, o, c, r) if c <= i and r <= o else None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.estimated or other.estimated,
        )


_MAX_TOKENS = 10**12
"""More tokens than any call can have: a count above it is not believed."""


def token_count(value: object) -> int | None:
    """A reported token count as an int (``None`` counts as 0), or None when it is not a
    plausible one: negative, fractional, not finite, above 10^12, or text that is not digits."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= _MAX_TOKENS else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and 0 <= value <= _MAX_TOKENS else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 13:
        return int(value)
    return None


@dataclass(frozen=True)
class Price:
    """A worker's price table, USD per 1M tokens."""

    input: float = 0.0
    output: float = 0.0
    cached_input: float = 0.0

    def cost(self, usage: Usage) -> float:
        """Cost of ``usage`` in USD."""
        fresh = usage.input_tokens - usage.cached_input_tokens
        return (
            fresh * self.input + usage.cached_input_tokens * self.cached_input + usage.output_tokens * self.output
        ) / 1_000_000


@dataclass(frozen=True)
class WorkerSettings:
    """Decoding settings of one call (pool defaults < worker < request, merged in the pool).

    Attributes:
        max_tokens: generation limit, tokens.
        temperature: sampling temperature (0 = greedy).
        top_p: nucleus sampling mass (1.0 = off; HTTP backends then leave it out).
        seed: sampling seed, for reproducible runs.
        reasoning_effort: ``"minimal" | "low" | "medium" | "high"`` for providers with
            reasoning models (sent as ``reasoning_effort``), else None.
    """

    max_tokens: int = 512
    temperature: float = 0.2
    top_p: float = 1.0
    seed: int = 0
    reasoning_effort: str | None = None


@dataclass(frozen=True)
class Completion:
    """What a worker returns for one call.

    Attributes:
        text: the generated text, always valid Unicode: a lone surrogate in what the worker
            gave (a provider's ``"\\ud800"``) is replaced by U+FFFD here, so no text that cannot
            be encoded reaches a prompt, a byte count, an answer or a trace
            (:func:`podium.unicode.valid_text`).
        usage: token counts.
        cost_usd: USD, from the worker's price table (USD per 1M tokens); a finite number of 0
            or more — anything else is refused as the call's error
            (:class:`~podium.errors.InvalidCost`) by the budget guard every pool worker sits in.
        latency_s: wall time of the call, seconds.
        finish_reason: ``"stop"`` or ``"length"`` (hit max_tokens).
        served_by: the worker that actually answered when a failover wrapper switched to an
            equivalent worker, else None.
        usage_reported: False when the provider sent no usage (some servers omit it in
            streams); ``usage`` is then podium's estimate (``usage.estimated``), ``cost_usd``
            priced from it, and budgets keep the call's full reservation.
        cached: True when a request cache (:mod:`podium.workers.cache`) or a replay pool
            (:mod:`podium.eval.replay`) answered; ``latency_s`` is then the original call's as its
            backend measured it, and traces record that latency (a live step records its whole
            call's wall time, slightly more).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    finish_reason: str = "stop"
    served_by: str | None = None
    usage_reported: bool = True
    cached: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.text, str):  # the edge where any worker's text enters podium
            object.__setattr__(self, "text", valid_text(self.text))


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker declares about itself: plain data, read by the executor, the conductors,
    the wrappers, the request cache and the traces (nothing probes a worker's attributes).

    Attributes:
        name: its name in the pool file (never shown to the conductor).
        description: capability note shown to the conductor as ``Model i: ...``.
        price: its price table, USD per 1M tokens.
        settings: its default decoding settings.
        system_prompt: a system message sent before each call's user message, or None.
        kind: ``"model"`` (an LLM) or ``"tool"`` (deterministic code: the sandbox, the vote).
        backend: the pool file's backend name (``llama_cpp``, ``openai``, ``python`` …); part
            of the request-cache key.
        model: the model it serves (an embedded model id, a ``.gguf`` path, a provider's model
            name; ``""`` for tools); part of the request-cache key.
        adapter_sha256: sha256 (hex) of a LoRA adapter applied on top of ``model``, or None.
        endpoint: the API root a remote worker calls (None: in-process), for the data-flow
            register.
        grammar: whether it can continue a reply under a GBNF grammar (a :class:`Call` with
            ``prefix``/``grammar``); only in-process llama.cpp can.
        budgeted: its calls reserve their own cost on the request's budget (a nested
            conductor request), so the budget guard only checks the deadline for it.
    """

    name: str
    description: str = ""
    price: Price = field(default_factory=Price)
    settings: WorkerSettings = field(default_factory=WorkerSettings)
    system_prompt: str | None = None
    kind: Literal["model", "tool"] = "model"
    backend: str = ""
    model: str = ""
    adapter_sha256: str | None = None
    endpoint: str | None = None
    grammar: bool = False
    budgeted: bool = False

    @property
    def is_tool(self) -> bool:
        """Whether it is a tool (deterministic code), not an LLM."""
        return self.kind == "tool"


@dataclass(frozen=True)
class CallContext:
    """What the request a call belongs to lends it: passed along with every :class:`Call`
    (explicitly — no context variables), and changed only by copying (:meth:`replace`).

    Attributes:
        budget: the request's deadline and cost ledgers (:class:`podium.budget.RequestBudget`),
            or None outside any request (no limits).
        vault: the request's PII placeholders (:class:`podium.pii.vault.Vault`), shared by its
            steps, its conductor calls and nested requests; None outside any request.
        calls: where the calls of one step (or conductor attempt) log what they disclosed to
            third parties (:class:`podium.pii.protection.CallLog`), or None.
        stream: where the answering step reports its cumulative text while it is generated
            (:class:`podium.streaming.TextSink`), or None (every other call).
        ticket: whether this call's request has left yet (:class:`podium.budget.CallTicket`,
            opened per call by the budget guard), or None.
        tally: where a conductor attempt's calls add what their budget guard settled
            (:class:`podium.budget.CostTally`), or None (every other call).
        task_id: the evaluation task (an outcome matrix's ``sample_id``) a replay worker
            answers for, or None for live traffic.
        depth: how many nested conductor requests enclose this call (0 = none).
    """

    budget: RequestBudget | None = None
    vault: Vault | None = None
    calls: CallLog | None = None
    stream: TextSink | None = None
    ticket: CallTicket | None = None
    tally: CostTally | None = None
    task_id: str | None = None
    depth: int = 0

    def replace(self, **changes: Any) -> CallContext:
        """A copy with ``changes`` (field names as above). Raises TypeError for another name.

        Copies the fields directly: ``dataclasses.replace`` re-reads the class's fields on every
        call, 3× the time, and a request makes about five of these copies."""
        if not changes.keys() <= _CONTEXT_FIELDS:
            raise TypeError(f"CallContext has no field {', '.join(sorted(changes.keys() - _CONTEXT_FIELDS))}")
        copy = object.__new__(CallContext)
        copy.__dict__.update(self.__dict__, **changes)  # no __post_init__ to run: none is defined
        return copy

    def report_text(self, text: str) -> None:
        """Backends: the text generated so far (cumulative); reaches the caller only when this
        call is the answering step of a streamed request. Passed on as valid Unicode
        (:func:`podium.unicode.stream_safe`), as the call's Completion will hold it."""
        if self.stream is not None:
            self.stream.update(stream_safe(text))

    def mark_pending(self) -> None:
        """Backends: the call has not been sent yet (queued, connecting); cancelled now, it
        releases its reservation (see :class:`podium.budget.CallTicket`)."""
        if self.ticket is not None:
            self.ticket.sent = False

    def mark_sent(self) -> None:
        """Backends: the call's request is leaving now (HTTP) or the model starts on it (in
        process); cut off after this, it keeps its worst-case reservation."""
        if self.ticket is not None:
            self.ticket.sent = True

    def call_timeout_s(self) -> float | None:
        """How long the call may take, seconds: the step timeout or what is left of the
        request's deadline (None: no limit)."""
        return None if self.budget is None else self.budget.call_timeout_s()


NO_CONTEXT = CallContext()
"""The context of a call made outside any request: no budget, vault, log or stream."""


_CONTEXT_FIELDS = frozenset(f.name for f in dataclasses.fields(CallContext))


@dataclass(frozen=True)
class Call:
    """One call to a worker: what :meth:`Worker.complete` receives.

    Attributes:
        messages: the chat messages (OpenAI shape).
        settings: the decoding settings asked for, or None for the worker's own.
        prefix: for a grammar-bound continuation, the text the reply must start with (the
            reply returned is only what follows it); None for a plain chat call.
        grammar: a continuation's GBNF grammar, or None.
        stop: a continuation's stop strings.
        context: the request's budget, vault, logs and stream (:class:`CallContext`).
    """

    messages: Sequence[Message]
    settings: WorkerSettings | None = None
    prefix: str | None = None
    grammar: str | None = None
    stop: Sequence[str] = ()
    context: CallContext = NO_CONTEXT

    @property
    def is_continuation(self) -> bool:
        """Whether this continues a reply under a grammar (``prefix`` is set)."""
        return self.prefix is not None

    def settings_for(self, worker: Worker) -> WorkerSettings:
        """The settings the call runs with on ``worker``: the asked ones, else its own."""
        return self.settings or worker.info.settings

    def with_messages(self, messages: Sequence[Message], prefix: str | None = None) -> Call:
        """The same call with other messages (and, for a continuation, another prefix)."""
        return dataclasses.replace(self, messages=messages, prefix=self.prefix if prefix is None else prefix)

    def with_context(self, **changes: Any) -> Call:
        """The same call with its context changed (:meth:`CallContext.replace`)."""
        return dataclasses.replace(self, context=self.context.replace(**changes))

    async def send(self, worker: Worker) -> Completion:
        """Make this call on ``worker``. Raises ConfigError for a continuation on a worker
        that cannot continue text (``info.grammar`` false), else what the worker raises."""
        if self.prefix is not None and not worker.info.grammar:
            from podium.errors import ConfigError

            raise ConfigError(f"worker {worker.info.name!r} cannot continue text under a grammar")
        return await worker.complete(self)


@runtime_checkable
class Worker(Protocol):
    """One callable unit of the pool: declared data (:attr:`info`) and one method.

    Attributes:
        info: what it is (:class:`WorkerInfo`: name, description, price, settings, system
            prompt, kind, capabilities).
    """

    @property
    def info(self) -> WorkerInfo: ...

    async def complete(self, call: Call) -> Completion:
        """Make one call (:class:`Call`: messages, settings, an optional grammar-bound
        continuation, the request's context). Raises ProviderError and its subclasses,
        ContextOverflow, EmptyOutput; ConfigError for a continuation it cannot make."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A worker that can count a call's prompt tokens exactly (in-process llama.cpp), so the
    budget guard reserves the exact prompt instead of a byte bound."""

    def count_tokens(self, messages: Sequence[Message], prefix: str = "") -> int:
        """Prompt tokens of ``messages`` plus ``prefix`` (may load the model: call it off the
        event loop)."""
        ...


@runtime_checkable
class Preloads(Protocol):
    """A worker whose first call loads a model into this process (in-process llama.cpp): a
    conductor that knows the worker will be called can have :meth:`preload` run while it plans,
    so the two loads overlap (:func:`podium.workers.wrapper.preload_in_background`)."""

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory already."""
        ...

    def preload(self) -> None:
        """Load the model now if it is not loaded (blocking: call it off the event loop); a
        no-op once loaded. Raises what the first call would raise (ConfigError,
        ModelNotInstalled)."""
        ...


@runtime_checkable
class PricedPerCall(Protocol):
    """A worker whose calls have a known price each, not a price per token (a replay worker:
    the recorded cost of the question); the budget guard reserves that."""

    def worst_case_usd(self, call: Call) -> float:
        """What ``call`` can cost at most, USD."""
        ...
