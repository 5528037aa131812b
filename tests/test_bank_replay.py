"""Conductors scored on a workflow bank, and paired comparisons in eval reports (issue: learned
workflows — the held-out proof replays the trained conductor on the recorded bank).

The bank is the real one recorded on the local models (data/banks/local); its row count grows
while it is being recorded, so no test depends on how many rows it has. ``Scripted`` below is a
unit-test fake conductor (it returns a fixed workflow)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from podium.answers import tally
from podium.conductor.catalogue import local_columns, local_plans
from podium.conductor.plans import fixed_plan
from podium.errors import ConfigError
from podium.eval.bank import read_bank
from podium.eval.bank_replay import replay_on_bank
from podium.eval.metrics import MetricInputError, paired_difference
from podium.eval.replay import OutcomeMatrix
from podium.eval.runner import Method
from podium.eval.session import EvalSpec, run_eval
from podium.records import PlanAttempt
from podium.roles import ROLES
from podium.workers.base import Worker
from podium.workflow import Step, Workflow

BANK = Path(__file__).resolve().parents[1] / "data" / "banks" / "local"


@pytest.fixture(scope="module")
def bank():  # type: ignore[no-untyped-def]
    return read_bank(BANK)


@pytest.fixture(scope="module")
def tasks():  # type: ignore[no-untyped-def]
    return OutcomeMatrix.load(BANK / "matrix.csv").tasks("test")[:30]


def _plan(plan_id: str) -> Method:
    columns = local_columns()
    plan = next(p for p in local_plans(columns) if p.id == plan_id)
    return Method(f"plan:{plan_id}", fixed_plan(plan, columns))


class Scripted:
    """Unit-test fake conductor: always writes ``steps`` over worker names (None: a parse failure)."""

    def __init__(self, steps: Sequence[tuple[str, str, tuple[int, ...]]] | None) -> None:
        self.name = "scripted"
        self.steps = steps

    async def plan(self, question: str, pool: Sequence[Worker], **_: object) -> PlanAttempt:
        if self.steps is None:
            return PlanAttempt(0, (), "nonsense", None, error_kind="unparseable", error="no lists")
        names = [w.info.name for w in pool]
        workflow = Workflow(tuple(Step(names.index(w), ROLES[r].subtask, a) for w, r, a in self.steps))
        return PlanAttempt(0, (), "", workflow)


def test_a_one_column_plan_scores_and_costs_what_its_column_recorded(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    rows = {r["sample_id"]: r for r in bank.rows}
    got = asyncio.run(replay_on_bank([_plan("solve@1.5b")], tasks, bank))["plan:solve@1.5b"]
    for result in got:
        row = rows[result.task_id]
        assert result.score == float(row["solve@1.5b"])
        assert result.cost_usd == pytest.approx(float(row["solve@1.5b|step_cost"]))
        assert result.answer_worker == "solve@1.5b" and result.status == "ok"


def test_a_vote_answers_with_one_of_its_members_and_pays_for_each(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    rows = {r["sample_id"]: r for r in bank.rows}
    members = ("sample1@1.5b", "sample2@1.5b", "sample3@1.5b")
    got = asyncio.run(replay_on_bank([_plan("vote(sample×3@1.5b)")], tasks, bank))["plan:vote(sample×3@1.5b)"]
    for result in got:
        row = rows[result.task_id]
        scores = {float(row[m]) for m in members}
        assert result.answer_worker in members and result.score == float(row[result.answer_worker])
        if len(scores) == 1:  # whoever wins, the vote scores what all three scored
            assert result.score == scores.pop()
        assert result.cost_usd == pytest.approx(sum(float(row[f"{m}|step_cost"]) for m in members))
        # three independent samples in parallel: the slowest one
        assert result.latency_s == pytest.approx(max(float(row[f"{m}|step_latency_s"]) for m in members))


def test_a_mixture_of_thought_cascade_adds_samples_only_when_solve_and_program_disagree(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    """On the real bank: round 1 is the 1.5B's direct answer and its program's run; when they
    disagree, three samples come and the vote counts all five answers (the program's code not),
    and the second round's three calls are paid for and counted in the tokens."""
    rows = {r["sample_id"]: r for r in bank.rows}
    plan_id = "cascade(vote(solve@1.5b,run(program@1.5b))→+sample×3@1.5b)"
    got = asyncio.run(replay_on_bank([_plan(plan_id)], tasks, bank))[f"plan:{plan_id}"]
    first = ["program@1.5b", "run(program@1.5b)", "solve@1.5b"]
    samples = ["sample1@1.5b", "sample2@1.5b", "sample3@1.5b"]
    escalated = 0
    for result in got:
        row = rows[result.task_id]
        agree = tally([row["solve@1.5b|model_response"], row["run(program@1.5b)|model_response"]]).agreement == 1.0
        steps = first + ([] if agree else samples)
        escalated += not agree
        assert result.cost_usd == pytest.approx(sum(float(row[f"{c}|step_cost"]) for c in steps))
        assert result.output_tokens == sum(int(float(row[f"{c}|output_tokens"])) for c in steps)
        voters = ["run(program@1.5b)", "solve@1.5b", *([] if agree else samples)]
        assert result.score == float(row[voters[tally([row[f"{v}|model_response"] for v in voters]).winner]])
    assert 0 < escalated < len(got)  # both branches are exercised on these 30 questions


def test_any_conductor_is_replayed_step_by_step_and_strays_are_failures(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    rows = {r["sample_id"]: r for r in bank.rows}
    methods = [
        Method("verify", Scripted([("qwen2.5-coder-1.5b", "solve", ()), ("qwen2.5-coder-1.5b", "verify", (0,))])),
        # the bank never recorded a 135M model verifying: not replayable, so a failed request
        Method("stray", Scripted([("qwen2.5-coder-1.5b", "solve", ()), ("smollm2-135m", "verify", (0,))])),
        Method("unparsed", Scripted(None)),
    ]
    got = asyncio.run(replay_on_bank(methods, tasks, bank))
    for result in got["verify"]:
        assert result.score == float(rows[result.task_id]["verify@1.5b(solve@1.5b)"])
    assert all(r.status == "error" and r.score == 0 and "never recorded" in r.detail for r in got["stray"])
    assert all(r.plan_failures == 1 and r.score == 0 for r in got["unparsed"])
    assert [len(v) for v in got.values()] == [len(tasks)] * 3  # nothing dropped


def test_eval_replays_plans_on_a_bank_and_pairs_them_with_the_baseline(tmp_path: Path) -> None:
    spec = EvalSpec(
        replay=BANK,
        limit=25,
        methods=("single:solve@1.5b", "single:solve@0.5b", "plan:solve@1.5b"),
        against="single:solve@1.5b",
        cache=None,
        embeddings=tmp_path / "emb.sqlite3",
    )
    report = run_eval(spec)
    paired = report["paired"]
    assert paired["against"] == "single:solve@1.5b"
    # the one-column plan is the same answers as the column: no difference at all
    assert paired["methods"]["plan:solve@1.5b"] == {"diff": 0.0, "ci95": [0.0, 0.0], "higher": 0, "lower": 0}
    small = paired["methods"]["single:solve@0.5b"]
    scores = {m: [r["score"] for r in report["results"][m]] for m in ("single:solve@0.5b", "single:solve@1.5b")}
    assert small["diff"] == pytest.approx(sum(scores["single:solve@0.5b"]) / 25 - sum(scores["single:solve@1.5b"]) / 25)
    assert report["config"]["bank"] is True
    assert report["config"]["tasks"] == f"{BANK} (test)"  # the bank folder names it (the plot title), not matrix.csv


def test_bad_eval_options_on_a_bank_fail_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--against 'single:nope' is not a method"):
        run_eval(EvalSpec(replay=BANK, methods=("single:solve@1.5b",), against="single:nope", cache=None))
    matrix = tmp_path / "plain.csv"  # a plain outcome matrix: no workflows to replay a plan on
    matrix.write_text(
        "sample_id,eval_name,split,prompt,a,a|total_cost,b,b|total_cost\n"
        "q1,gsm8k,train,What is 2+2?,1,0.1,0,0.01\nq2,gsm8k,test,What is 3+3?,1,0.1,1,0.01\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="does not run in replay mode"):
        run_eval(EvalSpec(replay=matrix, methods=("plan:solve@1.5b",), cache=None))


def test_paired_difference_is_the_mean_difference_with_a_normal_interval() -> None:
    diff, low, high = paired_difference([1, 1, 0, 0], [0, 1, 0, 1])  # differences 1, 0, 0, −1
    half = 1.959964 * math.sqrt(2 / 3) / 2  # s = √(2/3), n = 4
    assert diff == 0.0 and low == pytest.approx(-half, abs=1e-5) and high == pytest.approx(half, abs=1e-5)
    assert paired_difference([1, 1, 1], [0, 0, 0]) == (1.0, 1.0, 1.0)  # always better by 1: no spread
    assert paired_difference([0.5], [0.0]) == (0.5, -1.0, 1.0)  # one question says nothing about spread
    with pytest.raises(MetricInputError, match="equally long"):
        paired_difference([1, 0], [1])
    with pytest.raises(MetricInputError, match=r"\[0, 1\]"):
        paired_difference([1.5], [0])


def test_plan_ids_with_commas_are_one_method_on_the_command_line() -> None:
    from podium.eval.cli import _method_list

    given = "single, plan:vote(solve@1.5b,sample×4@1.5b),"
    given += "plan:cascade(vote(solve@0.5b,run(program@0.5b))→solve@1.5b),,oracle"
    assert _method_list(given) == (
        "single",
        "plan:vote(solve@1.5b,sample×4@1.5b)",
        "plan:cascade(vote(solve@0.5b,run(program@0.5b))→solve@1.5b)",
        "oracle",
    )


def test_the_spec_of_an_eval_over_several_task_sets_is_plain_json(tmp_path: Path) -> None:
    import json

    spec = EvalSpec(tasks=tmp_path / "a.jsonl", more_tasks=(tmp_path / "b.jsonl", tmp_path / "c.jsonl"), tags=("x",))
    config = json.loads(json.dumps(spec.config()))  # a tuple of paths once failed here, after the whole run
    assert config["more_tasks"] == [str(tmp_path / "b.jsonl"), str(tmp_path / "c.jsonl")] and config["tags"] == ["x"]


def test_a_bank_replay_plans_under_the_step_limit_it_is_given(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    # seven steps: test, its run, fix, solve, two samples, the vote
    seven = _plan("vote(fix@1.5b(test@1.5b),solve@1.5b,sample×2@1.5b)")
    assert asyncio.run(replay_on_bank([seven], tasks[:2], bank, max_steps=7))[seven.name][0].steps >= 7
    with pytest.raises(ConfigError, match="at most 6 steps"):
        asyncio.run(replay_on_bank([seven], tasks[:2], bank, max_steps=6))


def test_a_plan_conductor_that_may_cascade_gets_its_escalation_round() -> None:
    from podium.builder import build_orchestrator
    from podium.conductor.baselines import SingleWorker
    from podium.conductor.plans import cascade_rounds
    from podium.pool import load_pool

    cascade = _plan("cascade(vote(sample×3@0.5b)→solve@1.5b)").conductor
    assert cascade_rounds(cascade) == 1
    assert cascade_rounds(_plan("solve@1.5b").conductor) == 0 and cascade_rounds(SingleWorker(0)) == 0
    config = load_pool("local-tools")
    assert config.conductor.recursion_rounds == 0  # the pool file's own setting
    assert build_orchestrator(config, conductor=cascade).config.recursion_rounds == 1


def test_single_means_each_model_worker_alone_not_a_tool() -> None:
    from podium.eval.session import _baselines
    from podium.named_conductors import MethodName
    from podium.pool import load_pool
    from podium.pool_workers import build_pool_workers

    workers = build_pool_workers(load_pool("local-tools"))  # three models, the sandbox, the vote (none loaded)
    names = [m.name for m in _baselines([MethodName.parse("single")], workers, None, None)]
    assert names == ["single:qwen2.5-coder-1.5b", "single:qwen2.5-coder-0.5b", "single:smollm2-135m"]
    assert [m.name for m in _baselines([MethodName.parse("single:python")], workers, None, None)] == ["single:python"]


class Positional:
    """Unit-test fake conductor that reads positions, not names: always solves with Model 0."""

    name = "positional"

    async def plan(self, question: str, pool: Sequence[Worker], **_: object) -> PlanAttempt:
        return PlanAttempt(0, (), "", Workflow((Step(0, ROLES["solve"].subtask, ()),)))


def test_a_reversed_pool_changes_what_a_positional_conductor_does_but_not_a_name_reader(bank, tasks) -> None:  # type: ignore[no-untyped-def]
    """The permutation test's instrument (--pool-order reversed): Model 0 is the 1.5B worker in
    the bank's order and the vote tool reversed, so the positional fake's answers change (a tool
    cannot solve: not replayable), while a plan conductor, which finds its workers by name,
    scores the same on every question."""
    methods = [_plan("vote(run(program@1.5b),solve@1.5b,solve@0.5b)"), Method("positional", Positional())]
    given = asyncio.run(replay_on_bank(methods, tasks, bank))
    flipped = asyncio.run(replay_on_bank(methods, tasks, bank, reverse_pool=True))
    plan = "plan:vote(run(program@1.5b),solve@1.5b,solve@0.5b)"
    assert [(r.score, r.cost_usd) for r in given[plan]] == [(r.score, r.cost_usd) for r in flipped[plan]]
    rows = {r["sample_id"]: r for r in bank.rows}
    assert [r.score for r in given["positional"]] == [float(rows[t.id]["solve@1.5b"]) for t in tasks]
    assert all(r.status == "error" and "never recorded" in r.detail for r in flipped["positional"])


def test_pool_order_is_refused_outside_a_bank_replay(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--pool-order reversed applies to a replay on a workflow bank"):
        run_eval(EvalSpec(tasks=tmp_path / "t.jsonl", pool_order="reversed", cache=None))
