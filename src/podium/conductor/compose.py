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
  fresh, access ``[]``), else the conductor keeps round 1's answer (three empty lists); it also
  keeps it when the answers are free text, which a vote cannot compare (:meth:`Plan.escalates`);
* a **checked cascade** (``gate="whole-number"``): round 2 runs when round 1's answer is not a
  whole number — the program failed or printed nothing, a fraction, or text — a sanity check
  of the answer's form that costs no call (program-aided answers to word problems are whole
  numbers when the program is right far more often than when it is wrong);
* a **tested cascade** (``gate="tests-pass"``): round 1 is the run of code written with its
  tests (one member, a ``run`` column); when the run exits cleanly — every assertion held — the
  code it ran is the answer (round 2 is one ``vote`` step with access ``all``, which returns
  that code: the run's empty output has nothing to vote for), else round 2 escalates;
* a **cascade that adds answers** (``adds``; Yue et al. 2024's mixture-of-thought cascade,
  whose round 1 is a direct solve and a program of the same model): when round 1 disagrees,
  round 2 runs the ``adds`` columns and a ``vote`` step with access ``all`` that counts round 1's
  answers and the new ones together (:func:`vote_order` gives the order the vote tool sees them);
  a tested cascade that adds answers (a *checked* one) counts round 2's alone, since it escalates
  only when round 1's code failed its own asserts, which it carries: as delivered it raises.

Exact replay: a worker's request depends on the question, its subtask, the indices and outputs of
the steps it sees and its decoding settings (a ``sample`` step's seed is its ordinal among the
samples of its worker, :func:`podium.roles.step_settings`). :func:`plan_workflow` lays the steps
out so that every step gets exactly the request its column recorded, or raises
:class:`NotReplayable`; so a plan over recorded columns is replayed by the request cache, and
scored in replay by the recorded score of the answer it selects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from podium.answers import Tally, sandbox_passed
from podium.errors import ConfigError
from podium.roles import ROLES, RoleName
from podium.workflow import ALL, Access, Step, Workflow

__all__ = [
    "GATES",
    "Column",
    "Gate",
    "NotReplayable",
    "Plan",
    "check_order",
    "check_tested",
    "is_whole_number",
    "keep_workflow",
    "kept_column",
    "layout",
    "plan_workflow",
    "second_round_workflow",
    "sub_workflow",
    "vote_order",
    "votes_round_one",
]

Gate = Literal["agreement", "whole-number", "tests-pass"]
"""What decides a cascade's second round (:meth:`Plan.escalates`)."""
GATES: tuple[Gate, ...] = get_args(Gate)
_INTEGER = re.compile(r"-?\d+")


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
        escalate: for a cascade, the column round 2 escalates to (its answer replaces round
            1's), else None.
        threshold: a cascade escalates when round 1's vote agreement (share of members in the
            winning group) is below this.
        adds: for a cascade that adds answers, the columns round 2 runs; its vote counts
            round 1's answers too. At most one of ``escalate`` and ``adds``.
        gate: what decides a cascade's second round: ``"agreement"`` (round 1's vote agreement
            below ``threshold``), ``"whole-number"`` (round 1's answer is not a whole number) or
            ``"tests-pass"`` (the one member, a ``run`` of code with its tests, did not exit
            cleanly); ``threshold`` is read by ``"agreement"`` only.

    Raises ValueError for a plan with both ``escalate`` and ``adds``, or an unknown ``gate``.
    """

    id: str
    members: tuple[str, ...]
    escalate: str | None = None
    threshold: float = 1.0
    adds: tuple[str, ...] = ()
    gate: Gate = "agreement"

    def __post_init__(self) -> None:
        if self.escalate is not None and self.adds:
            raise ValueError(f"plan {self.id!r}: a cascade either escalates or adds answers, not both")
        if self.gate not in GATES:
            raise ValueError(f"plan {self.id!r}: unknown gate {self.gate!r} (one of {', '.join(GATES)})")

    @property
    def is_cascade(self) -> bool:
        """Whether the plan may run a second round (it escalates or adds answers)."""
        return self.escalate is not None or bool(self.adds)

    def escalates(self, round_one: Tally, outputs: Sequence[str] = ()) -> bool:
        """Whether a cascade runs its second round after round 1's vote ``round_one`` over its
        members' ``outputs`` (in member order; read by the ``tests-pass`` gate).

        Gate ``agreement``: round 1's agreement is below ``threshold`` and its answers are
        comparable — a vote over free text (kind ``text``: no number, letter or code block to
        compare) keeps round 1's answer, as more samples of an open question would not make the
        vote any surer. Gate ``whole-number``: round 1's winning answer is not a whole number
        (:func:`is_whole_number`), free text included — a program that prints no number has not
        answered. Gate ``tests-pass``: the member's run did not exit with code 0
        (:func:`podium.answers.sandbox_passed`)."""
        if not self.is_cascade:
            return False
        if self.gate == "tests-pass":
            return not (len(outputs) == 1 and sandbox_passed(outputs[0]))
        if self.gate == "whole-number":
            return not is_whole_number(round_one)
        return round_one.kind != "text" and round_one.agreement < self.threshold

    @property
    def second_round(self) -> tuple[str, ...]:
        """The columns round 2 runs when round 1 disagrees (``()`` for a one-round plan)."""
        return (self.escalate,) if self.escalate is not None else self.adds

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "members": list(self.members)}
        if self.escalate is not None:
            data |= {"escalate": self.escalate, "threshold": self.threshold}
        if self.adds:
            data |= {"adds": list(self.adds), "threshold": self.threshold}
        if self.gate != "agreement":  # files before gates have none
            data["gate"] = self.gate
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        return cls(
            str(data["id"]),
            tuple(str(m) for m in data["members"]),
            None if data.get("escalate") is None else str(data["escalate"]),
            float(data.get("threshold", 1.0)),
            tuple(str(a) for a in data.get("adds", ())),
            _gate(data.get("gate", "agreement")),
        )


def is_whole_number(round_one: Tally) -> bool:
    """Whether a vote's winning answer is a whole number: kind ``math`` and its key an integer
    (``18``, ``-3``; not ``1/2``, ``50%`` or an expression). A failed program's sandbox report
    answers nothing (:func:`podium.answers.sandbox_answer`), so it is not one."""
    key = round_one.keys[round_one.winner] if round_one.keys else None
    return round_one.kind == "math" and key is not None and _INTEGER.fullmatch(key) is not None


def _gate(value: object) -> Gate:
    if value not in GATES:
        raise ValueError(f"unknown cascade gate {value!r} (one of {', '.join(GATES)})")
    return value


def plan_workflow(
    members: Sequence[str],
    columns: Mapping[str, Column],
    pool: Sequence[str],
    *,
    vote_worker: str | None = None,
    vote_access: Access | None = None,
) -> Workflow:
    """The workflow of round 1 of a plan with these ``members`` over ``pool`` (worker names in
    pool order): the members' sub-workflows merged, then a ``vote`` step on ``vote_worker``
    (the pool's vote tool) over the members' steps when there are several members. With
    ``vote_access`` (the second round of a cascade that adds answers) the vote step always
    comes, with that access (:func:`second_round_workflow`).

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
        # a model step's request names the indices it sees; a tool step's output does not
        moved = [order.index(s) for s in col.sees] != [alone.index(s) for s in col.sees]
        if moved and ROLES[col.role].tool is None:
            raise NotReplayable(f"column {cid!r} would see other step indices than it recorded")
        if col.role == "sample":
            mine = [c for c in order[:index] if columns[c].worker == col.worker and columns[c].role == "sample"]
            if len(mine) != len([c for c in alone[:-1] if columns[c].role == "sample"]):
                raise NotReplayable(f"column {cid!r} would get another sample seed than it recorded")
        if col.worker not in pool:
            raise NotReplayable(f"column {cid!r} needs worker {col.worker!r}, which the pool lacks")
        steps.append(Step(pool.index(col.worker), ROLES[col.role].subtask, tuple(order.index(s) for s in col.sees)))
    if len(members) > 1 or vote_access is not None:
        if vote_worker is None or vote_worker not in pool:
            raise ConfigError("a plan with several members needs a vote tool worker in the pool (backend = 'vote')")
        access = tuple(order.index(m) for m in members) if vote_access is None else vote_access
        steps.append(Step(pool.index(vote_worker), ROLES["vote"].subtask, access))
    return Workflow(tuple(steps))


def second_round_workflow(
    plan: Plan, columns: Mapping[str, Column], pool: Sequence[str], *, vote_worker: str | None = None
) -> Workflow:
    """The workflow of a cascade's second round over ``pool`` (worker names): the escalation
    column alone (a fresh start), or the added columns and a vote over both rounds' answers —
    over this round's alone for a tested cascade (:func:`votes_round_one`).

    Raises NotReplayable (a ConfigError) when the pool cannot run it."""
    if plan.escalate is not None:
        return plan_workflow([plan.escalate], columns, pool)
    # ``all`` also sees round 1's answers (the previous round's outputs come first: vote_order)
    access = ALL if votes_round_one(plan) else tuple(range(len(layout(plan.adds, columns))))
    return plan_workflow(plan.adds, columns, pool, vote_worker=vote_worker, vote_access=access)


def votes_round_one(plan: Plan) -> bool:
    """Whether the second-round vote of a cascade that adds answers counts round 1's answers
    too: yes for a mixture-of-thought cascade, whose round 1 answered but disagreed; no for a
    tested cascade, whose round 1 is code that failed its own asserts (they stay in the code,
    so it raises wherever it is run: never a right answer as delivered)."""
    return plan.gate != "tests-pass"


def kept_column(plan: Plan, columns: Mapping[str, Column]) -> str | None:
    """The column whose answer a tested cascade keeps when round 1's tests pass (the code its
    run ran), or None for any other plan, which keeps round 1's last step."""
    if plan.gate != "tests-pass":
        return None
    (member,) = plan.members
    return columns[member].sees[-1]


def check_tested(plan: Plan, columns: Mapping[str, Column]) -> None:
    """Raise ConfigError unless a ``tests-pass`` plan has one member, a ``run`` column that
    sees the code it runs."""
    if plan.gate != "tests-pass":
        return
    if len(plan.members) != 1 or plan.members[0] not in columns:
        raise ConfigError(f"plan {plan.id!r}: a tested cascade has one member, a run step of the bank")
    column = columns[plan.members[0]]
    if column.role != "run" or not column.sees:
        raise ConfigError(f"plan {plan.id!r}: its member {column.id!r} is no run of code (role {column.role!r})")


def keep_workflow(plan: Plan, pool: Sequence[str], *, vote_worker: str | None = None) -> Workflow:
    """Round 2 of a cascade that keeps round 1's answer: nothing (three empty lists) — or, for
    a tested cascade, one ``vote`` step with access ``all``, which returns the tested code
    (the run's output, empty when the tests pass, names no code).

    Raises ConfigError for a tested cascade and a pool without the vote tool."""
    if plan.gate != "tests-pass":
        return Workflow(())
    if vote_worker is None or vote_worker not in pool:
        raise ConfigError("a tested cascade needs a vote tool worker in the pool (backend = 'vote')")
    return Workflow((Step(pool.index(vote_worker), ROLES["vote"].subtask, ALL),))


def vote_order(plan: Plan, columns: Mapping[str, Column]) -> list[str]:
    """The answers the second-round vote of a cascade that adds answers counts, in the order it
    sees them: every step of round 1 (unless :func:`votes_round_one` says no), then of round 2
    (:func:`layout` order), that a vote counts (:func:`podium.roles.counts_in_vote`: not a
    ``program``, ``check`` or ``vote``). The bank replay tallies exactly these recorded
    responses, so replay and live choose the same answer."""
    return [cid for cid in _voted_steps(plan, columns) if ROLES[columns[cid].role].answer]


def check_order(plan: Plan, columns: Mapping[str, Column]) -> list[str]:
    """The ``check`` steps that vote sees, in the same order (:func:`podium.answers.vote` counts
    only answers whose check passed, when one did)."""
    return [cid for cid in _voted_steps(plan, columns) if columns[cid].role == "check"]


def _voted_steps(plan: Plan, columns: Mapping[str, Column]) -> list[str]:
    """The steps the second-round vote sees, in order (round 1's only if :func:`votes_round_one`)."""
    return [*(layout(plan.members, columns) if votes_round_one(plan) else ()), *layout(plan.adds, columns)]


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
