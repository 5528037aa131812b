"""How sure is "on or above the router's curve at every cost"? A paired bootstrap over the test
questions of a replayed outcome matrix (issue 16; docs/learned-workflows.md, RouteLLM section).

    PODIUM_HOME=… python bench/curve_bootstrap.py data/outcomes/routellm-gpt4-mixtral.csv plans-routellm-cv

Fits the learned router on the matrix's train split exactly as ``podium eval --replay`` does
(:func:`podium.eval.router_fit.fit_router`: all-MiniLM-L6-v2 embeddings, the calibrated λ sweep),
loads every version of the named plan conductor from the registry (``PODIUM_HOME``), and computes
each method's choice per test question once. Each resample draws the test questions with
replacement and recomputes both curves — the hulls of their operating points with the weak and the
strong single worker, as AIQ integrates — and :func:`podium.eval.metrics.largest_shortfall` both
ways. Prints JSON: on the whole test split and over the resamples, how far the conductor falls
below the router at its worst (and the router below the conductor), and the share of resamples in
which the conductor is on or above the router at every cost.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from podium.conductor.plans import PlanPolicy
from podium.eval.metrics import Point, largest_shortfall
from podium.eval.plans import load_source, plan_outcomes
from podium.eval.router import RouterModel
from podium.eval.router_fit import calibrated_lambdas
from podium.eval.session import EvalSpec
from podium.named_conductors import shared_embedder
from podium.registry import Registry

Choices = list[npt.NDArray[np.intp]]
"""Per operating point, the chosen column per test question."""


def curve(choices: Choices, score: npt.NDArray[np.float64], cost: npt.NDArray[np.float64], rows: Any) -> list[Point]:
    """The (mean cost, mean quality) of each operating point over the questions ``rows``."""
    return [Point(float(cost[rows, c[rows]].mean()), float(score[rows, c[rows]].mean())) for c in choices]


def shortfalls(
    router: Choices, conductor: Choices, score: npt.NDArray[np.float64], cost: npt.NDArray[np.float64], rows: Any
) -> tuple[tuple[float, float], tuple[float, float]]:
    """((gap, at USD) of the conductor below the router, the same of the router below the
    conductor), each the largest shortfall over the weak-to-strong cost range on the questions
    ``rows``. Columns: the cheapest worker is weak, the best is strong (on these rows)."""
    means = [(float(cost[rows, j].mean()), float(score[rows, j].mean())) for j in range(score.shape[1])]
    weak, strong = Point(*min(means)), Point(*max(means, key=lambda cq: (cq[1], -cq[0])))
    a, b = curve(router, score, cost, rows), curve(conductor, score, cost, rows)
    return largest_shortfall(a, b, weak=weak, strong=strong), largest_shortfall(b, a, weak=weak, strong=strong)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", type=Path, help="an outcome matrix with a train/test split column")
    parser.add_argument("name", help="a plan conductor in the registry: every version is one operating point")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    _, columns, rows, plans = load_source(args.matrix)
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    before, after = plan_outcomes(plans, columns, train), plan_outcomes(plans, columns, test)
    workers = [p.id for p in before.plans]
    if any(len(p.members) != 1 or p.is_cascade for p in before.plans):
        raise SystemExit("this comparison is for a matrix whose plans are its single workers (a router's choices)")
    embedder = shared_embedder(EvalSpec().embeddings)
    v_train = embedder.embed([r["prompt"] for r in train])
    v_test = embedder.embed([r["prompt"] for r in test])
    lengths = [len(r["prompt"]) for r in train]
    model = RouterModel.fit(workers, v_train, lengths, before.score, before.cost, embedder=embedder.name)
    quality, cost = model.predict(v_train, lengths)
    q_test, c_test = model.predict(v_test, [len(r["prompt"]) for r in test])
    router = [model.choose(q_test, c_test, lam) for lam in calibrated_lambdas(quality, cost)]
    questions = [r["prompt"] for r in test]
    conductor = []
    for version in Registry().versions(args.name):
        policy = PlanPolicy.load(version.path / "policy.npz")
        order = [workers.index(p.id) for p in policy.plans]  # the policy's plan order → matrix columns
        conductor.append(np.asarray([order[i] for i in policy.choose(questions, v_test)], dtype=np.intp))
    if not conductor:
        raise SystemExit(f"no versions of {args.name!r} in the registry (set PODIUM_HOME)")

    everything = np.arange(len(test))
    (below, below_at), (above, above_at) = shortfalls(router, conductor, after.score, after.cost, everything)
    rng = np.random.default_rng(args.seed)
    draws = (rng.integers(0, len(test), len(test)) for _ in range(args.resamples))
    drawn = np.array([[g for g, _ in shortfalls(router, conductor, after.score, after.cost, rows)] for rows in draws])

    def quantiles(values: npt.NDArray[np.float64]) -> dict[str, float]:
        return dict(zip(("5%", "50%", "95%"), np.quantile(values, [0.05, 0.5, 0.95]).tolist(), strict=True))

    summary = {
        "matrix": str(args.matrix),
        "conductor": f"{args.name} ({len(conductor)} versions)",
        "router_points": len(router),
        "test_questions": len(test),
        "conductor_below_router": below,
        "conductor_below_router_at_usd": below_at,
        "router_below_conductor": above,
        "router_below_conductor_at_usd": above_at,
        "resamples": args.resamples,
        "seed": args.seed,
        "share_conductor_on_or_above_everywhere": float((drawn[:, 0] <= 1e-12).mean()),
        "share_router_on_or_above_everywhere": float((drawn[:, 1] <= 1e-12).mean()),
        "conductor_below_router_quantiles": quantiles(drawn[:, 0]),
        "router_below_conductor_quantiles": quantiles(drawn[:, 1]),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
