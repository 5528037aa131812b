"""Load benchmark of ``podium serve`` and ``podium shadow`` on loopback (issue: service).

A fixed-latency OpenAI-compatible upstream (``podium.serve.fake_upstream``, latency L) is the
worker. N concurrent clients send R requests each, three ways, in the same run:

* **direct** — straight to the upstream (the baseline);
* **serve** — through ``podium serve`` with a one-step fixed conductor (``single:upstream``) over
  that worker: what podium's API, orchestration, budgets and trace writing add per request;
* **shadow** — through ``podium shadow --mode plan`` in front of the upstream: what the proxy
  adds to the client's latency (its background plans also call the upstream, as an LM conductor
  there would).

Every server is a real process (uvicorn) started as a user starts it. Reported: throughput
(requests/s), latency p50/p95/p99 (ms) per way, the latency podium adds (its percentile minus
direct's), failed requests, and for serve that every request left exactly one complete trace.

    .venv/bin/python bench/serve_load.py [--clients 16] [--requests 25] [--latency-ms 50] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

BODY = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(args: list[str], port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    health = "/v1/models" if "fake_upstream" in args[0] else "/healthz"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{' '.join(args[:2])} exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{args[0]} did not start")


def pool_file(folder: Path, upstream_port: int) -> Path:
    path = folder / "bench-pool.toml"
    path.write_text(
        f"""name = "bench"
[conductor]
worker = "upstream"
[fallback]
worker = "upstream"
[[workers]]
name = "upstream"
backend = "openai"
model = "fixed"
base_url = "http://127.0.0.1:{upstream_port}/v1"
api_key_env = "PODIUM_BENCH_KEY"
price = {{ input = 1.0, output = 2.0 }}
"""
    )
    return path


async def load(url: str, clients: int, requests: int) -> tuple[list[float], int, float, list[str]]:
    """(latencies s, failures, wall s, request ids) of clients × requests POSTs."""
    latencies: list[float] = []
    ids: list[str] = []
    failures = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one_client() -> None:
            nonlocal failures
            for _ in range(requests):
                started = time.perf_counter()
                try:
                    response = await client.post(url + "/v1/chat/completions", json=BODY)
                except httpx.HTTPError:
                    failures += 1
                    continue
                if response.status_code != 200:
                    failures += 1
                    continue
                latencies.append(time.perf_counter() - started)
                ids.append(response.headers.get("x-request-id", ""))

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - started
    return latencies, failures, wall, ids


def summary(latencies: list[float], failures: int, wall: float) -> dict[str, Any]:
    ms = np.array(latencies) * 1000
    return {
        "requests": len(latencies) + failures,
        "failed": failures,
        "throughput_rps": round(len(latencies) / wall, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=25, help="requests per client")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the upstream's fixed latency")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "PODIUM_HOME": str(folder), "PODIUM_BENCH_KEY": "unused"}
        up_port, serve_port, shadow_port = free_port(), free_port(), free_port()
        config = folder / "serve.toml"
        config.write_text('[models.podium]\nconductor = "single:upstream"\n')
        traces = folder / "traces.sqlite3"
        procs = [start(["podium.serve.fake_upstream", "--port", str(up_port), "--latency-ms", str(args.latency_ms)],
                       up_port, env)]  # fmt: skip
        try:
            pool = str(pool_file(folder, up_port))
            procs.append(start(["podium", "serve", "--pool", pool, "--config", str(config), "--traces", str(traces),
                                "--port", str(serve_port)], serve_port, env))  # fmt: skip
            procs.append(start(["podium", "shadow", "--upstream", f"http://127.0.0.1:{up_port}", "--pool", pool,
                                "--mode", "plan", "--traces", str(folder / "shadow-traces.sqlite3"),
                                "--store", str(folder / "shadow.sqlite3"), "--port", str(shadow_port)],
                               shadow_port, env))  # fmt: skip
            results: dict[str, Any] = {"config": vars(args) | {"json": None}}
            for name, port in (("direct", up_port), ("serve", serve_port), ("shadow", shadow_port)):
                asyncio.run(load(f"http://127.0.0.1:{port}", 2, 3))  # warm-up: connections, imports
                latencies, failures, wall, ids = asyncio.run(
                    load(f"http://127.0.0.1:{port}", args.clients, args.requests)
                )
                results[name] = summary(latencies, failures, wall)
                if name == "serve":
                    db = sqlite3.connect(traces)
                    complete = db.execute(
                        "SELECT COUNT(*) FROM requests r WHERE status = 'ok' AND finished_at IS NOT NULL "
                        "AND (SELECT COUNT(*) FROM steps s WHERE s.request_id = r.id) = 1"
                    ).fetchone()[0]
                    wanted = set(ids)
                    stored = {r[0] for r in db.execute("SELECT id FROM requests")}
                    results[name]["traces_complete"] = int(complete) - 6  # the warm-up's 6 requests
                    results[name]["every_request_traced"] = wanted <= stored and len(wanted) == len(ids)
            for name in ("serve", "shadow"):
                results[name]["added_ms"] = {
                    q: round(results[name][f"{q}_ms"] - results["direct"][f"{q}_ms"], 1) for q in ("p50", "p95", "p99")
                }
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
