"""Conductors replayed on a workflow bank: each writes its workflow, the bank scores it.

On a plain outcome matrix a method's score is the recorded score of the model that wrote the
final answer (:mod:`podium.eval.replay`), which only credits routing. On a workflow bank
(:mod:`podium.eval.bank`: one column per recorded step) every conductor that writes workflows
over the bank's pool is scored **exactly** instead:

* a plan conductor (``light:REF`` of a plan policy, ``plan:ID``) chooses its plan for the question
  (:meth:`~podium.conductor.plans.PlanConductor.choose`), and the plan's score, cost and latency
  come from :func:`podium.eval.plans.plan_outcomes` — the same numbers its training maximised,
  including a cascade's second round;
* any other conductor (``lm:REF``, ``rules:FILE``) plans its first round, and
  :func:`podium.eval.plans.replay_workflow` matches every step to the recorded step it would
  repeat. A workflow with a step the bank never recorded is a failed request (score 0, its
  reason in ``detail``), never left out, so a conductor that strays from the catalogue is
  charged for it. Recursion rounds of these conductors are not replayed.

No worker is called: the pool the conductors see is the bank's workers by name (and a vote tool
named ``vote``). Conductors plan under ``max_steps`` — give the step limit of the pool the
conductor will serve on (``podium eval --replay BANK --pool POOL``), since a plan conductor
passes over plans longer than that and takes its next choice; without one every plan is allowed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from podium.conductor.compose import NotReplayable, layout
from podium.conductor.plans import PlanConductor
from podium.errors import ConfigError
from podium.eval.bank import Bank
from podium.eval.plans import Replayed, column_index, plan_outcomes, replay_workflow
from podium.eval.runner import Method, TaskResult, failed_result
from podium.eval.tasks import Task
from podium.workers.base import Call, Completion, WorkerInfo

__all__ = ["BANK_MAX_STEPS", "VOTE", "BankPoolWorker", "bank_pool", "replay_on_bank"]

BANK_MAX_STEPS = 16
"""Step limit given to conductors in a bank replay without a pool (no catalogue plan is longer
than seven steps)."""
VOTE = "vote"
"""Name of the vote tool in a bank replay's pool."""


class BankPoolWorker:
    """A pool worker of a bank replay, by name only: conductors read its ``info``; calling it
    is a bug (ConfigError), since a bank replay scores workflows without running them."""

    def __init__(self, name: str, *, tool: bool = False, backend: str = "") -> None:
        self.info = WorkerInfo(name, kind="tool" if tool else "model", backend=backend, model=name)

    def worst_case_usd(self, call: Call) -> float:
        return 0.0

    async def complete(self, call: Call) -> Completion:
        raise ConfigError(f"bank replay worker {self.info.name!r} was called; a bank replay never runs a step")


def bank_pool(bank: Bank) -> list[BankPoolWorker]:
    """The bank's workers in recording order (``python`` is the sandbox tool), then the vote
    tool."""
    return [
        *(BankPoolWorker(name, tool=name == "python", backend="python" if name == "python" else "")
          for name in bank.catalogue.workers()),
        BankPoolWorker(VOTE, tool=True, backend="vote"),
    ]  # fmt: skip


async def replay_on_bank(
    methods: Sequence[Method],
    tasks: Sequence[Task],
    bank: Bank,
    *,
    max_steps: int = BANK_MAX_STEPS,
    on_result: Callable[[str, TaskResult], None] | None = None,
    reverse_pool: bool = False,
) -> dict[str, list[TaskResult]]:
    """Every method on every task, scored on ``bank`` (see the module docstring); results per
    method name, in task order. ``max_steps``: the conductors' step limit; ``reverse_pool``:
    the conductors see the bank's workers in reverse order (a permutation test).

    Raises ConfigError when a task is not a row of the bank or a conductor can run none of
    its plans on the bank's pool (a setup error, not a per-question failure)."""
    rows = {r["sample_id"]: r for r in bank.rows}
    missing = [t.id for t in tasks if t.id not in rows]
    if missing:
        raise ConfigError(f"{bank.path}: {len(missing)} task(s) are not rows of the bank, e.g. {missing[0]!r}")
    pool = bank_pool(bank)[:: -1 if reverse_pool else 1]
    index = column_index(bank.catalogue.columns)
    results: dict[str, list[TaskResult]] = {m.name: [] for m in methods}
    for task in tasks:
        for method in methods:
            result = await _replay_one(method, task, rows[task.id], bank, pool, index, max_steps)
            results[method.name].append(result)
            if on_result is not None:
                on_result(method.name, result)
    return results


async def _replay_one(
    method: Method,
    task: Task,
    row: Mapping[str, str],
    bank: Bank,
    pool: Sequence[BankPoolWorker],
    index: Mapping[tuple[str, str, tuple[str, ...], int], str],
    max_steps: int,
) -> TaskResult:
    """One method on one bank row (see :func:`replay_on_bank`)."""
    started = time.perf_counter()
    names, columns, conductor = [w.info.name for w in pool], bank.catalogue.columns, method.conductor
    if isinstance(conductor, PlanConductor):  # the plan's outcome exactly as training scored it
        try:
            plan, workflow = conductor.choose(task.question, pool, max_steps)
        except NotReplayable as exc:
            raise ConfigError(f"{method.name}: {exc}") from None
        out = plan_outcomes([plan], columns, [row])
        first = replay_workflow(workflow, names, row, columns, index, vote_worker=VOTE)
        assert first is not None  # a plan's workflow is made of its recorded columns
        second = tuple(layout(plan.second_round, columns)) if out.escalated[0, 0] else ()
        score, cost, latency = (float(a[0, 0]) for a in (out.score, out.cost, out.latency))
        scored = Replayed(score, cost, latency, first.columns + second)
        return _result(task, row, scored, f"plan {plan.id}", time.perf_counter() - started)
    attempt = await conductor.plan(task.question, pool, max_steps=max_steps)
    if attempt.workflow is None:
        why = f"the conductor's workflow did not parse ({attempt.error_kind})"
        return failed_result(task, why, 0.0, plan_failures=1)
    replayed = replay_workflow(attempt.workflow, names, row, columns, index, vote_worker=VOTE)
    if replayed is None:
        return failed_result(task, "the workflow has a step the bank never recorded", 0.0, plan_failures=0)
    return _result(task, row, replayed, "workflow replayed step by step", time.perf_counter() - started)


def _tokens(row: Mapping[str, str], columns: Sequence[str], field: str) -> int:
    return sum(int(float(row.get(f"{c}|{field}") or 0)) for c in dict.fromkeys(columns))


def _result(task: Task, row: Mapping[str, str], replayed: Replayed, detail: str, wall_s: float) -> TaskResult:
    """A replayed request's result; the last column replayed wrote the answer."""
    steps, answer = len(replayed.columns), replayed.columns[-1]
    return TaskResult(
        task_id=task.id,
        tags=task.tags,
        score=replayed.score,
        correct=replayed.score >= 1.0,
        parsed=True,
        status="ok",
        fallback_reason=None,
        answer_worker=answer,
        cost_usd=replayed.cost,
        worker_calls=steps,  # as a live run counts them: every step, the tools' included
        input_tokens=_tokens(row, replayed.columns, "input_tokens"),
        output_tokens=_tokens(row, replayed.columns, "output_tokens"),
        steps=steps,
        plan_attempts=1,
        plan_failures=0,
        latency_s=replayed.latency,
        wall_s=wall_s,
        answer=row.get(f"{answer}|model_response", "")[:4000],
        detail=f"{detail}; recorded score of {answer}",
        error=None,
        trace_id="",
        question=task.question,
    )
