"""A trained plan conductor as a registry version: :func:`train_plans_version` trains,
cross-validates and stores one version with its training record. ``podium train --policy plans``
(:mod:`podium.train.plans_cli`) and the loop's train stage (:mod:`podium.loop.outcomes`) both
call it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from podium.conductor.compose import Column
from podium.eval.plans import PlanOutcomes
from podium.train.plans_cv import cross_validate

__all__ = ["MIN_QUESTIONS", "train_plans_version"]


MIN_QUESTIONS = 10
"""Fewest training questions the plan conductor trains on (its cross-validation needs folds)."""


def train_plans_version(
    name: str,
    source: str,
    split: str,
    outcomes: PlanOutcomes,
    vectors: Any,
    columns: dict[str, Column],
    embedder: str,
    config: Any,
    *,
    data: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Train, cross-validate and store one version of ``name`` in the registry on ``outcomes``
    (the ``split`` rows of ``source``, a bank folder or matrix, embedded as ``vectors``: shape
    (questions, dims), by ``embedder``); ``data`` adds to the record's ``data`` (e.g. the
    source's sha256). Returns (its ref, its record with ``path`` and ``policy_path``)."""
    from podium.registry import Registry, TrainingInfo
    from podium.train.plans import train_plans

    result = train_plans(outcomes, vectors, columns, embedder, config)
    cv = cross_validate(outcomes, vectors, columns, embedder, config)
    policy = result.policy
    chosen = policy.choose(list(outcomes.ids), vectors)
    rows_idx = np.arange(len(outcomes.ids))
    usage = Counter(outcomes.plans[i].id for i in chosen)
    version = Registry().create(name)
    policy.save(version.policy_path)
    record = {
        "policy": "plans",
        "source": source,
        "split": split,
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "embedder": embedder,
        "data": {
            "matrix": source,
            "split": split,
            "questions": len(outcomes.ids),
            "plans": len(outcomes.plans),
            **(data or {}),
        },
        "clusters": len(policy.centroids),
        "train": {
            "quality": float(outcomes.score[rows_idx, chosen].mean()),
            "cost_usd": float(outcomes.cost[rows_idx, chosen].mean()),
            "latency_s": float(outcomes.latency[rows_idx, chosen].mean()),
        },
        "cross_validation": cv,
        "plans_chosen": dict(usage.most_common()),
        "curve": result.curve,
    }
    version.write_training(TrainingInfo.from_json(record))
    return version.ref, {"path": str(version.path), "policy_path": str(version.policy_path), **record}
