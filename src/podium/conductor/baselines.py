"""Baseline conductors: fixed policies the learned conductor must beat (``podium eval``).

Each is a :class:`~podium.conductor.base.Conductor` that writes an ordinary workflow, so it runs
through the same executor, budgets, traces and verifiers as the LM conductor:

* :class:`SingleWorker` — one step on one worker ("every single worker alone", and the
  cheapest / strongest ones; see :func:`cheapest` and :func:`strongest`).
* :class:`RandomWorker` — one step on a uniformly random worker (RouterBench's random router),
  seeded per question so reruns agree.
* :class:`FixedPipeline` — the hand-written plan → solve → verify pipeline many teams run today.
* :class:`MixtureOfAgents` — every proposer answers independently, one aggregator writes the
  final answer from all proposals (Wang et al. 2024, "Mixture-of-Agents", one layer).

In a recursion round each keeps its answer (an empty workflow). Replay's oracle is
:class:`podium.eval.replay.OracleRouter` (evaluation only).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Sequence

from podium.conductor.base import PreviousRound
from podium.records import PlanAttempt
from podium.roles import subtask
from podium.workers.base import NO_CONTEXT, CallContext, Worker
from podium.workers.offload import offload
from podium.workflow import ALL, Access, Step, Workflow

__all__ = [
    "ANSWER",
    "MOA_AGGREGATE",
    "MOA_PROPOSE",
    "PIPELINE_SUBTASKS",
    "FallbackOnly",
    "FixedConductor",
    "FixedPipeline",
    "MixtureOfAgents",
    "RandomWorker",
    "SingleWorker",
    "StepsFn",
    "cheapest",
    "strongest",
]

ANSWER = subtask("solve")
"""The subtask of a one-step workflow (the ``solve`` role)."""

PIPELINE_SUBTASKS = (
    "Write a short numbered plan for solving the question. Do not solve it yet.",
    "Solve the question by following the plan. Show your work and end with the final answer.",
    "Check the solution above step by step. If you find a mistake, correct it. "
    "Reply with the corrected solution, ending with the final answer.",
)
"""plan → solve → verify: step 1 sees the plan, step 2 sees the solution."""

StepsFn = Callable[[str, Sequence[Worker], int], Sequence[Step]]
"""(question, pool, max_steps) → the workflow's steps."""

MOA_PROPOSE = "Answer the question. Show your reasoning briefly and end with the final answer."
MOA_AGGREGATE = (
    "Several independent answers to the question are shown above. Some may be wrong. "
    "Critically compare them and write the single best answer, ending with the final answer."
)


class FixedConductor:
    """A conductor whose workflow is a function of the question and pool, with no language-model
    call (the baselines, the learned router, the light conductor). It checks the steps against
    the pool and step limit, keeps the answer in recursion rounds, and records the attempt.

    Args:
        name: shown in traces and reports (e.g. ``"single:qwen-1.5b"``).
        steps: builds the steps from (question, pool, max_steps); subclasses may instead
            override :meth:`steps`.
    """

    def __init__(self, name: str, steps: StepsFn | None = None) -> None:
        self.name = name
        self._steps = steps

    def steps(self, question: str, pool: Sequence[Worker], max_steps: int) -> Sequence[Step]:
        """The workflow's steps for ``question`` over ``pool``."""
        if self._steps is None:
            raise NotImplementedError(f"{type(self).__name__} must pass steps= or override steps()")
        return self._steps(question, pool, max_steps)

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
        started = time.perf_counter()
        if previous is not None:  # keep the answer
            workflow = Workflow(())
        else:
            # a light conductor embeds the question here: on the main thread under podium run
            steps = tuple(await offload(self.steps, question, pool, max_steps, otherwise="inline"))
            if len(steps) > max_steps:
                raise ValueError(f"{self.name} writes {len(steps)} steps; max_steps is {max_steps}")
            if any(not 0 <= s.worker < len(pool) for s in steps):
                raise ValueError(f"{self.name} names a worker outside the pool of {len(pool)}")
            workflow = Workflow(steps)
        return PlanAttempt(
            attempt=attempt,
            messages=(),
            raw_output=workflow.lists_text(),
            workflow=workflow,
            round=0 if previous is None else previous.round + 1,
            latency_s=time.perf_counter() - started,  # e.g. a light conductor's embedding pass
        )


class SingleWorker(FixedConductor):
    """One step: pool worker ``worker`` answers the question."""

    def __init__(self, worker: int, name: str | None = None) -> None:
        super().__init__(name or f"single:{worker}", lambda _q, _p, _m: (Step(worker, ANSWER, ()),))
        self.worker = worker


class FallbackOnly(FixedConductor):
    """The fallback pipeline's one step as the whole workflow, with no conductor call: what a
    server serves while its kill switch is on (``serving = "fallback"``) or for a preset whose
    conductor is ``"fallback"``."""

    def __init__(self, worker: int, subtask: str) -> None:
        super().__init__("fallback", lambda _q, _p, _m: (Step(worker, subtask, ()),))


class RandomWorker(FixedConductor):
    """One step on a worker drawn uniformly per question (seeded by ``seed`` and the question,
    so the same question always goes to the same worker)."""

    def __init__(self, seed: int = 0, name: str = "random") -> None:
        def steps(question: str, pool: Sequence[Worker], _max_steps: int) -> tuple[Step, ...]:
            digest = hashlib.sha256(f"{seed}\0{question}".encode()).digest()
            return (Step(random.Random(digest).randrange(len(pool)), ANSWER, ()),)

        super().__init__(name, steps)


class FixedPipeline(FixedConductor):
    """plan → solve → verify on workers ``(planner, solver, verifier)`` (pool indices)."""

    def __init__(self, planner: int, solver: int, verifier: int, name: str = "pipeline") -> None:
        accesses: tuple[Access, Access, Access] = ((), (0,), (1,))
        workers = (planner, solver, verifier)
        super().__init__(
            name,
            lambda _q, _p, _m: tuple(
                Step(w, s, a) for w, s, a in zip(workers, PIPELINE_SUBTASKS, accesses, strict=True)
            ),
        )


class MixtureOfAgents(FixedConductor):
    """Proposers answer in parallel (no access), the aggregator sees them all (access ``all``)."""

    def __init__(self, proposers: Sequence[int], aggregator: int, name: str = "moa") -> None:
        chosen = tuple(proposers)
        if not chosen:
            raise ValueError("Mixture-of-Agents needs at least one proposer")
        super().__init__(
            name,
            lambda _q, _p, _m: (*(Step(w, MOA_PROPOSE, ()) for w in chosen), Step(aggregator, MOA_AGGREGATE, ALL)),
        )


def cheapest(pool: Sequence[Worker], mean_cost: Sequence[float] | None = None) -> int:
    """Index of the cheapest worker: by measured mean cost per call (USD) when given, else by
    list price (input + output USD per 1M tokens). Ties go to the earlier worker."""
    keys = list(mean_cost) if mean_cost is not None else [w.info.price.input + w.info.price.output for w in pool]
    return min(range(len(pool)), key=lambda i: (keys[i], i))


def strongest(pool: Sequence[Worker], quality: Sequence[float] | None = None) -> int:
    """Index of the strongest worker: by measured quality when given (e.g. the train split's
    mean score), else the most expensive by list price — price as a proxy for strength, which
    holds in the local pool (1.5B > 0.5B > 135M) but is only a default. Ties: earlier worker."""
    keys = list(quality) if quality is not None else [w.info.price.input + w.info.price.output for w in pool]
    return max(range(len(pool)), key=lambda i: (keys[i], -i))
