"""The worker interface (issue 18): declared data (``Worker.info``) and one method,
``complete(call)``, for chat calls and grammar-bound continuations alike; the public wrapper
base (podium.workers.wrapper) for podium's own wrappers and a user's; the request's context
travels on the call. Fakes here are unit-test fakes (a scripted worker and a tiny text
completer), named as such."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from podium.budget import Limits, RequestBudget
from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.pii.vault import Vault
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.workers import Call, Completion, Message, WorkerInfo, WorkerSettings, WorkerWrapper
from podium.workers.base import CallContext, Price, Usage, Worker
from podium.workers.resilience import ResiliencePolicy
from podium.workers.stack import stack
from podium.workers.wrapper import unwrap


class FakeCompleter:
    """A unit-test fake of a local text completer: replies with the prefix and what it was told."""

    def __init__(self) -> None:
        settings = WorkerSettings(max_tokens=8)
        self.info = WorkerInfo("fake-completer", "", Price(0.0, 0.0), settings, grammar=True)
        self.seen: list[tuple[str | None, str | None, tuple[str, ...]]] = []

    async def complete(self, call: Call) -> Completion:
        if not call.is_continuation:
            return Completion(text="plain", usage=Usage(1, 1))
        self.seen.append((call.prefix, call.grammar, tuple(call.stop)))
        return Completion(text=f"{call.prefix}|{call.settings_for(self).max_tokens}", usage=Usage(1, 1))


class Recording(WorkerWrapper):
    """A user's wrapper: records each call it sees."""

    def __init__(self, inner: Worker) -> None:
        super().__init__(inner)
        self.calls: list[Call] = []

    async def complete(self, call: Call) -> Completion:
        self.calls.append(call)
        return await super().complete(call)


MESSAGES: list[Message] = [{"role": "user", "content": "2+2?"}]


def test_chat_calls_and_continuations_reach_a_wrapper_as_one_typed_call() -> None:
    inner = FakeCompleter()
    wrapper = Recording(inner)
    plain = asyncio.run(wrapper.complete(Call(MESSAGES)))
    settings = WorkerSettings(max_tokens=3)
    cont = asyncio.run(
        wrapper.complete(Call(MESSAGES, settings, prefix="Answer:", grammar="root ::= [0-9]", stop=["\n"]))
    )
    assert plain.text == "plain" and cont.text == "Answer:|3"
    first, second = wrapper.calls
    assert not first.is_continuation and first.settings is None and first.settings_for(wrapper).max_tokens == 8
    assert second.is_continuation and second.prefix == "Answer:" and second.settings_for(wrapper).max_tokens == 3
    assert inner.seen == [("Answer:", "root ::= [0-9]", ("\n",))]


def test_a_wrapper_can_change_what_is_sent_and_wrappers_stack() -> None:
    class Shouting(WorkerWrapper):
        async def complete(self, call: Call) -> Completion:
            upper: list[Message] = [{"role": m["role"], "content": m["content"].upper()} for m in call.messages]
            return await super().complete(call.with_messages(upper))

    scripted = ScriptedWorker("w", lambda messages: messages[-1]["content"])
    stacked = Recording(Shouting(stack(scripted, resilience=ResiliencePolicy())))
    assert asyncio.run(stacked.complete(Call([{"role": "user", "content": "hi there"}]))).text == "HI THERE"
    assert unwrap(stacked) is scripted and stacked.info == scripted.info and stacked.info.name == "w"


def test_a_continuation_on_a_worker_that_cannot_continue_text_is_a_config_error() -> None:
    wrapper = Recording(ScriptedWorker("chat-only"))
    assert not wrapper.info.grammar and Recording(FakeCompleter()).info.grammar
    with pytest.raises(ConfigError, match="cannot continue text"):
        asyncio.run(wrapper.complete(Call(MESSAGES, prefix="x")))
    with pytest.raises(ConfigError, match="cannot continue text"):
        asyncio.run(Call(MESSAGES, prefix="x").send(ScriptedWorker("chat-only")))


def test_the_request_context_travels_on_every_call_and_in_no_context_variable() -> None:
    """Each step's call carries the request's budget and PII vault, its own disclosure log, and
    (only the answering step) the answer stream; the conductor's calls carry the same budget;
    no context variable is set while the request runs (issue 18: no hidden request state)."""
    seen_variables: list[str] = []

    def reply(_messages: object) -> str:
        seen_variables.extend(v.name for v in contextvars.copy_context() if v.name.startswith("podium"))
        return "fine"

    worker = ScriptedWorker("w", reply)
    plan = 'model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [0]]'
    orchestrator = Orchestrator(
        [worker], ScriptedConductor([plan]), Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
    )
    budget = RequestBudget(Limits(cost_cap_usd=1.0))
    record = asyncio.run(orchestrator.run("q", budget=budget))
    assert record.status == "ok"
    first, second = worker.contexts
    assert first.budget is budget and second.budget is budget
    assert first.vault is not None and first.vault is second.vault
    assert first.calls is not None and first.calls is not second.calls
    assert first.ticket is not None and first.ticket is not second.ticket  # the budget guard's, per call
    assert seen_variables == []


def test_a_nested_request_shares_its_parents_budget_and_vault() -> None:
    """A request run inside another's context (a conductor worker's nested request) reserves on
    the parent's budget and keeps its placeholders in the parent's vault."""
    worker = ScriptedWorker("w", "fine")
    plan = 'model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]'
    orchestrator = Orchestrator(
        [worker], ScriptedConductor([plan]), Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
    )
    budget = RequestBudget(Limits(cost_cap_usd=1.0))
    parent = CallContext(budget=budget, vault=Vault(), depth=1)
    record = asyncio.run(orchestrator.run("q", context=parent))
    (seen,) = worker.contexts
    assert seen.budget is budget and seen.vault is parent.vault and seen.depth == 1
    assert record.totals.total_cost_usd > 0 and budget.ledger.spent_usd == pytest.approx(record.totals.total_cost_usd)
