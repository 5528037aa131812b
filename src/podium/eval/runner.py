"""Run conductors over a task set and score every request: the core of ``podium eval``.

Every method — the LM conductor, each baseline, each point of a router's λ sweep — is a
:class:`~podium.conductor.base.Conductor` run through the same :class:`~podium.orchestrator.
Orchestrator` (executor, budgets, fallback), so their figures are comparable. A request's
result (:class:`TaskResult`) keeps what the report needs: the verifier's verdict, cost, calls,
tokens, latency and what went wrong.

Latency is reported two ways: ``latency_s`` is the request's **critical path from the recorded
per-call latencies** (conductor attempts in sequence, then each round's longest dependency chain
of steps, then the fallback) — identical on a cached rerun, and what a deployment with parallel
workers would see; ``wall_s`` is the measured wall time of this run (near zero on cache hits,
inflated on a 2-core machine where parallel steps share the CPU).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from podium.conductor.base import Conductor
from podium.errors import PodiumError
from podium.eval.replay import OutcomeMatrix, replay_score
from podium.eval.tasks import Task
from podium.orchestrator import Orchestrator
from podium.records import RunRecord, StepRecord
from podium.workers.base import CallContext, Worker

__all__ = [
    "Method",
    "OrchestratorFor",
    "Progress",
    "ReplayScorer",
    "Scored",
    "Scorer",
    "TaskResult",
    "VerifierScorer",
    "answer_step",
    "critical_path_s",
    "evaluate",
    "failed_result",
]

_ANSWER_CHARS = 4000
"""Answers are kept in results up to this many characters (the trace store has them whole)."""


@dataclass(frozen=True)
class Method:
    """One method of an evaluation.

    Attributes:
        name: its label in reports (``conductor``, ``single:qwen-1.5b``, ``router(λ=100)``…).
        conductor: the policy.
        group: sweep points share a group (e.g. ``"router"``) and form one cost–quality curve.
        param: the sweep parameter (e.g. λ), or None.
        rounds: recursion rounds for this method (baselines: 0).
    """

    name: str
    conductor: Conductor
    group: str | None = None
    param: float | None = None
    rounds: int = 0


@dataclass(frozen=True)
class Scored:
    """A verdict: score in [0, 1], correct, answer in the expected form, detail."""

    score: float
    correct: bool
    parsed: bool
    detail: str


class Scorer(Protocol):
    """Scores one request's record for its task."""

    async def __call__(self, task: Task, record: RunRecord) -> Scored: ...


@dataclass(frozen=True)
class TaskResult:
    """One request of one method.

    Attributes:
        task_id, tags: the task's.
        score: in [0, 1]; correct: the verifier's verdict; parsed: the answer had the expected
            form (format check).
        status: the record's ``ok`` / ``fallback`` / ``error``; fallback_reason: why.
        answer_worker: the worker that wrote the final answer (None when none did).
        cost_usd: workers + conductor, USD. worker_calls, input_tokens, output_tokens: workers
            only. steps: executed steps. plan_attempts / plan_failures: conductor attempts and
            how many of them failed to parse.
        latency_s: critical path of recorded call latencies, seconds; wall_s: measured.
        answer: the final answer (first 4,000 characters). detail: the verifier's reason.
        error: the record's error. trace_id: the request id.
        question: the question asked (a later run's learned router trains on it).
    """

    task_id: str
    tags: tuple[str, ...]
    score: float
    correct: bool
    parsed: bool
    status: str
    fallback_reason: str | None
    answer_worker: str | None
    cost_usd: float
    worker_calls: int
    input_tokens: int
    output_tokens: int
    steps: int
    plan_attempts: int
    plan_failures: int
    latency_s: float
    wall_s: float
    answer: str
    detail: str
    error: str | None
    trace_id: str
    question: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskResult:
        data = dict(data)
        data["tags"] = tuple(data["tags"])
        return cls(**data)


def answer_step(record: RunRecord) -> StepRecord | None:
    """The step whose output is the record's answer (last round's last step, or the fallback)."""
    if record.status == "error" or not record.answer:
        return None
    for step in reversed(record.steps):
        if step.error is None and step.output == record.answer:
            return step
    return None


def critical_path_s(record: RunRecord) -> float:
    """Seconds: conductor attempts in sequence + per round the longest dependency chain of
    steps (a step starts when every step it sees has finished) + fallback steps. Only recorded
    call latencies count: an attempt that called no model (a single-worker, light or plan
    conductor choosing in-process, in milliseconds) adds nothing, so a rerun from the request
    cache gives the same figure to the last digit (its time is in ``wall_s``)."""
    total = sum(a.latency_s for a in record.attempts if a.usage.input_tokens or a.usage.output_tokens)
    rounds: dict[tuple[str, int], dict[int, StepRecord]] = {}
    for step in record.steps:
        rounds.setdefault((step.phase, step.round), {})[step.index] = step
    for steps in rounds.values():
        finish: dict[int, float] = {}
        for index in sorted(steps):
            step = steps[index]
            start = max((finish.get(j, 0.0) for j in step.visible), default=0.0)
            finish[index] = start + step.latency_s
        total += max(finish.values(), default=0.0)
    return total


class VerifierScorer:
    """Live scoring: the task's verifier on the final answer (see :mod:`podium.eval.verifiers`).

    Args:
        judge: the worker that grades ``open`` tasks (None: open tasks raise ConfigError).
        code_timeout_s: wall-time limit of a code task's tests, seconds.
    """

    def __init__(self, judge: Worker | None = None, code_timeout_s: float = 10.0) -> None:
        self.judge = judge
        self.code_timeout_s = code_timeout_s

    async def __call__(self, task: Task, record: RunRecord) -> Scored:
        if record.status == "error":
            return Scored(0.0, False, False, f"no answer: {record.error}")
        from podium.eval.verifiers import verify  # math-verify loads lazily: replay never needs it

        verdict = await verify(task, record.answer, judge=self.judge, code_timeout_s=self.code_timeout_s)
        return Scored(verdict.score, verdict.correct, verdict.parsed, verdict.detail)


class ReplayScorer:
    """Replay scoring: the recorded score of the worker that wrote the final answer (see
    :mod:`podium.eval.replay` for why, and what that leaves out)."""

    def __init__(self, matrix: OutcomeMatrix) -> None:
        self.matrix = matrix

    async def __call__(self, task: Task, record: RunRecord) -> Scored:
        step = answer_step(record)
        worker = step.worker if step is not None else None
        score = replay_score(self.matrix, task.id, worker)
        return Scored(score, score >= 1.0, step is not None, f"recorded score of {worker}")


OrchestratorFor = Callable[[Method], Orchestrator]
Progress = Callable[[str, TaskResult], None]


async def evaluate(
    methods: Sequence[Method],
    tasks: Sequence[Task],
    orchestrator_for: OrchestratorFor,
    scorer: Scorer,
    *,
    replay: bool = False,
    concurrency: int = 1,
    on_result: Progress | None = None,
) -> dict[str, list[TaskResult]]:
    """Every method on every task; results per method name, in task order.

    Args:
        orchestrator_for: builds the orchestrator a method runs in (its pool, limits, traces).
        scorer: live verifiers or replay scores.
        replay: give each request its task's id (``CallContext.task_id``), for replay workers.
        concurrency: requests in flight at once (replay: dozens; live local models: 1–2).
        on_result: called after each request (progress bars).

    A request that fails with a PodiumError is recorded as a failed result (score 0), never
    dropped; any other exception propagates.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    gate = asyncio.Semaphore(concurrency)
    results: dict[str, list[TaskResult | None]] = {m.name: [None] * len(tasks) for m in methods}

    async def one(method: Method, orchestrator: Orchestrator, index: int, task: Task) -> None:
        async with gate:
            result = await _run_one(orchestrator, task, scorer, replay)
        results[method.name][index] = result
        if on_result is not None:
            on_result(method.name, result)

    orchestrators = [orchestrator_for(m) for m in methods]
    # task-major order: an interrupted run has every method on the same first tasks (and the
    # request cache keeps what was done, so the rerun resumes where it stopped)
    jobs: list[Awaitable[None]] = [
        one(method, orchestrator, i, task)
        for i, task in enumerate(tasks)
        for method, orchestrator in zip(methods, orchestrators, strict=True)
    ]
    await asyncio.gather(*jobs)
    return {name: [r for r in rs if r is not None] for name, rs in results.items()}


async def _run_one(orchestrator: Orchestrator, task: Task, scorer: Scorer, replay: bool) -> TaskResult:
    started = time.perf_counter()
    try:
        context = CallContext(task_id=task.id) if replay else None
        record = await orchestrator.run(task.question, context=context)
    except PodiumError as exc:  # invalid question, setup error: a failed result, not a lost one
        return failed_result(task, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
    scored = await scorer(task, record)
    step = answer_step(record)
    totals = record.totals
    return TaskResult(
        task_id=task.id,
        tags=task.tags,
        score=scored.score,
        correct=scored.correct,
        parsed=scored.parsed,
        status=record.status,
        fallback_reason=record.fallback.reason if record.fallback else None,
        answer_worker=step.worker if step is not None else None,
        cost_usd=totals.total_cost_usd,
        worker_calls=totals.worker_calls,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        steps=len(record.steps),
        plan_attempts=len(record.attempts),
        plan_failures=sum(1 for a in record.attempts if a.workflow is None),
        latency_s=critical_path_s(record),
        wall_s=time.perf_counter() - started,
        answer=record.answer[:_ANSWER_CHARS],
        detail=scored.detail,
        error=record.error,
        trace_id=record.id,
        question=task.question,
    )


def failed_result(task: Task, error: str, wall_s: float, *, plan_failures: int | None = None) -> TaskResult:
    """A request that produced no answer: score 0, ``error`` as its error and detail. With
    ``plan_failures`` it counts one conductor attempt (of which that many failed to parse);
    without, none (the request failed before planning)."""
    return TaskResult(
        task_id=task.id,
        tags=task.tags,
        score=0.0,
        correct=False,
        parsed=False,
        status="error",
        fallback_reason=None,
        answer_worker=None,
        cost_usd=0.0,
        worker_calls=0,
        input_tokens=0,
        output_tokens=0,
        steps=0,
        plan_attempts=0 if plan_failures is None else 1,
        plan_failures=plan_failures or 0,
        latency_s=0.0,
        wall_s=wall_s,
        answer="",
        detail=error,
        error=error,
        trace_id="",
        question=task.question,
    )
