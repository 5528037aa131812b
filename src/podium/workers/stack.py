"""The one order of podium's worker wrappers.

Every worker a request reaches is its raw backend under, from the inside out:

1. :class:`~podium.workers.cache.CachedWorker` (with a request cache: evaluation, recording) — a
   hit replays the recorded completion of exactly the request that would be sent;
2. :class:`~podium.workers.pii_guard.PIIGuard` (an external worker under a data policy) —
   pseudonymizes what leaves and restores the reply, so the cache above stores only what the
   provider saw and answered;
3. with a resilience policy: :class:`~podium.workers.budget_guard.BudgetGuard` (deadline, cost
   reservation and settlement, whole-call timeout — per attempt), then
   :class:`~podium.workers.resilience.CircuitBreaker`, then
   :class:`~podium.workers.resilience.Retrying`;
4. :class:`~podium.workers.failover.Failover` to an equivalent worker's own stack
   (:func:`stack_pool`, which builds every stack of a pool first).

This module is the only code that applies these wrappers (a test reads the source for any other
place), so the order cannot differ between the server, ``podium run`` and evaluation. The one
wrapper put on elsewhere is a missing budget guard
(:func:`~podium.workers.budget_guard.budget_guarded`, which keeps a guard that is there): the
orchestrator applies it to every pool worker (a pool built by hand) and the LM conductor to its
own model, so caps hold on any pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.workers.base import Worker

if TYPE_CHECKING:
    from podium.pii.protection import PIIProtection
    from podium.workers.cache import CallStore
    from podium.workers.pii_guard import DataPolicy
    from podium.workers.resilience import ResiliencePolicy

__all__ = ["stack", "stack_pool"]


def stack(
    worker: Worker,
    *,
    cache: CallStore | None = None,
    policy: DataPolicy | None = None,
    protection: PIIProtection | None = None,
    resilience: ResiliencePolicy | None = None,
) -> Worker:
    """``worker`` under the wrappers asked for, in the one order (module doc).

    Args:
        worker: the raw backend.
        cache: the request cache, or None (no caching).
        policy, protection: the worker's data policy and the pool's PII protection (None: a
            local worker, nothing to pseudonymize).
        resilience: retries and circuit breaker settings (None: no budget guard, breaker or
            retries — a judge or a recorder calling the worker directly).

    Returns the outermost wrapper (the worker itself when nothing was asked for).
    """
    if cache is not None:
        from podium.workers.cache import CachedWorker

        worker = CachedWorker(worker, cache)
    if policy is not None:
        from podium.workers.pii_guard import PIIGuard

        worker = PIIGuard(worker, policy, protection)
    if resilience is not None:
        from podium.workers.budget_guard import BudgetGuard
        from podium.workers.resilience import CircuitBreaker, Retrying

        r = resilience
        breaker = CircuitBreaker(BudgetGuard(worker), threshold=r.breaker_threshold, cooldown_s=r.breaker_cooldown_s)
        worker = Retrying(breaker, attempts=r.attempts, base_delay_s=r.base_delay_s, max_delay_s=r.max_delay_s)
    return worker


def stack_pool(
    workers: Sequence[Worker],
    *,
    equivalents: Sequence[int | None],
    policies: Sequence[DataPolicy | None],
    cache: CallStore | None = None,
    protection: PIIProtection | None = None,
    resilience: ResiliencePolicy | None = None,
) -> list[Worker]:
    """A pool's workers, each under :func:`stack`, then failover (step 4 of the module doc).

    Args:
        workers: the raw backends, in pool order.
        equivalents: per worker, the pool index of its equivalent (it fails over to that
            worker's own stack, the same object as that pool slot), or None.
        policies: per worker, its data policy (None: a local worker).
        cache, protection, resilience: as for :func:`stack`, the same for every worker.

    Raises ValueError when the three sequences differ in length or an equivalent is out of range
    (a caller's error: the pool file's loader has checked the names).
    """
    if not len(workers) == len(equivalents) == len(policies):
        raise ValueError(f"{len(workers)} workers, {len(equivalents)} equivalents, {len(policies)} policies")
    stacks = [
        stack(w, cache=cache, policy=p, protection=protection, resilience=resilience)
        for w, p in zip(workers, policies, strict=True)
    ]
    if any(e is not None and not 0 <= e < len(stacks) for e in equivalents):
        raise ValueError(f"an equivalent outside the pool of {len(stacks)}: {list(equivalents)}")
    if any(e is not None for e in equivalents):
        from podium.workers.failover import Failover

        return [s if e is None else Failover(s, stacks[e]) for s, e in zip(stacks, equivalents, strict=True)]
    return stacks
