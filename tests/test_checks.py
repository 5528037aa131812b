"""Checks: code run with the tests the question states, and the vote that keeps what passed them
(generate, then filter; the ``check`` role, the Python tool, :func:`podium.answers.vote`, the
``local-checked`` catalogue and its checked cascades).

The bank here is recorded by podium's real recorder over fake model workers (unit-test doubles
whose code is right or wrong by the question and the sample seed) and the real Python sandbox;
live execution runs through the real orchestrator, plan conductor and request cache, restored
from the bank's files alone, so replay and live must agree on every question."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from podium.answers import checked_code, code_fingerprint, vote
from podium.conductor.catalogue import local_plans
from podium.conductor.compose import Plan
from podium.conductor.plans import PlanConductor, PlanPolicy
from podium.errors import ConfigError
from podium.eval.bank import local_catalogue, read_bank
from podium.eval.plans import load_source, plan_outcomes, replay_workflow
from podium.eval.record import record_bank, restore_cache
from podium.eval.tasks import Task
from podium.eval.verifiers import verify
from podium.messages import GrantedStep, neutralise, worker_messages
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.roles import ROLES, subtask
from podium.store.request_cache import RequestCache
from podium.testing import ScriptedWorker
from podium.workers.base import Call, Completion, Price, Worker
from podium.workers.cache import CachedWorker
from podium.workers.python_tool import PythonToolWorker, question_tests
from podium.workers.vote_tool import VoteToolWorker
from tests.test_plans import NAMES, _Embed, _NoCalls


def _question(k: int) -> str:
    tests = f"assert f(1) == {k}\nassert f(3) == {3 * k}"
    return f"Write a function f(x) that returns x times {k}.\nYour code should pass these tests:\n{tests}"


TASKS = [
    Task(
        id=f"c/{k}",
        question=_question(k),
        task_type="code",
        tests=f"assert f(2) == {2 * k}",
        split="train",
        source="toy",
    )
    for k in range(2, 8)
]


def _code(k: int, right: bool) -> str:
    return f"```python\ndef f(x):\n    return x * {k}{'' if right else ' + 1'}\n```"


class _Coder(ScriptedWorker):
    """Code right or wrong by the question's k: the 1.5B's tested code is wrong (and fails its
    own asserts) on multiples of 3; a sample is right when k + its seed is even; the 0.5B's
    direct answer is right on odd k (unit-test double)."""

    async def complete(self, call: Call) -> Completion:
        text = call.messages[-1]["content"]
        k = int(text.split("returns x times ", 1)[1].split(".", 1)[0])
        subtask_text = text.rsplit("<your_subtask>", 1)[1]
        seed = call.settings_for(self).seed
        if "assert statements" in subtask_text:
            right = k % 3 != 0
            self.reply = _code(k, right)[:-4] + f"\nassert f(1) == {k}\n```"
        elif seed:
            self.reply = _code(k, (k + seed) % 2 == 0)
        else:
            self.reply = _code(k, k % 2 == 1 if self.name.endswith("0.5b") else k % 3 != 0)
        return await super().complete(call)


def _pool() -> list[Worker]:
    prices = {"qwen2.5-coder-1.5b": 2.0, "qwen2.5-coder-0.5b": 1.0, "smollm2-135m": 0.5}
    models: list[Worker] = [_Coder(n, price=Price(p, p)) for n, p in prices.items()]
    return [*models, PythonToolWorker("python"), VoteToolWorker("vote")]


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("checked-bank")
    record_bank(local_catalogue(name="local-checked"), TASKS, _pool()[:4], folder, score=verify)
    return folder


def _check(question: str, answer: str) -> str:
    messages = worker_messages(question, [GrantedStep(0, subtask("sample"), answer)], subtask("check"))
    return asyncio.run(PythonToolWorker("python").complete(Call(messages))).text


def test_a_check_runs_the_code_it_sees_with_the_questions_own_tests() -> None:
    passed, failed = _check(_question(4), _code(4, True)), _check(_question(4), _code(4, False))
    assert passed.startswith("[python: exit code 0]") and checked_code(passed) == code_fingerprint(
        "def f(x):\n    return x * 4"
    )
    assert "AssertionError" in failed and checked_code(failed) is None
    # no test in the question: nothing runs, and nothing passes
    untested = _check("Write a function f(x) that returns x times 4.", _code(4, True))
    assert checked_code(untested) is None and "states no tests" in untested
    # a plain run step still never runs the question's code
    messages = worker_messages(_question(4), [GrantedStep(0, subtask("sample"), _code(4, False))], subtask("run"))
    assert asyncio.run(PythonToolWorker("python").complete(Call(messages))).text.startswith("[python: exit code 0]")


def test_without_asserts_the_questions_examples_are_the_tests() -> None:
    question = 'def double(x):\n    """Twice x.\n    >>> double(2)\n    4\n    >>> double(-1)\n    -2\n    """\n'
    assert question_tests(question) is not None and question_tests("What is 2 + 2?") is None
    right = "```python\ndef double(x):\n    return 2 * x\n```"
    wrong = "```python\ndef double(x):\n    return x + 2\n```"
    assert checked_code(_check(question, right)) is not None
    assert checked_code(_check(question, wrong)) is None


def test_the_vote_counts_only_answers_whose_check_passed_when_one_did() -> None:
    wrong, right = _code(5, False), _code(5, True)
    answers = [wrong, wrong, right]
    checks = [_check(_question(5), a) for a in answers]
    assert vote(answers, checks) == 2  # the majority is wrong, but only the right code passed
    assert vote(answers, checks[:2]) == 0  # no check passed: the plain majority
    assert vote(answers) == 0
    # what a worker's message shows (framing neutralised) and the raw recorded text agree
    tagged = "```python\ndef f(x):\n    s = '<question>'\n    return x * 5\n```"
    assert code_fingerprint(neutralise(tagged)) == code_fingerprint(tagged)


def test_a_checked_cascade_never_votes_for_the_code_that_failed_its_own_asserts() -> None:
    """Round 2 runs only when round 1's code failed its own asserts, which it carries, so as
    delivered it raises: the second vote counts round 2's answers alone (live: its access list;
    replay: :func:`vote_order`). Here no check can run (the question states no tests) and the
    three codes differ: a vote over both rounds would take the earliest, the failed code (score 0);
    this one takes the 1.5B's new sample (score 1). The mixture-of-thought cascade still votes
    over both rounds."""
    from podium.conductor.compose import second_round_workflow, vote_order
    from podium.workflow import ALL

    columns = local_catalogue(name="local-checked").columns
    plans = {p.id: p for p in local_plans(columns)}
    checked = plans["check(run(test@1.5b))→checked(sample1@1.5b,solve@0.5b)"]
    mot = plans["cascade(vote(solve@1.5b,run(program@1.5b))→+sample×3@1.5b)"]
    second = second_round_workflow(checked, columns, NAMES, vote_worker="vote")
    assert [s.access for s in second.steps][-1] == (0, 1, 2, 3)  # sample, its check, 0.5B, its check
    assert vote_order(checked, columns) == ["sample1@1.5b", "solve@0.5b"]
    assert second_round_workflow(mot, columns, NAMES, vote_worker="vote").steps[-1].access == ALL
    assert set(vote_order(mot, columns)[:2]) == {"solve@1.5b", "run(program@1.5b)"}  # round 1 counts

    def code(body: str) -> str:
        return f"```python\ndef f(x):\n    return {body}\n```"

    not_run = "[python: not run: the question states no tests]\nstdout:\n\nstderr:\n"
    row = {
        "sample_id": "toy/1",
        "test@1.5b": "0",
        "test@1.5b|model_response": code("x * 2") + "\nassert f(1) == 3",
        "run(test@1.5b)": "0",
        "run(test@1.5b)|model_response": "[python: exit code 1]\nstdout:\n\nstderr:\nAssertionError",
        "sample1@1.5b": "1",
        "sample1@1.5b|model_response": code("x * 3"),
        "check(sample1@1.5b)": "0",
        "check(sample1@1.5b)|model_response": not_run,
        "solve@0.5b": "0",
        "solve@0.5b|model_response": code("x + 3"),
        "check(solve@0.5b)": "0",
        "check(solve@0.5b)|model_response": not_run,
    }
    out = plan_outcomes([checked], columns, [row])
    assert bool(out.escalated[0, 0]) and out.score[0, 0] == 1.0


@pytest.mark.slow  # the recorded bank runs ~100 sandboxed programs (~10 s)
def test_checked_plans_exist_only_on_a_bank_with_checks(bank_dir) -> None:  # type: ignore[no-untyped-def]
    checked = read_bank(bank_dir).catalogue.columns
    assert {c for c in checked if ROLES[checked[c].role].name == "check"} == {
        "check(sample1@1.5b)", "check(sample2@1.5b)", "check(sample3@1.5b)", "check(solve@0.5b)"
    }  # fmt: skip
    _, _, _, plans = load_source(bank_dir)  # what training and replay read from the bank
    assert [p.id for p in plans] == [p.id for p in local_plans(checked)]
    ids = {p.id for p in plans} - {p.id for p in local_plans(local_catalogue().columns)}
    assert ids == {
        "check(run(test@1.5b))→checked(sample1@1.5b,solve@0.5b)",
        "check(run(test@1.5b))→checked(sample1@1.5b,sample2@1.5b,sample3@1.5b)",
    }


def test_an_unknown_catalogue_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="local, local-checked"):
        local_catalogue(name="checked")


def _checked_plans(bank_dir) -> list[Plan]:  # type: ignore[no-untyped-def]
    columns = read_bank(bank_dir).catalogue.columns
    return [p for p in local_plans(columns) if "checked(" in p.id]


@pytest.mark.slow  # the recorded bank runs ~100 sandboxed programs (~10 s)
def test_a_checked_cascade_keeps_passing_tested_code_else_votes_among_checked_answers(bank_dir) -> None:  # type: ignore[no-untyped-def]
    """k = 3 and 6 fail the tested code's own asserts. k = 3: sample 1 (seed 1: 3 + 1 even) is
    right and passes, so both plans answer right. k = 6: sample 1 and the 0.5B are wrong and no
    check passes, so the one-sample plan takes the plain majority (wrong); sample 2 (seed 2) is
    right and the only answer that passes, so the three-sample plan answers right."""
    bank = read_bank(bank_dir)
    small, large = _checked_plans(bank_dir)
    out = plan_outcomes([small, large], bank.catalogue.columns, bank.rows)
    by_k = {int(r["sample_id"].split("/")[1]): i for i, r in enumerate(bank.rows)}
    for k, i in by_k.items():
        assert bool(out.escalated[i, 0]) == bool(out.escalated[i, 1]) == (k % 3 == 0)
        if k % 3:
            assert out.score[i, 0] == out.score[i, 1] == 1.0
    assert list(out.score[by_k[3]]) == [1.0, 1.0]
    assert list(out.score[by_k[6]]) == [0.0, 1.0]
    row = bank.rows[by_k[6]]
    paid = ["test@1.5b", "run(test@1.5b)", "sample1@1.5b", "check(sample1@1.5b)", "solve@0.5b", "check(solve@0.5b)"]
    assert out.cost[by_k[6], 0] == pytest.approx(sum(float(row[f"{c}|step_cost"]) for c in paid))


@pytest.mark.slow  # the recorded bank runs ~100 sandboxed programs (~10 s)
def test_live_and_replay_agree_on_checked_cascades(bank_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Live over the restored cache (no model call may miss it), the plan conductor's recursion
    round runs the samples, their checks and a vote over them, and ends with the answer
    the replay scores; replaying the live round-2 workflow step by step picks the same column.
    The tools run for real: a check sees its answer at another step index than it was recorded
    with (its request differs), and the sandbox gives the same report."""
    bank = read_bank(bank_dir)
    cache = RequestCache(tmp_path / "c.sqlite3")
    restore_cache(bank, _pool()[:4], cache)
    pool = [CachedWorker(_NoCalls(w), cache) if w.info.kind != "tool" else w for w in _pool()]
    columns = bank.catalogue.columns
    for plan in _checked_plans(bank_dir):
        policy = PlanPolicy((plan,), columns, np.zeros(3), np.zeros((0, 3)), np.ones(0), np.zeros((1, 1, 1)), "fake")
        orchestrator = Orchestrator(
            pool,
            PlanConductor(policy, _Embed()),
            Fallback(0, "Answer."),
            config=OrchestratorConfig(max_steps=7, recursion_rounds=1),
        )
        out = plan_outcomes([plan], columns, bank.rows)
        for i, task in enumerate(TASKS):
            record = asyncio.run(orchestrator.run(task.question))
            assert record.status == "ok", record.error
            assert asyncio.run(verify(task, record.answer)).score == out.score[i, 0], (plan.id, task.id)
            assert (len(record.workflows[1].steps) > 1) == bool(out.escalated[i, 0])
            if out.escalated[i, 0]:
                second = record.workflows[1]
                replayed = replay_workflow(second, NAMES, bank.rows[i], columns)
                assert replayed is not None and replayed.score == out.score[i, 0]
