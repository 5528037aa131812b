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
from typing import Any

from podium.conductor.base import PreviousRound
from podium.parse import try_parse_workflow
from podium.records import PlanAttempt
from podium.workers.base import (
    NO_CONTEXT,
    Call,
    CallContext,
    Completion,
    Message,
    Price,
    Usage,
    Worker,
    WorkerInfo,
    WorkerSettings,
)
from podium.workflow import Workflow

__all__ = ["KEEP_ANSWER", "ScriptedConductor", "ScriptedWorker", "ThreadedUvicorn", "fake_tokens"]


def fake_tokens(text: str) -> int:
    """A deterministic stand-in token count: one token per 4 characters, at least 1."""
    return max(1, len(text) // 4)


class ScriptedWorker:
    """A fake worker whose reply is a fixed string or a function of the messages it receives.

    Every call's messages are appended to ``calls``, so tests can assert on exactly what the
    worker saw. ``error`` makes every call raise it; ``delay_s`` sleeps before replying.
    Usage is :func:`fake_tokens` of the messages and reply; cost follows ``price``. When the
    call is the answering step of a streamed request, the reply is reported word by word
    (``call.context.report_text``) with ``word_delay_s`` between words, as a streaming backend
    would. Every reply reports ``finish_reason`` (``"length"``: as if cut off at max_tokens).
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
        word_delay_s: float = 0.0,
        settings: WorkerSettings | None = None,
        finish_reason: str = "stop",
    ) -> None:
        self.reply = reply
        self.finish_reason = finish_reason
        self.error = error
        self.delay_s = delay_s
        self.word_delay_s = word_delay_s
        price = price or Price(input=1.0, output=2.0)
        self.info = WorkerInfo(name, description, price, settings or WorkerSettings(), system_prompt)
        self.calls: list[list[Message]] = []
        self.contexts: list[CallContext] = []

    @property
    def name(self) -> str:
        """Its name (``info.name``)."""
        return self.info.name

    async def complete(self, call: Call) -> Completion:
        messages = call.messages
        self.calls.append(list(messages))
        self.contexts.append(call.context)
        started = time.perf_counter()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        text = self.reply(messages) if callable(self.reply) else self.reply
        if call.context.stream is not None:
            words = text.split(" ")
            for k in range(1, len(words) + 1):
                call.context.report_text(" ".join(words[:k]))
                await asyncio.sleep(self.word_delay_s)
        usage = Usage(sum(fake_tokens(m["content"]) for m in messages), fake_tokens(text) if text else 0)
        return Completion(
            text, usage, self.info.price.cost(usage), time.perf_counter() - started, finish_reason=self.finish_reason
        )


KEEP_ANSWER = "model_id = []\nsubtasks = []\naccess_list = []"
"""The recursion-round output that keeps the previous answer."""


class ScriptedConductor:
    """A fake conductor that "writes" the given outputs in order, one per call (the last one
    repeating), read by the real tolerant parser — so invalid outputs exercise the real
    re-sample and fallback paths. In recursion rounds it writes ``reviews`` in order (default:
    keep the answer). Questions it was asked are kept in ``questions``, the previous rounds it
    was shown in ``previous``."""

    def __init__(
        self,
        outputs: Sequence[str],
        *,
        reviews: Sequence[str] = (KEEP_ANSWER,),
        name: str = "scripted",
        cost_usd: float = 0.0,
    ) -> None:
        if not outputs or not reviews:
            raise ValueError("ScriptedConductor needs at least one output and one review")
        self.outputs = list(outputs)
        self.reviews = list(reviews)
        self.name = name
        self.cost_usd = cost_usd
        self.questions: list[str] = []
        self.previous: list[PreviousRound | None] = []

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """False: its script may hold a review round's workflow."""
        return False

    async def plan(
        self,
        question: str,
        pool: Sequence[Worker],
        *,
        max_steps: int,
        attempt: int = 0,
        previous: PreviousRound | None = None,
        context: CallContext = NO_CONTEXT,
    ) -> PlanAttempt:
        script = self.outputs if previous is None else self.reviews
        calls = sum(1 for p in self.previous if (p is None) == (previous is None))
        raw = script[min(calls, len(script) - 1)]
        self.questions.append(question)
        self.previous.append(previous)
        workflow, failure = try_parse_workflow(
            raw, pool_size=len(pool), max_steps=max_steps, allow_empty=previous is not None
        )
        return PlanAttempt(
            attempt=attempt,
            messages=({"role": "user", "content": question},),
            raw_output=raw,
            workflow=workflow,
            round=0 if previous is None else previous.round + 1,
            error_kind=failure.kind if failure else None,
            error=failure.detail if failure else None,
            usage=Usage(fake_tokens(question), fake_tokens(raw)),
            cost_usd=self.cost_usd,
        )


class ThreadedUvicorn:
    """An ASGI app served by a real uvicorn in a thread, on a free loopback port (for tests and
    benchmarks of servers; needs the ``serve`` extra).

    Attributes:
        uvicorn: the ``uvicorn.Server``; url: ``http://127.0.0.1:PORT``.
    """

    def __init__(self, app: Any, *, grace_s: float | None = None) -> None:
        import socket
        import threading

        import uvicorn  # the serve extra

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="critical",
            timeout_graceful_shutdown=grace_s,  # type: ignore[arg-type]
        )
        self.uvicorn = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.uvicorn.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.uvicorn.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """What SIGTERM does: stop accepting, let in-flight requests finish (up to the grace)."""
        self.uvicorn.should_exit = True
        self.thread.join(timeout=30)
