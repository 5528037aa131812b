"""bench/shift_compare.py joins eval reports by task id: the live light conductors' report and a
bank replay's report of plan conductors (whose rows carry no use-case tags) are compared on the
questions both answered. The reports here are hand-written (a unit test of the arithmetic)."""

from __future__ import annotations

import pytest
from bench.shift_compare import compare


def row(task_id: str, score: float, tags: tuple[str, ...] = ()) -> dict:
    return {"task_id": task_id, "score": score, "cost_usd": 0.001, "tags": list(tags)}


LIVE = {
    "results": {
        "light:old": [row("a", 0, ("use-case:math",)), row("b", 1, ("use-case:code",)), row("c", 0, ("use-case:da",))],
        "single:big": [row("a", 1, ("use-case:math",)), row("b", 1, ("use-case:code",)), row("c", 1, ("use-case:da",))],
    }
}
BANK = {"results": {"light:plans": [row("a", 1), row("b", 0)]}}  # c is an open task: not in the bank


def test_reports_are_joined_on_the_questions_every_method_answered() -> None:
    result = compare([LIVE, BANK], "light:plans", "light:old")
    assert result["common_questions"] == 2 and result["answered_beyond"] == {"light:old": 1, "single:big": 1}
    math, code = result["slices"]["use-case:math"], result["slices"]["use-case:code"]
    assert (math["quality"]["light:plans"], math["gap_recovered"]) == (1.0, 1.0)  # old 0, best 1, new 1
    assert code["gap_recovered"] is None  # old already at the best: no gap
    assert "use-case:da" not in result["slices"]
    overall = result["slices"]["all"]  # old 0.5, best 1.0, new 0.5
    assert (overall["per_question_best"], overall["gap_recovered"]) == (1.0, 0.0)


def test_a_method_in_two_reports_or_no_common_question_is_refused() -> None:
    with pytest.raises(ValueError, match="in two reports"):
        compare([LIVE, LIVE], "light:old", "single:big")
    with pytest.raises(ValueError, match="no question"):
        compare([LIVE, {"results": {"light:plans": [row("z", 1)]}}], "light:plans", "light:old")
