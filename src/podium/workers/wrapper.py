"""The base of workers that wrap a worker, and the one typed call they all see.

A worker has two ways to be called — :meth:`~podium.workers.base.Worker.complete` and, for a
local text completer, :meth:`~podium.workers.base.TextCompleter.continue_text` (a grammar-bound
continuation). A wrapper (budget guard, retries, circuit breaker, failover, PII guard, request
cache, or one of your own) should not care which: :class:`WorkerWrapper` turns either into one
:class:`Call` value and hands it to :meth:`WorkerWrapper.call`, the single method a wrapper
overrides. ``call.send(worker)`` makes the same call on any worker; :meth:`Call.with_messages`
changes what is sent (the PII guard masks it). So a wrapper reads ``call.settings`` instead of
working out which positional argument held it.

    class Timing(WorkerWrapper):
        async def call(self, call: Call) -> Completion:
            started = time.perf_counter()
            try:
                return await super().call(call)
            finally:
                print(self.name, time.perf_counter() - started)

Attributes a wrapper forwards from its inner worker: ``name``, ``description``, ``price``,
``settings``, ``system_prompt``, ``is_tool``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from podium.errors import ConfigError
from podium.workers.base import Completion, Message, TextCompleter, Worker, WorkerSettings

__all__ = ["Call", "WorkerWrapper", "grammar_capable", "unwrap"]


@dataclass(frozen=True)
class Call:
    """One call to a worker, whichever method it came through.

    Attributes:
        messages: the chat messages (OpenAI shape).
        settings: the decoding settings asked for, or None for the worker's own.
        prefix: for a continuation (``continue_text``), the text the reply must start with;
            None for a plain ``complete``.
        grammar: a continuation's GBNF grammar, or None.
        stop: a continuation's stop strings.
    """

    messages: Sequence[Message]
    settings: WorkerSettings | None = None
    prefix: str | None = None
    grammar: str | None = None
    stop: Sequence[str] = ()

    @property
    def is_continuation(self) -> bool:
        """Whether this is a ``continue_text`` call."""
        return self.prefix is not None

    def settings_for(self, worker: Worker) -> WorkerSettings:
        """The settings the call runs with on ``worker``: the asked ones, else its own."""
        return self.settings or worker.settings

    def with_messages(self, messages: Sequence[Message], prefix: str | None = None) -> Call:
        """The same call with other messages (and, for a continuation, another prefix)."""
        return dataclasses.replace(self, messages=messages, prefix=self.prefix if prefix is None else prefix)

    async def send(self, worker: Worker) -> Completion:
        """Make this call on ``worker``. Raises ConfigError for a continuation on a worker
        that cannot continue text (:func:`grammar_capable`), else what the worker raises."""
        if self.prefix is None:
            return await worker.complete(self.messages, self.settings)
        if not isinstance(worker, (TextCompleter, WorkerWrapper)):
            raise ConfigError(f"worker {worker.name!r} cannot continue text under a grammar")
        settings = self.settings_for(worker)
        return await worker.continue_text(self.messages, self.prefix, settings, grammar=self.grammar, stop=self.stop)


class WorkerWrapper:
    """A worker around ``inner``: override :meth:`call` to add behaviour; both worker methods
    reach it as one :class:`Call`. The wrapper is itself a worker, so wrappers stack and the
    executor never knows they are there."""

    def __init__(self, inner: Worker) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.price = inner.price
        self.settings = inner.settings
        self.system_prompt: str | None = getattr(inner, "system_prompt", None)
        self.is_tool: bool = getattr(inner, "is_tool", False)

    async def call(self, call: Call) -> Completion:
        """Make ``call`` on the inner worker; wrappers override this to add their behaviour."""
        return await call.send(self.inner)

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        return await self.call(Call(messages, settings))

    async def continue_text(
        self,
        messages: Sequence[Message],
        prefix: str,
        settings: WorkerSettings,
        *,
        grammar: str | None = None,
        stop: Sequence[str] = (),
    ) -> Completion:
        if not grammar_capable(self.inner):
            raise ConfigError(f"worker {self.name!r} cannot continue text under a grammar")
        return await self.call(Call(messages, settings, prefix=prefix, grammar=grammar, stop=tuple(stop)))


def unwrap(worker: Worker) -> Worker:
    """The innermost worker under any wrappers."""
    while isinstance(worker, WorkerWrapper):
        worker = worker.inner
    return worker


def grammar_capable(worker: Worker) -> bool:
    """Whether the worker (under its wrappers) supports grammar-constrained continuation."""
    return isinstance(unwrap(worker), TextCompleter)
