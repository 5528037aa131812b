"""The conductor as a worker (Nielsen et al. 2026 §3.2): a step that runs a whole nested request.

A pool may list the conductor itself as a worker (``backend = "conductor"``). Its step's message
— the question, the steps its access list grants, its subtask — becomes the question of a
nested request on the same orchestrator, whose answer is the step's output. A depth limit
bounds the nesting; past it the call fails with a ClientError (not retried), so the step fails
and the usual fallback rules apply.

The nested request shares the outer request's budget: its calls reserve against the same cost
cap and deadline, so the worker is ``self_budgeted`` (the budget guard does not reserve for it
again). It leaves its own trace, like every request.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from podium.budget import current_budget
from podium.errors import ClientError, ConfigError, ServerError
from podium.workers.base import Completion, Message, Price, Usage, WorkerSettings

if TYPE_CHECKING:
    from podium.orchestrator import Orchestrator

__all__ = ["ConductorWorker"]

_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("podium_conductor_depth", default=0)


class ConductorWorker:
    """A worker that answers by running a nested request on an orchestrator.

    Args:
        name: its name in the pool.
        description: what the (outer) conductor reads about it.
        max_depth: how many nested requests may stack (1 = the conductor may call itself once).
    """

    backend: ClassVar[str] = "conductor"
    """The backend's name in pool files (``backend = "conductor"``); part of the request-cache key."""

    self_budgeted = True

    def __init__(self, name: str, *, description: str = "", max_depth: int = 1) -> None:
        if max_depth < 1:
            raise ConfigError(f"worker {name!r}: max_depth must be at least 1")
        self.name = name
        self.description = description
        self.max_depth = max_depth
        self.price = Price()
        self.settings = WorkerSettings(max_tokens=0)
        self.system_prompt: str | None = None
        self._orchestrator: Orchestrator | None = None

    def bind(self, orchestrator: Orchestrator) -> None:
        """Attach the orchestrator whose requests this worker runs (done by the runtime)."""
        self._orchestrator = orchestrator

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        if self._orchestrator is None:
            raise ConfigError(f"worker {self.name!r} is not bound to an orchestrator")
        depth = _DEPTH.get()
        if depth >= self.max_depth:
            raise ClientError(
                f"worker {self.name!r}: nested conductor depth limit ({self.max_depth}) reached", worker=self.name
            )
        started = time.perf_counter()
        token = _DEPTH.set(depth + 1)
        try:
            record = await self._orchestrator.run(messages[-1]["content"], budget=current_budget())
        finally:
            _DEPTH.reset(token)
        if record.status == "error":
            raise ServerError(
                f"worker {self.name!r}: nested request {record.id} failed: {record.error}", worker=self.name
            )
        t = record.totals
        return Completion(
            text=record.answer,
            usage=Usage(t.input_tokens + t.conductor_input_tokens, t.output_tokens + t.conductor_output_tokens),
            cost_usd=t.total_cost_usd,
            latency_s=time.perf_counter() - started,
        )
