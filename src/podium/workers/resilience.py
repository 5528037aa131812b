"""Retries and the circuit breaker, and the policy that configures them.

Each wrapper is a :class:`~podium.workers.wrapper.WorkerWrapper` (itself a worker, so the
executor never knows they exist) and overrides its one method, ``complete``.
:func:`podium.workers.stack.stack` puts them on in the order that makes each one mean what it
says (the budget guard is :mod:`podium.workers.budget_guard`, failover
:mod:`podium.workers.failover`)::

    Failover(                      # an equivalent worker takes over when the primary is out
        Retrying(                  # transient errors: exponential backoff + jitter, 429 retry-after
            CircuitBreaker(        # N failures in a row -> cool-down, calls fail fast
                BudgetGuard(w))),  # every attempt: deadline check, cost reservation, timeout
        stack(equivalent))         # the equivalent's own stack, shared with its pool slot
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from podium.errors import (
    TRANSIENT_ERRORS,
    ClientError,
    ProviderError,
    RateLimited,
    WorkerUnavailable,
)
from podium.workers.base import Call, Completion, Worker
from podium.workers.wrapper import WorkerWrapper

__all__ = ["CircuitBreaker", "ResiliencePolicy", "Retrying"]


class Retrying(WorkerWrapper):
    """Retries transient errors (timeouts, 429, 5xx, connection errors) with exponential
    backoff and full jitter; a 429's ``retry_after`` is honoured. Never retries client errors
    (4xx) or an open circuit. Gives up at once when the wait would pass the request deadline.

    Args:
        attempts: total attempts, first included.
        base_delay_s, max_delay_s: backoff before attempt k is uniform in
            [0, min(max_delay_s, base_delay_s · 2^k)] seconds (AWS "full jitter").
        rng: randomness for the jitter (tests pass a seeded one).
        sleep: the sleep function (tests pass a recording one).
    """

    def __init__(
        self,
        inner: Worker,
        *,
        attempts: int = 3,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        rng: random.Random | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        super().__init__(inner)
        self.attempts = max(1, attempts)
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.rng = rng or random.Random()
        self.sleep = sleep

    def delay_s(self, attempt: int, error: ProviderError) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based)."""
        if isinstance(error, RateLimited) and error.retry_after is not None:
            return max(0.0, error.retry_after)
        return self.rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))

    async def complete(self, call: Call) -> Completion:
        for attempt in range(self.attempts):
            try:
                return await super().complete(call)
            except TRANSIENT_ERRORS as exc:
                if attempt == self.attempts - 1:
                    raise
                delay = self.delay_s(attempt, exc)
                budget = call.context.budget
                remaining = budget.remaining_s() if budget else None
                if remaining is not None and delay >= remaining:
                    raise
                await self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover


class CircuitBreaker(WorkerWrapper):
    """Takes a worker out for ``cooldown_s`` after ``threshold`` provider failures in a row;
    meanwhile calls raise WorkerUnavailable at once. After the cool-down one trial call goes
    through; a failure reopens the circuit, a success closes it. Client errors (4xx) and budget
    refusals do not count: they say nothing about the worker's health.
    """

    def __init__(
        self,
        inner: Worker,
        *,
        threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(inner)
        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.open_until = 0.0

    @property
    def is_open(self) -> bool:
        return self.clock() < self.open_until

    async def complete(self, call: Call) -> Completion:
        now = self.clock()
        if now < self.open_until:
            raise WorkerUnavailable(
                f"worker {self.info.name!r} is cooling down after {self.failures} failures in a row",
                worker=self.info.name,
                retry_after=self.open_until - now,
            )
        try:
            result = await super().complete(call)
        except ProviderError as exc:
            if not isinstance(exc, (ClientError, WorkerUnavailable)):
                self.failures += 1
                if self.failures >= self.threshold:
                    self.open_until = self.clock() + self.cooldown_s
            raise
        self.failures = 0
        return result


@dataclass(frozen=True)
class ResiliencePolicy:
    """How :func:`podium.workers.stack.stack` configures a worker's retries and circuit breaker.

    Attributes:
        attempts: total attempts per call for transient errors.
        base_delay_s, max_delay_s: backoff bounds, seconds.
        breaker_threshold: failures in a row that open the circuit.
        breaker_cooldown_s: how long an open circuit stays open, seconds.
    """

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    breaker_threshold: int = 5
    breaker_cooldown_s: float = 30.0
