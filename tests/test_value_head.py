"""The plan conductor's value head (podium.train.plans, ``head="value"``): per plan a logistic
regression of P(correct), the plan of highest predicted reward. Synthetic outcomes whose right
answer follows a known linear rule, so what the head must learn is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from podium.cli import cli
from podium.conductor.compose import Column, Plan
from podium.conductor.plans import PlanPolicy
from podium.errors import ConfigError
from podium.eval.plans import PlanOutcomes
from podium.train.plans import PlanTrainConfig, train_plans


def _cheap_and_dear(n: int, seed: int) -> tuple[PlanOutcomes, np.ndarray, dict[str, Column]]:
    """ "cheap" ($0.001) is right exactly when the embedding's first coordinate is positive;
    "dear" ($0.011) is right on every question."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, 5))
    scores = np.stack([vectors[:, 0] > 0, np.ones(n, dtype=bool)], axis=1).astype(float)
    plans = (Plan("cheap", ("cheap",)), Plan("dear", ("dear",)))
    columns = {p: Column(p, "w", "solve", (), ()) for p in ("cheap", "dear")}
    cost = np.tile([0.001, 0.011], (n, 1))
    ids = tuple(f"q{i}" for i in range(n))
    return PlanOutcomes(ids, plans, scores, cost, np.zeros((n, 2)), np.zeros((n, 2), dtype=bool)), vectors, columns


@pytest.mark.slow  # 2–3 s: make check's loop stays under a minute
def test_the_value_head_sends_each_question_where_its_predicted_reward_is_highest(tmp_path: Path) -> None:
    outcomes, vectors, columns = _cheap_and_dear(300, seed=1)
    # λ = 10: the dear plan's extra $0.01 costs 0.1 of reward, its extra P(correct) is worth 0.5 × ΔP,
    # so it pays off where cheap's P(correct) < 0.8 — about where the first coordinate is negative
    config = PlanTrainConfig(lam=10.0, dims=5, ensemble=1, l2=1e-3, head="value")
    policy = train_plans(outcomes, vectors, columns, "hash", config).policy
    assert policy.head == "value" and policy.offset == pytest.approx([0.5 - 0.01, 0.5 - 0.11])
    fresh, new_vectors, _ = _cheap_and_dear(200, seed=2)
    chosen = np.asarray(policy.choose(list(fresh.ids), new_vectors))
    rule = np.where(new_vectors[:, 0] > 0, 0, 1)
    near_the_boundary = np.abs(new_vectors[:, 0]) < 0.3  # where P(correct) ≈ 0.8 crosses
    assert (chosen == rule)[~near_the_boundary].mean() >= 0.95
    # λ = 0: cost does not count, and dear is never wrong: every question goes there
    always = train_plans(outcomes, vectors, columns, "hash", PlanTrainConfig(dims=5, ensemble=1, head="value")).policy
    assert set(always.choose(list(fresh.ids), new_vectors)) == {1}
    # saved and loaded, it chooses the same; a policy-head file still loads as one
    policy.save(tmp_path / "v.npz")
    again = PlanPolicy.load(tmp_path / "v.npz")
    assert again.head == "value" and again.choose(list(fresh.ids), new_vectors) == chosen.tolist()
    linear = train_plans(outcomes, vectors, columns, "hash", PlanTrainConfig(dims=2, ensemble=1, steps=20)).policy
    linear.save(tmp_path / "p.npz")
    assert PlanPolicy.load(tmp_path / "p.npz").head == "policy"


def test_a_bagged_value_head_averages_its_members_probabilities() -> None:
    outcomes, vectors, columns = _cheap_and_dear(120, seed=3)
    config = PlanTrainConfig(lam=10.0, dims=5, ensemble=3, head="value", seed=4)
    policy = train_plans(outcomes, vectors, columns, "hash", config).policy
    assert policy.weights.shape == (3, 2, 6)
    logits = np.einsum("nf,bpf->bnp", policy.features(vectors[:4]), policy.weights)
    expected = 0.5 * (1 / (1 + np.exp(-logits))).mean(axis=0) + policy.offset
    assert policy.scores(policy.features(vectors[:4])) == pytest.approx(expected)


@pytest.mark.parametrize(
    "settings",
    [{"head": "forest"}, {"head": "value", "clusters": 2}, {"head": "value", "dims": 0}, {"head": "value", "l2": 0.0}],
)
def test_value_head_settings_it_cannot_use_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        PlanTrainConfig(**settings)  # type: ignore[arg-type]


def test_head_and_l2_are_plan_conductor_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["train", "--replay", "missing.csv", "--head", "value"]) == 2  # --policy light
    assert "--head and --l2 are options of the plan conductor" in capsys.readouterr().err
    assert cli(["train", "--policy", "plans", "--replay", "m.csv", "--l2", "-1"]) == 2
