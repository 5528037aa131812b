"""The local catalogue: the steps a workflow bank records on the embedded local pool, and the
plans (compositions of those steps) the plan conductor chooses among. Definitions only — the
bank's files are :mod:`podium.eval.bank`, replaying plans on it :mod:`podium.eval.plans` — so a
conductor can name a plan (``plan:ID``) without importing the evaluation layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from podium.conductor.compose import Column, NotReplayable, Plan, plan_workflow
from podium.conductor.prompt import workflow_text
from podium.errors import ConfigError
from podium.roles import role_of
from podium.workflow import Workflow

__all__ = ["CHECKED", "local_columns", "local_plans", "plan_lists", "plan_workflows", "written"]


_ALIAS = {"qwen2.5-coder-1.5b": "1.5b", "qwen2.5-coder-0.5b": "0.5b", "smollm2-135m": "135m"}
"""The embedded local pool's model workers (strong, mid, tiny) and the short names column ids use
(:func:`local_plans` names its columns by them, so the catalogue is of these workers only)."""


CHECKED = ("sample1@1.5b", "sample2@1.5b", "sample3@1.5b", "solve@0.5b")
"""The answers the ``local-checked`` catalogue checks against the question's own tests."""


def local_columns(samples: tuple[int, int] = (5, 3), *, checks: bool = False) -> dict[str, Column]:
    """The steps (bank columns, by id, in recording order) of the catalogue recorded on the
    embedded local pool (docs/learned-workflows.md; :func:`podium.eval.bank.local_catalogue`).

    Per question, 22 steps, 18 of them model calls: each worker solving alone; ``samples``
    independent samples of the 1.5B and of the 0.5B worker (5 and 3: votes of 3 and 5); a program of the
    1.5B and of the 0.5B worker, run in the sandbox, with the answer stated from its output by the
    0.5B worker (program-aided reasoning); the 1.5B worker's code with tests, run, then fixed by
    it (self-debugging); and the 1.5B worker verifying the 1.5B's and the 0.5B's answers. Every
    question gets every step, so a conductor learns from what each composition does on every kind
    of question. Votes and cascades over these steps cost no further call. With ``checks``
    (the catalogue ``local-checked``), 4 more tool steps: a ``check`` of each answer in
    :data:`CHECKED` (its code run with the question's own tests).
    """
    strong, mid, tiny = _ALIAS
    python = "python"
    cols: list[Column] = [Column(f"solve@{_ALIAS[w]}", w, "solve") for w in (strong, mid, tiny)]
    for w, count in zip((strong, mid), samples, strict=True):
        for k in range(1, count + 1):
            after = (f"sample{k - 1}@{_ALIAS[w]}",) if k > 1 else ()
            cols.append(Column(f"sample{k}@{_ALIAS[w]}", w, "sample", after=after))
    for writer in (strong, mid):
        prog = f"program@{_ALIAS[writer]}"
        run = f"run({prog})"
        cols += [Column(prog, writer, "program"), Column(run, python, "run", sees=(prog,))]
        cols.append(Column(f"state@{_ALIAS[mid]}({prog})", mid, "state", sees=(prog, run)))
    code = f"test@{_ALIAS[strong]}"
    run = f"run({code})"
    cols += [Column(code, strong, "test"), Column(run, python, "run", sees=(code,))]
    cols.append(Column(f"fix@{_ALIAS[strong]}({code})", strong, "fix", sees=(code, run)))
    for solver in (strong, mid):
        base = f"solve@{_ALIAS[solver]}"
        cols.append(Column(f"verify@{_ALIAS[strong]}({base})", strong, "verify", sees=(base,)))
    if checks:
        cols += [Column(f"check({answer})", python, "check", sees=(answer,)) for answer in CHECKED]
    return {c.id: c for c in cols}


def local_plans(columns: Mapping[str, Any]) -> list[Plan]:
    """The compositions the light conductor chooses among on the local bank
    (:func:`local_columns`), from cheapest to dearest in spirit: each worker
    alone; program-aided (the sandbox's printed output as the answer, or the answer stated from
    it); the 1.5B's tested code, fixed from its run; solve → verify; self-consistency votes of 3
    and 5 samples; votes mixing a program with direct solves; cheap-first cascades that
    escalate to the 1.5B worker when the 0.5B worker's answers disagree; and mixture-of-thought
    cascades (Yue et al. 2024, "Large Language Model Cascades with Mixture of Thoughts
    Representations", ICLR): a worker's direct answer and its program's answer agree → keep it,
    else further answers (1, 3 or 5 samples of the 1.5B; or the 1.5B's direct answer, program and a
    sample after the 0.5B's pair) and a vote over both rounds'; checked cascades: a
    program's printed answer when it is a whole number, else the 1.5B worker's; and tested
    cascades: the 1.5B worker's code when its own tests pass, else the 1.5B's or the 0.5B's
    direct answer — or, on a bank with ``check`` steps (``local-checked``), further answers
    (a sample of the 1.5B and the 0.5B's answer, or three samples of the 1.5B), each run with the
    question's own tests, and a vote among those that pass them (generate, then filter: Li et al. 2022,
    "AlphaCode", Science; Chen et al. 2023, "CodeT", ICLR).

    Raises ConfigError when ``columns`` lack one of them (another catalogue)."""
    s15, s05, s135 = "solve@1.5b", "solve@0.5b", "solve@135m"
    pal15, pal05 = "run(program@1.5b)", "run(program@0.5b)"
    st15, st05 = "state@0.5b(program@1.5b)", "state@0.5b(program@0.5b)"
    fix = "fix@1.5b(test@1.5b)"
    samples15 = [f"sample{k}@1.5b" for k in range(1, 6)]
    samples05 = [f"sample{k}@0.5b" for k in range(1, 4)]
    plans = [
        Plan(s15, (s15,)),
        Plan(s05, (s05,)),
        Plan(s135, (s135,)),
        Plan(pal15, (pal15,)),
        Plan(st15, (st15,)),
        Plan(pal05, (pal05,)),
        Plan(st05, (st05,)),
        Plan("test@1.5b", ("test@1.5b",)),
        Plan(fix, (fix,)),
        Plan("verify@1.5b(solve@1.5b)", ("verify@1.5b(solve@1.5b)",)),
        Plan("verify@1.5b(solve@0.5b)", ("verify@1.5b(solve@0.5b)",)),
        Plan("vote(sample×3@1.5b)", tuple(samples15[:3])),
        Plan("vote(sample×5@1.5b)", tuple(samples15)),
        Plan("vote(sample×3@0.5b)", tuple(samples05)),
        Plan("vote(solve@1.5b,sample×2@1.5b)", (s15, *samples15[:2])),
        Plan("vote(solve@1.5b,sample×4@1.5b)", (s15, *samples15[:4])),
        Plan("vote(state@0.5b(program@1.5b),solve@1.5b,solve@0.5b)", (st15, s15, s05)),
        Plan("vote(run(program@1.5b),solve@1.5b,solve@0.5b)", (pal15, s15, s05)),
        Plan("vote(state@0.5b(program@1.5b),solve@1.5b,sample×2@1.5b)", (st15, s15, *samples15[:2])),
        Plan("vote(fix@1.5b(test@1.5b),solve@1.5b,sample×2@1.5b)", (fix, s15, *samples15[:2])),
        Plan("vote(state@0.5b(program@0.5b),solve@0.5b,sample×2@0.5b)", (st05, s05, *samples05[:2])),
        Plan("cascade(vote(sample×3@0.5b)→solve@1.5b)", tuple(samples05), s15, 1.0),
        Plan("cascade(vote(solve@0.5b,state@0.5b(program@0.5b))→solve@1.5b)", (st05, s05), s15, 1.0),
        Plan("cascade(vote(solve@0.5b,run(program@0.5b))→state@0.5b(program@1.5b))", (pal05, s05), st15, 1.0),
        Plan("cascade(vote(solve@0.5b,run(program@0.5b))→solve@1.5b)", (pal05, s05), s15, 1.0),
        # mixture-of-thought cascades (Yue et al. 2024): a direct solve and a program agree → keep;
        # else more answers, and a vote over both rounds'
        *(
            Plan(f"cascade(vote(solve@1.5b,{pal15})→+sample×{k}@1.5b)", (s15, pal15), None, 1.0, tuple(samples15[:k]))
            for k in (1, 3, 5)
        ),
        Plan(
            f"cascade(vote(solve@0.5b,{pal05})→+solve@1.5b,{pal15},sample@1.5b)",
            (s05, pal05),
            None,
            1.0,
            (s15, pal15, samples15[0]),
        ),
        # checked cascades: the program's printed answer when it is a whole number, else the
        # 1.5B's direct answer (or a vote of it, two samples and the program's output)
        *(Plan(f"check({pal})→{s15}", (pal,), s15, gate="whole-number") for pal in (pal15, pal05)),
        Plan(f"check({pal15})→+{s15},sample×2@1.5b", (pal15,), None, adds=(s15, *samples15[:2]), gate="whole-number"),
        # tested cascades: the 1.5B's code written with its tests when they pass, else a direct answer
        *(
            Plan(f"check(run(test@1.5b))→{solve}", ("run(test@1.5b)",), solve, gate="tests-pass")
            for solve in (s15, s05)
        ),
    ]
    if all(f"check({answer})" in columns for answer in CHECKED):
        plans += [
            Plan(
                f"check(run(test@1.5b))→checked({','.join(answers)})",
                ("run(test@1.5b)",),
                adds=tuple(f"check({a})" for a in answers),
                gate="tests-pass",
            )
            for answers in ((samples15[0], s05), tuple(samples15[:3]))  # round 2: 5 and 7 steps
        ]
    missing = sorted({c for p in plans for c in (*p.members, *p.second_round) if c not in columns})
    if missing:
        raise ConfigError(f"the bank lacks columns {', '.join(missing)} of the local plans (another catalogue?)")
    return plans


def plan_workflows(
    pool: Sequence[str], max_steps: int, *, vote_worker: str | None, columns: Mapping[str, Column] | None = None
) -> list[Workflow]:
    """The workflows of the catalogue's one-round plans (no cascade) that ``pool`` (worker names,
    in the order the conductor sees them) can run in at most ``max_steps`` steps, in catalogue
    order. These are exactly workflows a workflow bank recorded, so each replays on it.
    ``columns``: the catalogue's steps (default :func:`local_columns`); ``vote_worker``: the
    pool's vote tool (None: plans of one member)."""
    columns = local_columns() if columns is None else columns
    out = []
    for plan in local_plans(columns):
        if plan.is_cascade:
            continue
        try:
            workflow = plan_workflow(plan.members, columns, list(pool), vote_worker=vote_worker)
        except (NotReplayable, ConfigError):
            continue
        if len(workflow) <= max_steps:
            out.append(workflow)
    return out


def plan_lists(
    pool: Sequence[str], max_steps: int, *, vote_worker: str | None, columns: Mapping[str, Column] | None = None
) -> list[str]:
    """:func:`plan_workflows`, each as the conductor writes its three lists: role names as
    subtasks, ids into ``pool`` (the reasoning line of :func:`~podium.conductor.prompt.workflow_text`
    left out)."""
    workflows = plan_workflows(pool, max_steps, vote_worker=vote_worker, columns=columns)
    return [workflow_text("", *written(w)).split("\n", 1)[1] for w in workflows]


def written(workflow: Workflow) -> tuple[list[int], list[str], list[str]]:
    """A workflow of role instructions as the conductor writes it: (ids, role names, access
    entries as text: ``[]``, ``"all"``, ``[0, 1]``)."""
    access = [("[" + ", ".join(str(i) for i in a) + "]") if a != "all" else '"all"' for a in workflow.access_list]
    names: list[str] = [r.name for s in workflow.steps if (r := role_of(s.subtask))]
    return list(workflow.model_id), names, access
