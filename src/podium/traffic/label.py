"""Labelling by a judge worker: ``podium tasks label SET.jsonl --judge WORKER``, and the judge's
verdicts on served answers that ``podium drift --judge`` compares (:func:`judge_answers`).

Each task whose reference is still a **candidate** (``reference_source: candidate:…``, see
:mod:`podium.traffic.export`) is shown to the judge as the eval loop's ``open`` verifier shows an
answer (:func:`podium.eval.verifiers.judge_messages`: the question, the candidate as the answer,
the 1–10 rubric, no reference). A score of at least
:data:`~podium.eval.verifiers.JUDGE_PASS_SCORE` confirms the candidate: its
``reference_source`` becomes ``judge:<worker>``, so the set says who labelled it. A lower score,
or a reply without a score, leaves the task a candidate — for a person to review
(``podium tasks export --review`` on the next export, or the set's review file). Tasks already
confirmed (client, human, judge) are not sent again, so labelling is incremental.

:func:`judge_answers` shows the judge podium's own stored answers the same way (question, answer,
rubric, no reference) and keeps pass (1.0) or fail (0.0) per request: a quality figure for traffic
that nobody labelled, comparable between two windows because the same judge grades both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from podium.eval.tasks import Task
from podium.eval.verifiers import verify
from podium.traffic.export import CANDIDATE_SOURCES
from podium.traffic.source import TrafficItem
from podium.workers.base import Worker

__all__ = ["JudgedAnswers", "LabelResult", "judge_answers", "judge_label"]


@dataclass(frozen=True)
class LabelResult:
    """The set after judging.

    Attributes:
        records: every record, in order; confirmed ones with ``reference_source: judge:<name>``.
        confirmed: candidates the judge passed.
        rejected: candidates the judge scored below the pass mark (left as candidates).
        unscored: replies that give no score (left as candidates).
        skipped: tasks that were no candidates (not sent).
        scores: judge score (1–10) per task id sent.
        unscored_example: why the first unscored reply was not read, with its start ("" when
            every reply was scored).
    """

    records: list[dict[str, Any]]
    confirmed: int
    rejected: int
    unscored: int
    skipped: int
    scores: dict[str, float]
    unscored_example: str = ""


async def judge_label(
    records: Sequence[dict[str, Any]],
    judge: Worker,
    *,
    on_done: Callable[[int, int], None] | None = None,
) -> LabelResult:
    """Ask ``judge`` about each candidate reference of ``records`` (module docstring), one call
    at a time. ``on_done(done, total)`` follows progress. Raises what the judge's call raises
    (a provider error stops the labelling; nothing is returned half-done)."""
    todo = [i for i, r in enumerate(records) if r.get("reference_source") in CANDIDATE_SOURCES and r.get("reference")]
    out = [dict(r) for r in records]
    scores: dict[str, float] = {}
    confirmed = rejected = unscored = 0
    example = ""
    for done, index in enumerate(todo, 1):
        record = out[index]
        task = Task(id=str(record["id"]), question=str(record["question"]), task_type="open")
        verdict = await verify(task, str(record["reference"]), judge=judge)
        if not verdict.parsed:
            unscored += 1
            example = example or verdict.detail
        else:
            scores[task.id] = float(verdict.extracted or 0)
            if verdict.correct:
                confirmed += 1
                record["reference_source"] = f"judge:{judge.info.name}"
            else:
                rejected += 1
        if on_done is not None:
            on_done(done, len(todo))
    return LabelResult(out, confirmed, rejected, unscored, len(records) - len(todo), scores, example)


@dataclass(frozen=True)
class JudgedAnswers:
    """The judge's verdicts on stored answers.

    Attributes:
        scores: ``origin`` → 1.0 when the judge's score (1–10) reached
            :data:`~podium.eval.verifiers.JUDGE_PASS_SCORE`, else 0.0.
        unscored: origins whose judge reply gave no score (left out of ``scores``).
    """

    scores: dict[str, float]
    unscored: tuple[str, ...]


async def judge_answers(
    items: Sequence[TrafficItem], judge: Worker, *, on_done: Callable[[int, int], None] | None = None
) -> JudgedAnswers:
    """Ask ``judge`` whether each of ``items``' stored answers is right (module docstring), one call
    at a time; items without an answer are skipped. ``on_done(done, total)`` follows progress.
    Raises what the judge's call raises (a provider error stops it; nothing half-done is returned)."""
    todo = [i for i in items if i.answer]
    scores: dict[str, float] = {}
    unscored: list[str] = []
    for done, item in enumerate(todo, 1):
        task = Task(id=item.origin, question=item.question, task_type="open")
        verdict = await verify(task, item.answer or "", judge=judge)
        if verdict.parsed:
            scores[item.origin] = 1.0 if verdict.correct else 0.0
        else:
            unscored.append(item.origin)
        if on_done is not None:
            on_done(done, len(todo))
    return JudgedAnswers(scores, tuple(unscored))
