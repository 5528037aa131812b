"""Promotion cannot lower quality silently: a candidate whose held-out reward beats the promoted
version's but whose quality, on the same questions, is more than a small margin below it is
refused unless the operator overrides; one line says why either way.

The adoption trial: ``promoted — … quality 0.7505 vs 0.8047`` (promoted on reward, the quality
guard off by default). Here two hand-built light conductors over a replay matrix: v1 always asks
the big worker (right on 16 of 20 test questions, $0.01 each), v2 always the small one (15 of 20,
$0.001) — at λ = 10 v2's reward is higher, its quality 0.05 lower."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from podium.cli import cli
from podium.conductor.light import ROLES, LightPolicy, feature_count
from podium.registry import Registry

# found, not imported: importing cma (1.8 s) at collection would cost every test worker
pytestmark = pytest.mark.skipif(importlib.util.find_spec("cma") is None, reason="needs podium[train]")
EMBEDDER = "all-MiniLM-L6-v2:53aa51172d14"


def write_matrix(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["sample_id", "eval_name", "split", "prompt", "big", "small", "big|total_cost", "small|total_cost"]
        )
        for i in range(20):
            out.writerow([f"t{i}", "quiz", "test", f"Question number {i}?", int(i < 16), int(i < 15), 0.01, 0.001])
        for i in range(4):
            out.writerow([f"r{i}", "quiz", "train", f"Training question {i}?", 1, 1, 0.01, 0.001])
    return path


def always(registry: Registry, first: str, lam: float = 10.0) -> str:
    """A light conductor that sends every question to ``first`` in one step (zero weights: the
    first worker and role win every tie, and one step is the limit)."""
    workers = (first, "small" if first == "big" else "big")
    dims = 2
    policy = LightPolicy(
        workers, np.zeros(384), np.zeros((dims, 384)),
        np.zeros((len(workers) * len(ROLES) + 1, feature_count(dims, len(workers), 1))), 1, EMBEDDER,
    )  # fmt: skip
    version = registry.create("light")
    policy.save(version.policy_path)
    (version.path / "train.json").write_text(json.dumps({"policy": "light", "config": {"lam": lam}}))
    return version.ref


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Registry, str]:
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))  # the eval's embedding cache
    registry = Registry()
    v1 = always(registry, "big")
    registry.promote(registry.get(v1), evidence={})  # the current promoted version
    always(registry, "small")
    return registry, str(write_matrix(tmp_path / "m.csv"))


@pytest.mark.slow
def test_a_cheaper_candidate_that_loses_quality_is_refused(
    setup: tuple[Registry, str], capsys: pytest.CaptureFixture[str]
) -> None:
    registry, matrix = setup
    assert cli(["conductor", "promote", "light@v2", "--replay", matrix]) == 3
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(("promoted", "not promoted")))
    assert line.startswith("not promoted: light@v2's quality 0.7500 is 0.0500 below light@v1's 0.8000")
    assert "--allow-quality-drop" in out and "on the same 20 questions" in out
    assert registry.promoted("light").ref == "light@v1"


@pytest.mark.slow
def test_the_operator_can_override_and_it_is_logged(
    setup: tuple[Registry, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from podium.registry import QUALITY_MARGIN

    registry, matrix = setup
    assert cli(["conductor", "promote", "light@v2", "--replay", matrix, "--allow-quality-drop"]) == 0
    assert "promoted despite the quality guard (--allow-quality-drop)" in capsys.readouterr().out
    assert registry.promoted("light").ref == "light@v2"
    entry = registry.history("light")[-1]
    assert entry["quality_guard_overridden"] is True and entry["max_quality_drop"] == QUALITY_MARGIN
    assert entry["reason"].startswith("promoted despite the quality guard")
    # a wider margin promotes without an override
    registry.rollback("light")
    assert cli(["conductor", "promote", "light@v2", "--replay", matrix, "--max-quality-drop", "0.1"]) == 0
    assert "its quality 0.7500 is within 0.1 of 0.8000" in capsys.readouterr().out


def test_the_rule() -> None:
    from podium.registry import promotion_verdict

    common = {"candidate": "c", "against": "light@v1", "questions": 200}
    refused = promotion_verdict(against_promoted=True, reward=(0.9, 0.8), quality=(0.7505, 0.8047), **common)
    assert not refused.promote and refused.guarded and refused.quality_drop == pytest.approx(0.0542)
    within = promotion_verdict(against_promoted=True, reward=(0.9, 0.8), quality=(0.795, 0.8), **common)
    assert within.promote and "within 0.01" in within.line
    worse = promotion_verdict(against_promoted=True, reward=(0.7, 0.8), quality=(0.9, 0.8), override=True, **common)
    assert not worse.promote and "does not beat" in worse.line  # the override never passes a worse reward
    first = promotion_verdict(against_promoted=False, reward=(0.9, 0.8), quality=(0.5, 0.8), **common)
    assert first.promote and not first.guarded and "no quality guard" in first.line  # against a single worker


def test_train_json_is_one_typed_record(tmp_path: Path) -> None:
    """Every policy's train.json reads as one TrainingInfo: the common fields typed, the rest in
    ``extra``, written back unchanged; a version from before ``policy`` existed is light; what is
    not a training record is a ConfigError naming the file, never a crash in a reader."""
    from podium.errors import ConfigError
    from podium.registry import TrainingInfo, Version

    stored = {"policy": "lm", "config": {"lam": 2.5, "model": "m"}, "data": {"matrix": "x.csv"},
              "history": [{"step": 1, "reward": 0.5}], "adapter_gguf": {"file": "a.gguf"}}  # fmt: skip
    version = Version("c", 1, tmp_path)
    (tmp_path / "train.json").write_text(json.dumps(stored))
    info = version.training()
    assert (info.policy, info.lam, info.extra) == ("lm", 2.5, {"adapter_gguf": {"file": "a.gguf"}})
    version.write_training(info)
    assert json.loads((tmp_path / "train.json").read_text()) == stored
    (tmp_path / "train.json").write_text(json.dumps({"config": {"lam": 1}, "history": []}))
    assert version.training().policy == "light" and version.training().lam == 1.0
    for bad in ("[1, 2]", '{"policy": "magic"}', '{"config": [1]}', "{not json"):
        (tmp_path / "train.json").write_text(bad)
        with pytest.raises(ConfigError, match=r"train\.json"):
            version.training()
    assert TrainingInfo("plans").to_json() == {"policy": "plans", "config": {}, "data": {}, "history": []}


def test_a_gate_on_the_questions_a_version_trained_on_is_called_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first user promoted with ``--split train`` and saw "held-out: set.csv (train)": the figures
    were the training set's. The gate warns when its matrix and split are the version's own."""
    import argparse

    from rich.console import Console

    from podium.train.conductor_cli import _warn_if_trained_on

    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    version = Registry().create("light")
    info = {"policy": "light", "config": {}, "data": {"matrix": "set.csv", "split": "train"}}
    (version.path / "train.json").write_text(json.dumps(info))

    def warned(replay: str, split: str) -> str:
        err = Console(record=True, width=300)
        _warn_if_trained_on(version, argparse.Namespace(replay=replay, split=split), err)
        return err.export_text()

    assert "was trained on set.csv's train split" in warned(str(tmp_path / "loop" / "set.csv"), "train")
    assert warned(str(tmp_path / "loop" / "set.csv"), "test") == ""
    assert warned(str(tmp_path / "other.csv"), "train") == ""


def test_a_weight_that_is_no_number_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tester promoted with ``--lam nan``: "reward nan beats nan", promoted. ``podium train
    --lam nan`` stored a version whose train.json held NaN (no JSON). Both are refused now."""
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    matrix = str(write_matrix(tmp_path / "m.csv"))
    cases = [
        (["conductor", "promote", "light@v1", "--replay", matrix, "--lam", "nan"], "--lam must be a number 0 or more"),
        (["conductor", "promote", "light@v1", "--replay", matrix, "--lam", "-5"], "--lam must be a finite number"),
        (["conductor", "promote", "light@v1", "--replay", matrix, "--max-quality-drop", "2"], "from 0 to 1, got '2'"),
        (["train", "--replay", matrix, "--lam", "inf"], "--lam must be a number 0 or more"),
    ]
    for argv, message in cases:
        assert cli(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert Registry().names() == []  # nothing trained, nothing promoted
