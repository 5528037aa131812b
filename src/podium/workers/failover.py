"""Failover: an equivalent worker answers when the primary is out."""

from __future__ import annotations

import dataclasses

from podium.errors import RateLimited, ServerError, TransportError, WorkerTimeout, WorkerUnavailable
from podium.workers.base import Call, Completion, Worker
from podium.workers.wrapper import WorkerWrapper

__all__ = ["Failover"]


class Failover(WorkerWrapper):
    """Calls ``equivalent`` when the primary is unavailable or its transient errors are
    exhausted. The result is the equivalent's, with ``Completion.served_by`` naming it, so the
    step's trace shows who answered."""

    def __init__(self, inner: Worker, equivalent: Worker) -> None:
        super().__init__(inner)
        self.equivalent = equivalent

    async def complete(self, call: Call) -> Completion:
        try:
            return await super().complete(call)
        except (WorkerUnavailable, WorkerTimeout, RateLimited, ServerError, TransportError):
            if call.is_continuation and not self.equivalent.info.grammar:
                raise
            if call.context.budget is not None:
                call.context.budget.check_deadline()
            result = await call.send(self.equivalent)
            return dataclasses.replace(result, served_by=result.served_by or self.equivalent.info.name)
