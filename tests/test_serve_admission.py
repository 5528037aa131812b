"""Admission in ``podium serve``: at most max_in_flight run, later requests wait their turn
(bounded), and a request that gets no slot is answered 503 — traced and counted like any other.

Workers take a known time (``delay_s``), so which request must wait, and for how long, is known."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.errors import ConfigError
from podium.serve.app import Server
from podium.serve.cli import serving_stack
from podium.trace.store import TraceStore
from tests.serve_support import free_port
from tests.test_serve import POOL, Running, fake_pool

UPSTREAM_POOL = """name = "one"
[conductor]
worker = "upstream"
[fallback]
worker = "upstream"
[[workers]]
name = "upstream"
backend = "openai"
model = "fixed"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "PODIUM_TEST_KEY"
price = {{ input = 1.0, output = 2.0 }}
"""


def start(argv: list[str], port: int, health: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python -m ARGV`` as a process, once ``health`` answers on ``port``."""
    proc = subprocess.Popen([sys.executable, "-m", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{argv[0]} did not start")


BODY = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}


def server(tmp_path: Path, config: str, delay_s: float) -> tuple[Running, TraceStore]:
    (tmp_path / "serve.toml").write_text(config)
    traces = TraceStore(tmp_path / "traces.sqlite3")
    s = Server(config_path=tmp_path / "serve.toml", pool=POOL, traces=traces, workers=list(fake_pool(delay_s=delay_s)))
    return Running(s), traces


async def burst(url: str, n: int, gap_s: float = 0.05) -> list[tuple[int, dict[str, Any], str, float]]:
    """n requests, started ``gap_s`` apart (so their order of arrival is known): (status, body,
    request id header, seconds to answer) of each, in that order."""
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(i: int) -> tuple[int, dict[str, Any], str, float]:
            await asyncio.sleep(i * gap_s)
            started = time.monotonic()
            r = await client.post(url + "/v1/chat/completions", json=BODY)
            return r.status_code, r.json(), r.headers.get("x-request-id", ""), time.monotonic() - started

        return list(await asyncio.gather(*(one(i) for i in range(n))))


@pytest.mark.slow
def test_a_request_without_a_slot_gets_503_with_a_trace_and_is_counted(tmp_path: Path) -> None:
    running, traces = server(tmp_path, "max_in_flight = 1\nqueue_timeout_s = 0\n", delay_s=0.3)
    try:
        (ok, _, first, _), (busy, error, refused, _) = asyncio.run(burst(running.url, 2))
        health = httpx.get(running.url + "/healthz").json()
    finally:
        running.stop()
    assert ok == 200 and busy == 503 and error["error"]["code"] == "server_busy"
    assert refused and refused != first and refused in error["error"]["message"]  # the trace id is given
    record = traces.get(refused)
    assert record is not None and record.status == "error" and record.error is not None
    assert record.error.startswith("ServerBusy: 1 requests in flight (max_in_flight 1)")
    assert record.question == "What is 6 * 7?" and "model:podium" in record.tags and not record.steps
    assert health["refused_busy"] == 1 and health["served"] == 1 and health["max_in_flight"] == 1
    assert {r.id for r in traces.list()} == {first, refused}  # one trace per request, 503 included


@pytest.mark.slow
def test_requests_over_the_limit_wait_their_turn_and_all_get_answers(tmp_path: Path) -> None:
    running, traces = server(tmp_path, "max_in_flight = 1\nqueue_timeout_s = 30\n", delay_s=0.2)
    try:
        results = asyncio.run(burst(running.url, 3))
        health = httpx.get(running.url + "/healthz").json()
    finally:
        running.stop()
    assert [r[0] for r in results] == [200, 200, 200] and health["refused_busy"] == 0
    records = [traces.get(r[2]) for r in results]
    assert all(r is not None and r.status == "ok" for r in records)
    # one at a time, in order of arrival: each request started after the one before it finished
    starts = [r.steps[0].started_at for r in records if r is not None]
    ends = [r.finished_at for r in records if r is not None]
    assert ends[0] <= starts[1] and ends[1] <= starts[2]


@pytest.mark.slow
def test_a_wait_longer_than_queue_timeout_s_gets_503(tmp_path: Path) -> None:
    running, traces = server(tmp_path, "max_in_flight = 1\nqueue_timeout_s = 0.3\n", delay_s=1.5)
    try:
        (ok, _, _, _), (busy, _, refused, took) = asyncio.run(burst(running.url, 2))
    finally:
        running.stop()
    assert ok == 200 and busy == 503 and 0.3 <= took < 1.4  # refused when its wait ran out, not when a slot freed
    record = traces.get(refused)
    assert record is not None and record.error is not None and "no slot within queue_timeout_s 0.3 s" in record.error
    # its trace covers the wait, as the client saw it: it starts when the request arrived
    assert record.totals.wall_time_s > 0.25  # the 0.3 s wait, by the event loop's clock (was ~0.00004 s)
    assert record.started_at < record.finished_at


@pytest.mark.slow
def test_a_full_wait_queue_refuses_at_once(tmp_path: Path) -> None:
    running, traces = server(tmp_path, "max_in_flight = 1\nmax_queued = 1\nqueue_timeout_s = 30\n", delay_s=0.5)
    try:
        results = asyncio.run(burst(running.url, 3))
    finally:
        running.stop()
    assert [r[0] for r in results] == [200, 200, 503]  # the second waits; the third finds the queue full
    assert results[2][3] < 0.4
    record = traces.get(results[2][2])
    assert record is not None and record.error is not None and "and 1 waiting" in record.error


def test_the_serving_stack_is_uvloop_and_httptools_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {"uvloop", "httptools"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name in installed else None)
    assert serving_stack("auto", "auto") == ("uvloop", "httptools")
    assert serving_stack("asyncio", "h11") == ("asyncio", "h11")  # asked for by name
    installed.clear()  # e.g. Windows, PyPy, or an install without the serve extra
    assert serving_stack("auto", "auto") == ("asyncio", "h11")
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        serving_stack("uvloop", "auto")


@pytest.mark.slow
def test_podium_serve_says_which_stack_it_runs_and_answers_on_it(tmp_path: Path) -> None:
    up_port, port = free_port(), free_port()
    env = {**os.environ, "PODIUM_HOME": str(tmp_path), "PODIUM_TEST_KEY": "unused"}
    upstream = ["podium.serve.fake_upstream", "--port", str(up_port), "--latency-ms", "1"]
    procs = [start(upstream, up_port, "/v1/models", env)]
    try:
        (tmp_path / "serve.toml").write_text('[models.podium]\nconductor = "single:upstream"\n')
        (tmp_path / "pool.toml").write_text(UPSTREAM_POOL.format(port=up_port))
        argv = ["podium", "serve", "--pool", str(tmp_path / "pool.toml"), "--config", str(tmp_path / "serve.toml")]
        procs.append(start([*argv, "--port", str(port)], port, "/healthz", env))
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY, timeout=30)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=60)
    expected = " + ".join(serving_stack("auto", "auto"))  # what this interpreter has installed
    assert f"; {expected}" in procs[1].stdout.read().decode()  # type: ignore[union-attr]
