"""Slices count each task once: a set's own tag equal to the task type (``"tags": ["math"]`` on
a math task) used to be kept twice, so the ``math`` slice showed n = 10 for 6 tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from podium.eval.report import build_report
from podium.eval.runner import Method, TaskResult
from podium.eval.tasks import load_tasks
from podium.testing import ScriptedConductor


def write_set(path: Path) -> Path:
    rows = [
        {"id": f"m{i}", "question": f"{i} + {i}?", "task_type": "math", "reference": str(2 * i), "tags": ["math"]}
        for i in range(6)
    ] + [
        {"id": f"e{i}", "question": f"Say {i}.", "task_type": "exact", "reference": str(i), "tags": ["smoke", "smoke"]}
        for i in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def result(task_id: str, tags: tuple[str, ...], score: float) -> TaskResult:
    fields: dict[str, Any] = dict(
        task_id=task_id, tags=list(tags), score=score, correct=score == 1.0, parsed=True, status="ok",
        fallback_reason=None, answer_worker="w", cost_usd=0.001, worker_calls=1, input_tokens=10,
        output_tokens=5, steps=1, plan_attempts=1, plan_failures=0, latency_s=1.0, wall_s=1.0, answer="",
        detail="", error=None, trace_id="t",
    )  # fmt: skip
    return TaskResult.from_json(fields)


def test_a_tag_equal_to_the_task_type_is_kept_once(tmp_path: Path) -> None:
    tasks = load_tasks(write_set(tmp_path / "set.jsonl"))
    assert {t.tags for t in tasks} == {("math",), ("exact", "smoke")}  # the task type first, then the set's tags


def test_each_slice_counts_each_task_once(tmp_path: Path) -> None:
    tasks = load_tasks(write_set(tmp_path / "set.jsonl"))
    method = Method("single:w", ScriptedConductor(["unused"]))
    results = [result(t.id, t.tags, 1.0 if t.id in ("m0", "m1", "m2") else 0.0) for t in tasks]
    # a report of results stored before the fix (eval.json keeps each result's tags) counts once too
    results[0] = result("m0", ("math", "math"), 1.0)
    report = build_report([method], {method.name: results}, replay=False, config={})
    slices = {tag: per["single:w"]["n"] for tag, per in report["slices"].items()}
    assert slices == {"exact": 4, "math": 6, "smoke": 4}
    assert report["slices"]["math"]["single:w"]["quality"] == 0.5  # 3 of the 6, not 4 of 7
