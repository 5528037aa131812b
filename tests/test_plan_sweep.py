"""The plan conductor over a λ sweep against the learned router, on a slice of the shipped
RouteLLM matrix (docs/learned-workflows.md "RouteLLM matrix"): ``podium train --policy plans
--sweep`` trains one version per λ on the train split, and ``podium eval --replay … --methods
light:NAME@vA..vB`` evaluates those versions as one cost–quality curve. A hashing encoder stands
in for MiniLM so the test needs no model."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from podium.cli import cli
from podium.conductor.compose import Plan
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.plans import PlanOutcomes
from podium.eval.session import EvalSpec, run_eval
from podium.traffic.features import HashingEncoder
from podium.train.plans import lambda_sweep
from tests.conftest import SHARED_DATA


@pytest.fixture
def routellm_slice(tmp_path: Path) -> Path:
    """The first 60 train and 30 test rows of the shipped matrix."""
    source = SHARED_DATA / "outcomes" / "routellm-gpt4-mixtral.csv"
    with source.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows, taken = [], {"train": 0, "test": 0}
        for row in reader:
            if taken[row["split"]] < {"train": 60, "test": 30}[row["split"]]:
                taken[row["split"]] += 1
                rows.append(row)
            if taken == {"train": 60, "test": 30}:
                break
    path = tmp_path / "slice.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_two_plan_sweep_has_points_on_either_side_of_the_break_even() -> None:
    scores = np.array([[0.0, 1.0], [1.0, 1.0]])  # cheap: 0.5 at $0; dear: 1.0 at $0.01 → break-even 25
    costs = np.array([[0.0, 0.01], [0.0, 0.01]])
    outcomes = PlanOutcomes(("a", "b"), (Plan("cheap", ("cheap",)), Plan("dear", ("dear",))), scores, costs,
                            np.zeros((2, 2)), np.zeros((2, 2), dtype=bool))  # fmt: skip
    assert lambda_sweep(outcomes) == (0.0, 25.0, 75.0)  # the means' trade-offs only
    filled = lambda_sweep(outcomes, 23, fill=True)
    assert len(filled) == 23 and filled[0] == 0.0 and list(filled) == sorted(set(filled))
    assert 25.0 in filled and filled[1] == pytest.approx(25.0 / 8) and filled[-2] == pytest.approx(200.0)


@pytest.mark.slow
def test_a_swept_plan_conductor_is_one_curve_beside_the_router(
    routellm_slice: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("podium.embed.encoder_choice", lambda choice: HashingEncoder(64))
    embedder = Embedder(tmp_path / "vectors.sqlite3", encoder=HashingEncoder(64))
    monkeypatch.setattr("podium.named_conductors.shared_embedder", lambda cache, encoder=None: embedder)

    args = ["train", "--policy", "plans", "--replay", str(routellm_slice), "--sweep", "--name", "sweep"]
    assert cli([*args, "--dims", "2", "--ensemble", "1", "--steps", "40", "--json"]) == 0
    captured = capsys.readouterr()
    trained = json.loads(captured.out)
    assert "train: 60/60 embedding" in captured.err  # its progress (the cache is empty: 60 texts to encode)
    assert trained["span"] == "sweep@v1..v23" and len(trained["versions"]) == 23
    lambdas = [v["config"]["lam"] for v in trained["versions"]]
    assert lambdas[0] == 0.0 and lambdas == sorted(lambdas) and len(set(lambdas)) == 23
    assert all(v["data"]["questions"] == 60 for v in trained["versions"])  # the train split only
    assert 0.0 < trained["cross_validated_curve"]["aiq"] <= 1.0

    spec = EvalSpec(replay=routellm_slice, methods=("single", "light:sweep@v1..v23"), cache=None, embeddings=None)
    report = run_eval(spec)
    curve = report["curves"]["light:sweep@v1..v23"]
    assert len(curve["points"]) == 23 and 0.0 < curve["aiq"] <= 1.0
    params = [report["methods"][f"light:sweep@v{k}"]["param"] for k in range(1, 24)]
    assert params == lambdas
    assert report["config"]["n"] == 30  # evaluated on the test rows

    with pytest.raises(ConfigError, match=r"lacks some of v1\.\.v24"):
        run_eval(EvalSpec(replay=routellm_slice, methods=("single", "light:sweep@v1..v24"), cache=None))
    assert cli(["train", "--replay", str(routellm_slice), "--sweep"]) == 2  # light: no sweep


def test_cross_validation_pairs_the_cross_fitted_choices_with_the_strongest_single_plan() -> None:
    from podium.conductor.compose import Column
    from podium.train.plans import PlanTrainConfig
    from podium.train.plans_cv import cross_validate

    rng = np.random.default_rng(3)
    n = 40
    scores = (rng.random((n, 3)) < [0.3, 0.6, 0.5]).astype(float)  # three one-column plans
    ids = tuple(f"q{i}" for i in range(n))
    plans = tuple(Plan(p, (p,)) for p in ("a", "b", "c"))
    columns = {p: Column(p, "w", "solve", (), ()) for p in ("a", "b", "c")}
    cost = np.tile([0.001, 0.002, 0.003], (n, 1))
    outcomes = PlanOutcomes(ids, plans, scores, cost, np.zeros((n, 3)), np.zeros((n, 3), dtype=bool))
    config = PlanTrainConfig(lam=0.0, mu=0.0, dims=1, ensemble=2, steps=60, seed=0)
    cv = cross_validate(outcomes, rng.normal(size=(n, 5)), columns, "hash", config)
    paired, base = cv["paired"], int(np.argmax(scores.mean(axis=0)))
    assert paired["against"] == plans[base].id
    # 5 folds of 8 questions: the paired mean difference is the difference of the two means
    assert paired["diff"] == pytest.approx(cv["quality"]["mean"] - scores[:, base].mean())
    assert paired["ci95"][0] <= paired["diff"] <= paired["ci95"][1]
    assert paired["higher"] + paired["lower"] <= n


def _two_kinds(n: int = 40) -> tuple[PlanOutcomes, np.ndarray, dict]:  # type: ignore[type-arg]
    """Questions of two kinds (embeddings around two far-apart points); plan "a" is right on
    every kind-0 question and "b" on every kind-1 one, "c" on half of each and cheapest."""
    from podium.conductor.compose import Column

    rng = np.random.default_rng(7)
    kind = np.arange(n) % 2
    vectors = rng.normal(scale=0.1, size=(n, 6)) + np.where(kind[:, None] == 0, 0.0, 5.0)
    scores = np.stack([kind == 0, kind == 1, np.arange(n) % 4 < 2], axis=1).astype(float)
    plans = tuple(Plan(p, (p,)) for p in ("a", "b", "c"))
    columns = {p: Column(p, "w", "solve", (), ()) for p in ("a", "b", "c")}
    cost = np.tile([0.002, 0.002, 0.001], (n, 1))
    ids = tuple(f"q{i}" for i in range(n))
    return PlanOutcomes(ids, plans, scores, cost, np.zeros((n, 3)), np.zeros((n, 3), dtype=bool)), vectors, columns


def test_a_cluster_table_gives_each_group_of_questions_its_best_plan(tmp_path: Path) -> None:
    from podium.conductor.plans import PlanPolicy
    from podium.train.plans import AUTO, PlanTrainConfig, cluster_count, train_plans

    outcomes, vectors, columns = _two_kinds()
    assert cluster_count(vectors) == 2  # two well-separated groups: the silhouette's best k
    policy = train_plans(outcomes, vectors, columns, "hash", PlanTrainConfig(clusters=AUTO)).policy
    assert policy.centroids.shape == (2, 6) and policy.reads_question
    chosen = policy.choose(list(outcomes.ids), vectors)
    assert [outcomes.plans[c].id for c in chosen] == ["a" if i % 2 == 0 else "b" for i in range(40)]
    # one cluster: the best plan for everyone; "a", "b" and "c" all score 0.5 → the cheapest, "c"
    one = train_plans(outcomes, vectors, columns, "hash", PlanTrainConfig(clusters=1)).policy
    assert {outcomes.plans[c].id for c in one.choose(list(outcomes.ids), vectors)} == {"c"}
    # a plan the pool cannot run gives way to its cluster's next best (here "c" for kind 0)
    assert outcomes.plans[policy.choose(["q0"], vectors[:1], [False, True, True])[0]].id == "c"
    policy.save(tmp_path / "p.npz")
    again = PlanPolicy.load(tmp_path / "p.npz")
    assert np.array_equal(again.centroids, policy.centroids) and again.choose(["q1"], vectors[1:2]) == [1]


def test_a_question_unlike_every_training_question_gets_the_plain_answer(tmp_path: Path) -> None:
    """The gate (podium.train.plans, module docstring): questions around two directions train
    the table; a question along a third direction is farther from every training question than
    any training question is from its nearest neighbour, so it gets the best one-step solve
    plan instead of its nearest cluster's plan — and a training question never does."""
    from podium.conductor.compose import Column
    from podium.conductor.plans import PlanPolicy
    from podium.train.plans import PlanTrainConfig, train_plans

    n, rng = 40, np.random.default_rng(3)
    kind = np.arange(n) % 2
    vectors = np.eye(6)[kind] * 10 + rng.normal(scale=0.5, size=(n, 6)) + 5  # far from the origin, like LLM states
    scores = np.stack([kind == 0, kind == 1, np.arange(n) % 4 < 2], axis=1).astype(float)
    plans = (Plan("a", ("a",)), Plan("b", ("b",)), Plan("vote", ("a", "b", "c")), Plan("c", ("c",)))
    columns = {
        "a": Column("a", "w", "program", (), ()),
        "b": Column("b", "w", "test", (), ()),
        "c": Column("c", "w", "solve", (), ()),
    }
    score = np.hstack([scores[:, :2], np.maximum(scores[:, :1], scores[:, 1:2]), scores[:, 2:]])
    cost = np.tile([0.002, 0.002, 0.006, 0.001], (n, 1))
    ids = tuple(f"q{i}" for i in range(n))
    outcomes = PlanOutcomes(ids, plans, score, cost, np.zeros((n, 4)), np.zeros((n, 4), dtype=bool))
    for config in (PlanTrainConfig(clusters=2), PlanTrainConfig(dims=2, ensemble=1, steps=50)):
        policy = train_plans(outcomes, vectors, columns, "hash", config).policy
        assert policy.plans[policy.fallback].id == "c"  # the only one-step solve plan ("a", "b" are other roles)
        assert not policy.outside(vectors).any()
        if config.clusters:  # the table gives each kind its plan
            assert policy.choose(list(ids), vectors) == [0 if k == 0 else 1 for k in kind]
        stranger = np.eye(6)[[4]] * 10 + 5
        assert policy.outside(stranger).all() and policy.choose(["?"], stranger) == [3]
        assert policy.choose(["?"], stranger, [True, True, True, False]) != [3]  # a pool without it: the table decides
        policy.save(tmp_path / "p.npz")
        again = PlanPolicy.load(tmp_path / "p.npz")
        assert again.radius == pytest.approx(policy.radius) and again.choose(["?"], stranger) == [3]
    # a policy file from before the gate has no support set: nothing is outside
    old = PlanPolicy(
        plans, columns, np.zeros(6), np.zeros((0, 6)), np.ones(0), np.zeros((1, 4, 3)), "hash", vectors[:2]
    )
    old.save(tmp_path / "old.npz")
    assert not PlanPolicy.load(tmp_path / "old.npz").outside(stranger).any()


def test_clusters_is_a_plans_option_with_a_clear_error_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["train", "--policy", "light", "--replay", "m.csv", "--clusters", "2", "--name", "x"]) != 0
    assert "use it with --policy plans" in capsys.readouterr().err
    for bad in ("-3", "two", "1.5"):
        assert cli(["train", "--policy", "plans", "--replay", "m.csv", "--clusters", bad, "--name", "x"]) == 2
        assert "not a cluster count" in capsys.readouterr().err
