"""Admission in ``podium serve``: at most max_in_flight run, later requests wait their turn
(bounded), and a request that gets no slot is answered 503 — traced and counted like any other.

Workers take a known time (``delay_s``), so which request must wait, and for how long, is known."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from podium.serve.app import Server
from podium.trace.store import TraceStore
from tests.test_serve import POOL, Running, fake_pool

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


def test_a_wait_longer_than_queue_timeout_s_gets_503(tmp_path: Path) -> None:
    running, traces = server(tmp_path, "max_in_flight = 1\nqueue_timeout_s = 0.3\n", delay_s=1.5)
    try:
        (ok, _, _, _), (busy, _, refused, took) = asyncio.run(burst(running.url, 2))
    finally:
        running.stop()
    assert ok == 200 and busy == 503 and 0.3 <= took < 1.4  # refused when its wait ran out, not when a slot freed
    record = traces.get(refused)
    assert record is not None and record.error is not None and "no slot within queue_timeout_s 0.3 s" in record.error


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
