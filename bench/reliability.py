"""Reliability figures of podium's promises, measured (docs/reliability.md).

Runs each promise's worst case against the real orchestrator, parser, budget ledger, OpenAI-
compatible backend and server, with fake workers (no models), and prints a Markdown table:
seconds past a deadline, USD over a cap, reservations left behind, traces per request, parse
time of hostile conductor output, and the HTTP status of hostile server input.

    .venv/bin/python bench/reliability.py           # about 20 s
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from podium.budget import Limits, PeriodBudget
from podium.errors import WorkerTimeout
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.parse import try_parse_workflow
from podium.serve.app import Server, create_app
from podium.testing import ScriptedConductor, ScriptedWorker, ThreadedUvicorn
from podium.trace.store import TraceStore
from podium.workers.base import Call, Completion, Message, Price, Usage, Worker, WorkerSettings
from podium.workers.openai_compat import OpenAICompatWorker

POOL = str(Path(__file__).parent.parent / "tests" / "pools" / "three-fakes.toml")  # three fake workers
ONE_STEP = 'model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]'


def parser_row() -> tuple[str, str, str]:
    worst = 0.0
    for text in ("model_id=[“" * 9000, "<think>" * 14000, "subtasks = ['" * 7000):
        started = time.perf_counter()
        try_parse_workflow(text, pool_size=3)
        worst = max(worst, time.perf_counter() - started)
    return (
        "parser: linear, total",
        "tests/test_parse_properties.py, test_hardening.py",
        f"{worst:.3f} s worst of 3 hostile ~100k-char outputs",
    )


class _Hang(ScriptedWorker):
    async def complete(self, call: Call) -> Completion:
        await asyncio.sleep(60)
        raise AssertionError


class _ColdCount(ScriptedWorker):
    """Counts prompt tokens exactly, as llama.cpp does, but as slowly as a cold model load."""

    loaded = threading.Event()

    def count_tokens(self, messages: Sequence[Message], prefix: str = "") -> int:
        self.loaded.wait(5.0)
        return 10


def deadline_row() -> tuple[str, str, str]:
    second = OrchestratorConfig(limits=Limits(deadline_s=1.0))
    hanging = Orchestrator([_Hang("hang"), ScriptedWorker("fb", reply="ok")], ScriptedConductor([ONE_STEP]),
                           Fallback(1, "Answer."), config=second)  # fmt: skip
    cold = Orchestrator([_ColdCount("cold", reply="ok")], ScriptedConductor([ONE_STEP]), Fallback(0, "Answer."),
                        config=OrchestratorConfig(limits=Limits(deadline_s=1.0)))  # fmt: skip

    async def past(orch: Orchestrator) -> float:
        started = time.perf_counter()
        await orch.run("q")
        return time.perf_counter() - started - 1.0

    async def past_cold() -> float:
        try:
            return await past(cold)
        finally:
            _ColdCount.loaded.set()  # the "load" ends in the background (asyncio.run waits for its thread)

    worst = max(asyncio.run(past(hanging)), asyncio.run(past_cold()))
    return (
        "request deadline bounds everything (token counting too)",
        "tests/test_faults.py, test_deadline_guard.py",
        f"{worst:+.3f} s against a 1 s deadline, worst of a hanging step and a 5 s token count",
    )


def stream_row() -> tuple[str, str, str]:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        async def chunks() -> AsyncIterator[str]:
            for _ in range(200):
                body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                        "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}  # fmt: skip
                yield f"data: {json.dumps(body)}\n\n"
                await asyncio.sleep(0.3)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    server = ThreadedUvicorn(app)
    try:
        worker = OpenAICompatWorker("w", "m", base_url=server.url + "/v1", settings=WorkerSettings(), price=Price(),
                                    stream=True, timeout_s=1.0)  # fmt: skip
        started = time.perf_counter()
        with contextlib.suppress(WorkerTimeout):
            asyncio.run(worker.complete(Call([{"role": "user", "content": "hi"}])))
        past = time.perf_counter() - started - 1.0
    finally:
        server.stop()
    return (
        "a worker's timeout_s bounds the whole call (streams too)",
        "test_hardening.py",
        f"{past:+.3f} s past timeout_s = 1 (a chunk every 0.3 s)",
    )


class _Liar(ScriptedWorker):
    async def complete(self, call: Call) -> Completion:
        result = await super().complete(call)
        usage = Usage(result.usage.input_tokens, 500)  # 5× max_tokens
        return Completion(result.text, usage, self.info.price.cost(usage), result.latency_s)


def overshoot_rows() -> list[tuple[str, str, str]]:
    liar = _Liar("liar", price=Price(10.0, 200.0), settings=WorkerSettings(max_tokens=100))
    plan = 'model_id = [0, 0, 0]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [0], [1]]'
    capped = OrchestratorConfig(limits=Limits(cost_cap_usd=0.05))
    record = asyncio.run(Orchestrator([liar], ScriptedConductor([plan]), Fallback(0, "A."), config=capped).run("q"))
    request_over = record.totals.total_cost_usd - 0.05
    one_call = record.totals.incidents[0].actual_usd if record.totals.incidents else 0.0
    day = PeriodBudget(0.05, scope="pool:x/day")
    liar2 = _Liar("liar", price=Price(10.0, 200.0), settings=WorkerSettings(max_tokens=100))
    orch = Orchestrator(
        [liar2], ScriptedConductor([ONE_STEP]), Fallback(0, "A."), config=OrchestratorConfig(periods=(day,))
    )
    for i in range(20):
        asyncio.run(orch.run(f"q{i}"))
    return [
        ("a worker reporting 5× max_tokens overshoots a request cap by its one call at most", "test_hardening.py",
         f"${max(request_over, 0):.4f} over a $0.05 cap (the call cost ${one_call:.4f}); "
         f"{len(record.totals.incidents)} incident naming the worker; 1 call made of 3 planned"),
        ("… and a day budget by one call at most", "test_hardening.py",
         f"${max(day.spent_usd - 0.05, 0):.4f} over a $0.05 day budget after 20 requests"),
    ]  # fmt: skip


class _Queued(ScriptedWorker):
    async def complete(self, call: Call) -> Completion:
        call.context.mark_pending()
        await asyncio.sleep(60)
        raise AssertionError


def cancel_row() -> tuple[str, str, str]:
    day = PeriodBudget(1.0, scope="pool:x/day")
    orch = Orchestrator([_Queued("busy", price=Price(100.0, 100.0))], ScriptedConductor([ONE_STEP]),
                        Fallback(0, "A."), config=OrchestratorConfig(periods=(day,)))  # fmt: skip

    async def run() -> None:
        tasks = [asyncio.create_task(orch.run(f"q{i}")) for i in range(20)]
        await asyncio.sleep(0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    held = day.reserved_usd + day.spent_usd
    figure = f"${abs(held):.4f} held after 20 calls cancelled while queued"
    return ("reservations are released on every path", "test_hardening.py", figure)


def traces_row(tmp: Path) -> tuple[str, str, str]:
    store = TraceStore(tmp / "t.sqlite3")
    orch = Orchestrator([ScriptedWorker("w", delay_s=0.01)], ScriptedConductor([ONE_STEP]), Fallback(0, "A."),
                        traces=store)  # fmt: skip

    async def run() -> None:
        await asyncio.gather(*(orch.run(f"q{i}") for i in range(200)))

    asyncio.run(run())
    n = len(store.list(limit=1000))
    return ("one trace per request", "tests/test_faults.py", f"{n} traces for 200 concurrent requests")


def server_rows(tmp: Path) -> list[tuple[str, str, str]]:
    plan = 'model_id = [1]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    fakes: list[Worker] = [ScriptedWorker(n, reply=plan) for n in ("smol-a", "smol-b", "smol-c")]
    server = ThreadedUvicorn(create_app(Server(pool=POOL, traces=TraceStore(tmp / "s.sqlite3"), workers=fakes)))
    url = server.url + "/v1/chat/completions"
    cases = {
        "empty question": {"model": "podium", "messages": [{"role": "user", "content": ""}]},
        "null content": {"model": "podium", "messages": [{"role": "user", "content": None}]},
        "120k characters": {"model": "podium", "messages": [{"role": "user", "content": "x" * 120_000}]},
    }
    try:
        statuses = {name: httpx.post(url, json=body).status_code for name, body in cases.items()}
        raw = {
            "lone surrogate": b'{"model": "podium", "messages": [{"role": "user", "content": "\\ud800"}]}',
            "JSON 100k deep": b"[" * 100_000 + b"]" * 100_000,
            "5 MiB body": b"x" * (5 << 20),
        }
        statuses |= {name: httpx.post(url, content=body, headers={"content-type": "application/json"}).status_code
                     for name, body in raw.items()}  # fmt: skip
    finally:
        server.stop()
    shown = ", ".join(f"{k} {v}" for k, v in statuses.items())
    return [("hostile server input gets 4xx in the OpenAI shape", "test_hardening.py, test_serve_schema.py", shown)]


def main() -> None:
    rows = [parser_row(), deadline_row(), stream_row(), *overshoot_rows(), cancel_row()]
    with TemporaryDirectory() as tmp:
        rows += [traces_row(Path(tmp)), *server_rows(Path(tmp))]
    print("| promise | checked by | measured |")
    print("|---|---|---|")
    for promise, test, figure in rows:
        print(f"| {promise} | {test} | {figure} |")


if __name__ == "__main__":
    main()
