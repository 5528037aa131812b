"""Test helpers: a scripted fake worker and a scripted fake conductor (no model, no network).

For unit tests only — they are fakes, and say so in their names. Like pydantic-ai's
``FunctionModel``, they make the orchestrator's behaviour checkable on exact messages::

    worker = ScriptedWorker("w0", reply=lambda msgs: "42")
    conductor = ScriptedConductor(["model_id = [0]\\nsubtasks = [\\"Solve.\\"]\\naccess_list = [[]]"])
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from podium.parse import try_parse_workflow
from podium.records import PlanAttempt
from podium.workers.base import Completion, Message, Price, Usage, Worker, WorkerSettings

__all__ = ["ScriptedConductor", "ScriptedWorker", "fake_tokens"]


def fake_tokens(text: str) -> int:
    """A deterministic stand-in token count: one token per 4 characters, at least 1."""
    return max(1, len(text) // 4)


class ScriptedWorker:
    """A fake worker whose reply is a fixed string or a function of the messages it receives.

    Every call's messages are appended to ``calls``, so tests can assert on exactly what the
    worker saw. ``error`` makes every call raise it; ``delay_s`` sleeps before replying.
    Usage is :func:`fake_tokens` of the messages and reply; cost follows ``price``.
    """

    def __init__(
        self,
        name: str,
        reply: str | Callable[[Sequence[Message]], str] = "ok",
        *,
        price: Price | None = None,
        description: str = "",
        error: Exception | None = None,
        delay_s: float = 0.0,
        system_prompt: str | None = None,
    ) -> None:
        self.name = name
        self.reply = reply
        self.price = price or Price(input=1.0, output=2.0)
        self.description = description
        self.settings = WorkerSettings()
        self.error = error
        self.delay_s = delay_s
        self.system_prompt = system_prompt
        self.calls: list[list[Message]] = []

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        self.calls.append(list(messages))
        started = time.perf_counter()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        text = self.reply(messages) if callable(self.reply) else self.reply
        usage = Usage(sum(fake_tokens(m["content"]) for m in messages), fake_tokens(text) if text else 0)
        return Completion(text, usage, self.price.cost(usage), time.perf_counter() - started)


class ScriptedConductor:
    """A fake conductor that "writes" the given outputs in order (attempt k gets output k, the
    last one repeating), read by the real tolerant parser — so invalid outputs exercise the
    real re-sample and fallback paths. Questions it was asked are kept in ``questions``."""

    def __init__(self, outputs: Sequence[str], *, name: str = "scripted", cost_usd: float = 0.0) -> None:
        if not outputs:
            raise ValueError("ScriptedConductor needs at least one output")
        self.outputs = list(outputs)
        self.name = name
        self.cost_usd = cost_usd
        self.questions: list[str] = []

    async def plan(self, question: str, pool: Sequence[Worker], *, max_steps: int, attempt: int = 0) -> PlanAttempt:
        self.questions.append(question)
        raw = self.outputs[min(attempt, len(self.outputs) - 1)]
        workflow, failure = try_parse_workflow(raw, pool_size=len(pool), max_steps=max_steps)
        return PlanAttempt(
            attempt=attempt,
            messages=({"role": "user", "content": question},),
            raw_output=raw,
            workflow=workflow,
            error_kind=failure.kind if failure else None,
            error=failure.detail if failure else None,
            usage=Usage(fake_tokens(question), fake_tokens(raw)),
            cost_usd=self.cost_usd,
        )
