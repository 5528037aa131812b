"""The trace record tables are declared once (podium.trace.columns): the SQLite trace file, the
PostgreSQL tables and what a record writes all follow that declaration, a PostgreSQL database
migrated by Alembic matches the current tables (so a column declared without its revision fails
here), and an SQLite file written before a column was declared gets it on its next open."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from podium.trace.columns import RECORD_TABLES, Col, RecordTable
from podium.trace.rows import rows_of
from podium.trace.store import TraceStore
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
    added = Col("note", "text", default="'none'")
    steps = RecordTable(columns.STEPS.name, (*columns.STEPS.columns, added), columns.STEPS.primary_key)
    monkeypatch.setattr(sqlite_schema, "RECORD_TABLES", (columns.REQUESTS, columns.ATTEMPTS, steps))
    TraceStore(path).close()
    assert ("note", "TEXT", False) in _sqlite_columns(path, "steps")
    db = sqlite3.connect(path)
    assert {r[0] for r in db.execute("SELECT note FROM steps")} == {"none"}
    db.close()


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
            diff: list[Any] = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()
    assert [d for d in diff if not _alembic_own(d)] == []


def _alembic_own(change: Any) -> bool:
    """Alembic's version table is in the database and not in podium's metadata."""
    return isinstance(change, tuple) and change[0] == "remove_table" and change[1].name == "alembic_version"
