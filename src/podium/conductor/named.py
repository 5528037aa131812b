"""Conductors by name: the one place a name such as ``single:qwen-1.5b`` or ``light:v3`` becomes
a conductor, for ``podium eval --methods`` and the server's model presets.

Names (pool indices are resolved against ``pool``):

* ``single:NAME`` — one step on worker NAME; ``cheapest`` / ``strongest`` — one step on the
  cheapest / strongest worker (:func:`~podium.conductor.baselines.cheapest`, ``strongest``);
* ``random`` — one step on a seeded random worker;
* ``pipeline`` — plan → solve → verify on the strongest worker; ``moa`` — Mixture-of-Agents;
* ``light:REF`` — a trained light conductor: a registry ref (``v3``, ``promoted``, ``latest``)
  or a ``policy.npz`` path.

The pool's own LM conductor is built by :func:`podium.runtime.build_orchestrator`, not here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from podium.conductor.base import Conductor
from podium.conductor.baselines import (
    FixedPipeline,
    MixtureOfAgents,
    RandomWorker,
    SingleWorker,
    cheapest,
    strongest,
)
from podium.errors import ConfigError
from podium.workers.base import Worker

if TYPE_CHECKING:
    from podium.embed import Embedder

__all__ = ["NAMED", "named_conductor", "shared_embedder"]

NAMED = ("single:NAME", "cheapest", "strongest", "random", "pipeline", "moa", "light:REF")
"""The names :func:`named_conductor` knows, for help texts and errors."""


def named_conductor(
    name: str,
    pool: Sequence[Worker],
    *,
    quality: Sequence[float] | None = None,
    cost: Sequence[float] | None = None,
    embeddings: Path | None = None,
) -> Conductor:
    """The conductor called ``name`` over ``pool``.

    Args:
        quality, cost: measured mean quality and cost (USD) per worker, when known (replay);
            else strength and cheapness follow list prices.
        embeddings: the embedding cache file for light conductors.

    Raises ConfigError for an unknown name, a worker not in the pool, or a light conductor
    that is not in the registry.
    """
    by_name = {w.name: i for i, w in enumerate(pool)}
    best = strongest(pool, quality)
    if name.startswith("single:"):
        wanted = name.split(":", 1)[1]
        if wanted not in by_name:
            raise ConfigError(f"{name}: no worker {wanted!r} in the pool ({', '.join(by_name)})")
        return SingleWorker(by_name[wanted], name)
    if name.startswith("light:"):
        return _light(name.split(":", 1)[1], embeddings)
    if name == "cheapest":
        return SingleWorker(cheapest(pool, cost), f"cheapest:{pool[cheapest(pool, cost)].name}")
    if name == "strongest":
        return SingleWorker(best, f"strongest:{pool[best].name}")
    if name == "random":
        return RandomWorker(seed=0)
    if name == "pipeline":
        return FixedPipeline(best, best, best)
    if name == "moa":
        return MixtureOfAgents([i for i, w in enumerate(pool) if not getattr(w, "is_tool", False)], best)
    raise ConfigError(f"unknown conductor {name!r}; known: {', '.join(NAMED)}")


def _light(ref: str, embeddings: Path | None) -> Conductor:
    """A trained light conductor from a registry ref or a ``policy.npz`` path."""
    from podium.conductor.light import LightConductor, LightPolicy
    from podium.registry import Registry

    if ref.endswith(".npz"):
        path, shown = Path(ref), ref
    else:  # a bare name is its promoted version: the name says which, so traces show rollbacks
        version = Registry().get(ref)
        path, shown = version.policy_path, version.ref
    return LightConductor(LightPolicy.load(path), shared_embedder(embeddings), name=f"light:{shown}")


@functools.cache
def shared_embedder(cache: Path | None) -> Embedder:
    """One embedder per cache file for the whole process: the model loads once (≈ 6 s), however
    many light conductors and router points use it."""
    from podium.embed import Embedder

    return Embedder(cache)
