"""Task sets: the shipped benchmarks load with their standard splits; bad regression sets fail
with the file, the line and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.eval.tasks import TaskSetError, load_tasks, mbpp_split, select
from tests.conftest import SHARED_DATA

BENCH = SHARED_DATA / "benchmarks"


def test_gsm8k_reference_is_the_number_after_the_hashes() -> None:
    tasks = load_tasks(BENCH / "gsm8k" / "test.jsonl")
    assert len(tasks) == 1319  # the GSM8K test split
    first = tasks[0]
    assert first.id == "gsm8k/test/0" and first.task_type == "math" and first.split == "test"
    assert first.reference == "18"  # Janet's ducks: "#### 18"
    # thousands separators are dropped so the verifier compares numbers, not strings
    assert all("," not in (t.reference or "") for t in tasks)


def test_humaneval_and_mbpp_splits() -> None:
    humaneval = load_tasks(BENCH / "humaneval" / "HumanEval.jsonl")
    assert len(humaneval) == 164 and humaneval[0].entry_point == "has_close_elements"
    assert "def has_close_elements" in humaneval[0].question
    counts = {s: len(load_tasks(BENCH / "mbpp" / "mbpp.jsonl", split=s)) for s in ("test", "validation", "train")}
    # Austin et al. 2021: test 11-510, validation 511-600, train 601-974
    assert counts == {"test": 500, "validation": 90, "train": 374}
    assert (mbpp_split(10), mbpp_split(11), mbpp_split(510), mbpp_split(511), mbpp_split(601)) == (
        "prompt",
        "test",
        "test",
        "validation",
        "train",
    )
    mbpp = load_tasks(BENCH / "mbpp" / "mbpp.jsonl", split="test")[0]
    assert mbpp.id == "mbpp/11" and "assert" in (mbpp.tests or "") and "assert" in mbpp.question


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_regression_set_loads_with_tags(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "question": "2+2?", "task_type": "math", "reference": 4, "tags": ["danish"]},
        {"id": "b", "question": "Pick", "task_type": "choice", "reference": "B", "choices": ["x", "y"]},
        {"id": "c", "question": "Write f", "task_type": "code", "tests": "assert f() == 1"},
    ]
    tasks = load_tasks(_write(tmp_path, [json.dumps(r) for r in rows]))
    assert [t.id for t in tasks] == ["a", "b", "c"]
    assert tasks[0].reference == "4" and tasks[0].tags == ("math", "danish")
    assert tasks[1].choices == ("x", "y")


def test_unconfirmed_candidate_references_are_counted_and_can_be_left_out(tmp_path: Path) -> None:
    """An exported regression set marks a reference nobody confirmed ``candidate:…``: eval can
    leave those tasks out (``--confirmed-only``), keeping the confirmed and the client's own."""
    from podium.cli import _parser
    from podium.eval.session import EvalSpec, _filter, unconfirmed

    rows = [
        {"id": "a", "question": "2+2?", "task_type": "math", "reference": 4, "reference_source": "candidate:upstream"},
        {"id": "b", "question": "3+3?", "task_type": "math", "reference": 6, "reference_source": "human"},
        {"id": "c", "question": "4+4?", "task_type": "math", "reference": 8, "reference_source": "candidate:podium"},
        {"id": "d", "question": "5+5?", "task_type": "math", "reference": 10, "reference_source": "client"},
        {"id": "e", "question": "6+6?", "task_type": "math", "reference": 12},
    ]
    tasks = load_tasks(_write(tmp_path, [json.dumps(r) for r in rows]))
    assert [t.id for t in tasks if unconfirmed(t)] == ["a", "c"]
    assert [t.id for t in _filter(tasks, EvalSpec(tasks=tmp_path))] == ["a", "b", "c", "d", "e"]
    assert [t.id for t in _filter(tasks, EvalSpec(tasks=tmp_path, confirmed_only=True))] == ["b", "d", "e"]
    args = _parser("eval").parse_args(["eval", "--tasks", "x.jsonl", "--confirmed-only"])
    assert args.confirmed_only is True


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "question": "q", "task_type": "math"}', "needs 'reference'"),
        ('{"id": "a", "question": "q", "task_type": "code"}', "needs 'tests'"),
        ('{"id": "a", "question": "q", "task_type": "code", "tests": ["assert 1"]}', "'tests' must be text"),
        ('{"id": "a", "question": "q", "task_type": "poem", "reference": "x"}', "'task_type' must be one of"),
        ('{"id": "a", "question": "", "task_type": "exact", "reference": "x"}', "'question' must be non-empty"),
        ('{"id": "a", "question": "q", "task_type": "exact", "reference": "x", "answer_key": 1}', "unknown field"),
        ('{"id": "a", "question": "q", "task_type": "exact", "reference": "x", "tags": "t"}', "'tags' must be a list"),
        ('{"id": "a", "question": "q"', "invalid JSON"),
    ],
)
def test_bad_regression_set_names_file_line_and_fix(tmp_path: Path, line: str, message: str) -> None:
    good = '{"id": "ok", "question": "q", "task_type": "exact", "reference": "x"}'
    path = _write(tmp_path, [good, line])
    with pytest.raises(TaskSetError) as info:
        load_tasks(path)
    assert message in str(info.value)
    assert f"{path}:2" in str(info.value)


def test_duplicate_ids_missing_file_and_empty_split(tmp_path: Path) -> None:
    row = '{"id": "a", "question": "q", "task_type": "exact", "reference": "x"}'
    with pytest.raises(TaskSetError, match="duplicate task id 'a'"):
        load_tasks(_write(tmp_path, [row, row]))
    with pytest.raises(TaskSetError, match="does not exist"):
        load_tasks(tmp_path / "nope.jsonl")
    with pytest.raises(TaskSetError, match=r"no task in split 'train'; its splits: \(none\) \(1\)"):
        load_tasks(_write(tmp_path, [row]), split="train")
    with pytest.raises(TaskSetError, match="unknown task set format"):
        load_tasks(_write(tmp_path, ['{"prompt": "x"}']))


def test_sample_is_seeded_and_keeps_order() -> None:
    tasks = load_tasks(BENCH / "gsm8k" / "test.jsonl")
    a, b = select(tasks, sample=50, seed=7), select(tasks, sample=50, seed=7)
    assert [t.id for t in a] == [t.id for t in b]
    indices = [int(t.id.rsplit("/", 1)[1]) for t in a]
    assert indices == sorted(indices) and len(set(indices)) == 50
    assert select(tasks, sample=50, seed=8) != a
    assert [t.id for t in select(tasks, limit=3)] == ["gsm8k/test/0", "gsm8k/test/1", "gsm8k/test/2"]


def test_example_regression_set_is_consistent_with_its_verifiers() -> None:
    """Each example task's reference, written as a model would answer, passes its own verifier
    (so the example cannot silently ask for the impossible)."""
    import asyncio

    from podium.eval.verifiers import verify
    from tests.conftest import ROOT

    tasks = load_tasks(ROOT / "examples" / "regression-set.jsonl")
    solutions = {
        "code-reverse-words": "```python\ndef reverse_words(s):\n    return ' '.join(reversed(s.split()))\n```",
        "code-is-leap": "```python\ndef is_leap(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n```",
    }
    tags = {tag for t in tasks for tag in t.tags}
    assert {"danish", "tables", "domain-terms", "adversarial"} <= tags
    for task in tasks:
        if task.task_type == "open":
            continue
        answer = solutions.get(task.id) or f"Let me work it out. The answer is {task.reference}"
        if task.task_type == "exact":
            answer = f"Here you go:\n{task.reference}"
        if task.task_type == "choice":
            answer = f"The correct answer is ({task.reference})."
        verdict = asyncio.run(verify(task, answer))
        assert verdict.correct, (task.id, verdict)


def test_a_review_csv_given_as_the_set_is_named_and_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    """A first user passed the review CSV as --set and read about a UTF-8 BOM in invalid JSON."""
    review = tmp_path / "review.csv"
    review.write_bytes("\ufeffid,question,candidate,verdict,reference\ntraffic/1,q,18,accept,\n".encode())
    with pytest.raises(TaskSetError, match=r"is a CSV file \(a review file\?\), not a task set"):
        load_tasks(review)
    marked = tmp_path / "set.jsonl"  # the same JSONL a Windows editor saved with a BOM
    marked.write_bytes('\ufeff{"id": "a", "question": "q", "task_type": "exact", "reference": "x"}\n'.encode())
    assert [t.id for t in load_tasks(marked)] == ["a"]


def test_a_requests_task_tag_matches_the_type_its_export_gave_the_task() -> None:
    """Traffic tagged task:math is exported as tasks of type math (the task: tag is dropped), so
    --tag task:math must still find them; other tags match as written."""
    from podium.eval.tasks import Task, has_tag

    task = Task(id="t1", question="2+2?", task_type="math", reference="4", tags=("math", "use-case:support"))
    assert has_tag(task, ["task:math"]) and has_tag(task, ["use-case:support"]) and has_tag(task, ["math"])
    assert not has_tag(task, ["task:code"]) and not has_tag(task, ["use-case:billing"]) and not has_tag(task, [])
