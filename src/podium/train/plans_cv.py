"""Held-out figures of plan-conductor training settings on the training questions alone:
k-fold cross-validation (:func:`cross_validate`) and the cross-validated cost–quality curve of a
λ sweep (:func:`cv_curve`) — what ``podium train --policy plans`` reports per version and what
``--dims``, ``--head`` and λ are selected by, so nothing is chosen on a test split."""

from __future__ import annotations

from typing import Any

import numpy as np

from podium.conductor.compose import Column
from podium.eval.plans import PlanOutcomes
from podium.train.plans import reward, single_plans, strongest_single, train_plans

__all__ = ["cross_validate", "cv_curve"]


def cross_validate(
    outcomes: PlanOutcomes, vectors: Any, columns: dict[str, Column], embedder: str, config: Any, folds: int = 5
) -> dict[str, Any]:
    """Held-out figures of ``config`` by ``folds``-fold cross-validation over the questions
    (seeded split): per fold the greedy policy's mean reward, quality and cost on its held-out
    part; returns their means and standard deviations, and ``paired``: every question's
    cross-fitted score (from the fold that held it out) against the strongest one-column plan
    on these questions (ties: the cheaper) — the mean difference with its 95 % interval
    (:func:`~podium.eval.metrics.paired_difference`) and on how many questions it is higher or
    lower."""
    from podium.eval.metrics import paired_summary

    n = len(outcomes.ids)
    order = np.random.default_rng(config.seed).permutation(n)
    parts = [order[k::folds] for k in range(folds) if len(order[k::folds])]
    r = reward(outcomes, config.lam, config.mu)
    per_fold = []
    fitted = np.zeros(n)
    for held in parts:
        train = np.setdiff1d(order, held)
        policy = train_plans(outcomes.subset(train.tolist()), vectors[train], columns, embedder, config).policy
        chosen = np.asarray(policy.choose([outcomes.ids[i] for i in held], vectors[held]))
        fitted[held] = outcomes.score[held, chosen]
        per_fold.append(
            (
                float(r[held, chosen].mean()),
                float(outcomes.score[held, chosen].mean()),
                float(outcomes.cost[held, chosen].mean()),
            )
        )
    values = np.array(per_fold)
    base = strongest_single(outcomes) if single_plans(outcomes) else None
    paired = None
    if base is not None:
        against = outcomes.score[:, base].tolist()
        paired = {"against": outcomes.plans[base].id, **paired_summary(fitted.tolist(), against)}
    return {
        "folds": len(parts),
        "paired": paired,
        "reward": {"mean": float(values[:, 0].mean()), "std": float(values[:, 0].std())},
        "quality": {"mean": float(values[:, 1].mean()), "std": float(values[:, 1].std())},
        "cost_usd": {"mean": float(values[:, 2].mean()), "std": float(values[:, 2].std())},
    }


def cv_curve(outcomes: PlanOutcomes, points: list[tuple[float, float]]) -> dict[str, Any] | None:
    """AIQ and APGR (:mod:`podium.eval.metrics`) of cross-validated (cost, quality) operating
    points, against the training questions' cheapest and best single-column plan — the figure
    a λ sweep's settings (``--dims``, ``--ensemble``) are selected by; None without two single
    plans that differ in cost and quality."""
    from podium.eval.metrics import Point, aiq, apgr

    single = single_plans(outcomes)
    means = [(float(outcomes.cost[:, j].mean()), float(outcomes.score[:, j].mean())) for j in single]
    if len(means) < 2:
        return None
    weak = Point(*min(means))
    strong = Point(*max(means, key=lambda cq: (cq[1], -cq[0])))
    if strong.quality <= weak.quality or strong.cost <= weak.cost:
        return None
    hull = [Point(c, q) for c, q in points] + [weak, strong]
    return {
        "aiq": aiq(hull, weak.cost, strong.cost),
        "apgr": apgr(hull, weak=weak, strong=strong),
        "weak": [weak.cost, weak.quality],
        "strong": [strong.cost, strong.quality],
    }
