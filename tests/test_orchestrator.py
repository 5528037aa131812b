"""The orchestrator with a scripted fake conductor and fake workers (no model).

These are unit tests with fakes, by design: they pin the access-list boundary on the exact
messages, the re-sample → fallback path, and that every request leaves one complete trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from podium.errors import ContextOverflow, InvalidQuestion, ModelNotInstalled, ProviderError
from podium.messages import worker_messages
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Call, Completion, Message
from podium.workflow import Step

VALID_3 = (
    "Reasoning: draft, independent draft, then combine.\n"
    "model_id = [0, 1, 2]\n"
    'subtasks = ["Draft A.", "Draft B.", "Combine the drafts."]\n'
    "access_list = [[], [], [1]]"
)


def secret_worker(name: str) -> ScriptedWorker:
    """A worker whose output carries a unique marker, so leaks are detectable."""
    return ScriptedWorker(name, reply=f"SECRET-FROM-{name}")


def make(
    conductor: ScriptedConductor,
    workers: Sequence[ScriptedWorker],
    tmp_path: Path | None = None,
    resamples: int = 2,
    fallback: int = 0,
    rounds: int = 0,
) -> Orchestrator:
    traces = TraceStore(tmp_path / "traces.sqlite3") if tmp_path else None
    return Orchestrator(
        workers,
        conductor,
        Fallback(fallback, "Answer directly."),
        traces=traces,
        config=OrchestratorConfig(resamples=resamples, pool_name="fake", recursion_rounds=rounds),
    )


def test_access_list_is_enforced_on_the_exact_messages(tmp_path: Path) -> None:
    w = [secret_worker("w0"), secret_worker("w1"), secret_worker("w2")]
    record = asyncio.run(make(ScriptedConductor([VALID_3]), w, tmp_path).run("Q?"))
    assert record.status == "ok"
    # step 2 sees step 1 only: it must never receive step 0's output or subtask.
    (final_call,) = w[2].calls
    text = "\n".join(m["content"] for m in final_call)
    assert "SECRET-FROM-w1" in text and "Draft B." in text
    assert "SECRET-FROM-w0" not in text and "Draft A." not in text
    # and the message is exactly the one docs/design.md prescribes for (question, granted, subtask)
    assert final_call == worker_messages("Q?", [_granted(1, "Draft B.", "SECRET-FROM-w1")], "Combine the drafts.")
    # steps 0 and 1 have access [] and see no earlier output at all
    for worker in w[:2]:
        assert "SECRET-FROM" not in worker.calls[0][0]["content"]
    assert record.answer == "SECRET-FROM-w2"
    assert [s.visible for s in record.steps] == [(), (), (1,)]


def _granted(index: int, subtask: str, output: str):  # type: ignore[no-untyped-def]
    from podium.messages import GrantedStep

    return GrantedStep(index, subtask, output)


def test_access_all_sees_every_earlier_step() -> None:
    plan = 'model_id = [0, 0, 1]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], "all", "all"]'
    w = [secret_worker("w0"), secret_worker("w1")]
    record = asyncio.run(make(ScriptedConductor([plan]), w).run("Q?"))
    assert [s.visible for s in record.steps] == [(), (0,), (0, 1)]
    last = w[1].calls[0][0]["content"]
    assert last.count("SECRET-FROM-w0") == 2


def test_invalid_plans_are_resampled_then_fallback_runs(tmp_path: Path) -> None:
    conductor = ScriptedConductor(["no lists here", "model_id = [7]\nsubtasks = ['x']\naccess_list = [[]]"])
    w = [ScriptedWorker("w0", reply="fallback answer"), ScriptedWorker("w1")]
    orch = make(conductor, w, tmp_path, resamples=2)
    record = asyncio.run(orch.run("Q?"))
    assert len(conductor.questions) == 3  # 1 + 2 re-samples
    assert [a.error_kind for a in record.attempts] == ["missing_field", "unknown_worker", "unknown_worker"]
    assert record.status == "fallback"
    assert record.fallback is not None and record.fallback.reason == "invalid_plan"
    assert record.answer == "fallback answer"
    assert [(s.phase, s.worker) for s in record.steps] == [("fallback", "w0")]
    assert w[1].calls == []
    stored = TraceStore(tmp_path / "traces.sqlite3").get(record.id)
    assert stored == record


def test_a_valid_resample_is_used_without_fallback() -> None:
    conductor = ScriptedConductor(["garbage", 'model_id = [1]\nsubtasks = ["Solve."]\naccess_list = [[]]'])
    w = [ScriptedWorker("w0"), ScriptedWorker("w1", reply="42")]
    record = asyncio.run(make(conductor, w).run("Q?"))
    assert record.status == "ok" and record.answer == "42"
    assert len(record.attempts) == 2 and record.fallback is None


def test_worker_error_triggers_fallback_and_keeps_the_failed_step() -> None:
    plan = 'model_id = [1, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], "all"]'
    w = [ScriptedWorker("w0", reply="rescued"), ScriptedWorker("w1", error=ProviderError("boom", worker="w1"))]
    record = asyncio.run(make(ScriptedConductor([plan]), w).run("Q?"))
    assert record.status == "fallback"
    assert record.fallback is not None and record.fallback.reason == "worker_error"
    assert [(s.phase, s.index, s.error is not None) for s in record.steps] == [
        ("workflow", 0, True),
        ("fallback", 0, False),
    ]
    # step 1 never ran: w0 was called once, by the fallback
    assert len(w[0].calls) == 1
    assert record.answer == "rescued"


def test_empty_final_output_triggers_fallback() -> None:
    plan = 'model_id = [1]\nsubtasks = ["a"]\naccess_list = [[]]'
    w = [ScriptedWorker("w0", reply="from fallback"), ScriptedWorker("w1", reply="   ")]
    record = asyncio.run(make(ScriptedConductor([plan]), w).run("Q?"))
    assert record.fallback is not None and record.fallback.reason == "empty_output"
    assert record.answer == "from fallback"


def test_failing_fallback_ends_with_a_clear_error_and_a_trace(tmp_path: Path) -> None:
    w = [ScriptedWorker("w0", error=ProviderError("down", worker="w0"))]
    record = asyncio.run(make(ScriptedConductor(["nothing"]), w, tmp_path, resamples=0).run("Q?"))
    assert record.status == "error" and record.answer == ""
    assert record.error is not None and "down" in record.error
    assert TraceStore(tmp_path / "traces.sqlite3").get(record.id) == record


def test_totals_add_up_and_separate_the_conductor() -> None:
    w = [ScriptedWorker("w0", reply="aaaa" * 10), ScriptedWorker("w1", reply="bbbb" * 5), ScriptedWorker("w2")]
    record = asyncio.run(make(ScriptedConductor([VALID_3], cost_usd=0.5), w).run("Q?"))
    t = record.totals
    assert t.worker_calls == 3
    assert t.output_tokens == 10 + 5 + 1  # fake_tokens: len/4, at least 1
    assert t.cost_usd == pytest.approx(sum(s.cost_usd for s in record.steps))
    assert t.conductor_cost_usd == 0.5 and t.conductor_calls == 1
    assert t.total_cost_usd == pytest.approx(t.cost_usd + 0.5)


def test_independent_steps_overlap_and_dependent_ones_wait() -> None:
    log: list[str] = []

    def replying(name: str):  # type: ignore[no-untyped-def]
        def reply(messages: Sequence[Message]) -> str:
            log.append(f"end {name}")
            return name

        return reply

    class Logged(ScriptedWorker):
        async def complete(self, call: Call) -> Completion:
            log.append(f"start {self.name}")
            return await super().complete(call)

    w = [
        Logged("a", reply=replying("a"), delay_s=0.05),
        Logged("b", reply=replying("b"), delay_s=0.05),
        Logged("c", reply=replying("c")),
    ]
    asyncio.run(make(ScriptedConductor([VALID_3]), w).run("Q?"))
    # a and b (both access []) start before either ends; c (sees 1) starts after b ends.
    assert log.index("start b") < log.index("end a")
    assert log.index("start c") > log.index("end b")


@pytest.mark.parametrize("question", ["", "   \n", "x" * 20_001])
def test_bad_questions_are_refused_before_any_work(question: str, tmp_path: Path) -> None:
    conductor = ScriptedConductor([VALID_3])
    w = [ScriptedWorker("w0"), ScriptedWorker("w1"), ScriptedWorker("w2")]
    with pytest.raises(InvalidQuestion):
        asyncio.run(make(conductor, w, tmp_path).run(question))
    assert conductor.questions == [] and all(x.calls == [] for x in w)


def test_plan_mode_executes_nothing(tmp_path: Path) -> None:
    w = [ScriptedWorker("w0"), ScriptedWorker("w1"), ScriptedWorker("w2")]
    record = asyncio.run(make(ScriptedConductor([VALID_3]), w, tmp_path).run("Q?", mode="plan"))
    assert record.mode == "plan" and record.workflow is not None and record.steps == ()
    assert all(x.calls == [] for x in w)


def test_a_fallback_worker_that_is_not_set_up_raises_and_its_step_stays_in_the_trace(tmp_path: Path) -> None:
    """A setup problem (here a model not installed) is raised for the user to fix, not fallen back
    from; the fallback step that hit it is still in the request's one trace."""
    missing = ModelNotInstalled("model w0 is not installed", model="w0", install_command="podium models install")
    w = [ScriptedWorker("w0", error=missing)]
    orch = make(ScriptedConductor(["nothing"]), w, tmp_path, resamples=0)
    with pytest.raises(ModelNotInstalled):
        asyncio.run(orch.run("Q?"))
    (summary,) = TraceStore(tmp_path / "traces.sqlite3").list()
    stored = TraceStore(tmp_path / "traces.sqlite3").get(summary.id)
    assert stored is not None and stored.status == "error"
    assert [(s.phase, s.error_type) for s in stored.steps] == [("fallback", "ModelNotInstalled")]


def test_a_workflow_step_over_its_window_falls_back_but_a_missing_model_in_a_step_is_raised(tmp_path: Path) -> None:
    """The rule is on the error classes (``fallback_reason``): a ContextOverflow is a ConfigError
    yet a step failure (the plan granted a step more than its worker holds: ``worker_error``),
    while any other ConfigError in a step, such as a model that is not installed, is raised."""
    overflow = ContextOverflow("w1: the prompt is 5000 tokens", worker="w1", prompt_tokens=5000, n_ctx=4096)
    w = [ScriptedWorker("w0"), ScriptedWorker("w1", error=overflow), ScriptedWorker("w2")]
    record = asyncio.run(make(ScriptedConductor([VALID_3]), w, tmp_path).run("Q?"))
    assert record.status == "fallback" and record.fallback is not None
    assert record.fallback.reason == "worker_error"
    assert "ContextOverflow" in {s.error_type for s in record.steps}
    missing = ModelNotInstalled("model w1 is not installed", model="w1", install_command="podium models install")
    w = [ScriptedWorker("w0"), ScriptedWorker("w1", error=missing), ScriptedWorker("w2")]
    with pytest.raises(ModelNotInstalled):
        asyncio.run(make(ScriptedConductor([VALID_3]), w).run("Q?"))


def test_an_unexpected_crash_still_leaves_a_trace(tmp_path: Path) -> None:
    class Broken(ScriptedWorker):
        async def complete(self, call: Call) -> Completion:
            raise ZeroDivisionError("bug")

    orch = make(ScriptedConductor(['model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]']), [Broken("w0")], tmp_path)
    with pytest.raises(ZeroDivisionError):
        asyncio.run(orch.run("Q?"))
    (summary,) = TraceStore(tmp_path / "traces.sqlite3").list()
    assert summary.status == "error"


# --- recursion rounds (Nielsen et al. 2026 §3.2) ---------------------------------------------

ONE = 'model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]'


def test_a_review_round_may_keep_the_answer(tmp_path: Path) -> None:
    conductor = ScriptedConductor([ONE])  # reviews default to three empty lists
    w = [ScriptedWorker("w0", reply="41")]
    record = asyncio.run(make(conductor, w, tmp_path, rounds=1).run("Q?"))
    assert record.status == "ok" and record.answer == "41"
    (first, review) = conductor.previous
    assert first is None and review is not None
    assert review.round == 0 and review.answer == "41" and review.workflow.model_id == [0]
    assert [len(wf) for wf in record.workflows] == [1, 0]
    assert [a.round for a in record.attempts] == [0, 1] and len(w[0].calls) == 1
    assert TraceStore(tmp_path / "traces.sqlite3").get(record.id) == record


def test_a_later_round_sees_the_previous_round_through_access_all() -> None:
    review = 'model_id = [1, 1]\nsubtasks = ["Check.", "Fix."]\naccess_list = [[], "all"]'
    w = [ScriptedWorker("w0", reply="SECRET-ROUND0"), ScriptedWorker("w1", reply="fixed")]
    record = asyncio.run(make(ScriptedConductor([ONE], reviews=[review]), w, rounds=1).run("Q?"))
    assert record.answer == "fixed" and record.status == "ok"
    check, fix = [s for s in record.steps if s.round == 1]
    assert check.visible_previous == () and "SECRET-ROUND0" not in check.messages[0]["content"]
    assert fix.visible_previous == ((0, 0),) and fix.visible == (0,)
    assert '<step round="0" index="0">' in fix.messages[0]["content"]
    assert "SECRET-ROUND0" in fix.messages[0]["content"]


def test_rounds_are_capped() -> None:
    rewrite = 'model_id = [0]\nsubtasks = ["Again."]\naccess_list = ["all"]'
    conductor = ScriptedConductor([ONE], reviews=[rewrite])
    w = [ScriptedWorker("w0")]
    record = asyncio.run(make(conductor, w, rounds=2).run("Q?"))
    assert sorted({s.round for s in record.steps}) == [0, 1, 2]
    assert len(conductor.questions) == 3 and len(w[0].calls) == 3


def test_an_invalid_review_keeps_the_previous_answer() -> None:
    w = [ScriptedWorker("w0", reply="kept")]
    record = asyncio.run(make(ScriptedConductor([ONE], reviews=["nonsense"]), w, resamples=1, rounds=1).run("Q?"))
    assert record.status == "ok" and record.answer == "kept" and record.fallback is None
    assert [a.error_kind for a in record.attempts] == [None, "missing_field", "missing_field"]


def test_a_failing_later_round_keeps_the_previous_answer() -> None:
    review = 'model_id = [1]\nsubtasks = ["Redo."]\naccess_list = ["all"]'
    w = [ScriptedWorker("w0", reply="first"), ScriptedWorker("w1", error=ProviderError("down", worker="w1"))]
    record = asyncio.run(make(ScriptedConductor([ONE], reviews=[review]), w, rounds=1).run("Q?"))
    assert record.status == "ok" and record.answer == "first"
    assert record.steps[-1].round == 1 and record.steps[-1].error_type == "ProviderError"


# --- the conductor as a worker, with a depth limit --------------------------------------------


def test_the_conductor_can_be_a_worker_and_its_depth_is_limited(tmp_path: Path) -> None:
    from podium.workers.conductor_worker import ConductorWorker

    to_self = 'model_id = [1]\nsubtasks = ["Delegate this to a nested workflow."]\naccess_list = [[]]'
    inner = ConductorWorker("conductor", max_depth=1)
    leaf = ScriptedWorker("w0", reply="leaf answer")
    store = TraceStore(tmp_path / "traces.sqlite3")
    orch = Orchestrator(
        [leaf, inner],
        ScriptedConductor([to_self]),
        Fallback(0, "Answer."),
        traces=store,
        config=OrchestratorConfig(recursion_rounds=0),
    )
    inner.bind(orch)
    record = asyncio.run(orch.run("Q?"))
    # outer step 0 ran a nested request; inside it the plan again chose the conductor worker,
    # which refused at depth 1, so the nested request's fallback (w0) answered.
    assert record.status == "ok" and record.answer == "leaf answer"
    assert record.steps[0].worker == "conductor"
    nested = [store.get(s.id) for s in store.list() if s.id != record.id]
    assert len(nested) == 1 and nested[0] is not None
    assert nested[0].status == "fallback" and nested[0].steps[0].error_type == "ClientError"
    assert "depth limit" in (nested[0].steps[0].error or "")
    assert nested[0].question.endswith("</your_subtask>")  # the step's whole message was its question


def test_the_orchestrators_settings_are_one_frozen_config() -> None:
    """Per-request settings live in one frozen OrchestratorConfig, held by a frozen Orchestrator:
    keywords replace the config's fields, dataclasses.replace and subset() change only what they
    are given, the original is untouched (its workers shared, not re-wrapped), and an
    out-of-range setting is a ConfigError naming it."""
    import dataclasses

    from podium.budget import Limits
    from podium.errors import ConfigError
    from podium.orchestrator import OrchestratorConfig

    base = OrchestratorConfig(pool_name="p", max_steps=4, resamples=1, recursion_rounds=0)
    orch = Orchestrator([ScriptedWorker("a"), ScriptedWorker("b")], ScriptedConductor(["x"]), Fallback(0, "A."),
                        dataclasses.replace(base, limits=Limits(deadline_s=9.0)))  # fmt: skip
    assert orch.config == dataclasses.replace(base, limits=Limits(deadline_s=9.0)) and orch.config.max_steps == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        orch.config.max_steps = 9  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        orch.config = base  # type: ignore[misc]
    derived = dataclasses.replace(orch.subset([1, 0]), config=orch.config.updated(max_steps=2, resamples=None))
    assert derived.config == dataclasses.replace(orch.config, max_steps=2)
    assert orch.config.max_steps == 4 and [w.info.name for w in derived.pool] == ["b", "a"]
    assert derived.pool[0] is orch.pool[1] and derived.fallback == Fallback(1, "A.")
    with pytest.raises(ConfigError, match="fallback worker 'a'"):
        orch.subset([1])
    for field, value in (("max_steps", 0), ("resamples", -1), ("recursion_rounds", -1), ("max_question_chars", 0)):
        with pytest.raises(ConfigError, match=field):
            OrchestratorConfig(**{field: value})


@pytest.mark.parametrize(
    ("steps", "kind"),
    [
        ((Step(0, "a", ()), Step(0, "b", ()), Step(0, "c", ())), "too_many_steps"),
        ((Step(5, "a", ()),), "unknown_worker"),
    ],
)
def test_a_direct_conductors_bad_plan_is_a_traced_attempt_and_the_request_falls_back(
    steps: tuple[Step, ...], kind: str
) -> None:
    """Conductor.plan never raises for a bad plan: a direct conductor (rules, light, router) that
    writes more steps than max_steps or names a worker outside the pool returns a failed attempt
    with its PlanParseError kind, and the request falls back (it raised a bare ValueError out of
    the request before). It is asked once, resamples notwithstanding: it would write the same."""
    from podium.conductor.base import DirectConductor

    conductor = DirectConductor("broken", lambda _q, _pool, _n: steps)
    orch = Orchestrator([ScriptedWorker("a", reply="fallback answer")], conductor, Fallback(0, "Answer."),
                        OrchestratorConfig(max_steps=2, resamples=2))  # fmt: skip
    record = asyncio.run(orch.run("Q?"))
    assert record.status == "fallback" and record.fallback is not None and record.fallback.reason == "invalid_plan"
    assert [a.error_kind for a in record.attempts] == [kind]
    assert record.answer == "fallback answer"
