"""The worker interface: one async method from messages to a :class:`Completion`.

Every backend (in-process llama.cpp now; HTTP providers and tools later) implements
:class:`Worker`. Wrappers (cache, replay, budget guard, fallback chain) are workers wrapping
workers, so the executor never knows they exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict, runtime_checkable

__all__ = [
    "Completion",
    "Message",
    "Price",
    "TextCompleter",
    "Usage",
    "Worker",
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
        text: the generated text.
        usage: token counts.
        cost_usd: USD, from the worker's price table (USD per 1M tokens).
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


@runtime_checkable
class Worker(Protocol):
    """One callable unit of the pool.

    Attributes:
        name: its name in the pool file (never shown to the conductor).
        description: optional capability note shown to the conductor as ``Model i: ...``.
        price: its price table.
        settings: its default decoding settings.
    """

    name: str
    description: str
    price: Price
    settings: WorkerSettings

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        """Run one chat call. Raises ProviderError / ContextOverflow / EmptyOutput."""
        ...


@runtime_checkable
class TextCompleter(Protocol):
    """A worker that can also continue an assistant turn under a grammar (llama.cpp GBNF).

    The LM conductor uses it for constrained decoding; backends without grammar support
    simply do not implement it and the conductor falls back to the tolerant parser.
    """

    async def continue_text(
        self,
        messages: Sequence[Message],
        prefix: str,
        settings: WorkerSettings,
        *,
        grammar: str | None = None,
        stop: Sequence[str] = (),
    ) -> Completion:
        """Continue the assistant reply that starts with ``prefix``; returns only new text."""
        ...
