"""The shadow store and the request cache on both engines (an SQLite store and a database on a
real PostgreSQL server, tests/postgres_support.py): one suite, the same assertions; files from
before the shared store still read; a trace purge reaches the shared shadow rows; a shadow row
the store cannot take is counted, not raised into the proxy."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", reason="needs SQLAlchemy (a podium dependency)")

from podium.errors import ConfigError
from podium.store.engine import StoreError, mask_url
from podium.store.request_cache import RequestCache
from podium.store.shadow import ShadowStore, shadow_location
from podium.workers.base import Completion, Usage


def _row(at: str, request_id: str | None, cost: float | None, question: str = "q") -> dict[str, Any]:
    return {"at": at, "status": "done", "mode": "execute", "use_case": "support", "request_id": request_id,
            "question": question, "podium_cost_usd": cost}  # fmt: skip


def test_shadow_rows_round_trip_window_spend_and_purge(store_url: str) -> None:
    store = ShadowStore(store_url)
    store.add(_row("2026-11-30T10:00:00.000Z", "a" * 32, 0.002))
    store.add(_row("2026-12-01T09:00:00.000Z", "b" * 32, 0.003))
    store.add(_row("2026-12-01T11:00:00.000Z", None, None) | {"status": "dropped"})  # no trace
    other = ShadowStore(store_url)  # another process on the same store sees the rows
    assert [r["request_id"] for r in other.rows()] == ["a" * 32, "b" * 32, None]  # oldest first
    assert [r["at"][:10] for r in other.rows(since="2026-12-01")] == ["2026-12-01", "2026-12-01"]
    assert [r["request_id"] for r in other.rows(until="2026-12-01")] == ["a" * 32]
    assert other.spent_since("2026-12-01") == pytest.approx(0.003)  # NULL costs (unrun rows) count 0
    assert other.purge(request_ids=["b" * 32]) == 1
    assert other.purge(before="2026-12-01") == 1  # the older row, whatever its request
    assert [r["status"] for r in store.rows()] == ["dropped"]
    store.close()
    other.close()


def test_the_request_cache_is_shared_by_every_process_on_the_store(store_url: str) -> None:
    first, second = RequestCache(store_url), RequestCache(store_url)
    completion = Completion(text="So the answer is 42", usage=Usage(12, 5), cost_usd=0.0001, latency_s=0.7)
    assert second.get("k1") is None
    first.put("k1", "smol-a", completion)
    hit = second.get("k1")
    assert hit is not None and hit.cached and hit.text == completion.text and hit.usage == completion.usage
    first.put("k1", "smol-a", Completion(text="replaced", usage=Usage(1, 1)))  # the same key replaces
    assert (second.get("k1") or completion).text == "replaced" and len(second) == 1
    assert (second.hits, second.misses) == (2, 1)
    assert first.path == mask_url(store_url)  # a database cache is shown by its URL, password masked
    first.close()
    second.close()


def test_files_from_before_the_shared_store_are_read_as_they_are(tmp_path: Path) -> None:
    """The shadow and cache files of earlier releases (tables written by hand then) keep their
    rows and take new ones."""
    shadow = tmp_path / "shadow.sqlite3"
    with sqlite3.connect(shadow) as db:
        db.execute("CREATE TABLE shadow (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, status TEXT NOT NULL, "
                   "mode TEXT NOT NULL, use_case TEXT NOT NULL, task_type TEXT, reference TEXT, question TEXT, "
                   "upstream_model TEXT, upstream_status INTEGER, upstream_answer TEXT, upstream_latency_s REAL, "
                   "upstream_input_tokens INTEGER, upstream_output_tokens INTEGER, upstream_cost_usd REAL, "
                   "request_id TEXT, podium_status TEXT, podium_answer TEXT, podium_cost_usd REAL, "
                   "podium_latency_s REAL, podium_workers TEXT, podium_steps INTEGER, error TEXT)")  # fmt: skip
        db.execute("INSERT INTO shadow (at, status, mode, use_case) VALUES ('2026-11-01T00:00Z', 'done', 'plan', 'x')")
    store = ShadowStore(shadow)
    store.add(_row("2026-12-01T00:00:00.000Z", "c" * 32, 0.001))
    assert [r["use_case"] for r in store.rows()] == ["x", "support"]
    cache = tmp_path / "requests.sqlite3"
    with sqlite3.connect(cache) as db:
        db.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, worker TEXT NOT NULL, completion TEXT NOT NULL, "
                   "created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))")  # fmt: skip
        body = '{"text": "old", "usage": {"input_tokens": 3, "output_tokens": 1}, "cost_usd": 0.0, "latency_s": 0.1}'
        db.execute("INSERT INTO calls (key, worker, completion) VALUES ('old-key', 'w', ?)", (body,))
    hit = RequestCache(cache).get("old-key")
    assert hit is not None and hit.text == "old" and hit.cached


def test_a_file_that_is_not_a_store_is_named_with_the_fix(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(ConfigError, match=r"request cache.*junk\.sqlite3.*--cache"):
        RequestCache(junk)
    with pytest.raises(StoreError, match=r"junk\.sqlite3"):
        ShadowStore(junk)


def test_the_shadow_store_is_the_shared_one_when_the_database_url_is_set(tmp_path: Path, monkeypatch: Any) -> None:
    default = tmp_path / "shadow.sqlite3"
    monkeypatch.delenv("PODIUM_DATABASE_URL", raising=False)
    assert shadow_location(None, default) == default
    monkeypatch.setenv("PODIUM_DATABASE_URL", "postgresql://podium@db:5432/podium")
    assert shadow_location(None, default) == "postgresql://podium@db:5432/podium"
    assert shadow_location(tmp_path / "mine.sqlite3", default) == tmp_path / "mine.sqlite3"  # an explicit file wins


def test_a_trace_purge_removes_the_shared_shadow_rows_and_their_text(
    store_url_postgresql: str, postgres_server: Any, monkeypatch: Any, capsys: Any
) -> None:
    """``podium trace purge`` with ``PODIUM_DATABASE_URL`` purges the requests' shadow rows in
    the shared store too, and VACUUM FULL leaves none of their text in the table files."""
    from podium.cli import cli
    from podium.trace.postgres import PostgresTraceStore
    from tests.test_trace_backends import _table_bytes
    from tests.test_trace_purge import run_marked

    monkeypatch.setenv("PODIUM_DATABASE_URL", store_url_postgresql)
    traces = PostgresTraceStore(store_url_postgresql)
    run_marked(traces, subject="cust-9")  # type: ignore[arg-type]
    traces.flush()
    (gone,) = [s.id for s in traces.list()]
    traces.close()
    marker = "shadowmarker" + "x" * 40
    shadow = ShadowStore(store_url_postgresql)
    shadow.add(_row("2026-12-01T00:00:00.000Z", gone, 0.001, question=marker))
    shadow.add(_row("2026-12-01T00:00:01.000Z", "d" * 32, 0.001, question="kept"))
    assert marker.encode() in _table_bytes(postgres_server, store_url_postgresql)
    assert cli(["trace", "purge", "--subject", "cust-9", "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shadow_rows"] == 1  # --json purged the shadow rows too
    assert [r["question"] for r in shadow.rows()] == ["kept"]
    assert marker.encode() not in _table_bytes(postgres_server, store_url_postgresql)
    shadow.close()


def test_a_shadow_row_the_store_refuses_is_counted_lost_not_raised(tmp_path: Path) -> None:
    import asyncio

    from podium.builder import build_orchestrator
    from podium.pool import load_pool
    from podium.serve.shadow import ShadowJob, ShadowProxy
    from podium.testing import ScriptedWorker

    class DownStore(ShadowStore):
        def add(self, row: Any) -> None:
            raise StoreError("cannot store a shadow record in the shadow store: server closed the connection")

    pool = load_pool(str(Path(__file__).parent / "pools" / "three-fakes.toml"))
    workers = [ScriptedWorker(n, 'model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]') for n in "abc"]
    proxy = ShadowProxy("http://127.0.0.1:9", build_orchestrator(pool, workers=list(workers)),
                        DownStore(tmp_path / "s.sqlite3"))  # fmt: skip
    reply = b'{"choices": [{"message": {"content": "42"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}'
    job = ShadowJob({"messages": [{"role": "user", "content": "6*7?"}]}, 200, reply, 0.1, "support", None, None)
    asyncio.run(proxy.run_job(job))
    assert proxy.counts["lost"] == 1 and proxy.counts["done"] == 1


def test_a_key_store_that_goes_down_keeps_known_keys_and_answers_503_for_others(store_url_postgresql: str) -> None:
    """The shared key store goes away mid-run: a key this replica already knew keeps working (no
    revocation can happen without the store), an unknown secret gets 503 in OpenAI's shape with
    Retry-After — never a plain-text 500 — and the UI says so too."""
    import httpx
    import sqlalchemy

    from podium.serve.app import Server, create_app
    from podium.serve.keys import KeyStore
    from podium.testing import ThreadedUvicorn
    from tests.test_serve import POOL, fake_pool

    keys = KeyStore(url=store_url_postgresql)
    secret = keys.create("team-a")  # no budget: nothing else needs the database
    server = ThreadedUvicorn(create_app(Server(pool=POOL, keys=keys, workers=list(fake_pool()))))
    body = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}

    def ask(key: str) -> httpx.Response:
        return httpx.post(server.url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})

    try:
        assert ask(secret).status_code == 200
        keys._db.dispose()  # the server "goes away": nothing listens at port 1
        keys._db = sqlalchemy.create_engine("postgresql+psycopg://podium@127.0.0.1:1/none")
        time.sleep(KeyStore.CACHE_S + 0.1)  # past the lookup cache: the store is asked again
        assert ask(secret).status_code == 200
        stranger = ask("pk-podium-" + "x" * 43)
        error = stranger.json()["error"]
        assert stranger.status_code == 503 and error["code"] == "store_unavailable" and "key store" in error["message"]
        assert stranger.headers["retry-after"] == "5"
        ui = httpx.get(server.url + "/ui", headers={"Authorization": "Bearer pk-podium-unknown"})
        assert ui.status_code == 503 and "key store" in ui.text
    finally:
        server.stop()


def test_trace_commands_take_the_store_by_option(store_url_postgresql: str, monkeypatch: Any, capsys: Any) -> None:
    """``--database-url`` reaches the shared traces without the environment variable."""
    from podium.cli import cli
    from podium.trace.postgres import PostgresTraceStore
    from tests.test_trace_purge import run_marked

    monkeypatch.delenv("PODIUM_DATABASE_URL", raising=False)
    traces = PostgresTraceStore(store_url_postgresql)
    marks = run_marked(traces)  # type: ignore[arg-type]
    traces.close()
    assert cli(["trace", "search", marks[0], "--database-url", store_url_postgresql, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert cli(["dataflow", "--database-url", store_url_postgresql, "--json"]) == 0


def test_tasks_export_reads_shadow_rows_from_a_store_given_by_url(store_url: str, tmp_path: Path, capsys: Any) -> None:
    """``podium tasks export --store`` takes a database URL as well as a file (the option once
    made every value a path, turning ``postgresql://host/db`` into ``postgresql:/host/db``)."""
    from podium.cli import cli

    store = ShadowStore(store_url)
    for k, question in enumerate(("What is 6 * 7?", "What is 2 + 2?")):
        row = _row(f"2026-12-01T0{k}:00:00.000Z", None, 0.001, question)
        store.add(row | {"upstream_answer": "The answer is 42." if k == 0 else "4", "task_type": "math"})
    store.close()
    out = tmp_path / "set.jsonl"
    argv = ["tasks", "export", "--source", "shadow", "--store", store_url, "--out", str(out), "--allow-pii", "--json"]
    assert cli(argv) == 0
    assert json.loads(capsys.readouterr().out)["written"] == 2
    assert [json.loads(line)["question"] for line in out.read_text().splitlines()] == [
        "What is 6 * 7?",
        "What is 2 + 2?",
    ]
    missing = tmp_path / "no-such-store.sqlite3"  # a file that is not there is named, not created
    assert cli([*argv[:5], str(missing), "--out", str(tmp_path / "other.jsonl"), "--allow-pii"]) == 2
    assert "no shadow store at" in capsys.readouterr().err and not missing.exists()
