"""Several ``podium serve`` replicas against one PostgreSQL store: a key's budget holds across
all of them.

Real parts: three ``podium serve`` processes started by the CLI as an operator starts them, a
real PostgreSQL server (tests/postgres_support.py), the key created with ``podium keys create``,
and a real OpenAI-compatible HTTP worker on 127.0.0.1. The worker is a fake (tests/fake_openai.py:
it answers every call with one valid workflow, and reports one prompt token per byte, the most
podium's worst-case bound allows, so each call costs close to what it reserved and the budget
binds) so 200 requests take seconds; what is under test is podium's accounting, not a model.
With a ledger per process (podium before the shared store) the three replicas together spent up
to three budgets.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("sqlalchemy", reason="needs podium[serve]")

from podium.store.engine import open_store
from podium.testing import ThreadedUvicorn
from tests.fake_openai import fake_openai_app
from tests.serve_support import free_port, start_podium

MARK = "zqmark"  # a word no other text has: question k carries "zqmark{k}"
PLAN = 'model_id = [0]\nsubtasks = ["Answer the question."]\naccess_list = [[]]'
BUDGET_USD = 0.2
PRICE = 10.0  # USD per 1M tokens in and out: a conductor call reserves and costs ~$0.02-0.03


def _pool(tmp_path: Path, upstream: str) -> Path:
    pool = tmp_path / "http-fakes.toml"
    pool.write_text(
        f"""name = "http-fakes"
max_steps = 2
[conductor]
worker = "fake"
resamples = 0
recursion_rounds = 0
max_tokens = 64
[fallback]
worker = "fake"
[[workers]]
name = "fake"
backend = "openai"
model = "smollm2"
base_url = "{upstream}/v1"
max_tokens = 32
price = {{ input = {PRICE}, output = {PRICE} }}
"""
    )
    return pool


def _podium(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "podium", *args], env=env, capture_output=True, text=True, check=False)


def _start_serve(
    port: int, pool: Path, traces: Path | None, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    files = ["--traces", str(traces)] if traces is not None else []  # None: the shared store's traces
    return start_podium(["serve", "--pool", str(pool), *files, *extra], port, env)


@pytest.mark.parametrize("deployment", ["3 replicas + PostgreSQL", "--workers 3 + SQLite"])
@pytest.mark.slow
def test_processes_serving_one_key_share_its_budget(deployment: str, tmp_path: Path, request: Any) -> None:
    """200 concurrent requests on one key with a $0.20 budget, spread over three processes:
    separate replicas on three ports against one PostgreSQL database, or one ``podium serve
    --workers 3`` on the embedded SQLite store. Together they spend at most the budget; every
    refusal is a 429 in OpenAI's shape; every answer has exactly one trace."""
    env = {**os.environ, "PODIUM_HOME": str(tmp_path / "home")}
    replicas = deployment.startswith("3 replicas")
    if replicas:
        url = request.getfixturevalue("postgres_server").new_database()
        env["PODIUM_DATABASE_URL"] = url
        upgraded = _podium("db", "upgrade", env=env)
        assert upgraded.returncode == 0, upgraded.stderr
    else:
        env.pop("PODIUM_DATABASE_URL", None)
        url = f"sqlite:///{tmp_path / 'home' / 'keys.sqlite3'}"
    created = _podium("keys", "create", "team", "--budget", str(BUDGET_USD), env=env)
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip().splitlines()[-1]

    upstream = ThreadedUvicorn(fake_openai_app(reply=PLAN, prompt_tokens="bytes"))
    pool = _pool(tmp_path, upstream.url)
    if replicas:  # traces in PostgreSQL too: one table for the three
        ports, traces = [free_port() for _ in range(3)], []
        servers = [_start_serve(p, pool, None, env) for p in ports]
    else:
        ports, traces = [free_port()], [tmp_path / "traces.sqlite3"]
        servers = [_start_serve(ports[0], pool, traces[0], env, "--workers", "3")]
    try:
        auth = {"Authorization": f"Bearer {secret}"}
        model = httpx.get(f"http://127.0.0.1:{ports[0]}/v1/models", headers=auth, timeout=10).json()["data"][0]["id"]

        async def one(client: httpx.AsyncClient, k: int) -> httpx.Response:
            return await client.post(
                f"http://127.0.0.1:{ports[k % len(ports)]}/v1/chat/completions",
                headers=auth,
                json={
                    "model": model,
                    "user": f"customer-{k % 7}",
                    "messages": [{"role": "user", "content": f"Question {k}: what is {k} + 1? {MARK}{k}"}],
                },
            )

        async def burst() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(timeout=120, limits=limits) as client:
                return await asyncio.gather(*(one(client, k) for k in range(200)))

        responses = asyncio.run(burst())
    finally:
        for proc in servers:
            proc.terminate()
        for proc in servers:
            proc.wait(timeout=60)
        upstream.stop()

    answered = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert answered and refused, "the budget must let some requests through and refuse others"
    for r in refused:  # OpenAI's error shape, the quota code a client library maps to its error
        assert r.status_code == 429, r.text[:500]
        error = r.json()["error"]
        assert error["code"] == "insufficient_quota" and error["message"]

    # The money: what the three replicas recorded, and what the shared ledger settled, stay within the budget.
    from sqlalchemy import text

    engine = open_store(url)
    with engine.connect() as connection:
        settled = connection.scalar(text("SELECT COALESCE(SUM(spent_usd), 0) FROM budget_ledgers"))
        recorded = connection.scalar(text("SELECT COALESCE(SUM(cost_usd), 0) FROM usage"))
        recorded_n = connection.scalar(text("SELECT COUNT(*) FROM usage"))
        holds = connection.scalar(text("SELECT COUNT(*) FROM budget_holds"))
    engine.dispose()
    print(f"answered {len(answered)}, refused {len(refused)}, spent ${recorded:.6f} of ${BUDGET_USD}")
    assert recorded <= BUDGET_USD + 1e-9  # what the replicas recorded as spent: within the one budget
    assert 0.5 * BUDGET_USD < settled <= BUDGET_USD + 1e-9  # the budget bound (and was not left mostly unused)
    assert recorded == pytest.approx(settled)
    assert holds == 0  # every reservation settled: none is left to expire
    assert recorded_n >= len(answered)  # refused mid-request ones record what they spent (often $0)

    # One trace per request that started: answered ones and those refused mid-request; one store or one file.
    ids = _trace_ids(url if replicas else None, traces)
    assert all(n == 1 for n in ids.values())
    answered_ids = {r.json()["id"].removeprefix("chatcmpl-") for r in answered}
    assert answered_ids <= set(ids) and len(ids) == recorded_n
    if not replicas:
        return
    # The shared trace store: what any replica wrote is found, and purged, from anywhere.
    found = _podium("trace", "search", f"{MARK}*", "--limit", "500", "--json", env=env)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert len(hits) == len(ids)  # every request's question, whichever replica served it
    purge = _podium("trace", "purge", "--subject", "customer-3", "--yes", "--json", env=env)
    assert purge.returncode == 0, purge.stderr
    purged = json.loads(purge.stdout)["request_ids"]
    assert purged and set(purged) <= set(ids)
    after = json.loads(_podium("trace", "search", f"{MARK}*", "--limit", "500", "--json", env=env).stdout)
    assert {h["id"] for h in after} == set(ids) - set(purged)
    assert _podium("trace", "search", "--subject", "customer-3", "--json", env=env).stdout.strip() == "[]"


def _trace_ids(url: str | None, files: list[Path]) -> dict[str, int]:
    """Request id → how many finished trace rows it has (PostgreSQL store, or trace files)."""
    ids: dict[str, int] = {}
    if url is not None:
        from sqlalchemy import text

        engine = open_store(url)
        with engine.connect() as connection:
            rows = list(connection.execute(text("SELECT id FROM requests WHERE status != 'running'")))
        engine.dispose()
    else:
        rows = []
        for path in files:
            with sqlite3.connect(path) as db:
                rows += db.execute("SELECT id FROM requests WHERE status != 'running'").fetchall()
    for (request_id,) in rows:
        ids[request_id] = ids.get(request_id, 0) + 1
    return ids


@pytest.mark.slow
def test_a_config_edit_reaches_every_worker_process(tmp_path: Path) -> None:
    """The kill switch with ``--workers 2``: each process watches the configuration file, so
    one edit switches all of them to the fallback pipeline within seconds."""
    env = {**os.environ, "PODIUM_HOME": str(tmp_path / "home")}
    env.pop("PODIUM_DATABASE_URL", None)
    upstream = ThreadedUvicorn(fake_openai_app(reply=PLAN))
    config = tmp_path / "serve.toml"
    config.write_text('serving = "conductor"\n')
    port = free_port()
    proc = _start_serve(port, _pool(tmp_path, upstream.url), tmp_path / "t.sqlite3", env,
                        "--workers", "2", "--config", str(config))  # fmt: skip
    try:

        def serving() -> dict[int, str]:
            seen: dict[int, str] = {}
            for _ in range(60):  # a new connection each time: the kernel hands them to either process
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                seen[health["process"]] = health["serving"]
            return seen

        before = serving()
        assert len(before) == 2 and set(before.values()) == {"conductor"}, before
        config.write_text('serving = "fallback"\n')
        deadline = time.monotonic() + 15
        while (after := serving()) and set(after.values()) != {"fallback"} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert set(after.values()) == {"fallback"} and set(after) <= set(before), after
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        upstream.stop()


@pytest.mark.slow
def test_the_kill_switch_reaches_replicas_on_other_hosts_through_the_shared_store(
    tmp_path: Path, postgres_server: Any
) -> None:
    """Two replicas with their own configuration files (as on two hosts) on one PostgreSQL
    store: ``podium kill-switch on`` from a third process switches both to the fallback pipeline
    within seconds (a request then runs no conductor), and ``off`` hands back to their files."""
    env = {**os.environ, "PODIUM_HOME": str(tmp_path / "home")}
    env["PODIUM_DATABASE_URL"] = postgres_server.new_database()
    assert _podium("db", "upgrade", env=env).returncode == 0
    upstream = ThreadedUvicorn(fake_openai_app(reply=PLAN))
    pool = _pool(tmp_path, upstream.url)
    ports = [free_port() for _ in range(2)]
    servers = [_start_serve(p, pool, None, env) for p in ports]

    def serving() -> list[str]:
        return [httpx.get(f"http://127.0.0.1:{p}/healthz", timeout=5).json()["serving"] for p in ports]

    def wait_for(state: str) -> list[str]:
        deadline = time.monotonic() + 15
        while (seen := serving()) != [state, state] and time.monotonic() < deadline:
            time.sleep(0.3)
        return seen

    try:
        assert serving() == ["conductor", "conductor"]
        flipped = _podium("kill-switch", "on", env=env)
        assert flipped.returncode == 0 and "kill switch ON" in flipped.stdout, flipped.stderr
        assert wait_for("fallback") == ["fallback", "fallback"]
        model = httpx.get(f"http://127.0.0.1:{ports[1]}/v1/models", timeout=5).json()["data"][0]["id"]
        body = {"model": model, "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
        answered = httpx.post(f"http://127.0.0.1:{ports[1]}/v1/chat/completions", json=body, timeout=60)
        assert answered.status_code == 200
        shown = _podium("trace", "show", answered.json()["id"], "--json", env=env)
        assert json.loads(shown.stdout)["conductor"] == "fallback"  # no conductor call on the kill switch
        assert json.loads(_podium("kill-switch", "status", "--json", env=env).stdout)["on"] is True
        assert _podium("kill-switch", "off", env=env).returncode == 0
        assert wait_for("conductor") == ["conductor", "conductor"]
    finally:
        for proc in servers:
            proc.terminate()
        for proc in servers:
            proc.wait(timeout=60)
        upstream.stop()
