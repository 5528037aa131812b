"""The trace record tables are declared once (podium.trace.columns): the SQLite trace file, the
PostgreSQL tables and what a record writes all follow that declaration, a PostgreSQL database
migrated by Alembic matches the current tables (so a column declared without its revision fails
here), and an SQLite file written before a column was declared gets it on its next open."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from podium.records import BudgetIncident, Disclosure, FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
from podium.trace.columns import RECORD_TABLES, Col, RecordTable
from podium.trace.rows import record_from_rows, rows_of
from podium.trace.store import TraceStore
from podium.workers.base import Usage
from podium.workflow import ALL, Step, Workflow
from tests.test_trace_purge import run_marked


def _sqlite_columns(path: Path, table: str) -> list[tuple[str, str, bool]]:
    db = sqlite3.connect(path)
    try:
        return [(r[1], r[2], not r[3]) for r in db.execute(f"PRAGMA table_info({table})")]
    finally:
        db.close()


def test_a_new_sqlite_trace_file_has_the_declared_columns(tmp_path: Path) -> None:
    TraceStore(tmp_path / "t.sqlite3").close()
    types = {"text": "TEXT", "integer": "INTEGER", "real": "REAL"}
    for table in RECORD_TABLES:
        declared = [(c.name, types[c.type], c.nullable) for c in table.columns]
        assert _sqlite_columns(tmp_path / "t.sqlite3", table.name) == declared, table.name


def test_a_record_writes_exactly_the_declared_columns(tmp_path: Path) -> None:
    """rows_of is the one place a record becomes rows: every declared column gets a value and
    nothing undeclared is written (a run with a plan attempt and steps)."""
    store = TraceStore(tmp_path / "t.sqlite3")
    run_marked(store, request_id="c" * 32)
    record = store.get("c" * 32)
    store.close()
    assert record is not None and record.attempts and record.steps
    request, attempts, steps = rows_of(record)
    for table, row in zip(RECORD_TABLES, (request, attempts[0], steps[0]), strict=True):
        assert set(row) == {c.name for c in table.columns}, table.name


def test_an_sqlite_file_gets_a_newly_declared_column_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Declaring a column (nullable or with a default) is enough for the SQLite file: an
    existing file's table gets it, its rows keep their values and read the default."""
    import podium.trace.sqlite_schema as sqlite_schema
    from podium.trace import columns

    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    run_marked(store)
    store.close()
    added = Col("added_by_this_test", "text", default="'none'")
    steps = RecordTable(columns.STEPS.name, (*columns.STEPS.columns, added), columns.STEPS.primary_key)
    monkeypatch.setattr(sqlite_schema, "RECORD_TABLES", (columns.REQUESTS, columns.ATTEMPTS, steps))
    TraceStore(path).close()
    assert ("added_by_this_test", "TEXT", False) in _sqlite_columns(path, "steps")
    db = sqlite3.connect(path)
    assert {r[0] for r in db.execute("SELECT added_by_this_test FROM steps")} == {"none"}
    db.close()


def test_a_version_6_file_with_rows_opens_and_gains_every_column_declared_since(tmp_path: Path) -> None:
    """tests/data/trace-schema-v6.sql is a file of 2026-12-06 (its SQL written by hand then) with a
    request, its attempt and its steps. Opening it adds the columns declared since; SQLite can add
    a NOT NULL column without a default only to an empty table, so a new column declared that way
    fails here, not in a user's file."""
    path = tmp_path / "v6.sqlite3"
    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "data" / "trace-schema-v6.sql").read_text(encoding="utf-8"))
    db.close()
    store = TraceStore(path)
    record = store.get("6" * 32)
    store.close()
    assert record is not None and record.status == "ok" and record.attempts and len(record.steps) == 2
    for table in RECORD_TABLES:
        assert {name for name, _, _ in _sqlite_columns(path, table.name)} == {c.name for c in table.columns}


def test_postgres_migrated_by_alembic_matches_the_declared_tables(store_url_postgresql: str) -> None:
    """Revision 0002 writes its columns out as they were; every later change needs its own
    revision. Alembic's autogenerate comparison of the migrated database with the current
    metadata must find nothing (a column declared without a revision shows up here)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from podium.store.schema import metadata

    engine = create_engine(store_url_postgresql.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_server_default": True})
            diff: list[Any] = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert [d for d in diff if not _alembic_own(d)] == []


def test_a_postgres_store_with_traces_upgrades_to_head_and_reads_them_back(postgres_server: Any) -> None:
    """A database at revision 0004 (the first with every trace table as it stands) holding the
    version-6 file's request, attempt and steps is upgraded to head, as ``podium db upgrade``
    does, and the request reads back. A later revision that adds a NOT NULL column without a
    server default fails here: the test database of the comparison above is empty."""
    import sqlalchemy
    from alembic import command

    from podium.store.engine import _alembic_config, _engine, upgrade_url
    from podium.trace.postgres import PostgresTraceStore

    old = sqlite3.connect(":memory:")  # the version-6 file's rows, with the columns they had then
    old.row_factory = sqlite3.Row
    old.executescript((Path(__file__).parent / "data" / "trace-schema-v6.sql").read_text(encoding="utf-8"))
    rows = {t: [dict(r) for r in old.execute(f"SELECT * FROM {t}")] for t in ("requests", "plan_attempts", "steps")}
    old.close()
    assert [len(rows[t]) for t in rows] == [1, 2, 2]  # a request, its plan and review attempts, two steps
    url = str(postgres_server.new_database())
    engine = _engine(url)
    try:
        with engine.begin() as connection:
            command.upgrade(_alembic_config(connection), "0004")
            for name, table_rows in rows.items():
                table = sqlalchemy.table(name, *(sqlalchemy.column(c) for c in table_rows[0]))
                connection.execute(sqlalchemy.insert(table), table_rows)
    finally:
        engine.dispose()
    assert upgrade_url(url)[0] == "0004"
    store = PostgresTraceStore(url)
    try:
        record = store.get("6" * 32)
    finally:
        store.close()
    assert record is not None and record.status == "ok" and len(record.steps) == 2


def _alembic_own(change: Any) -> bool:
    """Alembic's version table is in the database and not in podium's metadata."""
    return isinstance(change, tuple) and change[0] == "remove_table" and change[1].name == "alembic_version"


def _every_field_set() -> RunRecord:
    """A record in which every stored field of the record, its attempts, steps, usage, totals and
    disclosures differs from its default (checked below), so a field that rows_of writes but
    record_from_rows forgets to read (or the reverse) fails the round trip."""
    usage = Usage(input_tokens=11, output_tokens=7, cached_input_tokens=3, reasoning_tokens=2, estimated=True)
    disclosure = Disclosure("api.example.com", provider="openai", endpoint="https://api.example.com/v1",
                            region="eu", masked={"PERSON": 1}, clear={"EMAIL": 2}, scanned=True, blocked="why",
                            values={"<PERSON_1>": "Ada"})  # fmt: skip
    workflow = Workflow((Step(0, "Draft.", ()), Step(1, "Finish.", ALL)))
    attempt = PlanAttempt(attempt=1, messages=({"role": "user", "content": "plan"},), raw_output="raw",
                          workflow=workflow, round=1, error_kind="unparseable", error="bad", usage=usage,
                          cost_usd=0.5, latency_s=1.5, constrained=True, started_at="2026-12-06T00:00:00.000Z",
                          finished_at="2026-12-06T00:00:01.000Z", disclosures=(disclosure,))  # fmt: skip
    step = StepRecord(index=1, phase="fallback", worker_index=1, worker="w1", subtask="Finish.", access=[0],
                      visible=(0,), messages=({"role": "user", "content": "step"},), output="out", usage=usage,
                      cost_usd=0.25, latency_s=2.5, started_at="2026-12-06T00:00:01.000Z",
                      finished_at="2026-12-06T00:00:02.000Z", finish_reason="length", error="boom",
                      error_type="ServerError", round=1, visible_previous=((0, 1),),
                      disclosures=(disclosure,))  # fmt: skip
    totals = Totals(worker_calls=1, input_tokens=11, cached_input_tokens=3, output_tokens=7, cost_usd=0.25,
                    conductor_calls=1, conductor_input_tokens=5, conductor_cached_input_tokens=1,
                    conductor_output_tokens=4, conductor_cost_usd=0.5, total_cost_usd=0.75, wall_time_s=3.0,
                    incidents=(BudgetIncident("w1", 0.1, 0.2, role="conductor"),), estimated_calls=1)  # fmt: skip
    return RunRecord(id="7" * 32, question="Q?", pool="p", workers=("w0", "w1"), conductor="c", mode="plan",
                     started_at="2026-12-06T00:00:00.000Z", finished_at="2026-12-06T00:00:03.000Z",
                     status="fallback", answer="A.", attempts=(attempt,), workflows=(workflow,), steps=(step,),
                     totals=totals, fallback=FallbackInfo("worker_error", "detail"), error="err", tags=("t",),
                     subject="s")  # fmt: skip


def test_a_record_with_every_field_set_comes_back_equal_from_its_rows() -> None:
    record = _every_field_set()
    for value in (record, record.attempts[0], record.steps[0], record.steps[0].usage, record.totals,
                  record.steps[0].disclosures[0], record.totals.incidents[0]):  # fmt: skip
        defaults = {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            for f in dataclasses.fields(value)
            if f.metadata.get("stored", True)
            and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
        }
        unset = [name for name, default in defaults.items() if getattr(value, name) == default]
        assert not unset, f"{type(value).__name__}: set {unset} in _every_field_set, so the round trip checks them"
    request, attempts, steps = rows_of(record)
    assert record_from_rows(request, attempts, steps) == record
