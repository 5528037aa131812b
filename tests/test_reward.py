"""One training reward for every conductor (podium.train.reward): λ means the same trade-off in
the light conductor's, the plan conductor's and GRPO's training and in the promotion gate (the
plan conductor used score − λ·cost, so its λ = 10 weighed cost twice as much as the others')."""

from __future__ import annotations

import numpy as np
import pytest

from podium.conductor.compose import Plan
from podium.eval.plans import PlanOutcomes
from podium.train.light import replay_reward
from podium.train.plans import lambda_sweep, reward
from podium.train.reward import workflow_reward


def test_the_formula_by_hand() -> None:
    assert workflow_reward(1.0, 0.01, lam=10.0) == pytest.approx(0.9)
    assert workflow_reward(0.0, 0.0, 2.0, lam=0.0, mu=0.1) == pytest.approx(0.3)
    assert np.allclose(workflow_reward(np.array([0.0, 1.0]), np.array([0.0, 0.02]), lam=5.0), [0.5, 0.9])


def test_plans_and_the_light_conductor_score_the_same_workflow_alike() -> None:
    # one question, two single-worker plans: cheap (wrong, $0.001) and dear (right, $0.004)
    scores, costs = np.array([[0.0, 1.0]]), np.array([[0.001, 0.004]])
    outcomes = PlanOutcomes(("q",), (Plan("cheap", ("cheap",)), Plan("dear", ("dear",))), scores, costs,
                            np.zeros((1, 2)), np.zeros((1, 2), dtype=bool))  # fmt: skip
    for lam in (0.0, 10.0, 100.0):
        plan_rewards = reward(outcomes, lam, 0.0)[0]
        light = [replay_reward(np.array([[w, -1]]), scores, costs, lam=lam)[0] for w in (0, 1)]
        assert np.allclose(plan_rewards, light)


def test_the_lambda_sweep_breaks_even_where_the_reward_ties() -> None:
    scores = np.array([[0.0, 1.0], [1.0, 1.0]])  # cheap: 0.5 mean score at $0; dear: 1.0 at $0.01
    costs = np.array([[0.0, 0.01], [0.0, 0.01]])
    outcomes = PlanOutcomes(("a", "b"), (Plan("cheap", ("cheap",)), Plan("dear", ("dear",))), scores, costs,
                            np.zeros((2, 2)), np.zeros((2, 2), dtype=bool))  # fmt: skip
    sweep = lambda_sweep(outcomes)
    assert sweep[0] == 0.0 and sweep[1] == pytest.approx(25.0)  # 0.5 · 0.5 / 0.01
    mean = reward(outcomes, sweep[1], 0.0).mean(axis=0)
    assert mean[0] == pytest.approx(mean[1])
