"""Outcome matrices written from live eval reports (``podium eval --matrix``), read back by the
replay loader that training uses. The reports are built by hand in the shape the runner writes
(per-request results of single:NAME methods)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podium.errors import ConfigError
from podium.eval.matrix import assign_new_splits, assign_splits, write_matrix
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


def test_a_split_of_two_kinds_holds_out_each_kind_in_proportion_for_every_seed() -> None:
    """10 math and 5 table questions at share 0.8: 12 train, so the exact quotas are 8 and 4
    and the test split has 2 math and 1 table question whatever the shuffle. Unstratified, some
    seeds hold out three math questions and no table one (checked below, so the stratification
    is what makes the difference)."""
    kinds = {f"traffic/{i:02d}": "math" if i < 10 else "table" for i in range(15)}
    unstratified_one_kind = 0
    for seed in range(40):
        splits = assign_splits(kinds, 0.8, seed, strata=kinds)
        held_out = sorted(kinds[i] for i, split in splits.items() if split == "test")
        assert held_out == ["math", "math", "table"], seed
        plain = assign_splits(kinds, 0.8, seed)
        unstratified_one_kind += len({kinds[i] for i, split in plain.items() if split == "test"}) == 1
    assert unstratified_one_kind > 0
    # one kind only: exactly the unstratified draw (existing files keep their splits)
    one = dict.fromkeys(kinds, "math")
    assert assign_splits(kinds, 0.8, 3, strata=one) == assign_splits(kinds, 0.8, 3)


def test_new_rows_are_split_by_kind_and_kept_rows_never_move() -> None:
    """4 kept rows (3 train, 1 test) + 6 new ones (3 math, 3 table) at share 0.8: 8 of 10 in
    train, so 5 of the new ones, shared 2.5 / 2.5 — largest remainder, tie to 'math' (sorted
    first): 3 math and 2 table to train, the one new test row a table question."""
    kept = {"k/1": "train", "k/2": "train", "k/3": "train", "k/4": "test"}
    new = {f"n/{i}": "math" if i < 3 else "table" for i in range(6)}
    for seed in range(10):
        splits = assign_new_splits(kept, new, 0.8, seed, strata=new)
        assert set(splits) == set(new)
        assert [new[i] for i, split in splits.items() if split == "test"] == ["table"], seed


def test_write_matrix_stratifies_by_the_reports_tags(tmp_path: Path) -> None:
    """The loop's traffic rows all have eval_name 'traffic'; their tags say the kind. Four math
    and four table questions at share 0.75: 6 train, 3 per kind, one of each kind in test (an
    unstratified draw with seed 5 holds out two table questions)."""
    rows = []
    for i in range(8):
        r = result(f"traffic/{i}", 1.0, 0.001)
        r["tags"] = ["support", "math" if i < 4 else "table"]
        rows.append(r)
    path = tmp_path / "set.csv"
    write_matrix(report({"single:big": rows}), path, train_share=0.75, seed=5)
    matrix = OutcomeMatrix.load(path)
    held_out = sorted(int(t.id.split("/")[1]) < 4 for t in matrix.tasks("test"))
    assert held_out == [False, True]


def test_a_rows_tags_travel_with_it_so_a_gate_can_take_one_use_case(tmp_path: Path) -> None:
    """A first user's loop matrix kept only ``eval_name`` ("traffic"), so ``conductor promote
    --tag use-case:support`` found no question. The row's tags are now a column; a file written
    before it (no such column) still loads and extends."""
    from podium.eval.tasks import TaskSetError

    def tagged(task_id: str, *tags: str) -> dict[str, Any]:
        return {**result(task_id, 1.0, 0.001), "tags": list(tags)}

    path = tmp_path / "set.csv"
    old = "sample_id,eval_name,split,prompt,big,big|total_cost\ntraffic/a,traffic,test,Q a?,1,0.001\n"
    path.write_text(old, encoding="utf-8")  # the shape before the column
    assert OutcomeMatrix.load(path).tasks()[0].tags == ("traffic",)
    rows = [tagged("traffic/b", "open", "use-case:support", "lang:da"), tagged("traffic/c", "math", "use-case:billing")]
    assert write_matrix(report({"single:big": rows}), path) == (3, 0)
    tasks = {t.id: t.tags for t in OutcomeMatrix.load(path).tasks()}
    assert tasks == {
        "traffic/a": ("traffic",),  # kept from the old file: no tags recorded
        "traffic/b": ("traffic", "open", "use-case:support", "lang:da"),
        "traffic/c": ("traffic", "math", "use-case:billing"),
    }
    assert [t.id for t in OutcomeMatrix.load(path).tasks() if "use-case:support" in t.tags] == ["traffic/b"]
    path.write_text(path.read_text(encoding="utf-8").replace('"[""math""', '"math'), encoding="utf-8")
    with pytest.raises(TaskSetError, match="must be a JSON list of text"):
        OutcomeMatrix.load(path)


def test_the_same_answer_recorded_again_keeps_its_first_latency(tmp_path: Path) -> None:
    """A live run records a call's whole wall time; a rerun from the request cache the backend's
    time of that first call, a little less. The loop re-recorded a matrix from the cache after a
    judge changed and got other bytes for the same outcomes, so it trained again. An unchanged
    answer keeps the latency the file has; a changed one takes the new figure."""
    path = tmp_path / "m.csv"

    def run(answer: str, latency: float) -> dict[str, Any]:
        return report({"single:big": [{**result("gsm8k/test/1", 1.0, 0.002, answer), "latency_s": latency}]})

    write_matrix(run("42", 2.6582), path)
    first = path.read_bytes()
    write_matrix(run("42", 2.6538), path)  # the same answer, from the cache
    assert path.read_bytes() == first
    write_matrix(run("41", 3.1), path)  # another answer: its own latency
    assert OutcomeMatrix.load(path).outcome("gsm8k/test/1", "big").latency_s == 3.1
