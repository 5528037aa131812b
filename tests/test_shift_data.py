"""The shift proof's data (bench/shift_data.py) from the shipped benchmarks: the same files for
the same seed, three disjoint question sets, every task tagged with its kind, references that
podium's loader and verifiers accept, and nothing the old conductor was trained on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from bench.shift_data import TRAINED_ON, build, danish_reference, danish_table, main

from podium.eval.tasks import load_tasks


def test_the_same_seed_writes_the_same_files_and_another_seed_other_questions(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path / "a"), "--before", "20", "--after", "16", "--heldout", "12"]) == 0
    assert main(["--out", str(tmp_path / "b"), "--before", "20", "--after", "16", "--heldout", "12"]) == 0
    for name in ("before", "after", "heldout", "manifest"):
        ext = "json" if name == "manifest" else "jsonl"
        assert (tmp_path / "a" / f"{name}.{ext}").read_bytes() == (tmp_path / "b" / f"{name}.{ext}").read_bytes()
    other = build(20, 16, 12, seed=1)
    assert {r["id"] for r in other["before"]} != {r["id"] for r in build(20, 16, 12)["before"]}


def test_the_sets_are_disjoint_tagged_by_kind_and_sized_as_asked(tmp_path: Path) -> None:
    sets = build(before=200, after=200, heldout=120)
    ids = {name: {r["id"] for r in records} for name, records in sets.items()}
    assert {name: len(v) for name, v in ids.items()} == {"before": 200, "after": 200, "heldout": 120}
    assert not ids["before"] & ids["after"] and not ids["before"] & ids["heldout"] and not ids["after"] & ids["heldout"]
    # the Danish rewrites use GSM8K questions that no math task uses
    sources = [r["id"].split("/", 2)[2] for records in sets.values() for r in records]
    assert len(sources) == len(set(sources))
    kinds = {name: {r["tags"][0] for r in records} for name, records in sets.items()}
    assert kinds["before"] == {"use-case:math", "use-case:code"}
    assert (
        kinds["after"]
        == kinds["heldout"]
        == {"use-case:math", "use-case:code", "use-case:humaneval", "use-case:support-da"}
    )
    assert sum(r["tags"][0] == "use-case:humaneval" for r in sets["after"]) == 50
    with TRAINED_ON.open(encoding="utf-8", newline="") as handle:
        trained = {row["sample_id"] for row in csv.DictReader(handle)}
    assert trained and not trained & set(sources)  # nothing the old conductor was trained on


def test_podium_loads_every_set_with_references_or_tests(tmp_path: Path) -> None:
    sets = build(before=8, after=8, heldout=8)
    for name, records in sets.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for task in load_tasks(path):
            assert task.tests if task.task_type == "code" else task.reference, task.id
            if "use-case:humaneval" in task.tags:
                assert task.tests is not None and task.tests.rstrip().endswith(")") and "candidate" not in task.tests


def test_the_danish_rewrite_is_a_table_whose_total_is_the_reference() -> None:
    question = "Janet has 16 eggs, eats 3 and bakes with 4. How many are left?"
    text = danish_table(question, 7)
    assert "| vare 1 | 16 |" in text and "| vare 3 | 4 |" in text and "(sag 7)" in text
    assert danish_reference(question) == "23"
    assert danish_reference("No numbers here.") == "12"  # the 3, 4, 5 table


def test_a_second_held_out_set_is_fresh_and_leaves_the_other_sets_as_they_were() -> None:
    without = build(before=20, after=16, heldout=12)
    sets = build(before=20, after=16, heldout=12, heldout2=8)
    assert {name: sets[name] for name in without} == without  # dealt last: nothing else moves
    second = [r["id"].split("/", 2)[2] for r in sets["heldout2"]]
    earlier = {r["id"].split("/", 2)[2] for name in without for r in without[name]}
    assert len(second) == 8 and not earlier & set(second)
    assert {r["tags"][0] for r in sets["heldout2"]} == {
        "use-case:math", "use-case:code", "use-case:humaneval", "use-case:support-da"
    }  # fmt: skip
