"""A team's own data into training: ``podium eval --matrix`` splits the recorded matrix by a
seeded train/test share when asked (``--matrix-split 0.8 --seed S``), and every dead end on the
way to ``podium train`` names its fix (a set without splits was all ``test``, then ``no row in
split 'train'``; then too few questions, with no fix named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.cli import cli
from podium.eval.replay import OutcomeMatrix
from podium.eval.report import build_report
from podium.eval.runner import Method, TaskResult
from podium.testing import ScriptedConductor


def result(task_id: str, score: float, cost: float) -> TaskResult:
    return TaskResult.from_json(
        dict(
            task_id=task_id, tags=["exact"], score=score, correct=score == 1.0, parsed=True, status="ok",
            fallback_reason=None, answer_worker="w", cost_usd=cost, worker_calls=1, input_tokens=10,
            output_tokens=5, steps=1, plan_attempts=0, plan_failures=0, latency_s=1.0, wall_s=1.0, answer="a",
            detail="", error=None, trace_id="t", question=f"What is the refund period for order {task_id}?",
        )
    )  # fmt: skip


def stored_report(folder: Path, n: int) -> Path:
    """The eval.json of a live '--methods single' run on ``n`` questions of a set without splits
    (ids like 'refunds-7'), two workers."""
    ids = [f"refunds-{i}" for i in range(n)]
    methods = [Method("single:big", ScriptedConductor(["x"])), Method("single:small", ScriptedConductor(["x"]))]
    results = {
        "single:big": [result(i, 1.0, 0.002) for i in ids],
        "single:small": [result(i, float(k % 2), 0.0005) for k, i in enumerate(ids)],
    }
    report = build_report(methods, results, replay=False, config={"tasks": "refunds.jsonl", "split": None})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.json").write_text(json.dumps(report), encoding="utf-8")
    return folder / "eval.json"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))  # the embedding cache of podium train


def test_matrix_split_assigns_a_seeded_share_to_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = stored_report(tmp_path / "run", 30)
    m = tmp_path / "m.csv"
    assert cli(["eval", "--from", str(report), "--matrix", str(m), "--matrix-split", "0.8", "--seed", "3"]) == 0
    assert "30 question(s) (6 test, 24 train, split by --matrix-split 0.8 --seed 3)" in capsys.readouterr().err
    matrix = OutcomeMatrix.load(m)
    train = {t.id for t in matrix.tasks("train")}
    assert len(train) == 24 and len(matrix.tasks("test")) == 6
    # the same seed gives the same split (written again: unchanged), another seed another one
    assert cli(["eval", "--from", str(report), "--matrix", str(m), "--matrix-split", "0.8", "--seed", "3"]) == 0
    assert {t.id for t in OutcomeMatrix.load(m).tasks("train")} == train
    other = tmp_path / "other.csv"
    assert cli(["eval", "--from", str(report), "--matrix", str(other), "--matrix-split", "0.8", "--seed", "4"]) == 0
    assert {t.id for t in OutcomeMatrix.load(other).tasks("train")} != train


def test_without_a_split_the_fix_is_named_on_the_way_to_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = stored_report(tmp_path / "run", 30)
    m = tmp_path / "m.csv"
    assert cli(["eval", "--from", str(report), "--matrix", str(m)]) == 0
    err = capsys.readouterr().err
    assert "(30 test)" in err and "add --matrix-split 0.8" in err  # said when recorded...
    assert cli(["train", "--replay", str(m), "--generations", "0"]) == 2
    err = capsys.readouterr().err
    assert "no question in split 'train' to train on (it has 30 in 'test')" in err  # ...and when training
    assert "--matrix-split 0.8" in err and "--split" in err


def test_too_few_questions_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = tmp_path / "m.csv"
    args = ["eval", "--from", str(stored_report(tmp_path / "run", 10)), "--matrix", str(m), "--matrix-split", "0.8"]
    assert cli(args) == 0
    capsys.readouterr()
    assert cli(["train", "--replay", str(m), "--generations", "0"]) == 2
    err = capsys.readouterr().err
    assert "8 training questions in split 'train'" in err and "needs at least 20" in err
    assert "podium eval --tasks MORE.jsonl --methods single --matrix FILE" in err and "How many questions" in err


def test_bad_matrix_split_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = str(stored_report(tmp_path / "run", 4))
    assert cli(["eval", "--from", report, "--matrix-split", "0.8"]) == 2
    assert "give --matrix OUT.csv too" in capsys.readouterr().err
    assert cli(["eval", "--from", report, "--matrix", str(tmp_path / "m.csv"), "--matrix-split", "1.5"]) == 2
    assert "between 0 and 1" in capsys.readouterr().err and not (tmp_path / "m.csv").exists()


def test_kept_splits_never_move_a_question_as_the_matrix_grows(tmp_path: Path) -> None:
    """podium loop extends set.csv every week with ``keep_splits``: questions keep the split
    they were given when first written (a question trained on never becomes a held-out one),
    new questions bring the share back to the target, and rows of dropped tasks go (``only``)."""
    from podium.eval.matrix import assign_new_splits, write_matrix

    m = tmp_path / "m.csv"
    first = json.loads(stored_report(tmp_path / "a", 20).read_text())
    assert write_matrix(first, m, train_share=0.8, seed=1, keep_splits=True) == (20, 0)
    before = {t.id: t.split for t in OutcomeMatrix.load(m).tasks()}
    grown = json.loads(stored_report(tmp_path / "b", 30).read_text())
    keep = {f"refunds-{i}" for i in range(30)} - {"refunds-3"}
    assert write_matrix(grown, m, train_share=0.8, seed=1, keep_splits=True, only=keep) == (29, 0)
    after = {t.id: t.split for t in OutcomeMatrix.load(m).tasks()}
    assert all(after[i] == split for i, split in before.items() if i != "refunds-3") and "refunds-3" not in after
    assert sum(split == "train" for split in after.values()) == round(0.8 * 29)
    assert assign_new_splits({"a": "train"}, ["b"], 0.8) == {"b": "test"}  # at least one held-out row
    assert assign_new_splits({"a": "test"}, ["b"], 0.2) == {"b": "train"}  # and one to train on
