"""Replay pools: workers that answer with recorded results of real models.

An **outcome matrix** (RouterBench's column convention, docs/eval.md, "Replay pools") holds, per question
(``sample_id, eval_name, split, prompt``; podium's own add ``tags``, the question's tags as a
JSON list) and per model ``<model>``: the score in [0, 1],
``<model>|model_response`` (may be empty) and ``<model>|total_cost`` (USD). Any number of
models loads. :class:`ReplayWorker` turns one model's column into a pool worker, so conductors
are trained and evaluated on recorded results without calling any model.

How a workflow is scored in replay (and reported as such):

* A step on worker *m* answers with *m*'s recorded response to the **question** (whatever
  the subtask said — the record cannot know), and is charged *m*'s recorded cost for the
  question. Every step is charged, so a 3-step workflow costs the sum of its three records.
* The request's **quality is the recorded score of the worker that wrote the final answer**
  (the last step, or the fallback pipeline's worker). Earlier steps cannot improve or hurt it:
  replay measures *routing* (who answers, at what cost), not collaboration. Multi-step
  baselines (pipeline, MoA) are therefore scored as their final worker alone, at the cost of
  all their calls — an honest lower bound on what they buy, stated in every replay report.
* Latency: RouterBench's convention has none, and replay reports then give no latency figures.
  podium's own matrices (``podium eval --matrix``) add an optional ``<model>|latency_s`` column,
  the recorded seconds of that model's request (:attr:`OutcomeMatrix.has_latency`). With it a
  step takes its worker's recorded seconds, reports give the critical path (plus the
  conductor's own planning time, measured), and training's −μ·latency reward term reads it.

The replayed question is found from the task being evaluated (the request's
``CallContext.task_id``, which the eval runner sets), not by parsing messages, so a subtask that
rewrites the question still replays the right row.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from podium.conductor.base import PreviousRound
from podium.conductor.baselines import SingleWorker
from podium.errors import ConfigError
from podium.eval.tasks import Task, TaskSetError, TaskType, split_sizes
from podium.records import PlanAttempt
from podium.workers.base import (
    NO_CONTEXT,
    Call,
    CallContext,
    Completion,
    Price,
    Usage,
    Worker,
    WorkerInfo,
    WorkerSettings,
)
from podium.workflow import Workflow

MATRIX_FIXED_COLUMNS = ("sample_id", "eval_name", "split", "prompt", "tags")
"""The columns of an outcome matrix that are no model: RouterBench's four, and podium's optional
``tags`` (the question's tags as a JSON list)."""

__all__ = [
    "MATRIX_FIXED_COLUMNS",
    "OracleRouter",
    "Outcome",
    "OutcomeMatrix",
    "ReplayWorker",
    "oracle_choice",
    "replay_score",
]


@dataclass(frozen=True)
class Outcome:
    """One model's record for one question: score in [0, 1], response ("" if none), USD, and
    the request's recorded seconds (0.0 when the matrix has no ``|latency_s`` column)."""

    score: float
    response: str
    cost_usd: float
    latency_s: float = 0.0


@dataclass(frozen=True)
class _Row:
    sample_id: str
    eval_name: str
    split: str
    prompt: str
    outcomes: dict[str, Outcome]
    tags: tuple[str, ...] = ()


class OutcomeMatrix:
    """A loaded outcome matrix.

    Attributes:
        path: the CSV file.
        models: model column names, in file order.
        rows: by ``sample_id``.
        has_latency: every model has a ``<model>|latency_s`` column (podium's extension).
    """

    def __init__(self, path: Path, models: tuple[str, ...], rows: dict[str, _Row], has_latency: bool = False) -> None:
        self.path = path
        self.models = models
        self.rows = rows
        self.has_latency = has_latency

    def require_latency(self, purpose: str) -> None:
        """Raises TaskSetError (a ConfigError) naming ``purpose`` when the matrix has no
        ``|latency_s`` columns, with how to get them."""
        if not self.has_latency:
            raise TaskSetError(
                f"{purpose} needs recorded latencies, and {self.path.name} has no '<model>|latency_s' columns: "
                "record a matrix with podium eval --methods single --matrix FILE (live runs record latency), "
                "or set μ to 0"
            )

    @classmethod
    def load(cls, path: str | Path) -> OutcomeMatrix:
        """Read a RouterBench-convention CSV.

        Raises:
            TaskSetError: missing file, missing fixed columns, a model without its
                ``|total_cost`` column, a score outside [0, 1], a negative or non-numeric cost,
                or a duplicate ``sample_id`` — each naming the row and column.
        """
        file = Path(path)
        if not file.is_file():
            raise TaskSetError(f"outcome matrix {file} does not exist")
        csv.field_size_limit(1 << 27)
        with file.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in ("sample_id", "eval_name", "split", "prompt") if c not in header]
            if missing:
                raise TaskSetError(
                    f"{file}: missing column(s) {missing} (RouterBench's convention: docs/eval.md, 'Replay pools')"
                )
            models = tuple(c for c in header if "|" not in c and c not in MATRIX_FIXED_COLUMNS)
            if not models:
                raise TaskSetError(f"{file}: no model columns (a column per model with its score in [0, 1])")
            for model in models:
                if f"{model}|total_cost" not in header:
                    raise TaskSetError(f"{file}: model {model!r} has no '{model}|total_cost' column")
            rows: dict[str, _Row] = {}
            for line, rec in enumerate(reader, 2):
                sid = rec["sample_id"]
                if sid in rows:
                    raise TaskSetError(f"{file}:{line}: duplicate sample_id {sid!r}")
                outcomes = {m: _outcome(rec, m, file, line) for m in models}
                tags = _row_tags(rec.get("tags"), file, line)
                rows[sid] = _Row(sid, rec["eval_name"], rec["split"], rec["prompt"], outcomes, tags)
        if not rows:
            raise TaskSetError(f"{file}: no rows")
        return cls(file, models, rows, has_latency=all(f"{m}|latency_s" in header for m in models))

    def tasks(self, split: str | None = None) -> list[Task]:
        """The matrix's questions as tasks (id = ``sample_id``; tags = eval family and name, then
        the row's own ``tags``, e.g. a regression set's ``use-case:support``).

        Raises TaskSetError when ``split`` leaves no row."""
        tasks = [
            Task(
                id=row.sample_id,
                question=row.prompt,
                task_type=_task_type(row.eval_name),
                tags=tuple(dict.fromkeys((*_tags(row.eval_name), *row.tags))),
                split=row.split,
                source=self.path.stem,
            )
            for row in self.rows.values()
            if split is None or row.split == split
        ]
        if not tasks:
            splits = split_sizes(row.split for row in self.rows.values())
            raise TaskSetError(f"{self.path}: no row in split {split!r}; its splits: {splits}")
        return tasks

    def outcome(self, sample_id: str, model: str) -> Outcome:
        """The record of ``model`` for ``sample_id``; KeyError naming both if absent."""
        try:
            return self.rows[sample_id].outcomes[model]
        except KeyError:
            raise KeyError(f"no record of model {model!r} for sample {sample_id!r} in {self.path}") from None

    def workers(self) -> list[ReplayWorker]:
        """One replay worker per model, in column order. Each one's description — what an LM
        conductor reads as ``Model i: ...`` — is its model name, as in GRPO training
        (:mod:`podium.train.grpo`)."""
        return [ReplayWorker(model, self, description=model) for model in self.models]


def _outcome(rec: dict[str, str], model: str, file: Path, line: int) -> Outcome:
    try:
        score = float(rec[model])
        cost = float(rec[f"{model}|total_cost"])
    except (TypeError, ValueError):
        raise TaskSetError(f"{file}:{line}: model {model!r}: score and total_cost must be numbers") from None
    if not (0.0 <= score <= 1.0) or math.isnan(score):
        raise TaskSetError(f"{file}:{line}: model {model!r}: score {score} is outside [0, 1]")
    if not (cost >= 0.0):
        raise TaskSetError(f"{file}:{line}: model {model!r}: total_cost {cost} must be ≥ 0 USD")
    latency = rec.get(f"{model}|latency_s") or "0"
    try:
        seconds = float(latency)
    except ValueError:
        raise TaskSetError(f"{file}:{line}: model {model!r}: latency_s {latency!r} is not a number") from None
    if not (seconds >= 0.0):
        raise TaskSetError(f"{file}:{line}: model {model!r}: latency_s {seconds} must be ≥ 0 seconds")
    return Outcome(score, rec.get(f"{model}|model_response") or "", cost, seconds)


def _row_tags(cell: str | None, file: Path, line: int) -> tuple[str, ...]:
    """A row's optional ``tags`` cell: a JSON list of text (podium's extension), empty for none."""
    if not cell:
        return ()
    try:
        tags = json.loads(cell)
    except json.JSONDecodeError:
        tags = None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskSetError(f'{file}:{line}: tags {cell!r} must be a JSON list of text, e.g. ["use-case:support"]')
    return tuple(tags)


def _family(eval_name: str) -> str:
    return eval_name.split("-", 1)[0]


def _tags(eval_name: str) -> tuple[str, ...]:
    family = _family(eval_name)
    return (family,) if family == eval_name else (family, eval_name)


def _task_type(eval_name: str) -> TaskType:
    family = _family(eval_name)
    if family == "gsm8k":
        return "math"
    if family == "mmlu":
        return "choice"
    if family.lower() in ("mbpp", "humaneval"):
        return "code"
    return "open"


class ReplayWorker:
    """One model of an outcome matrix as a worker (see the module docstring).

    ``complete`` answers with the recorded response for the call's task
    (``call.context.task_id``) and costs its recorded USD; when the response is empty the text
    says so (``[recorded outcome of <model>; score …]``), never empty. Raises KeyError for a
    call without a task id or for a question the matrix lacks.
    """

    def __init__(self, model: str, matrix: OutcomeMatrix, *, description: str = "") -> None:
        self.model = model
        self.matrix = matrix
        # costs come per question from the matrix
        self.info = WorkerInfo(model, description, Price(), WorkerSettings(), model=model)

    def worst_case_usd(self, call: Call) -> float:
        """What a call costs, USD: the recorded cost for its task (budgets reserve it)."""
        task_id = call.context.task_id
        return 0.0 if task_id is None else self.matrix.outcome(task_id, self.model).cost_usd

    async def complete(self, call: Call) -> Completion:
        task_id = call.context.task_id
        if task_id is None:
            raise KeyError(f"replay worker {self.info.name!r} called without a task id (CallContext.task_id)")
        record = self.matrix.outcome(task_id, self.model)
        text = record.response.strip() or f"[recorded outcome of {self.model}; score {record.score:g}]"
        # a recorded result: like a request-cache hit, it carries the original call's latency
        return Completion(text=text, usage=Usage(), cost_usd=record.cost_usd, latency_s=record.latency_s, cached=True)


def replay_score(matrix: OutcomeMatrix, task_id: str, answer_worker: str | None) -> float:
    """The request's quality in replay: the recorded score of the worker that wrote the final
    answer, 0.0 when no worker answered."""
    if answer_worker is None:
        return 0.0
    return matrix.outcome(task_id, answer_worker).score


def oracle_choice(matrix: OutcomeMatrix, task_id: str, models: Sequence[str]) -> str:
    """RouterBench's oracle: among ``models``, the cheapest one with the best recorded score."""
    outcomes = [(matrix.outcome(task_id, m), m) for m in models]
    best = max(o.score for o, _ in outcomes)
    return min((o.cost_usd, m) for o, m in outcomes if o.score == best)[1]


class OracleRouter:
    """One step on ``choose(task_id)``'s worker, the task id being the evaluation task the
    request answers (``context.task_id``); for replay's oracle (see module docstring). Raises
    ConfigError for a request without a task id."""

    def __init__(self, choose: Callable[[str], int], name: str = "oracle") -> None:
        self.name = name
        self.choose = choose

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """True: it writes one-step workflows and keeps their answer."""
        return True

    async def plan(
        self,
        question: str,
        pool: Sequence[Worker],
        *,
        max_steps: int,
        attempt: int = 0,
        previous: PreviousRound | None = None,
        context: CallContext = NO_CONTEXT,
    ) -> PlanAttempt:
        if context.task_id is None:
            raise ConfigError("the oracle routes only replayed requests: give the request a task id")
        single = SingleWorker(self.choose(context.task_id), self.name)
        return await single.plan(question, pool, max_steps=max_steps, attempt=attempt, previous=previous)
