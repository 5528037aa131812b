"""Compositions: multi-step workflows built from role steps, that replay exactly.

A **column** is one step of a role (:mod:`podium.roles`) on one named worker, together with the
steps it sees — e.g. ``state@0.5b`` seeing ``program@1.5b`` and the ``run`` of it. Its
**sub-workflow** is the column with everything it depends on, in order; recording a column means
executing its sub-workflow (the dependencies then come from the request cache). An outcome
matrix whose columns are such steps is a **workflow outcome bank** (:mod:`podium.eval.bank`).

A **plan** composes columns into one request:

* one member — that column's sub-workflow, its last step answers;
* several members — their sub-workflows merged (shared steps once) and a ``vote`` step that sees
  every member's answer (self-consistency; :func:`podium.answers.tally`);
* a **cascade** — the plan's members are round 1; when their vote's agreement is below
  ``threshold``, round 2 escalates to the ``escalate`` column (a recursion round that starts
  fresh, access ``[]``), else the conductor keeps round 1's answer (three empty lists).

Exact replay: a worker's request depends on the question, its subtask, the indices and outputs of
the steps it sees and its decoding settings (a ``sample`` step's seed is its ordinal among the
samples of its worker, :func:`podium.roles.step_settings`). :func:`plan_workflow` lays the steps
out so that every step gets exactly the request its column recorded, or raises
:class:`NotReplayable`; so a plan over recorded columns is replayed by the request cache, and
scored in replay by the recorded score of the answer it selects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podium.errors import ConfigError
from podium.roles import ROLES, RoleName
from podium.workflow import Step, Workflow

__all__ = ["Column", "NotReplayable", "Plan", "layout", "plan_workflow", "sub_workflow"]


class NotReplayable(ConfigError):
    """A plan whose steps could not all get the requests their columns recorded."""


@dataclass(frozen=True)
class Column:
    """One recorded step: ``role`` on worker ``worker`` (a pool name), seeing ``sees``.

    Attributes:
        id: unique name, e.g. ``"sample2@qwen2.5-coder-1.5b"`` (no ``|`` or ``,``).
        worker: the pool worker's name.
        role: the role.
        sees: ids of the columns whose outputs this step sees, in step order.
        after: ids of columns that run before it without being seen (a ``sample`` step's
            earlier samples on the same worker, which fix its seed).
    """

    id: str
    worker: str
    role: RoleName
    sees: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "role": self.role, "sees": list(self.sees), "after": list(self.after)}


def sub_workflow(column: str, columns: Mapping[str, Column]) -> list[str]:
    """The ids of ``column``'s sub-workflow in execution order: its dependencies (depth first,
    ``after`` before ``sees``, each once) then itself. KeyError for an unknown id."""
    order: list[str] = []

    def visit(cid: str) -> None:
        if cid in order:
            return
        col = columns[cid]
        for dep in (*col.after, *col.sees):
            visit(dep)
        order.append(cid)

    visit(column)
    return order


@dataclass(frozen=True)
class Plan:
    """A composition of columns answering one request (see the module docstring).

    Attributes:
        id: unique name.
        members: answer columns; one → it answers; several → a vote over them.
        escalate: for a cascade, the column round 2 escalates to, else None.
        threshold: a cascade escalates when round 1's vote agreement (share of members in the
            winning group) is below this.
    """

    id: str
    members: tuple[str, ...]
    escalate: str | None = None
    threshold: float = 1.0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "members": list(self.members)}
        if self.escalate is not None:
            data |= {"escalate": self.escalate, "threshold": self.threshold}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        return cls(
            str(data["id"]),
            tuple(str(m) for m in data["members"]),
            None if data.get("escalate") is None else str(data["escalate"]),
            float(data.get("threshold", 1.0)),
        )


def plan_workflow(
    members: Sequence[str], columns: Mapping[str, Column], pool: Sequence[str], *, vote_worker: str | None = None
) -> Workflow:
    """The workflow of round 1 of a plan with these ``members`` over ``pool`` (worker names in
    pool order): the members' sub-workflows merged, then a ``vote`` step on ``vote_worker``
    (the pool's vote tool) when there are several members.

    Raises:
        NotReplayable: a step would see other step indices, or get another sample seed, than
            its column recorded (e.g. two members with dependent chains: only one chain can
            come first); or a member's worker is not in ``pool``.
        ConfigError: several members and no vote worker.
    """
    order = layout(members, columns)
    steps: list[Step] = []
    for index, cid in enumerate(order):
        col = columns[cid]
        alone = sub_workflow(cid, columns)
        if col.sees and [order.index(s) for s in col.sees] != [alone.index(s) for s in col.sees]:
            raise NotReplayable(f"column {cid!r} would see other step indices than it recorded")
        if col.role == "sample":
            mine = [c for c in order[:index] if columns[c].worker == col.worker and columns[c].role == "sample"]
            if len(mine) != len([c for c in alone[:-1] if columns[c].role == "sample"]):
                raise NotReplayable(f"column {cid!r} would get another sample seed than it recorded")
        if col.worker not in pool:
            raise NotReplayable(f"column {cid!r} needs worker {col.worker!r}, which the pool lacks")
        steps.append(Step(pool.index(col.worker), ROLES[col.role].subtask, tuple(order.index(s) for s in col.sees)))
    if len(members) > 1:
        if vote_worker is None or vote_worker not in pool:
            raise ConfigError("a plan with several members needs a vote tool worker in the pool (backend = 'vote')")
        steps.append(Step(pool.index(vote_worker), ROLES["vote"].subtask, tuple(order.index(m) for m in members)))
    return Workflow(tuple(steps))


def layout(members: Sequence[str], columns: Mapping[str, Column]) -> list[str]:
    """The column ids of a plan's round-1 steps in execution order: the members' sub-workflows
    merged (shared steps once), members with dependent steps first so that their indices match
    their recordings (the vote step, when there is one, comes after these)."""
    order: list[str] = []
    chained = [m for m in members if len(sub_workflow(m, columns)) > 1 and _has_access(m, columns)]
    for member in [*chained, *(m for m in members if m not in chained)]:
        for cid in sub_workflow(member, columns):
            if cid not in order:
                order.append(cid)
    return order


def _has_access(column: str, columns: Mapping[str, Column]) -> bool:
    return any(columns[c].sees for c in sub_workflow(column, columns))
