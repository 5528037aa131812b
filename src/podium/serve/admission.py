"""Admission of ``podium serve``: at most ``max_in_flight`` requests run; later ones wait for a
slot, first come first served (at most ``max_queued`` waiting, each at most ``queue_timeout_s``);
one that gets no slot is :class:`ServerBusy` (the server answers 503 and traces it)."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from podium.errors import BudgetError, FallbackReason

__all__ = ["Admission", "ServerBusy"]


class ServerBusy(BudgetError):
    """No slot for a request: every one is taken and the wait queue is full or timed out.

    Attributes:
        reason: why, for the client (``N requests in flight (max_in_flight M) and K waiting``).
        waited_s: seconds the request waited for a slot (0.0 when refused at once).

    Its text (the trace's error) is the reason and the wait. Never a fallback: answered 503."""

    fallback_reason: FallbackReason | None = None

    def __init__(self, reason: str, waited_s: float) -> None:
        super().__init__(f"{reason}; waited {waited_s:.3f} s")
        self.reason, self.waited_s = reason, waited_s


class Admission:
    """Slots for requests: at most ``limit`` hold one; the others wait first come, first served.

    A freed slot is handed straight to the longest waiter (a request arriving meanwhile cannot
    take it), so nobody waits past their turn."""

    def __init__(self) -> None:
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def enter(self, limit: int, max_queued: int, timeout_s: float) -> float:
        """Take a slot, waiting at most ``timeout_s``; returns the seconds waited. Raises ServerBusy."""
        if self.running < limit and not self._waiters:
            self.running += 1
            return 0.0
        if timeout_s <= 0 or len(self._waiters) >= max_queued:
            reason = f"{self.running} requests in flight (max_in_flight {limit}) and {self.waiting} waiting"
            raise ServerBusy(reason, 0.0)
        started = time.monotonic()
        slot = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            await asyncio.wait_for(asyncio.shield(slot), timeout_s)
        except TimeoutError:
            if not (slot.done() and not slot.cancelled()):  # handed a slot just as the time ran out: keep it
                slot.cancel()
                raise ServerBusy(
                    f"no slot within queue_timeout_s {timeout_s:g} s ({self.running} requests in flight, "
                    f"max_in_flight {limit})",
                    time.monotonic() - started,
                ) from None
        except asyncio.CancelledError:  # the client went away while waiting
            if slot.done() and not slot.cancelled():
                self.leave(limit)  # the slot was ours: pass it on
            slot.cancel()
            raise
        finally:
            if slot in self._waiters:
                self._waiters.remove(slot)
        return time.monotonic() - started

    def leave(self, limit: int) -> None:
        """Give a slot back: to the longest waiter, or free."""
        self.running -= 1
        while self._waiters and self.running < limit:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(None)
                self.running += 1
