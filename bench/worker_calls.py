"""Client-side cost of one worker call over HTTP: podium's transport against the ones it used before.

A fixed-latency fake upstream (``podium.serve.fake_upstream``, its own process, so its CPU is not
counted) answers chat completions; this process makes N calls at C concurrency and reports its
own CPU time and wall time per call for:

* ``podium worker`` — two OpenAICompatWorkers on the endpoint (podium today: aiohttp over one
  pool per endpoint and loop, :mod:`podium.workers._http`);
* ``openai SDK, shared pool`` — the same chat call through the ``openai`` SDK (one
  ``AsyncOpenAI`` over one httpx pool, retries off: how podium called workers before), ratio
  against the first;
* ``native POST`` — the native backends' POST (``podium.workers._http.post_json``, Anthropic and
  Gemini) over the shared pool;
* ``httpx, client per call`` — the same POST building an ``httpx.AsyncClient`` per call, as the
  native backends did at first (a new connection each time; over HTTPS also a TLS handshake,
  which loopback HTTP here does not even show).

    .venv/bin/python bench/worker_calls.py --calls 2000 --concurrency 1,16,64 --repeats 3

Ratios are within one run (this machine is shared and noisy); the table goes to docs/overhead.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

MESSAGES: Any = [{"role": "user", "content": "What is 6 * 7?"}]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _upstream(port: int, latency_ms: int) -> subprocess.Popen[bytes]:
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "podium.serve.fake_upstream", "--port", str(port), "--latency-ms", str(latency_ms)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(200):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the fake upstream did not start")


Case = tuple[Callable[[int], Awaitable[Any]], Callable[[], Awaitable[None]]]
"""A case's call (by call number) and what closes its clients at the end of a run."""


async def _nothing() -> None:
    return None


async def _measure(case: Callable[[], Case], calls: int, concurrency: int) -> tuple[float, float]:
    """(CPU ms per call, wall ms per call) for ``calls`` calls, ``concurrency`` at a time."""
    call, close = case()
    queue = iter(range(calls))

    async def lane() -> None:
        for i in queue:
            await call(i)

    await asyncio.gather(*(lane() for _ in range(min(concurrency, 8))))  # warm-up: connections, imports
    queue = iter(range(calls))
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    cpu, wall = (time.process_time() - cpu) * 1e3 / calls, (time.perf_counter() - wall) * 1e3 / calls
    await close()
    return cpu, wall


def _cases(base: str) -> dict[str, Callable[[], Case]]:
    import httpx
    import openai

    from podium.workers._http import post_json
    from podium.workers.base import NO_CONTEXT, Call, Price, WorkerSettings
    from podium.workers.openai_compat import OpenAICompatWorker

    settings, price = WorkerSettings(max_tokens=16), Price(1.0, 1.0)
    body = {"model": "fixed", "messages": MESSAGES, "max_tokens": 16}
    url = f"{base}/v1/chat/completions"

    def podium_worker() -> Case:
        workers = [OpenAICompatWorker(n, "fixed", base_url=f"{base}/v1", settings=settings, price=price)
                   for n in ("a", "b")]  # fmt: skip
        return (lambda i: workers[i % 2].complete(Call(MESSAGES))), _nothing

    def sdk_shared() -> Case:
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-none", max_retries=0)

        async def call(_i: int) -> Any:
            reply = await client.chat.completions.create(model="fixed", messages=MESSAGES, max_tokens=16)
            return reply.choices[0].message.content

        return call, client.close

    def native_post() -> Case:
        return (lambda i: post_json("bench", url, {}, body, 30.0, NO_CONTEXT)), _nothing

    def httpx_per_call() -> Case:
        async def call(_i: int) -> Any:
            async with httpx.AsyncClient(timeout=30.0) as client:
                return (await client.post(url, json=body)).json()

        return call, _nothing

    return {
        "podium worker": podium_worker,
        "openai SDK, shared pool": sdk_shared,
        "native POST": native_post,
        "httpx, client per call": httpx_per_call,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case and level (median reported)")
    parser.add_argument("--latency-ms", type=int, default=5, help="the fake upstream's latency")
    args = parser.parse_args()
    port = _port()
    upstream = _upstream(port, args.latency_ms)
    base = f"http://127.0.0.1:{port}"
    cases = _cases(base)
    levels = [int(c) for c in args.concurrency.split(",")]
    try:
        print(f"{args.calls} calls per run, median of {args.repeats}; fake upstream {args.latency_ms} ms; "
              f"{os.cpu_count()} CPUs", flush=True)  # fmt: skip
        print("| case | clients | CPU ms/call | wall ms/call | CPU vs podium worker |\n|---|---|---|---|---|")
        for level in levels:
            results: dict[str, tuple[float, float]] = {}
            for name, make in cases.items():
                runs = [asyncio.run(_measure(make, args.calls, level)) for _ in range(args.repeats)]
                results[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
            ours = results["podium worker"][0]
            for name, (cpu, wall) in results.items():
                print(f"| {name} | {level} | {cpu:.3f} | {wall:.3f} | {cpu / ours:.2f} |", flush=True)
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


if __name__ == "__main__":
    main()
