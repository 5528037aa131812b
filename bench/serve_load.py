"""Load benchmark of ``podium serve`` (and ``podium shadow``) on loopback.

A fixed-latency OpenAI-compatible upstream (``podium.serve.fake_upstream``, latency L) is the
worker. At each client level N (``--clients 1,16,64,256``), N concurrent clients send about
``--total`` requests in all, to each way in turn, in the same run (the ways' order rotates from
level to level):

* **direct** — straight to the upstream (the baseline);
* **serve** — through ``podium serve`` with a one-step fixed conductor (``single:upstream``) over
  that worker: what podium's API, orchestration, budgets and trace writing add per request;
* **base** (``--baseline-src DIR``) — the same through another podium checkout's ``src`` (e.g. a
  ``git worktree`` of an older commit), started the same way, plus ``--base-args``: before/after
  in one run (``--baseline-src src --base-args '--loop asyncio --http h11'`` compares this
  checkout's serving stacks);
* **shadow** (``--shadow``) — through ``podium shadow --mode plan`` in front of the upstream:
  what the proxy adds to the client's latency;
* **litellm** (``--litellm PATH``) — through LiteLLM's proxy (``PATH`` is the ``litellm``
  command of a venv of its own, pinned: ``scripts/litellm-peer.sh`` makes it and prints the
  path), one process, routing the same model name to the same upstream, with its cost-map
  download, telemetry and logging off: the peer to beat. It writes no traces.

With ``--paired`` (and ``--baseline-src``) each level ends with a **paired** round: serve and
base run at once, each client alternating between them (half start with one, half with the
other), so whatever else loads the machine loads both alike; reported are each one's CPU
milliseconds per request over that same interval, their ratio and their p50s. On a shared
machine it resolves differences of a few percent that the ways run one after another cannot.

Every server is a real process (uvicorn) started as a user starts it. Reported per way and
level: throughput (requests/s, answered ones), latency p50/p95/p99 (ms), the latency added to
direct's, answered / refused (503) / failed requests, the server process's CPU milliseconds per
request (user + system, from /proc, over the level's requests) and its main thread's alone (the
event loop; the rest is the trace writer and thread pools), the throughput ratio to direct
(and serve/base), and for serve and base that every request — 503s included — left exactly one
trace, every answered one complete.

    .venv/bin/python bench/serve_load.py [--clients 1,16,64,256] [--total 400] [--latency-ms 50]
        [--baseline-src DIR [--base-args '--loop asyncio --http h11']] [--shadow]
        [--config-extra 'max_in_flight = 256'] [--paired] [--litellm PATH] [--json OUT]
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


def start(
    args: list[str], port: int, env: dict[str, str], *, command: list[str] | None = None, health: str | None = None
) -> subprocess.Popen[bytes]:
    """Start ``python -m ARGS`` (or ``COMMAND``) and wait until ``health`` answers 200."""
    argv = command if command is not None else [sys.executable, "-m", *args]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    health = health or ("/v1/models" if "fake_upstream" in args[0] else "/healthz")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{' '.join(argv[:3])} exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{args[0]} did not start")


def cpu_s(pid: int, *, main_thread: bool = False) -> float:
    """User + system CPU seconds of a process so far (Linux /proc), or of its main thread alone
    (the one whose id is the process's: for a server, its event loop; the rest is the trace
    writer and thread pools)."""
    stat = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def litellm_config(folder: Path, upstream_port: int) -> Path:
    """LiteLLM's proxy configuration: the benchmark's model name to the fake upstream."""
    path = folder / "litellm.yaml"
    path.write_text(
        f"""model_list:
  - model_name: {BODY["model"]}
    litellm_params:
      model: openai/fixed
      api_base: http://127.0.0.1:{upstream_port}/v1
      api_key: unused
general_settings:
  dangerously_permit_weak_or_unset_master_key: true  # loopback only, no key: as podium serve here
litellm_settings:
  telemetry: false
  set_verbose: false
  json_logs: false
"""
    )
    return path


async def load(url: str, clients: int, requests: int) -> dict[str, Any]:
    """clients × requests POSTs: latencies (s) of the answered ones, their ids and the 503s' ids,
    failures (anything else), wall seconds."""
    latencies: list[float] = []
    ids: list[str] = []
    refused: list[str] = []
    failures = 0
    why: dict[str, int] = {}  # what each failure was: an HTTP status, or the transport error
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one_client() -> None:
            nonlocal failures
            for _ in range(requests):
                started = time.perf_counter()
                try:
                    response = await client.post(url + "/v1/chat/completions", json=BODY)
                except httpx.HTTPError as exc:
                    failures += 1
                    why[type(exc).__name__] = why.get(type(exc).__name__, 0) + 1
                    continue
                if response.status_code == 503:
                    refused.append(response.headers.get("x-request-id", ""))
                elif response.status_code != 200:
                    failures += 1
                    why[str(response.status_code)] = why.get(str(response.status_code), 0) + 1
                else:
                    latencies.append(time.perf_counter() - started)
                    ids.append(response.headers.get("x-request-id", ""))

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - started
    return {"latencies": latencies, "ids": ids, "refused": refused, "failures": failures, "why": why, "wall": wall}


async def paired_load(urls: tuple[str, str], clients: int, requests: int) -> dict[str, list[float]]:
    """clients × requests POSTs to each of two servers, each client alternating between them
    (odd clients start with the second): the latencies (s) of each server's answered requests.
    Anything but a 200 fails the round (SystemExit): the round compares CPU per answer."""
    latencies: dict[str, list[float]] = {url: [] for url in urls}
    limits = httpx.Limits(max_connections=2 * clients, max_keepalive_connections=2 * clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one_client(k: int) -> None:
            order = urls if k % 2 == 0 else urls[::-1]
            for _ in range(requests):
                for url in order:
                    started = time.perf_counter()
                    response = await client.post(url + "/v1/chat/completions", json=BODY)
                    if response.status_code != 200:
                        raise SystemExit(f"paired round: {url} answered {response.status_code}")
                    latencies[url].append(time.perf_counter() - started)

        await asyncio.gather(*(one_client(k) for k in range(clients)))
    return latencies


def paired(ways: dict[str, tuple[int, int | None, Path | None]], clients: int, requests: int) -> dict[str, Any]:
    """The paired round of serve and base (see the module doc)."""
    (serve_port, serve_pid, _), (base_port, base_pid, _) = ways["serve"], ways["base"]
    assert serve_pid is not None and base_pid is not None
    urls = (f"http://127.0.0.1:{serve_port}", f"http://127.0.0.1:{base_port}")
    cpu0 = (cpu_s(serve_pid), cpu_s(base_pid))
    latencies = asyncio.run(paired_load(urls, clients, requests))
    serve_cpu, base_cpu = (cpu_s(serve_pid) - cpu0[0]) * 1000, (cpu_s(base_pid) - cpu0[1]) * 1000
    n = clients * requests
    return {
        "requests_each": n,
        "serve_cpu_ms_per_request": round(serve_cpu / n, 2),
        "base_cpu_ms_per_request": round(base_cpu / n, 2),
        "cpu_serve/base": round(serve_cpu / base_cpu, 3),
        "serve_p50_ms": round(float(np.percentile(np.array(latencies[urls[0]]) * 1000, 50)), 1),
        "base_p50_ms": round(float(np.percentile(np.array(latencies[urls[1]]) * 1000, 50)), 1),
    }


def summary(run: dict[str, Any], cpu: float | None, main_cpu: float | None = None) -> dict[str, Any]:
    ms = np.array(run["latencies"] or [float("nan")]) * 1000
    sent = len(run["latencies"]) + len(run["refused"]) + run["failures"]
    return {
        "requests": sent,
        "answered": len(run["latencies"]),
        "refused_503": len(run["refused"]),
        "failed": run["failures"],
        "failed_as": run["why"],
        "throughput_rps": round(len(run["latencies"]) / run["wall"], 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "cpu_ms_per_request": None if cpu is None else round(cpu * 1000 / sent, 2),
        "main_thread_cpu_ms_per_request": None if main_cpu is None else round(main_cpu * 1000 / sent, 2),
    }


def traced(traces: Path, run: dict[str, Any], health_url: str) -> dict[str, Any]:
    """Whether every request of ``run`` left one trace (complete when answered). Waits until the
    server's trace writer has nothing pending (another process sees a write once it commits)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        writer = httpx.get(health_url, timeout=5).json().get("traces")
        if writer is None or writer["pending"] == 0:  # an older podium writes inline
            break
        time.sleep(0.05)
    db = sqlite3.connect(traces)
    try:
        rows = dict(db.execute("SELECT id, status FROM requests"))
        steps = dict(db.execute("SELECT request_id, COUNT(*) FROM steps GROUP BY request_id"))
    finally:
        db.close()
    answered, refused = run["ids"], run["refused"]
    return {
        "every_request_traced": all(i in rows for i in answered + refused)
        and len(set(answered + refused)) == len(answered + refused),
        "answered_complete": sum(rows.get(i) == "ok" and steps.get(i) == 1 for i in answered),
        "refused_traced": sum(rows.get(i) == "error" for i in refused),
    }


def table(results: dict[str, Any]) -> str:
    """The run's figures per level and way as a Markdown table (what docs/serve.md shows)."""
    columns = ("clients", "way", "req/s", "vs direct", "CPU ms / request", "p50 / p95 (ms)", "added p50 (ms)", "failed",
               "traced")  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for key, level in results.items():
        if not key.startswith("clients="):
            continue
        for way, row in level.items():
            if "throughput_rps" not in row:  # the ratios between ways
                continue
            ratio, added = row.get("throughput_vs_direct", ""), row.get("added_ms", {}).get("p50", "")
            traced = {None: "", True: "yes", False: "NO"}[row.get("every_request_traced")]
            cells = (key.removeprefix("clients="), way, row["throughput_rps"], ratio, row["cpu_ms_per_request"],
                     f"{row['p50_ms']} / {row['p95_ms']}", added, row["failed"], traced)  # fmt: skip
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,16,64,256", help="client levels, comma-separated")
    parser.add_argument("--total", type=int, default=400, help="requests per level and way (at least 2 per client)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the upstream's fixed latency")
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src/ to run as way 'base'")
    parser.add_argument("--base-args", default="", help="extra podium serve options for 'base' (e.g. --loop asyncio)")
    parser.add_argument("--shadow", action="store_true", help="also measure podium shadow --mode plan")
    parser.add_argument("--config-extra", default="", help="TOML lines added to serve's configuration")
    parser.add_argument("--paired", action="store_true", help="end each level with serve and base run at once")
    parser.add_argument("--litellm", type=Path, metavar="PATH",
                        help="also measure LiteLLM's proxy: its litellm command (scripts/litellm-peer.sh)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    if args.paired and not args.baseline_src:
        parser.error("--paired compares serve with base: give --baseline-src too")
    levels = [int(c) for c in args.clients.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "PODIUM_HOME": str(folder), "PODIUM_BENCH_KEY": "unused"}
        config = folder / "serve.toml"
        config.write_text(f'{args.config_extra}\n[models.podium]\nconductor = "single:upstream"\n')
        up_port = free_port()
        procs = [start(["podium.serve.fake_upstream", "--port", str(up_port), "--latency-ms", str(args.latency_ms)],
                       up_port, env)]  # fmt: skip
        ways: dict[str, tuple[int, int | None, Path | None]] = {"direct": (up_port, procs[0].pid, None)}
        try:
            pool = str(pool_file(folder, up_port))
            servers: list[tuple[str, dict[str, str], list[str]]] = [("serve", env, [])]
            if args.baseline_src:
                base_env = {**env, "PYTHONPATH": str(args.baseline_src.resolve())}
                servers.append(("base", base_env, args.base_args.split()))
            for name, server_env, extra in servers:
                port, traces = free_port(), folder / f"{name}-traces.sqlite3"
                proc = start(["podium", "serve", "--pool", pool, "--config", str(config), "--traces", str(traces),
                              "--port", str(port), *extra], port, server_env)  # fmt: skip
                procs.append(proc)
                ways[name] = (port, proc.pid, traces)
            if args.shadow:
                port = free_port()
                proc = start(["podium", "shadow", "--upstream", f"http://127.0.0.1:{up_port}", "--pool", pool,
                              "--mode", "plan", "--traces", str(folder / "shadow-traces.sqlite3"),
                              "--store", str(folder / "shadow.sqlite3"), "--port", str(port)], port, env)  # fmt: skip
                procs.append(proc)
                ways["shadow"] = (port, proc.pid, None)
            if args.litellm:
                port = free_port()
                litellm_env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR",
                               "LITELLM_TELEMETRY": "False"}  # fmt: skip
                proc = start([], port, litellm_env, health="/health/liveliness", command=[
                    str(args.litellm), "--config", str(litellm_config(folder, up_port)), "--host", "127.0.0.1",
                    "--port", str(port), "--num_workers", "1"])  # fmt: skip
                procs.append(proc)
                ways["litellm"] = (port, proc.pid, None)
            for port, _, _ in ways.values():
                asyncio.run(load(f"http://127.0.0.1:{port}", 2, 3))  # warm-up: connections, imports
            paths = {"baseline_src": str(args.baseline_src), "litellm": str(args.litellm)}
            results: dict[str, Any] = {"config": vars(args) | {"json": None} | paths}
            names = list(ways)
            for k, clients in enumerate(levels):
                per_client = max(2, -(-args.total // clients))
                level: dict[str, Any] = {}
                for name in names[k % len(names) :] + names[: k % len(names)]:  # rotate the order
                    port, pid, trace_file = ways[name]
                    url = f"http://127.0.0.1:{port}"
                    cpu0 = (cpu_s(pid), cpu_s(pid, main_thread=True)) if pid else None
                    run = asyncio.run(load(url, clients, per_client))
                    cpu = (cpu_s(pid) - cpu0[0], cpu_s(pid, main_thread=True) - cpu0[1]) if pid and cpu0 else None
                    level[name] = summary(run, *(cpu or (None, None)))
                    if trace_file is not None:
                        level[name] |= traced(trace_file, run, url + "/healthz")
                for name in names[1:]:
                    level[name]["throughput_vs_direct"] = round(
                        level[name]["throughput_rps"] / level["direct"]["throughput_rps"], 3
                    )
                    level[name]["added_ms"] = {
                        q: round(level[name][f"{q}_ms"] - level["direct"][f"{q}_ms"], 1) for q in ("p50", "p95", "p99")
                    }
                if "base" in level:
                    level["serve/base"] = {
                        "throughput": round(level["serve"]["throughput_rps"] / level["base"]["throughput_rps"], 3),
                        "cpu_ms_per_request": round(
                            level["serve"]["cpu_ms_per_request"] / level["base"]["cpu_ms_per_request"], 3
                        ),
                    }
                if "litellm" in level:
                    level["serve/litellm"] = {
                        "throughput": round(level["serve"]["throughput_rps"] / level["litellm"]["throughput_rps"], 3),
                        "cpu_ms_per_request": round(
                            level["serve"]["cpu_ms_per_request"] / level["litellm"]["cpu_ms_per_request"], 3
                        ),
                    }
                if args.paired:
                    level["paired"] = paired(ways, clients, per_client)
                results[f"clients={clients}"] = level
                print(json.dumps({f"clients={clients}": level}), file=sys.stderr, flush=True)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
    text = json.dumps(results, indent=2)
    print(text)
    print(table(results), file=sys.stderr)  # for a person; the JSON on stdout is for a file
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
