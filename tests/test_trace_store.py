"""The SQLite trace store: a real file, WAL mode, complete round trips."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore, TraceStoreError

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
