"""Plans over an outcome bank: what each composition scores, costs and takes, per question.

A :class:`~podium.conductor.compose.Plan` composes recorded columns (a single column; a vote over
several; a cascade that escalates when the vote's agreement is low). Replayed on a bank
(:mod:`podium.eval.bank`) or on any outcome matrix with responses (RouterBench's
``|model_response``), a plan's outcome follows from the recorded cells alone, exactly:

* **score** — the recorded score of the response the plan ends with: the member itself; for a
  vote, the member :func:`podium.answers.tally` selects from the recorded responses (the vote
  tool makes the same choice live, so live and replay agree); for a cascade, the escalation
  column's score when round 1's agreement is below the threshold — or, for a cascade that adds
  answers, the score of the answer the second vote selects among round 1's and round 2's
  (:func:`podium.conductor.compose.vote_order`; among those whose recorded ``check`` passed,
  when one did: :func:`podium.answers.vote`);
* **cost** — USD of every distinct step the plan runs (shared steps once: five samples and a vote
  over the first three share three calls), plus the escalation's when it happens;
* **latency** — the critical path of those steps from their recorded seconds (independent steps
  in parallel, as the executor runs them; a cascade's second round after its first).

:func:`plan_outcomes` computes all three for every (question, plan) as arrays, for training
(thousands of policy evaluations) and for replay reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from podium.answers import Tally, tally, vote
from podium.conductor.catalogue import local_plans
from podium.conductor.compose import (
    Column,
    Plan,
    check_order,
    check_tested,
    kept_column,
    layout,
    sub_workflow,
    vote_order,
)
from podium.errors import ConfigError
from podium.roles import ROLES, role_of
from podium.workflow import Workflow

__all__ = [
    "PlanOutcomes",
    "Replayed",
    "column_index",
    "load_source",
    "local_plans",
    "matrix_plans",
    "plan_outcomes",
    "replay_workflow",
]

_Array = npt.NDArray[np.float64]


def matrix_plans(models: Sequence[str], *, votes: bool = True) -> list[Plan]:
    """Plans over a plain outcome matrix's models (e.g. RouterBench's): each model alone, and —
    with ``votes`` and at least three models — the vote of all of them."""
    plans = [Plan(m, (m,)) for m in models]
    if votes and len(models) >= 3:
        plans.append(Plan(f"vote({','.join(models)})", tuple(models)))
    return plans


@dataclass(frozen=True)
class PlanOutcomes:
    """Per question and plan: ``score`` in [0, 1], ``cost`` (USD), ``latency`` (seconds);
    arrays of shape (questions, plans). ``escalated`` (bool, same shape) marks cascades that
    went to their second round. ``ids``: the questions; ``plans``: the plans, in column order."""

    ids: tuple[str, ...]
    plans: tuple[Plan, ...]
    score: _Array
    cost: _Array
    latency: _Array
    escalated: npt.NDArray[np.bool_]

    def subset(self, rows: Sequence[int]) -> PlanOutcomes:
        """The outcomes of the questions at ``rows`` (indices)."""
        idx = np.asarray(rows, dtype=np.intp)
        return PlanOutcomes(
            tuple(self.ids[i] for i in idx),
            self.plans,
            self.score[idx],
            self.cost[idx],
            self.latency[idx],
            self.escalated[idx],
        )


def plan_outcomes(
    plans: Sequence[Plan],
    columns: Mapping[str, Column],
    rows: Sequence[Mapping[str, str]],
) -> PlanOutcomes:
    """Outcomes of ``plans`` on bank ``rows`` (see the module docstring).

    Args:
        plans: the compositions.
        columns: the bank's columns (a plan's members and their dependencies must be there).
        rows: matrix rows as read (``c``, ``c|model_response``, ``c|step_cost``,
            ``c|step_latency_s`` per column ``c``; a RouterBench matrix without step fields
            uses ``c|total_cost`` and ``c|latency_s``).

    Raises ConfigError naming a plan that uses a column the bank lacks.
    """
    for plan in plans:
        for cid in (*plan.members, *plan.second_round):
            if cid not in columns:
                raise ConfigError(f"plan {plan.id!r} uses column {cid!r}, which the bank does not have")
        check_tested(plan, columns)
        if shared := set(layout(plan.members, columns)) & set(layout(plan.adds, columns)):
            raise ConfigError(f"plan {plan.id!r} would run {', '.join(sorted(shared))} again in its second round")
    n, m = len(rows), len(plans)
    score, cost, latency = np.zeros((n, m)), np.zeros((n, m)), np.zeros((n, m))
    escalated = np.zeros((n, m), dtype=bool)
    subs = {cid: sub_workflow(cid, columns) for cid in columns}
    for i, row in enumerate(rows):
        step_cost = {cid: _number(row, cid, "step_cost", "total_cost") for cid in columns}
        step_latency = {cid: _number(row, cid, "step_latency_s", "latency_s") for cid in columns}
        for j, plan in enumerate(plans):
            s, c, lat, round_one = _round(plan.members, row, columns, subs, step_cost, step_latency)
            outputs = [row.get(f"{m}|model_response", "") for m in plan.members]
            escalates = plan.escalates(round_one, outputs)
            if (kept := kept_column(plan, columns)) is not None and not escalates:
                s = float(row[kept])  # round 2's vote returns the tested code (a tool step: no cost)
            if escalates:
                e_s, e_c, e_lat, _ = _round(plan.second_round, row, columns, subs, step_cost, step_latency)
                if plan.adds:  # the second vote counts round 1's answers and round 2's (checked ones, if any)
                    voters, checks = vote_order(plan, columns), check_order(plan, columns)
                    winner = vote([_response(row, v) for v in voters], [_response(row, c) for c in checks])
                    e_s = float(row[voters[winner]])
                s, c, lat = e_s, c + e_c, lat + e_lat
                escalated[i, j] = True
            score[i, j], cost[i, j], latency[i, j] = s, c, lat
    return PlanOutcomes(tuple(r["sample_id"] for r in rows), tuple(plans), score, cost, latency, escalated)


def _response(row: Mapping[str, str], cid: str) -> str:
    return row.get(f"{cid}|model_response", "")


def _number(row: Mapping[str, str], cid: str, field: str, fallback: str) -> float:
    value = row.get(f"{cid}|{field}")
    if value is None or value == "":
        value = row.get(f"{cid}|{fallback}") or "0"
    return float(value)


def _round(
    members: Sequence[str],
    row: Mapping[str, str],
    columns: Mapping[str, Column],
    subs: Mapping[str, list[str]],
    step_cost: Mapping[str, float],
    step_latency: Mapping[str, float],
) -> tuple[float, float, float, Tally]:
    """(score, cost, latency, vote) of one round whose answers are ``members`` (one member:
    a vote of one, which picks it)."""
    steps: list[str] = []
    for member in members:
        for cid in subs[member]:
            if cid not in steps:
                steps.append(cid)
    finish: dict[str, float] = {}
    for cid in steps:  # sub-workflows list dependencies first
        finish[cid] = step_latency[cid] + max((finish[d] for d in columns[cid].sees), default=0.0)
    cost = sum(step_cost[cid] for cid in steps)
    latency = max((finish[mb] for mb in members), default=0.0)
    outcome = tally([row.get(f"{mb}|model_response", "") for mb in members])
    return float(row[members[outcome.winner]]), cost, latency, outcome


@dataclass(frozen=True)
class Replayed:
    """A workflow replayed on one bank row: ``score`` (of its final answer), ``cost`` (USD of
    its steps), ``latency`` (critical path, seconds), ``columns`` (the recorded step each model
    or tool step replays; a vote step gives the column whose answer it selects)."""

    score: float
    cost: float
    latency: float
    columns: tuple[str, ...]


def column_index(columns: Mapping[str, Column]) -> dict[tuple[str, str, tuple[str, ...], int], str]:
    """Columns by (worker, role, seen columns, sample ordinal): how a workflow step finds the
    recorded step it would repeat (:func:`replay_workflow`)."""
    index: dict[tuple[str, str, tuple[str, ...], int], str] = {}
    for cid, col in columns.items():
        ordinal = sum(1 for c in sub_workflow(cid, columns)[:-1] if columns[c].role == "sample")
        index[(col.worker, col.role, col.sees, ordinal if col.role == "sample" else 0)] = cid
    return index


def replay_workflow(
    workflow: Workflow,
    pool: Sequence[str],
    row: Mapping[str, str],
    columns: Mapping[str, Column],
    index: Mapping[tuple[str, str, tuple[str, ...], int], str] | None = None,
    vote_worker: str = "vote",
) -> Replayed | None:
    """``workflow`` (over worker names ``pool``) replayed exactly on one bank row, or None when
    some step is not a recorded one — a subtask that is no role's template, a role on a worker
    or with an access list the bank never recorded, or a model step that would see other step
    indices than its recording (its request would differ). A ``vote`` step on the vote tool
    selects among the answers it sees as the tool would (:func:`podium.answers.vote`, not
    counting programs, checks and earlier votes: :func:`podium.roles.counts_in_vote`; only
    answers a visible check passed, when one did); a ``run`` or ``check`` step replays the
    recorded run of the code it sees (the sandbox is deterministic). Cost counts
    every step (a repeated step is a repeated call); latency follows access lists."""
    index = index if index is not None else column_index(columns)
    chosen: list[str] = []
    finish: list[float] = []
    cost = 0.0
    samples: dict[str, int] = {}
    votes: set[int] = set()  # the vote steps (each holds a copy of an answer, which votes skip)
    for i, step in enumerate(workflow.steps):
        role = role_of(step.subtask)
        if role is None or not 0 <= step.worker < len(pool):
            return None
        worker = pool[step.worker]
        visible = step.visible(i)
        seen = tuple(chosen[j] for j in visible)
        start = max((finish[j] for j in visible), default=0.0)
        if role.name == "vote":
            voters = [chosen[j] for j in visible if j not in votes and ROLES[columns[chosen[j]].role].answer]
            checks = [chosen[j] for j in visible if j not in votes and columns[chosen[j]].role == "check"]
            if worker != vote_worker or not voters:
                return None
            winner = vote([_response(row, c) for c in voters], [_response(row, c) for c in checks])
            votes.add(i)
            chosen.append(voters[winner])
            finish.append(start)
            continue
        ordinal = samples.get(worker, 0) if role.name == "sample" else 0
        if role.name == "sample":
            samples[worker] = ordinal + 1
        cid = index.get((worker, role.name, seen, ordinal))
        if cid is None:
            return None
        if role.tool is None and columns[cid].sees:
            alone = sub_workflow(cid, columns)
            if list(visible) != [alone.index(s) for s in columns[cid].sees]:
                return None
        chosen.append(cid)
        cost += _number(row, cid, "step_cost", "total_cost")
        finish.append(start + _number(row, cid, "step_latency_s", "latency_s"))
    if not chosen:
        return None
    return Replayed(float(row[chosen[-1]]), cost, max(finish), tuple(chosen))


def load_source(path: Path) -> tuple[str, dict[str, Column], list[dict[str, str]], list[Plan]]:
    """(name, columns, rows, plans) of a bank folder or an outcome-matrix CSV.

    Raises ConfigError for a missing or malformed source."""
    from podium.eval.bank import CATALOGUES, read_bank

    if path.is_dir() or (path.name == "matrix.csv" and (path.parent / "workflows.json").is_file()):
        bank = read_bank(path)
        columns = bank.catalogue.columns
        plans = local_plans(columns) if bank.catalogue.name in CATALOGUES else matrix_plans(list(columns))
        return f"bank {bank.path}", columns, bank.rows, plans
    from podium.eval.replay import OutcomeMatrix

    matrix = OutcomeMatrix.load(path)
    rows = []
    for row in matrix.rows.values():
        cells: dict[str, str] = {"sample_id": row.sample_id, "eval_name": row.eval_name, "split": row.split}
        cells["prompt"] = row.prompt
        for m, o in row.outcomes.items():
            cells |= {m: repr(o.score), f"{m}|model_response": o.response, f"{m}|total_cost": repr(o.cost_usd)}
            cells[f"{m}|latency_s"] = repr(o.latency_s)
        rows.append(cells)
    columns = {m: Column(m, m, "solve") for m in matrix.models}
    return f"matrix {matrix.path.name}", columns, rows, matrix_plans(matrix.models)
