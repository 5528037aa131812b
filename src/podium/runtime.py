"""Build a ready :class:`~podium.orchestrator.Orchestrator` from a pool file's configuration.

The one place where configuration turns into objects: workers (lazy: no model is loaded until
its first call), the LM conductor on its configured worker's model, and the fallback pipeline.
"""

from __future__ import annotations

from podium.conductor.base import Conductor
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.orchestrator import Fallback, Orchestrator
from podium.pool import PoolConfig
from podium.trace.store import TraceStore
from podium.workers import build_pool_workers
from podium.workers.base import Worker

__all__ = ["build_orchestrator"]


def build_orchestrator(
    config: PoolConfig,
    *,
    traces: TraceStore | None = None,
    conductor: Conductor | None = None,
    workers: list[Worker] | None = None,
    resamples: int | None = None,
    max_steps: int | None = None,
) -> Orchestrator:
    """An orchestrator for ``config``.

    Args:
        config: a validated pool file.
        traces: the trace store (None: records are returned but not stored).
        conductor: override the configured LM conductor (e.g. a baseline or a test fake).
        workers: override the pool's workers (tests), in pool order.
        resamples, max_steps: override the pool file's values.
    """
    pool = workers if workers is not None else build_pool_workers(config)
    if conductor is None:
        c = config.conductor
        conductor = LMConductor(
            pool[config.worker_index(c.worker)],
            LMConductorSettings(
                temperature=c.temperature,
                seed=c.seed,
                reasoning_tokens=c.reasoning_tokens,
                max_tokens=c.max_tokens,
                constrained=c.constrained,
                subtask_chars=c.subtask_chars,
            ),
        )
    return Orchestrator(
        pool,
        conductor,
        Fallback(config.worker_index(config.fallback.worker), config.fallback.subtask),
        pool_name=config.name,
        max_steps=config.max_steps if max_steps is None else max_steps,
        resamples=config.conductor.resamples if resamples is None else resamples,
        max_question_chars=config.max_question_chars,
        traces=traces,
    )
