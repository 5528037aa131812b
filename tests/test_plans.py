"""Plans over a workflow bank: replayed outcomes agree with live execution; the plan conductor
and its trainer.

The bank here is recorded by podium's real recorder over fake model workers (ScriptedWorker,
unit-test doubles whose answers depend on the subtask and the sample seed) and the real Python
sandbox and vote tool; live execution then runs through the real orchestrator and request
cache, restored from the bank's files alone."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from podium.answers import tally
from podium.conductor.compose import Plan
from podium.conductor.plans import PlanConductor, PlanPolicy
from podium.errors import ConfigError
from podium.eval.bank import local_catalogue, read_bank
from podium.eval.plans import local_plans, plan_outcomes
from podium.eval.record import record_bank, restore_cache
from podium.eval.tasks import Task
from podium.eval.verifiers import verify
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.roles import ROLES
from podium.store.request_cache import RequestCache
from podium.testing import ScriptedWorker
from podium.workers.base import Call, Completion, Price, Worker
from podium.workers.cache import CachedWorker
from podium.workers.python_tool import PythonToolWorker
from podium.workers.vote_tool import VoteToolWorker

TASKS = [
    Task(id=f"t/{i}", question=f"What is {i} * 7?", task_type="math", reference=str(i * 7), split="train", source="toy")
    for i in range(2, 8)
]
NAMES = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m", "python", "vote"]


class _Fake(ScriptedWorker):
    """Answers depend on the worker, the subtask and the sample seed: the 1.5B is right on even
    questions, samples vary with their seed, programs compute the product — the 0.5B's prints
    half of it, not a whole number, on odd questions (unit-test double)."""

    async def complete(self, call: Call) -> Completion:
        text = call.messages[-1]["content"]
        question = text.split("<question>\n", 1)[1].split("\n</question>", 1)[0]
        a = int(question.split()[2])
        subtask = text.rsplit("<your_subtask>", 1)[1]
        seed = call.settings_for(self).seed
        strong = self.name.endswith("1.5b")
        if "assert statements" in subtask:  # its own test fails on multiples of 3
            reply = f"```python\nprint({a} * 7)\nassert {a} % 3 != 0\n```"
        elif "Python program" in subtask:  # the 0.5B's program halves odd questions' answers
            reply = f"```python\nprint({a} * 7{' / 2' if a % 2 and not strong else ''})\n```"
        elif "program above was run" in subtask:
            reply = f"The program printed {a * 7}. The final answer is {a * 7}."
        else:
            right = (a % 2 == 0) if strong else (a % 3 == 0)
            if seed:
                right = (a + seed) % 2 == 0
            reply = f"The final answer is {a * 7 if right else a * 7 + 1}."
        self.reply = reply
        return await super().complete(call)


def _pool() -> list[Worker]:
    prices = {"qwen2.5-coder-1.5b": 2.0, "qwen2.5-coder-0.5b": 1.0, "smollm2-135m": 0.5}
    models: list[Worker] = [_Fake(n, price=Price(p, p)) for n, p in prices.items()]
    return [*models, PythonToolWorker("python"), VoteToolWorker("vote")]


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bank")
    record_bank(local_catalogue(), TASKS, _pool()[:4], folder, score=verify)
    return folder


class _NoCalls:
    """A worker that must not be called: every request has to come from the cache."""

    def __init__(self, inner: Worker) -> None:
        backend = inner.info.backend or type(inner).__name__  # the cache key's, as the inner worker's
        self.info = dataclasses.replace(inner.info, description="", backend=backend)

    async def complete(self, call: Call) -> Completion:
        raise AssertionError(f"{self.info.name} was called: the bank did not hold this request")


def _live(plan: Plan, bank_dir: Path, task: Task, cache: RequestCache) -> tuple[float, float]:
    """(score, cost) of ``plan`` executed live over the restored cache, by the orchestrator."""
    bank = read_bank(bank_dir)
    pool = [CachedWorker(_NoCalls(w), cache) if w.info.name != "vote" else w for w in _pool()]
    from podium.conductor.base import DirectConductor
    from podium.conductor.compose import plan_workflow

    workflow = plan_workflow(plan.members, bank.catalogue.columns, NAMES, vote_worker="vote")
    conductor = DirectConductor("plan", lambda _q, _p, _m: workflow.steps)
    orchestrator = Orchestrator(
        pool, conductor, Fallback(0, "Answer."), config=OrchestratorConfig(max_steps=10, recursion_rounds=0)
    )
    record = asyncio.run(orchestrator.run(task.question))
    assert record.status == "ok", record.error
    verdict = asyncio.run(verify(task, record.answer))
    return verdict.score, record.totals.cost_usd


@pytest.mark.slow
def test_restored_cache_replays_every_plan_exactly_as_the_outcome_arrays_say(bank_dir: Path, tmp_path: Path) -> None:
    bank = read_bank(bank_dir)
    cache = RequestCache(tmp_path / "restored.sqlite3")
    stored = restore_cache(bank, _pool()[:4], cache)
    assert stored == len(TASKS) * len(bank.catalogue.columns)
    plans = [p for p in local_plans(bank.catalogue.columns) if not p.is_cascade]
    outcomes = plan_outcomes(plans, bank.catalogue.columns, bank.rows)
    for i, task in enumerate(TASKS[:3]):
        for j, plan in enumerate(plans):
            score, cost = _live(plan, bank_dir, task, cache)
            assert score == outcomes.score[i, j], plan.id
            assert cost == pytest.approx(outcomes.cost[i, j]), plan.id


def test_votes_pick_the_majority_of_recorded_answers(bank_dir: Path) -> None:
    bank = read_bank(bank_dir)
    cols = bank.catalogue.columns
    plans = [Plan("v", ("sample1@1.5b", "sample2@1.5b", "sample3@1.5b"))]
    out = plan_outcomes(plans, cols, bank.rows)
    for i, row in enumerate(bank.rows):
        scores = [float(row[f"sample{k}@1.5b"]) for k in (1, 2, 3)]
        assert out.score[i, 0] == (1.0 if sum(scores) >= 2 else 0.0)  # two of three agree on the right answer
        # three samples: three calls (the k-th sample's sub-workflow includes the earlier ones once)
        assert out.cost[i, 0] == pytest.approx(sum(float(row[f"sample{k}@1.5b|step_cost"]) for k in (1, 2, 3)))


def test_a_cascade_escalates_only_when_its_vote_disagrees(bank_dir: Path) -> None:
    bank = read_bank(bank_dir)
    cascade = Plan("c", ("sample1@0.5b", "sample2@0.5b", "sample3@0.5b"), "solve@1.5b", 1.0)
    out = plan_outcomes([cascade], bank.catalogue.columns, bank.rows)
    for i, row in enumerate(bank.rows):
        answers = {row[f"sample{k}@0.5b|model_response"] for k in (1, 2, 3)}
        assert bool(out.escalated[i, 0]) == (len(answers) > 1)
        if len(answers) > 1:
            assert out.score[i, 0] == float(row["solve@1.5b"])


MOT = Plan("mot", ("solve@1.5b", "run(program@1.5b)"), None, 1.0, ("sample1@1.5b", "sample2@1.5b", "sample3@1.5b"))
"""A mixture-of-thought cascade: the 1.5B's direct answer and its program's; when they disagree,
three samples and a vote over all five answers."""


def test_a_cascade_that_adds_answers_votes_over_both_rounds(bank_dir: Path) -> None:
    bank = read_bank(bank_dir)
    cols = bank.catalogue.columns
    out = plan_outcomes([MOT], cols, bank.rows)
    voters = ["run(program@1.5b)", "solve@1.5b", "sample1@1.5b", "sample2@1.5b", "sample3@1.5b"]
    calls = ["program@1.5b", "run(program@1.5b)", "solve@1.5b"]
    for i, row in enumerate(bank.rows):
        agree = tally([row["solve@1.5b|model_response"], row["run(program@1.5b)|model_response"]]).agreement == 1.0
        assert bool(out.escalated[i, 0]) == (not agree)
        steps = calls + (voters[2:] if not agree else [])  # the second round adds three calls
        assert out.cost[i, 0] == pytest.approx(sum(float(row[f"{c}|step_cost"]) for c in steps))
        if agree:
            assert out.score[i, 0] == float(row["solve@1.5b"])
        else:  # the majority of all five answers, ties to the earliest (the program's run first)
            winner = tally([row[f"{v}|model_response"] for v in voters]).winner
            assert out.score[i, 0] == float(row[voters[winner]])
    assert out.escalated.any() and not out.escalated.all()  # the fakes' 1.5B is wrong on odd questions only


def test_a_cascade_either_escalates_or_adds_and_never_repeats_a_step(bank_dir: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        Plan("x", ("solve@0.5b", "solve@135m"), "solve@1.5b", 1.0, ("sample1@1.5b",))
    again = Plan("x", ("solve@1.5b", "run(program@1.5b)"), None, 1.0, ("state@0.5b(program@1.5b)",))
    with pytest.raises(ConfigError, match="again in its second round"):
        plan_outcomes([again], read_bank(bank_dir).catalogue.columns, read_bank(bank_dir).rows)
    assert Plan.from_json(MOT.to_json()) == MOT


def _policy(bank_dir: Path, weights: np.ndarray, plans: list[Plan]) -> PlanPolicy:
    bank = read_bank(bank_dir)
    return PlanPolicy(tuple(plans), bank.catalogue.columns, np.zeros(3), np.zeros((0, 3)), np.ones(0), weights, "fake")


class _Embed:
    name = "fake"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[float(len(t)), 1.0, 0.0] for t in texts])


CHECKED = Plan("checked", ("run(program@0.5b)",), "solve@1.5b", gate="whole-number")
"""A checked cascade: the 0.5B's program's printed answer when it is a whole number, else the
1.5B's direct answer."""


TESTED = Plan("tested", ("run(test@1.5b)",), "solve@0.5b", gate="tests-pass")
"""A tested cascade: the 1.5B's code written with its tests when they pass, else the 0.5B's
direct answer."""


@pytest.mark.parametrize(
    "cascade",
    [Plan("c", ("sample1@0.5b", "sample2@0.5b", "sample3@0.5b"), "solve@1.5b", 1.0), MOT, CHECKED, TESTED],
    ids=["escalates", "adds-answers", "checked", "tested"],
)
def test_the_plan_conductor_runs_a_cascade_through_a_recursion_round(
    bank_dir: Path, tmp_path: Path, cascade: Plan
) -> None:
    """Live over the restored cache (no model call may miss it), the orchestrator's recursion
    round escalates exactly when replay says and ends with the answer replay scores; a cascade
    that adds answers ends with a vote with access ``all`` that sees round 1's steps."""
    bank = read_bank(bank_dir)
    cache = RequestCache(tmp_path / "c.sqlite3")
    restore_cache(bank, _pool()[:4], cache)
    conductor = PlanConductor(_policy(bank_dir, np.zeros((1, 1, 1)), [cascade]), _Embed())
    pool = [CachedWorker(_NoCalls(w), cache) if w.info.name != "vote" else w for w in _pool()]
    orchestrator = Orchestrator(pool, conductor, Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=1))
    out = plan_outcomes([cascade], bank.catalogue.columns, bank.rows)
    for i, task in enumerate(TASKS):
        record = asyncio.run(orchestrator.run(task.question))
        second = record.workflows[1].steps if len(record.workflows) == 2 else ()
        escalated = any(step.subtask != ROLES["vote"].subtask for step in second)  # a tested keep votes
        assert escalated == bool(out.escalated[i, 0])
        assert asyncio.run(verify(task, record.answer)).score == out.score[i, 0]
        if escalated and cascade.adds:
            last = record.steps[-1]
            assert last.access == "all" and len(last.visible_previous) == len(record.workflows[0])


def test_a_cascade_escalates_on_disagreeing_answers_but_not_on_free_text() -> None:
    """The one escalation rule live and replay share (Plan.escalates): numbers that differ
    escalate; two texts with no number, letter or code block cannot be compared, so the vote
    would be no surer after more samples — round 1's answer is kept."""
    assert MOT.escalates(tally(["The answer is 12.", "It prints 13."]))
    assert not MOT.escalates(tally(["The answer is 12.", "The program printed 12."]))
    texts = tally(["Crisp leaves drift and fall", "Autumn wind, bare trees"])
    assert texts.kind == "text" and texts.agreement == 0.5 and not MOT.escalates(texts)
    assert not Plan("one", ("solve@1.5b",)).escalates(tally(["12", "13"]))  # not a cascade


def test_a_checked_cascade_escalates_unless_round_one_answers_a_whole_number(bank_dir: Path) -> None:
    """Gate whole-number: a program that printed 56.0 or -3 has answered; one that printed 10.5
    or 1/2, failed (its traceback's line numbers are no answer) or printed text has not. Replay
    escalates exactly on the fake 0.5B's halved odd questions and scores the 1.5B's answer there."""
    ran = "[python: exit code {}]\nstdout:\n{}\n\nstderr:\n{}"
    for printed in ("56.0", "-3", "The total is 1,200"):
        assert not CHECKED.escalates(tally([ran.format(0, printed, "")])), printed
    failed = (1, "", 'File "x.py", line 3')
    for code, printed, err in [(0, "10.5", ""), (0, "1/2", ""), (0, "", ""), failed, (0, "done", "")]:
        assert CHECKED.escalates(tally([ran.format(code, printed, err)])), (code, printed)
    assert not dataclasses.replace(CHECKED, escalate=None).escalates(tally(["10.5"]))  # not a cascade
    bank = read_bank(bank_dir)
    out = plan_outcomes([CHECKED], bank.catalogue.columns, bank.rows)
    for i, (row, task) in enumerate(zip(bank.rows, TASKS, strict=True)):
        odd = int(task.question.split()[2]) % 2 == 1
        assert bool(out.escalated[i, 0]) == odd
        assert out.score[i, 0] == float(row["solve@1.5b" if odd else "run(program@0.5b)"])
    assert Plan.from_json(CHECKED.to_json()) == CHECKED
    assert Plan.from_json({"id": "c", "members": ["x"], "escalate": "y"}).gate == "agreement"  # files before gates
    with pytest.raises(ValueError, match="unknown gate"):
        Plan("x", ("solve@0.5b",), "solve@1.5b", gate="confidence")  # type: ignore[arg-type]


def test_a_tested_cascade_keeps_the_code_whose_tests_pass_and_escalates_the_rest(bank_dir: Path) -> None:
    """Gate tests-pass: the fake's code fails its own assertion on multiples of 3 (3 and 6); there
    replay scores the escalation (the 0.5B's answer), elsewhere the tested code — not the run's
    printed output — and pays for the code and its run only."""
    bank = read_bank(bank_dir)
    out = plan_outcomes([TESTED], bank.catalogue.columns, bank.rows)
    for i, (row, task) in enumerate(zip(bank.rows, TASKS, strict=True)):
        failed = int(task.question.split()[2]) % 3 == 0
        assert bool(out.escalated[i, 0]) == failed
        assert out.score[i, 0] == float(row["solve@0.5b" if failed else "test@1.5b"])
        paid = ["test@1.5b", "run(test@1.5b)"] + (["solve@0.5b"] if failed else [])
        assert out.cost[i, 0] == pytest.approx(sum(float(row[f"{c}|step_cost"]) for c in paid))
    ran = "[python: exit code {}]\nstdout:\n21\n\nstderr:\n{}"
    assert not TESTED.escalates(tally([ran.format(0, "")]), [ran.format(0, "")])
    assert TESTED.escalates(tally([ran.format(1, "AssertionError")]), [ran.format(1, "AssertionError")])
    assert TESTED.escalates(tally(["21"]), ["21"])  # no sandbox report: no test ran
    wrong = Plan("w", ("test@1.5b",), "solve@0.5b", gate="tests-pass")
    with pytest.raises(ConfigError, match="no run of code"):
        plan_outcomes([wrong], bank.catalogue.columns, bank.rows)


def test_an_open_question_runs_one_round_of_a_cascade(bank_dir: Path) -> None:
    """Live: a haiku request under the mixture-of-thought cascade runs round 1 (a direct answer,
    a program and its run) and keeps the direct answer; no sample is drawn."""
    poem = "Crisp leaves drift and fall\nthe maple lets go of red\nwind counts what remains"

    def reply(messages: Sequence[dict[str, str]]) -> str:
        subtask = messages[-1]["content"].rsplit("<your_subtask>", 1)[1]
        return "```python\nprint('Autumn wind, bare trees')\n```" if "Python program" in subtask else poem

    strong = ScriptedWorker("qwen2.5-coder-1.5b", reply)
    pool: list[Worker] = [strong, *_pool()[1:3], PythonToolWorker("python"), VoteToolWorker("vote")]
    conductor = PlanConductor(_policy(bank_dir, np.zeros((1, 1, 1)), [MOT]), _Embed())
    orchestrator = Orchestrator(pool, conductor, Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=1))
    record = asyncio.run(orchestrator.run("Write a haiku about autumn."))
    assert record.answer == poem
    assert len(strong.calls) == 2  # the direct answer and the program; no samples
    assert len(record.workflows) == 2 and len(record.workflows[1]) == 0
    assert "free text" in record.attempts[-1].raw_output


def test_the_untrained_policy_does_not_depend_on_the_order_of_its_plans(bank_dir: Path) -> None:
    plans = local_plans(read_bank(bank_dir).catalogue.columns)
    forward = PlanConductor(_policy(bank_dir, np.zeros((1, len(plans), 1)), plans), _Embed())
    backward = PlanConductor(_policy(bank_dir, np.zeros((1, len(plans), 1)), plans[::-1]), _Embed())
    pool = _pool()
    for task in TASKS:
        assert forward.choose(task.question, pool, 10)[0].id == backward.choose(task.question, pool, 10)[0].id


def test_a_pool_without_the_vote_tool_only_gets_single_column_plans(bank_dir: Path) -> None:
    plans = local_plans(read_bank(bank_dir).catalogue.columns)
    weights = np.zeros((1, len(plans), 1))
    weights[0, next(i for i, p in enumerate(plans) if len(p.members) > 1), 0] = 5.0  # prefers a vote
    conductor = PlanConductor(_policy(bank_dir, weights, plans), _Embed())
    chosen, workflow = conductor.choose("What is 2 * 7?", _pool()[:4], 10)
    assert len(chosen.members) == 1 and len(workflow) >= 1
    with pytest.raises(ConfigError, match="none of its plans"):
        conductor.choose("What is 2 * 7?", [ScriptedWorker("other")], 10)


def test_policy_files_round_trip(bank_dir: Path, tmp_path: Path) -> None:
    plans = local_plans(read_bank(bank_dir).catalogue.columns)
    rng = np.random.default_rng(0)
    policy = PlanPolicy(
        tuple(plans), read_bank(bank_dir).catalogue.columns, rng.normal(size=3), rng.normal(size=(2, 3)),
        np.ones(2), rng.normal(size=(3, len(plans), 3)), "fake",
    )  # fmt: skip
    policy.save(tmp_path / "p.npz")
    again = PlanPolicy.load(tmp_path / "p.npz")
    assert again.plans == policy.plans and again.columns == policy.columns
    x = policy.features(_Embed().embed(["What is 3 * 7?"]))
    assert np.allclose(again.scores(x), policy.scores(x))
    (tmp_path / "bad.npz").write_bytes(b"nope")
    with pytest.raises(ConfigError, match="not a plan policy"):
        PlanPolicy.load(tmp_path / "bad.npz")


def test_replaying_a_plans_workflow_step_by_step_agrees_with_the_plan_arrays(bank_dir: Path) -> None:
    """The LM conductor's rollouts are replayed step by step (replay_workflow): on the plans'
    own workflows it must give exactly what plan_outcomes gives."""
    from podium.conductor.compose import plan_workflow
    from podium.eval.plans import replay_workflow

    bank = read_bank(bank_dir)
    cols = bank.catalogue.columns
    plans = [p for p in local_plans(cols) if not p.is_cascade]
    outcomes = plan_outcomes(plans, cols, bank.rows)
    for j, plan in enumerate(plans):
        workflow = plan_workflow(plan.members, cols, NAMES, vote_worker="vote")
        for i, row in enumerate(bank.rows):
            replayed = replay_workflow(workflow, NAMES, row, cols)
            assert replayed is not None, plan.id
            assert replayed.score == outcomes.score[i, j] and replayed.cost == pytest.approx(outcomes.cost[i, j])


def test_steps_the_bank_never_recorded_are_not_replayable(bank_dir: Path) -> None:
    from podium.eval.plans import replay_workflow
    from podium.roles import subtask
    from podium.workflow import Step, Workflow

    bank = read_bank(bank_dir)
    cols, row = bank.catalogue.columns, bank.rows[0]
    free = Workflow((Step(0, "Solve it please.", ()),))
    assert replay_workflow(free, NAMES, row, cols) is None  # not a role template
    unrecorded = Workflow((Step(2, subtask("verify"), ()),))  # the 135M never verified anything
    assert replay_workflow(unrecorded, NAMES, row, cols) is None
    shifted = Workflow(  # state sees program and run at indices 1, 2: its recorded request saw 0, 1
        (Step(0, subtask("solve"), ()), Step(0, subtask("program"), ()), Step(3, subtask("run"), (1,)),
         Step(1, subtask("state"), (1, 2)))
    )  # fmt: skip
    assert replay_workflow(shifted, NAMES, row, cols) is None
    ok = Workflow((Step(0, subtask("program"), ()), Step(3, subtask("run"), (0,)), Step(1, subtask("state"), (0, 1))))
    replayed = replay_workflow(ok, NAMES, row, cols)
    assert replayed is not None and replayed.columns[-1] == "state@0.5b(program@1.5b)"


def test_grpo_rewards_on_a_bank_score_multi_step_workflows_exactly(bank_dir: Path) -> None:
    """GRPO's reward on a bank: a sampled workflow that repeats recorded steps scores as the
    plan arrays say (0.5 + 0.5·score − λ·cost); one that does not is unscored (0); the warm
    start's random targets are such workflows."""
    import random

    from podium.conductor.compose import plan_workflow
    from podium.train.sources import BankSource

    bank = read_bank(bank_dir)
    cols = bank.catalogue.columns
    source = BankSource(bank, {n: f"worker {n}" for n in NAMES})
    shown = ["vote", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "python", "smollm2-135m"]  # any order
    plan = next(p for p in local_plans(cols) if p.id == "vote(run(program@1.5b),solve@1.5b,solve@0.5b)")
    outcomes = plan_outcomes([plan], cols, bank.rows)
    text = "Reasoning: x\n" + plan_workflow(plan.members, cols, shown, vote_worker="vote").lists_text()
    for i, row in enumerate(bank.rows):
        reward, parts = source.reward(text, shown, row["sample_id"], lam=10.0, mu=0.0, max_steps=6)
        assert reward == pytest.approx(0.5 + 0.5 * outcomes.score[i, 0] - 10.0 * outcomes.cost[i, 0])
        assert parts["replayable"] and parts["steps"] == 5
    free = 'model_id = [2]\nsubtasks = ["Think hard."]\naccess_list = [[]]'
    assert source.reward(free, shown, bank.rows[0]["sample_id"], lam=0, mu=0, max_steps=5)[0] == 0.0
    rng = random.Random(0)
    for _ in range(20):
        target = source.target(shown, 5, rng)
        assert target is not None
        reward, parts = source.reward(target, shown, bank.rows[0]["sample_id"], lam=0, mu=0, max_steps=5)
        assert parts.get("replayable") and reward >= 0.5


@pytest.mark.model
@pytest.mark.timeout(2400)  # a hang guard: CPU training takes ~5 min alone, >15 min on a loaded machine
def test_grpo_on_a_bank_smoke(
    bank_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """CI smoke run of GRPO on a workflow bank (SmolLM2-135M, LoRA): the warm start writes random
    role compositions, one GRPO step of two short rollouts runs, the rewards come from the bank's
    step replay, and the version records that it writes role instructions. It checks the loop
    runs — not that anything was learned."""
    import json

    from podium.cli import cli

    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    args = ["train", "--policy", "lm", "--replay", str(bank_dir), "--steps", "1", "--questions-per-step", "1"]
    args += ["--num-generations", "2", "--max-completion-tokens", "8", "--json"]
    assert cli(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["config"]["roles"] is True and len(record["history"]) == 1
    step = record["history"][0]
    assert 0.0 <= step["replay_rate"] <= step["parse_rate"] <= 1.0
    assert len(record["warm_start_loss"]) == 3  # 6 questions, 2 per batch


class _Loads(_Fake):
    """A fake worker (unit-test double) that says it loads a model on first use, as the
    in-process llama.cpp worker does, and records when :meth:`preload` ran."""

    def __init__(self, name: str) -> None:
        super().__init__(name, price=Price(1.0, 1.0))
        self.preloaded_by: list[str] = []

    @property
    def loaded(self) -> bool:
        return bool(self.preloaded_by)

    def preload(self) -> None:
        self.preloaded_by.append(threading.current_thread().name)


def test_the_models_every_plan_calls_load_while_the_question_is_embedded(bank_dir: Path) -> None:
    """Both plans call the 1.5B, only one the 0.5B: the 1.5B is loaded ahead, in another thread,
    the 0.5B is not; behind the request cache nothing is (a hit needs no model); a loaded
    model is not loaded again."""
    plans = [Plan("one", ("solve@1.5b",)), Plan("two", ("solve@0.5b", "solve@1.5b"), "solve@1.5b", 1.0)]
    policy = _policy(bank_dir, np.zeros((1, 2, 2)), plans)
    policy = dataclasses.replace(policy, components=np.ones((1, 3)), scale=np.ones(1))
    assert policy.reads_question
    strong, small = _Loads("qwen2.5-coder-1.5b"), _Loads("qwen2.5-coder-0.5b")
    conductor = PlanConductor(policy, _Embed())
    conductor.choose("What is 2 * 7?", [strong, small, *_pool()[2:]], 10)
    for thread in threading.enumerate():
        if thread.name == "podium-preload":
            thread.join(5)
    assert strong.preloaded_by == ["podium-preload"] and small.preloaded_by == []
    conductor.choose("What is 3 * 7?", [strong, small, *_pool()[2:]], 10)
    assert strong.preloaded_by == ["podium-preload"]  # loaded already
    behind_cache = _Loads("qwen2.5-coder-1.5b")
    cached = CachedWorker(behind_cache, RequestCache(":memory:"))
    conductor.choose("What is 4 * 7?", [cached, small, *_pool()[2:]], 10)
    assert behind_cache.preloaded_by == []


def test_a_cluster_policy_reaches_each_clusters_best_plan_and_its_fallback(bank_dir: Path) -> None:
    plans = local_plans(read_bank(bank_dir).catalogue.columns)[:4]
    weights = np.zeros((1, 4, 3))
    weights[0, 0, 0] = weights[0, 1, 1] = 1.0  # cluster 0 -> plan 0, cluster 1 -> plan 1; plan 3 never
    policy = dataclasses.replace(
        _policy(bank_dir, weights, plans), centroids=np.eye(3)[:2], support=np.eye(3, dtype=np.float32)[:2],
        radius=0.1, fallback=2,
    )  # fmt: skip
    assert policy.reachable([True] * 4) == [0, 1, 2]
    assert policy.reachable([False, True, True, True]) == [1, 2, 3]  # cluster 0's best not runnable: all tie at 0
    assert dataclasses.replace(policy, fallback=-1).reachable([True] * 4) == [0, 1]


def test_the_plan_conductor_keeps_the_answer_of_a_plan_that_is_no_cascade(bank_dir: Path) -> None:
    """What lets the default serve model stream: a review round can replace only a cascade's
    first-round answer, so any other plan's answer streams live."""
    solve = Plan("solve@1.5b", ("solve@1.5b",))
    conductor = PlanConductor(_policy(bank_dir, np.zeros((1, 2, 1)), [solve, MOT]), _Embed())
    pool = [*_pool()[:3], PythonToolWorker("python"), VoteToolWorker("vote")]
    direct, cascade = conductor._workflows(pool, 10)
    assert direct is not None and cascade is not None
    assert conductor.keeps_answer(direct, pool, 10) and not conductor.keeps_answer(cascade, pool, 10)
