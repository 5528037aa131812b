"""The one order of podium's worker wrappers.

Every worker a request reaches is its raw backend under, from the inside out:

1. :class:`~podium.workers.cache.CachedWorker` (with a request cache: evaluation, recording) — a
   hit replays the recorded completion of exactly the request that would be sent;
2. :class:`~podium.workers.pii_guard.PIIGuard` (an external worker under a data policy) —
   pseudonymizes what leaves and restores the reply, so the cache above stores only what the
   provider saw and answered;
3. :func:`~podium.workers.resilience.harden`: the budget guard (deadline, cost reservation and
   settlement, whole-call timeout — per attempt), the circuit breaker, then retries;
4. :class:`~podium.workers.failover.Failover` to an equivalent worker's own stack, added by
   the pool builder (:func:`podium.builder.build_orchestrator`), which needs both stacks.

:func:`stack` is the only code that applies 1–3, so the order cannot differ between the server,
``podium run`` and evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium.workers.base import Worker

if TYPE_CHECKING:
    from podium.pii.protection import PIIProtection
    from podium.workers.cache import CallStore
    from podium.workers.pii_guard import DataPolicy
    from podium.workers.resilience import ResiliencePolicy

__all__ = ["stack"]


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
    """
    if cache is not None:
        from podium.workers.cache import CachedWorker

        worker = CachedWorker(worker, cache)
    if policy is not None:
        from podium.workers.pii_guard import PIIGuard

        worker = PIIGuard(worker, policy, protection)
    if resilience is not None:
        from podium.workers.resilience import harden

        worker = harden(worker, resilience)
    return worker
