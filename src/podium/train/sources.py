"""What GRPO trains the LM conductor on: a replay source that scores sampled workflows.

Two sources, one contract (:class:`ReplaySource`):

* :class:`MatrixSource` — an outcome matrix (RouterBench's convention): a step answers with its
  model's recorded response to the question, and a workflow scores as its final worker alone
  (:func:`conductor_reward`). Routing only.
* :class:`BankSource` — a workflow bank (:mod:`podium.eval.bank`): each step of a sampled
  workflow is matched to the recorded step it would repeat (its role, worker, what it sees, its
  sample seed; :func:`podium.eval.plans.replay_workflow`), so multi-step workflows — programs,
  votes, verification — are scored exactly by what they select, at no worker cost. Workers are
  shown with their descriptions (name, strengths, price, from the pool file), and the conductor
  writes role names as subtasks (:mod:`podium.roles`; expanded to their instructions). A parsed
  workflow with a step the bank never recorded is not scored (reward 0, counted as *unreplayable*).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from podium.conductor.catalogue import plan_lists, plan_workflows, written
from podium.conductor.prompt import workflow_text
from podium.errors import ConfigError
from podium.eval.bank import Bank
from podium.eval.plans import column_index, replay_workflow
from podium.eval.replay import OutcomeMatrix
from podium.eval.tasks import Task, TaskType
from podium.parse import try_parse_workflow
from podium.roles import expand, role_of
from podium.train.reward import workflow_reward

__all__ = ["BankSource", "MatrixSource", "ReplaySource", "conductor_reward"]


class ReplaySource(Protocol):
    """A recorded pool GRPO samples workflows against. ``roles``: whether the conductor writes
    role instructions only (the prompt lists them)."""

    roles: bool

    @property
    def name(self) -> str: ...

    def tasks(self, split: str | None) -> list[Task]: ...

    def workers(self) -> list[str]: ...

    def description(self, worker: str) -> str: ...

    def reward(
        self, output: str, shown: Sequence[str], task_id: str, *, lam: float, mu: float, max_steps: int
    ) -> tuple[float, dict[str, Any]]: ...

    def target(self, shown: Sequence[str], max_steps: int, rng: random.Random) -> str | None: ...

    def replayable(self, shown: Sequence[str], max_steps: int) -> list[str] | None:
        """The lists (:meth:`~podium.workflow.Workflow.lists_text`) of every workflow over
        ``shown`` that replays exactly, or None when every valid workflow does."""
        ...

    def require_latency(self, purpose: str) -> None: ...


@dataclass
class MatrixSource:
    """An outcome matrix as a replay source (routing; the previous behaviour)."""

    matrix: OutcomeMatrix
    roles: bool = False

    @property
    def name(self) -> str:
        return self.matrix.path.name

    def tasks(self, split: str | None) -> list[Task]:
        return self.matrix.tasks(split)

    def workers(self) -> list[str]:
        return list(self.matrix.models)

    def description(self, worker: str) -> str:
        return worker  # the model's name, as ReplayWorker shows it

    def reward(
        self, output: str, shown: Sequence[str], task_id: str, *, lam: float, mu: float, max_steps: int
    ) -> tuple[float, dict[str, Any]]:
        return conductor_reward(output, list(shown), self.matrix, task_id, lam=lam, mu=mu, max_steps=max_steps)

    def target(self, shown: Sequence[str], max_steps: int, rng: random.Random) -> str | None:
        return None  # the warm start's random shapes

    def replayable(self, shown: Sequence[str], max_steps: int) -> list[str] | None:
        return None  # routing: the last step's worker is scored, whatever the workflow

    def require_latency(self, purpose: str) -> None:
        self.matrix.require_latency(purpose)


_TYPES: dict[str, TaskType] = {"gsm8k": "math", "mbpp": "code", "humaneval": "code"}


@dataclass
class BankSource:
    """A workflow bank as a replay source (see the module docstring).

    Args:
        bank: the recorded bank.
        descriptions: what the conductor reads about each worker, by name (the pool file's
            ``description``); the vote tool's name is ``vote_worker``.
    """

    bank: Bank
    descriptions: Mapping[str, str]
    vote_worker: str = "vote"
    roles: bool = True
    _rows: dict[str, Mapping[str, str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rows = {r["sample_id"]: r for r in self.bank.rows}
        self._index = column_index(self.bank.catalogue.columns)
        missing = [w for w in self.workers() if w not in self.descriptions]
        if missing:
            raise ConfigError(f"no description for worker(s) {', '.join(missing)} of bank {self.bank.path}")

    @property
    def name(self) -> str:
        return f"bank {self.bank.path.name}"

    def tasks(self, split: str | None) -> list[Task]:
        tasks = [
            Task(
                id=r["sample_id"],
                question=r["prompt"],
                task_type=_TYPES.get(r["eval_name"].lower(), "open"),
                tags=(r["eval_name"],),
                split=r["split"],
                source=r["eval_name"],
            )
            for r in self.bank.rows
            if split is None or r["split"] == split
        ]
        if not tasks:
            raise ConfigError(f"bank {self.bank.path}: no question in split {split!r}")
        return tasks

    def workers(self) -> list[str]:
        return [*self.bank.catalogue.workers(), self.vote_worker]

    def description(self, worker: str) -> str:
        return self.descriptions[worker]

    def reward(
        self, output: str, shown: Sequence[str], task_id: str, *, lam: float, mu: float, max_steps: int
    ) -> tuple[float, dict[str, Any]]:
        workflow, failure = try_parse_workflow(output, pool_size=len(shown), max_steps=max_steps)
        if workflow is None:
            return 0.0, {"parsed": False, "error": failure.kind if failure else "unparseable"}
        workflow = expand(workflow)  # role names, as a roles-only conductor writes them
        if not all(role_of(s.subtask) for s in workflow.steps):
            return 0.0, {"parsed": True, "replayable": False, "error": "a subtask that is no role's instruction"}
        replayed = replay_workflow(
            workflow, shown, self._rows[task_id], self.bank.catalogue.columns, self._index, self.vote_worker
        )
        if replayed is None:
            return 0.0, {"parsed": True, "replayable": False, "error": "a step the bank never recorded"}
        reward = workflow_reward(replayed.score, replayed.cost, replayed.latency, lam=lam, mu=mu)
        parts = {"parsed": True, "replayable": True, "final": replayed.columns[-1], "score": replayed.score}
        return reward, {**parts, "cost": replayed.cost, "latency": replayed.latency, "steps": len(workflow)}

    def target(self, shown: Sequence[str], max_steps: int, rng: random.Random) -> str | None:
        """A random composition the shown pool can run (uniform over the local plans that fit),
        written as the conductor would — a warm start with random decisions that teaches the
        format and the role instructions, not which plan to choose."""
        fitting = plan_workflows(shown, max_steps, vote_worker=self.vote_worker, columns=self.bank.catalogue.columns)
        if not fitting:
            return None
        model_id, names, access = written(rng.choice(fitting))
        return workflow_text(f"Compose the steps: {', '.join(names)}.", model_id, names, access)

    def replayable(self, shown: Sequence[str], max_steps: int) -> list[str] | None:
        """The catalogue's one-round plans (no cascade) that ``shown`` can run, as the conductor
        writes them (role names)."""
        return plan_lists(shown, max_steps, vote_worker=self.vote_worker, columns=self.bank.catalogue.columns)

    def require_latency(self, purpose: str) -> None:
        return None  # a bank records every step's latency


def conductor_reward(
    output: str,
    pool: Sequence[str],
    matrix: OutcomeMatrix,
    task_id: str,
    *,
    lam: float,
    max_steps: int,
    mu: float = 0.0,
) -> tuple[float, dict[str, Any]]:
    """The reward of one conductor output and what it was made of: the workflow reward of its
    steps' recorded outcomes (:mod:`podium.train.grpo` describes it).

    ``pool`` is the worker (matrix model) names in the order the prompt showed them."""
    workflow, failure = try_parse_workflow(output, pool_size=len(pool), max_steps=max_steps)
    if workflow is None:
        return 0.0, {"parsed": False, "error": failure.kind if failure else "unparseable"}
    outcomes = [matrix.outcome(task_id, pool[s.worker]) for s in workflow.steps]
    final = pool[workflow.steps[-1].worker]
    score = outcomes[-1].score
    cost = sum(o.cost_usd for o in outcomes)
    finish: list[float] = []
    for i, (step, outcome) in enumerate(zip(workflow.steps, outcomes, strict=True)):
        finish.append(max((finish[j] for j in step.visible(i)), default=0.0) + outcome.latency_s)
    latency = max(finish)  # the executor waits for every step, not only the answering one
    reward = workflow_reward(score, cost, latency, lam=lam, mu=mu)
    parts = {"parsed": True, "final": final, "score": score, "cost": cost, "latency": latency}
    return reward, {**parts, "steps": len(workflow)}
