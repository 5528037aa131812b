"""Outcome matrices written from live eval reports (``podium eval --matrix``), read back by the
replay loader that training uses. The reports are built by hand in the shape the runner writes
(per-request results of single:NAME methods)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podium.errors import ConfigError
from podium.eval.matrix import write_matrix
from podium.eval.replay import OutcomeMatrix


def result(task_id: str, score: float, cost: float, answer: str = "ans") -> dict[str, Any]:
    return {"task_id": task_id, "score": score, "cost_usd": cost, "answer": answer, "question": f"Q {task_id}?"}


def report(results: dict[str, list[dict[str, Any]]], split: str | None = None) -> dict[str, Any]:
    return {"config": {"split": split}, "results": results}


def test_a_train_run_and_a_test_run_make_one_matrix_that_replay_loads(tmp_path: Path) -> None:
    path = tmp_path / "local.csv"
    train = report(
        {
            "single:big": [result("gsm8k/train/1", 1.0, 0.002), result("gsm8k/train/2", 0.0, 0.003)],
            "single:small": [result("gsm8k/train/1", 0.0, 0.0005), result("gsm8k/train/2", 1.0, 0.0004)],
            "conductor": [result("gsm8k/train/1", 1.0, 0.01)],  # not a single worker: not a column
        }
    )
    assert write_matrix(train, path) == (2, 0)
    test = report(
        {
            "single:big": [result("gsm8k/test/7", 1.0, 0.002), result("gsm8k/test/8", 1.0, 0.002)],
            "single:small": [result("gsm8k/test/7", 0.0, 0.0005)],  # test/8 lacks this worker: left out
        }
    )
    assert write_matrix(test, path) == (3, 1)
    matrix = OutcomeMatrix.load(path)
    assert matrix.models == ("big", "small")
    assert [t.id for t in matrix.tasks("train")] == ["gsm8k/train/1", "gsm8k/train/2"]
    (held_out,) = matrix.tasks("test")
    assert held_out.id == "gsm8k/test/7" and held_out.task_type == "math" and held_out.question == "Q gsm8k/test/7?"
    assert matrix.outcome("gsm8k/train/2", "small").score == 1.0
    assert matrix.outcome("gsm8k/train/1", "big").cost_usd == pytest.approx(0.002)


def test_mbpp_ids_take_the_standard_split_and_workers_must_match(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    write_matrix(report({"single:a": [result("mbpp/11", 1.0, 0.1), result("mbpp/700", 0.0, 0.1)]}), path)
    matrix = OutcomeMatrix.load(path)
    assert [t.id for t in matrix.tasks("test")] == ["mbpp/11"] and [t.id for t in matrix.tasks("train")] == ["mbpp/700"]
    assert matrix.tasks("test")[0].task_type == "code"
    with pytest.raises(ConfigError, match="has workers a; this run has b"):
        write_matrix(report({"single:b": [result("mbpp/12", 1.0, 0.1)]}), path)
    with pytest.raises(ConfigError, match="summary-only"):
        write_matrix({"config": {}}, tmp_path / "x.csv")
