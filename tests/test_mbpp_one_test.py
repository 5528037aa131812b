"""bench/mbpp_one_test.py: MBPP with one assert shown and all graded, read back by podium's own
task loader, so a check can run only the shown test while the grader runs all three."""

from __future__ import annotations

import json
from pathlib import Path

from bench.mbpp_one_test import first_call, main, record, wanted

from podium.eval.tasks import load_tasks
from podium.workers.python_tool import question_tests


def test_the_question_shows_the_first_assert_and_the_grader_keeps_all(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("# a list\ngsm8k/test/3\nmbpp/12\nmbpp/17/one-test\n", encoding="utf-8")
    out = tmp_path / "one.jsonl"
    assert main(["--ids", str(ids), "--out", str(out)]) == 0
    tasks = {t.id: t for t in load_tasks(out)}
    assert list(tasks) == ["mbpp/12/one-test", "mbpp/17/one-test"]
    original = {t.id: t for t in load_tasks(Path(__file__).parents[1] / "data" / "benchmarks" / "mbpp" / "mbpp.jsonl")}
    for task_id, task in tasks.items():
        graded = original[task_id.removesuffix("/one-test")].tests
        assert task.task_type == "code" and task.tests == graded  # the grader's three asserts
        assert graded is not None and len(graded.splitlines()) == 3
        shown = question_tests(task.question)  # what a check step runs
        assert shown is not None and shown.strip() == graded.splitlines()[0]


def test_problems_with_setup_code_are_left_out_and_unknown_ids_refused(tmp_path: Path) -> None:
    assert record({"task_id": 9, "text": "t", "test_list": ["assert f()"], "test_setup_code": "import x"}) is None
    assert wanted(["mbpp/4", "mbpp/4/one-test", "HumanEval/2", "mbpp/x"]) == [4, 4]
    ids = tmp_path / "ids.txt"
    ids.write_text("mbpp/99999\n", encoding="utf-8")
    assert main(["--ids", str(ids), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert not (tmp_path / "o.jsonl").exists()


def test_with_no_test_shown_a_check_finds_nothing_to_run_and_the_grader_keeps_all(tmp_path: Path) -> None:
    """``--shown 0``: the question names the function by the first assert's call without its
    expected value, so a check step has no test to run; the grader still runs all three."""
    ids = tmp_path / "ids.txt"
    ids.write_text("mbpp/12\nmbpp/17/no-test\n", encoding="utf-8")
    out = tmp_path / "none.jsonl"
    assert main(["--ids", str(ids), "--out", str(out), "--shown", "0"]) == 0
    tasks = {t.id: t for t in load_tasks(out)}
    assert list(tasks) == ["mbpp/12/no-test", "mbpp/17/no-test"]
    original = {t.id: t for t in load_tasks(Path(__file__).parents[1] / "data" / "benchmarks" / "mbpp" / "mbpp.jsonl")}
    for task_id, task in tasks.items():
        graded = original[task_id.removesuffix("/no-test")].tests
        assert task.tests == graded and graded is not None
        assert question_tests(task.question) is None  # nothing for a check to run
        first = graded.splitlines()[0]
        call = task.question.split("Call it like this: ", 1)[1].split("\n", 1)[0]
        assert call in first and call.endswith(")") and "==" not in call


def test_a_bracket_inside_a_string_does_not_end_the_shown_call() -> None:
    """MBPP 386's first assert is ``assert swap_count("[]][][") == 2``: the call shown is the whole
    ``swap_count("[]][][")`` (a bracket counter stopped at ``swap_count("[]]``); MBPP 77's
    ``is_Diff (12345)`` keeps its space."""
    problems = {
        int(p["task_id"]): p
        for p in map(json.loads, (Path(__file__).parents[1] / "data/benchmarks/mbpp/mbpp.jsonl").open(encoding="utf-8"))
    }
    assert first_call(problems[386]) == 'swap_count("[]][][")'
    assert first_call(problems[77]) == "is_Diff (12345)"
