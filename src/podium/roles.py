"""Roles: the fixed subtask templates that workflows are composed of.

A workflow step is (worker, subtask, access list) in the ordinary format (docs/design.md, "The workflow format"). A
**role** is a subtask template with a meaning podium knows, so that conductors can compose
multi-step workflows whose steps are recorded, replayed and learned exactly:

==============  =================================================================  ============
role            what the step does                                                 usual access
==============  =================================================================  ============
``solve``       answer the question (the single-worker baseline's subtask)         none
``sample``      answer independently at temperature :data:`SAMPLE_TEMPERATURE`,    none
                with a seed of its own, so several samples differ
``program``     write a Python program that computes and prints the answer —       none
                program-aided reasoning (Gao et al. 2023, "PAL", ICML)
``test``        write the requested code followed by the question's tests as      none
                asserts (for coding tasks)
``run``         a **tool** step: the Python sandbox runs the program it sees       the program
``check``       a **tool** step: the sandbox runs the code it sees followed by     the code
                the question's own tests — its ``assert`` lines, else its ``>>>``
                examples (generate, then filter by the stated tests: Li et al.
                2022, "AlphaCode", Science; Chen et al. 2023, "CodeT", ICLR); a
                vote that sees checks counts only answers whose check passed
``state``       state the final answer from a program and its output               program, run
``fix``         correct code that its run shows failing (self-debugging, Chen     code, run
                et al. 2024, "Teaching LLMs to Self-Debug", ICLR)
``verify``      check the previous answer and correct it                           the previous
``aggregate``   combine the answers it sees into one (Mixture-of-Agents)           all
``vote``        a **tool** step: the majority answer of the steps it sees          the voters
                (self-consistency, Wang et al. 2023; :func:`podium.answers.tally`);
                it counts every step but a ``program`` (its ``run`` is the answer),
                a ``check`` and an earlier ``vote`` (a copy), so with access ``all``
                it counts each answer once (:func:`counts_in_vote`)
==============  =================================================================  ============

A step *has* a role when its subtask is that role's template (whitespace-insensitive); any
other subtask is free text and runs with the worker's own decoding settings. Decoding settings
per step (:func:`step_settings`): a ``sample`` step runs at :data:`SAMPLE_TEMPERATURE` with
seed ``worker seed + 1 + k``, where ``k`` counts the earlier ``sample`` steps on the same worker
in the same workflow, so the first three samples of a five-sample workflow are exactly the
three samples of a three-sample one (and share their calls through the request cache).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from podium.workers.base import WorkerSettings
from podium.workflow import Step, Workflow

__all__ = [
    "ROLES",
    "SAMPLE_TEMPERATURE",
    "Role",
    "RoleName",
    "counts_in_vote",
    "expand",
    "role_of",
    "step_settings",
    "subtask",
]

RoleName = Literal["solve", "sample", "program", "test", "run", "check", "state", "fix", "verify", "aggregate", "vote"]

SAMPLE_TEMPERATURE = 0.7
"""Temperature of a ``sample`` step (self-consistency samples at 0.5–0.7 in Wang et al. 2023)."""


@dataclass(frozen=True)
class Role:
    """One role.

    Attributes:
        name: the role's name.
        subtask: the exact subtask text a step of this role carries.
        tool: ``"python"`` or ``"vote"`` when the step must run on that kind of tool worker,
            else None (a model step).
        brief: what the step does, in a few words (the LM conductor's prompt lists the roles).
        answer: whether a vote counts the step's output as an answer: not a ``program`` (code
            whose sandbox ``run`` is the answer), a ``check`` (a verdict on an answer) nor a
            ``vote`` (a copy of an answer it saw).
    """

    name: RoleName
    subtask: str
    tool: Literal["python", "vote"] | None = None
    brief: str = ""
    answer: bool = True


_CODE_FORM = "for a coding task, the complete code in one ```python code block"

ROLES: dict[RoleName, Role] = {
    role.name: role
    for role in (
        # the single-worker baseline's subtask (podium.conductor.baselines.ANSWER), unchanged
        Role("solve", "Answer the question. End with the final answer.", brief="answer the question directly"),
        Role(
            "sample",
            "Answer the question independently. End with the final answer.",
            brief="an independent, sampled answer: several samples of one worker differ",
        ),
        Role(
            "program",
            "Write a Python program that computes the answer to the question and prints it. "
            "Reply with the program in one ```python code block.",
            brief="a program that prints the answer (the Python tool runs it next)",
            answer=False,
        ),
        Role(
            "test",
            "Write the code the question asks for, then its tests as assert statements, then "
            "print('all tests passed'). Reply with all of it in one ```python code block.",
            brief="coding questions: the requested code with the question's tests (the Python tool runs it next)",
        ),
        Role(
            "run",
            "Run the Python program of the step above and report what it printed.",
            tool="python",
            brief="Python tool only: run the program of the one step it sees",
        ),
        Role(
            "check",
            "Run the code of the step above with the tests the question states, and report the result.",
            tool="python",
            brief="Python tool only: run the code of the one step it sees with the question's own tests",
            answer=False,
        ),
        Role(
            "state",
            "The program above was run and its output is shown. Give the answer to the question that the "
            "output shows. End with the final answer.",
            brief="the answer from a program and its run (sees both)",
        ),
        Role(
            "fix",
            "The code above was run and its output is shown. If the output shows an error or a failed test, "
            "correct the code. Reply with the complete final code in one ```python code block.",
            brief="coding questions: fix the code its test run shows failing (sees the code and the run)",
        ),
        Role(
            "verify",
            f"Check the previous answer step by step. If it is wrong, correct it. End with the final answer; "
            f"{_CODE_FORM}.",
            brief="check and correct the one answer it sees",
        ),
        Role(
            "aggregate",
            f"Combine the answers above into the single best answer. End with the final answer; {_CODE_FORM}.",
            brief="combine the answers it sees into one",
        ),
        Role(
            "vote",
            "Return the answer that most of the steps above agree on.",
            tool="vote",
            brief="vote tool only: the answer most of the steps it sees agree on",
            answer=False,
        ),
    )
}
"""Every role by name, in the order of the module docstring's table."""

_BY_TEXT = {" ".join(role.subtask.split()): role for role in ROLES.values()}


def subtask(name: RoleName) -> str:
    """The subtask template of role ``name``; KeyError for an unknown role."""
    return ROLES[name].subtask


def role_of(text: str) -> Role | None:
    """The role whose template ``text`` is (whitespace-insensitive), or None for free text."""
    return _BY_TEXT.get(" ".join(text.split()))


def counts_in_vote(text: str) -> bool:
    """Whether a vote counts the output of a step with subtask ``text`` as an answer: every
    step but a ``program``, a ``check`` and a ``vote`` (:attr:`Role.answer`); free text counts."""
    role = role_of(text)
    return role is None or role.answer


def expand(workflow: Workflow) -> Workflow:
    """``workflow`` with every subtask that is a role's *name* (``"sample"``, any case) replaced
    by that role's template. A roles-only conductor writes names — a few tokens instead of a
    sentence per step — and the workers receive the full instructions."""
    steps = []
    for step in workflow.steps:
        role = ROLES.get(step.subtask.strip().lower())  # type: ignore[call-overload]
        steps.append(dataclasses.replace(step, subtask=role.subtask) if role is not None else step)
    return Workflow(tuple(steps))


def step_settings(steps: Sequence[Step], index: int, base: WorkerSettings) -> WorkerSettings | None:
    """The decoding settings of step ``index`` of ``steps`` given its worker's ``base`` settings:
    for a ``sample`` step, ``base`` at :data:`SAMPLE_TEMPERATURE` with its own seed (see the
    module docstring); None (the worker's own settings) for every other step."""
    step = steps[index]
    role = role_of(step.subtask)
    if role is None or role.name != "sample":
        return None
    k = sum(1 for s in steps[:index] if s.worker == step.worker and role_of(s.subtask) is role)
    return dataclasses.replace(base, temperature=SAMPLE_TEMPERATURE, seed=base.seed + 1 + k)
