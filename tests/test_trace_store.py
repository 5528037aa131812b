"""The SQLite trace store: a real file, WAL mode, complete round trips."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import SCHEMA_VERSION, TraceStore, TraceStoreError
from tests.conftest import v2_trace_database

PLAN = 'model_id = [0, 1]\nsubtasks = ["Draft.", "Finish."]\naccess_list = [[], "all"]'


def run_one(store: TraceStore, question: str = "Q?") -> str:
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="draft"), ScriptedWorker("w1", reply="final")],
        ScriptedConductor([PLAN]),
        Fallback(0, "Answer."),
        traces=store,
    )
    return asyncio.run(orch.run(question)).id


def test_wal_mode_and_schema(tmp_path: Path) -> None:
    TraceStore(tmp_path / "t.sqlite3")
    db = sqlite3.connect(tmp_path / "t.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"requests", "plan_attempts", "steps", "meta"} <= tables


def test_record_round_trip_has_every_field(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    request_id = run_one(store)
    record = store.get(request_id)
    assert record is not None
    assert record.question == "Q?" and record.answer == "final" and record.status == "ok"
    assert record.workers == ("w0", "w1")
    assert record.attempts[0].raw_output == PLAN
    step = record.steps[1]
    assert step.visible == (0,) and step.access == "all"
    assert "draft" in step.messages[-1]["content"]  # the exact message sent is stored
    assert step.started_at.endswith("Z") and "T" in step.started_at
    # the conductor call is timed too, and it ends before the first step starts (same clock, UTC)
    plan = record.attempts[0]
    assert plan.started_at.endswith("Z") and plan.started_at <= plan.finished_at <= record.steps[0].started_at
    assert record.totals.worker_calls == 2


def test_list_is_newest_first_and_ids_resolve_by_prefix(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    first, second = run_one(store, "first"), run_one(store, "second")
    rows = store.list()
    assert [r.id for r in rows] == [second, first]
    assert rows[0].steps == 2
    assert store.resolve_id(first[:10]) == first
    with pytest.raises(ConfigError, match="no request"):
        store.resolve_id("ffffffffffffffffffff")
    with pytest.raises(ConfigError, match="not a request id"):
        store.resolve_id("not-hex")


def test_a_request_cut_off_midway_is_reported_unfinished(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    store.begin("abc123", "Q?", started_at="2026-11-30T00:00:00.000Z", pool="p", conductor="c", mode="run")
    assert store.flush(timeout=10)  # the running row is committed with the writer's next batch
    record = TraceStore(tmp_path / "t.sqlite3").get("abc123")  # a second process opening the file
    assert record is not None and record.status == "error" and record.error == "unfinished"


def test_unopenable_database_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db.sqlite3"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="cannot open trace database"):
        TraceStore(bad)


def test_a_database_of_another_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('schema_version', '1');"
    )
    db.close()
    before = path.read_bytes()
    with pytest.raises(TraceStoreError, match=r"schema version 1.*mv "):
        TraceStore(path)
    assert path.read_bytes() == before


def test_a_version_2_database_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    v2_trace_database(
        path,
        "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question) "
        "VALUES ('ab12', '2026-11-29T00:00:00.000Z', 'run', 'p', 'c', 'ok', 'old question')",
    )
    store = TraceStore(path)
    old = store.get("ab12")
    assert old is not None and old.question == "old question" and old.tags == () and old.subject is None
    new = run_one(store, "new question")  # the new columns are written too
    assert store.get(new) is not None
    version = sqlite3.connect(path).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)


def test_tags_subject_and_a_given_request_id_round_trip(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="draft"), ScriptedWorker("w1", reply="final")],
        ScriptedConductor([PLAN]),
        Fallback(0, "Answer."),
        traces=store,
    )
    given = "0123456789abcdef0123456789abcdef"
    record = asyncio.run(orch.run("Q?", request_id=given, tags=("support", "da"), subject="customer-42"))
    stored = store.get(given)
    assert record.id == given and stored is not None
    assert stored.tags == ("support", "da") and stored.subject == "customer-42"
    with pytest.raises(ConfigError, match="32 lowercase hex"):
        asyncio.run(orch.run("Q?", request_id="not-an-id"))
