"""A plan conductor's cluster table trained to a cost cap (podium.train.plans, ``max_cost_ratio``):
the exact knapsack against brute force, a table no λ reaches, and the CLI's errors. Synthetic
outcomes and a hashing-free embedding (plain vectors), so no model runs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from podium.cli import cli
from podium.conductor.compose import Column, Plan
from podium.errors import ConfigError
from podium.eval.plans import PlanOutcomes
from podium.train.plans import PlanTrainConfig, capped_choice, lambda_sweep, train_plans


def test_the_capped_choice_is_the_best_choice_within_the_budget_by_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        groups, plans = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        rewards = rng.integers(0, 6, (groups, plans)).astype(float)  # whole numbers: ties happen
        costs = rng.integers(1, 6, (groups, plans)).astype(float)
        budget = float(rng.integers(groups, 5 * groups + 1))
        choice = capped_choice(rewards, costs, budget)

        def total(c: tuple[int, ...], rewards: np.ndarray = rewards, costs: np.ndarray = costs) -> tuple[float, float]:
            return sum(rewards[g, p] for g, p in enumerate(c)), sum(costs[g, p] for g, p in enumerate(c))

        feasible = [c for c in itertools.product(range(plans), repeat=groups) if total(c)[1] <= budget]
        if not feasible:  # nothing fits: every group's cheapest plan
            assert total(tuple(choice))[1] == costs.min(axis=1).sum()
            continue
        best = max(total(c)[0] for c in feasible)
        cheapest_best = min(total(c)[1] for c in feasible if total(c)[0] == best)
        assert total(tuple(choice)) == (best, cheapest_best)


def _three_plans(n: int = 20) -> tuple[PlanOutcomes, np.ndarray, dict[str, Column]]:
    """One kind of question; cheap scores 0.5 at $1, mid 0.6 at $2, dear 0.9 at $3 (per question,
    on average). mid lies below the chord from cheap to dear, so no λ makes it the best."""
    names = ("cheap", "mid", "dear")
    plans = tuple(Plan(p, (p,)) for p in names)
    columns = {p: Column(p, "w", "solve", (), ()) for p in names}
    i = np.arange(n)
    score = np.stack([i % 10 < 5, i % 10 < 6, i % 10 < 9], axis=1).astype(float)
    cost = np.tile([1.0, 2.0, 3.0], (n, 1))
    vectors = np.random.default_rng(0).normal(size=(n, 4)) + 10
    ids = tuple(f"q{k}" for k in range(n))
    return PlanOutcomes(ids, plans, score, cost, np.zeros((n, 3)), np.zeros((n, 3), dtype=bool)), vectors, columns


@pytest.mark.slow  # 2–3 s: make check's loop stays under a minute
def test_a_cap_reaches_a_table_that_no_lambda_does() -> None:
    outcomes, vectors, columns = _three_plans()
    # every λ of the sweep makes cheap or dear the best constant plan: mid is off the hull
    for lam in lambda_sweep(outcomes, 23, fill=True):
        policy = train_plans(outcomes, vectors, columns, "v", PlanTrainConfig(lam=lam, clusters=1)).policy
        assert {outcomes.plans[c].id for c in policy.choose(list(outcomes.ids), vectors)} <= {"cheap", "dear"}

    def capped(ratio: float) -> set[str]:
        config = PlanTrainConfig(clusters=1, max_cost_ratio=ratio)
        policy = train_plans(outcomes, vectors, columns, "v", config).policy
        return {outcomes.plans[c].id for c in policy.choose(list(outcomes.ids), vectors)}

    # the best single worker is dear ($3): a cap of 2/3 of it is $2 → mid; 1/3 → cheap; 1 → dear
    assert capped(2 / 3) == {"mid"} and capped(0.34) == {"cheap"} and capped(1.0) == {"dear"}
    assert capped(0.1) == {"cheap"}  # nothing fits: the cheapest


def test_a_cap_needs_a_cluster_table_a_positive_ratio_and_a_single_worker() -> None:
    with pytest.raises(ConfigError, match="cluster table"):
        PlanTrainConfig(max_cost_ratio=1.0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="ratio > 0"):
            PlanTrainConfig(clusters=1, max_cost_ratio=bad)
    outcomes, vectors, columns = _three_plans()
    only_votes = PlanOutcomes(
        outcomes.ids, (Plan("v", ("cheap", "mid", "dear")),), outcomes.score[:, :1], outcomes.cost[:, :1],
        outcomes.latency[:, :1], outcomes.escalated[:, :1],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="no one-column plan"):
        train_plans(only_votes, vectors, columns, "v", PlanTrainConfig(clusters=1, max_cost_ratio=1.0))


def test_the_cli_says_where_the_cap_belongs(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["train", "--policy", "plans", "--replay", "m.csv", "--max-cost-ratio", "1.1"]) != 0
    assert "--policy plans --clusters" in capsys.readouterr().err
    args = ["train", "--policy", "plans", "--replay", "m.csv", "--clusters", "auto", "--max-cost-ratio", "1.1"]
    assert cli([*args, "--sweep"]) != 0
    assert "give one of them" in capsys.readouterr().err
