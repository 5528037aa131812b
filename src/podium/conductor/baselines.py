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
from collections.abc import Sequence

from podium.conductor.base import DirectConductor
from podium.roles import subtask
from podium.workers.base import Worker
from podium.workflow import ALL, Access, Step

__all__ = [
    "ANSWER",
    "MOA_AGGREGATE",
    "MOA_PROPOSE",
    "PIPELINE_SUBTASKS",
    "FallbackOnly",
    "FixedPipeline",
    "MixtureOfAgents",
    "RandomWorker",
    "SingleWorker",
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

MOA_PROPOSE = "Answer the question. Show your reasoning briefly and end with the final answer."
MOA_AGGREGATE = (
    "Several independent answers to the question are shown above. Some may be wrong. "
    "Critically compare them and write the single best answer, ending with the final answer."
)


class SingleWorker(DirectConductor):
    """One step: pool worker ``worker`` answers the question."""

    def __init__(self, worker: int, name: str | None = None) -> None:
        super().__init__(name or f"single:{worker}", lambda _q, _p, _m: (Step(worker, ANSWER, ()),))
        self.worker = worker


class FallbackOnly(DirectConductor):
    """The fallback pipeline's one step as the whole workflow, with no conductor call: what a
    server serves while its kill switch is on (``serving = "fallback"``) or for a preset whose
    conductor is ``"fallback"``."""

    def __init__(self, worker: int, subtask: str) -> None:
        super().__init__("fallback", lambda _q, _p, _m: (Step(worker, subtask, ()),))


class RandomWorker(DirectConductor):
    """One step on a worker drawn uniformly per question (seeded by ``seed`` and the question,
    so the same question always goes to the same worker)."""

    def __init__(self, seed: int = 0, name: str = "random") -> None:
        def steps(question: str, pool: Sequence[Worker], _max_steps: int) -> tuple[Step, ...]:
            digest = hashlib.sha256(f"{seed}\0{question}".encode()).digest()
            return (Step(random.Random(digest).randrange(len(pool)), ANSWER, ()),)

        super().__init__(name, steps)


class FixedPipeline(DirectConductor):
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


class MixtureOfAgents(DirectConductor):
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
