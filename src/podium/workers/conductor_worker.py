"""The conductor as a worker (Nielsen et al. 2026 §3.2): a step that runs a whole nested request.

A pool may list the conductor itself as a worker (``backend = "conductor"``). Its step's message
— the question, the steps its access list grants, its subtask — becomes the question of a
nested request on the same orchestrator, whose answer is the step's output. A depth limit
bounds the nesting; past it the call fails with a ClientError (not retried), so the step fails
and the usual fallback rules apply.

The nested request runs in the outer call's context: its calls reserve against the same cost
cap and deadline (so the worker declares ``info.budgeted``, and the budget guard does not
reserve for it again), and it shares the PII vault. It leaves its own trace, like every request.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from podium.errors import ClientError, ConfigError, ServerError
from podium.workers.base import Call, Completion, Price, Usage, WorkerInfo, WorkerSettings

if TYPE_CHECKING:
    from podium.orchestrator import Orchestrator

__all__ = ["ConductorWorker"]


class ConductorWorker:
    """A worker that answers by running a nested request on an orchestrator.

    Args:
        name: its name in the pool.
        description: what the (outer) conductor reads about it.
        max_depth: how many nested requests may stack (1 = the conductor may call itself once).
    """

    def __init__(self, name: str, *, description: str = "", max_depth: int = 1) -> None:
        if max_depth < 1:
            raise ConfigError(f"worker {name!r}: max_depth must be at least 1")
        self.max_depth = max_depth
        self.info = WorkerInfo(
            name, description, Price(), WorkerSettings(max_tokens=0), backend="conductor", budgeted=True
        )
        self._orchestrator: Orchestrator | None = None

    def bind(self, orchestrator: Orchestrator) -> None:
        """Attach the orchestrator whose requests this worker runs (done by podium.builder)."""
        self._orchestrator = orchestrator

    async def complete(self, call: Call) -> Completion:
        name = self.info.name
        if self._orchestrator is None:
            raise ConfigError(f"worker {name!r} is not bound to an orchestrator")
        if call.context.depth >= self.max_depth:
            raise ClientError(f"worker {name!r}: nested conductor depth limit ({self.max_depth}) reached", worker=name)
        started = time.perf_counter()
        nested = call.context.replace(depth=call.context.depth + 1, calls=None, stream=None, ticket=None)
        record = await self._orchestrator.run(call.messages[-1]["content"], context=nested)
        if record.status == "error":
            raise ServerError(f"worker {name!r}: nested request {record.id} failed: {record.error}", worker=name)
        t = record.totals
        return Completion(
            text=record.answer,
            usage=Usage(t.input_tokens + t.conductor_input_tokens, t.output_tokens + t.conductor_output_tokens),
            cost_usd=t.total_cost_usd,
            latency_s=time.perf_counter() - started,
        )
