"""The public wrapper base (podium.workers.wrapper): one typed Call per call, whichever worker
method it came through, for podium's own wrappers and a user's. Fakes here are unit-test fakes
(a scripted worker and a tiny text completer), named as such."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from podium.errors import ConfigError
from podium.testing import ScriptedWorker
from podium.workers import Call, Completion, Message, WorkerSettings, WorkerWrapper
from podium.workers.base import Price, Usage
from podium.workers.resilience import ResiliencePolicy, harden
from podium.workers.wrapper import grammar_capable, unwrap


class FakeCompleter:
    """A unit-test fake of a local text completer: replies with the prefix and what it was told."""

    def __init__(self) -> None:
        self.name, self.description = "fake-completer", ""
        self.price, self.settings = Price(0.0, 0.0), WorkerSettings(max_tokens=8)
        self.seen: list[tuple[str, str | None, tuple[str, ...]]] = []

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        return Completion(text="plain", usage=Usage(1, 1))

    async def continue_text(
        self,
        messages: Sequence[Message],
        prefix: str,
        settings: WorkerSettings,
        *,
        grammar: str | None = None,
        stop: Sequence[str] = (),
    ) -> Completion:
        self.seen.append((prefix, grammar, tuple(stop)))
        text = f"{prefix}|{settings.max_tokens}"
        return Completion(text=text, usage=Usage(1, 1))


class Recording(WorkerWrapper):
    """A user's wrapper: records each call it sees."""

    def __init__(self, inner: object) -> None:
        super().__init__(inner)  # type: ignore[arg-type]
        self.calls: list[Call] = []

    async def call(self, call: Call) -> Completion:
        self.calls.append(call)
        return await super().call(call)


MESSAGES: list[Message] = [{"role": "user", "content": "2+2?"}]


def test_both_worker_methods_reach_a_wrapper_as_one_typed_call() -> None:
    inner = FakeCompleter()
    wrapper = Recording(inner)
    plain = asyncio.run(wrapper.complete(MESSAGES))
    settings = WorkerSettings(max_tokens=3)
    cont = asyncio.run(wrapper.continue_text(MESSAGES, "Answer:", settings, grammar="root ::= [0-9]", stop=["\n"]))
    assert plain.text == "plain" and cont.text == "Answer:|3"
    first, second = wrapper.calls
    assert not first.is_continuation and first.settings is None and first.settings_for(wrapper).max_tokens == 8
    assert second.is_continuation and second.prefix == "Answer:" and second.settings_for(wrapper).max_tokens == 3
    assert inner.seen == [("Answer:", "root ::= [0-9]", ("\n",))]


def test_a_wrapper_can_change_what_is_sent_and_wrappers_stack() -> None:
    class Shouting(WorkerWrapper):
        async def call(self, call: Call) -> Completion:
            upper = [{**m, "content": m["content"].upper()} for m in call.messages]
            return await super().call(call.with_messages(upper))  # type: ignore[arg-type]

    scripted = ScriptedWorker("w", lambda messages: messages[-1]["content"])
    stacked = Recording(Shouting(harden(scripted, ResiliencePolicy())))
    assert asyncio.run(stacked.complete([{"role": "user", "content": "hi there"}])).text == "HI THERE"
    assert unwrap(stacked) is scripted and stacked.name == "w"


def test_a_continuation_on_a_worker_that_cannot_continue_text_is_a_config_error() -> None:
    wrapper = Recording(ScriptedWorker("chat-only"))
    assert not grammar_capable(wrapper) and grammar_capable(Recording(FakeCompleter()))
    with pytest.raises(ConfigError, match="cannot continue text"):
        asyncio.run(wrapper.continue_text(MESSAGES, "x", WorkerSettings()))
    with pytest.raises(ConfigError, match="cannot continue text"):
        asyncio.run(Call(MESSAGES, prefix="x").send(ScriptedWorker("chat-only")))
