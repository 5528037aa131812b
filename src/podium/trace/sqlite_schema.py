"""The SQLite trace file's schema: its tables, their upgrades, and what its search index holds.

Tables: ``requests`` (one row per request), ``plan_attempts`` (one row per conductor call),
``steps`` (one row per executed step, workflow and fallback), their columns declared once in
:mod:`podium.trace.columns` (``CREATE TABLE`` is written from there, and a column declared after
a file was made is added to it on open). JSON columns hold messages,
workflows, access lists and disclosures (third-party recipients of a call and the PII kinds they
received; never PII values unless the pool file says ``record_values``). Times are UTC ISO 8601.

Full-text search: ``search_text`` holds the searchable texts of each request (question, answer,
conductor output, subtasks, outputs, errors; see :data:`~podium.trace.query.FIELDS`), each as
written and folded (:func:`~podium.trace.query.fold`: no accents, ø → o, æ → ae), and
``search_index`` is an SQLite FTS5 index of the folded texts (external content: filled by
:func:`index_texts` in one statement per batch, emptied of a deleted row by a trigger); queries
are folded alike, and snippets are shown in the text as written. Both are
written in the same transaction as the rows they index (:func:`index_texts`), and the foreign
key's ``ON DELETE CASCADE`` takes a request's texts and index entries with it, so the index
cannot drift.

Opening a file (:class:`~podium.trace.store.TraceStore` does it): :func:`check_version` reads its
schema version before anything writes, :func:`create_or_upgrade` creates the tables of a new file
or upgrades an older one in one transaction. The PostgreSQL store's tables are
:mod:`podium.store.schema`, built from the same declaration.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from podium.trace.backend import TraceStoreError
from podium.trace.columns import RECORD_TABLES, Col, RecordTable

__all__ = ["SCHEMA_VERSION", "check_version", "create_or_upgrade", "index_texts"]


SCHEMA_VERSION = 6
"""Version of the tables below. An older database is upgraded in place by additive migrations
(new columns and indexes, and a rebuilt search index; in one transaction, announced on stderr);
a newer one is refused with the fix, never altered. (Version 1 was a development schema that
never shipped.)"""

_FOLDED_SINCE = 4
"""The first version whose search index holds folded text (:func:`~podium.trace.query.fold`);
the search tables of an older file are rebuilt from its rows when it is upgraded."""

_MIGRATIONS: dict[int, str] = {
    # 2 → 3: caller-given tags and the data subject's key, for search, slices and purge; when
    # each conductor call started and ended (for span export); each call's third-party recipients
    # and the PII kinds they received (data-flow register); the full-text tables (created by
    # _SCHEMA and filled from the old rows in the same transaction).
    2: """
    ALTER TABLE requests ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE requests ADD COLUMN subject TEXT;
    ALTER TABLE plan_attempts ADD COLUMN started_at TEXT;
    ALTER TABLE plan_attempts ADD COLUMN finished_at TEXT;
    ALTER TABLE plan_attempts ADD COLUMN disclosures TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE steps ADD COLUMN disclosures TEXT NOT NULL DEFAULT '[]';
    """,
    # 3 → 4: the index holds folded text (ø → o, æ → ae, é → e, ...), so search finds "lørdag"
    # for "lordag"; the search tables are dropped here, created by _SCHEMA and filled from the
    # rows in the same transaction (nothing else changes: rows are kept as they are).
    3: """
    DROP TRIGGER IF EXISTS search_text_insert;
    DROP TRIGGER IF EXISTS search_text_delete;
    DROP TABLE IF EXISTS search_index;
    DROP VIEW IF EXISTS search_content;
    DROP TABLE IF EXISTS search_text;
    """,
    # 4 → 5: whether a call's token counts are podium's estimate (its provider reported no usage)
    4: """
    ALTER TABLE plan_attempts ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
    """,
    # 5 → 6: the search index is filled by one INSERT ... SELECT per batch (index_texts), not by a
    # per-row trigger: FTS5 flushes its pending terms at each trigger's statement boundary, so the
    # trigger wrote a tiny index segment per text (about 3x the CPU of a batch's one insert)
    5: """
    DROP TRIGGER IF EXISTS search_text_insert;
    """,
}
"""SQL that upgrades version ``k`` to ``k + 1``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE INDEX IF NOT EXISTS requests_subject ON requests (subject) WHERE subject IS NOT NULL;
CREATE TABLE IF NOT EXISTS search_text (
    id INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    field TEXT NOT NULL,
    location TEXT NOT NULL,
    text TEXT NOT NULL,
    folded TEXT
);
CREATE INDEX IF NOT EXISTS search_text_request ON search_text (request_id);
CREATE VIEW IF NOT EXISTS search_content AS SELECT id, COALESCE(folded, text) AS folded FROM search_text;
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5 (folded, content='search_content', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS search_text_delete AFTER DELETE ON search_text BEGIN
    INSERT INTO search_index (search_index, rowid, folded) VALUES ('delete', old.id, COALESCE(old.folded, old.text));
END;
"""

_STEP_LOCATION = (
    "CASE WHEN phase = 'fallback' THEN 'fallback' WHEN round > 0 THEN printf('round %d step %d', round, step_index) "
    "ELSE printf('step %d', step_index) END"
)
_INDEX = (
    "SELECT id, 'question', '', question FROM requests WHERE {requests}",
    "SELECT id, 'answer', '', answer FROM requests WHERE answer <> '' AND {requests}",
    "SELECT id, 'error', '', error FROM requests WHERE error <> '' AND {requests}",
    "SELECT request_id, 'reasoning', CASE WHEN round > 0 THEN printf('round %d attempt %d', round, attempt) "
    "ELSE printf('attempt %d', attempt) END, raw_output FROM plan_attempts WHERE raw_output <> '' AND {steps}",
    f"SELECT request_id, 'subtask', {_STEP_LOCATION}, subtask FROM steps WHERE subtask <> '' AND {{steps}}",
    f"SELECT request_id, 'output', {_STEP_LOCATION}, output FROM steps WHERE output <> '' AND {{steps}}",
    f"SELECT request_id, 'error', {_STEP_LOCATION}, error FROM steps WHERE error <> '' AND {{steps}}",
)
"""What goes into ``search_text`` (one row per text; ``field`` is one of query.FIELDS)."""


def index_texts(
    db: sqlite3.Connection,
    request_ids: Sequence[str] | None,
    running: Sequence[str] = (),
    finished: Sequence[str] = (),
) -> None:
    """Fill ``search_text`` (and so ``search_index``) from the stored rows of these requests
    (one statement per kind of text for the whole batch), or of every request when
    ``request_ids`` is None (an upgrade). ``running``: requests stored as ``running`` rows,
    whose one text is their question (no answer, error, attempts or steps yet), so only the
    question's statement looks for them. ``finished``: requests whose ``running`` row (its
    question indexed) was just written over by their finished record: every statement but the
    question's looks for them. Each text is stored as written (for display) and, where folding
    changes it, folded (``podium_fold``, :func:`~podium.trace.query.fold`); the index reads the
    folded form (view ``search_content``), and the texts added here go into it by one statement
    at the end: new ``search_text`` rows get ids above the largest one (SQLite's rowid rule for
    a table without AUTOINCREMENT), so "id above the largest before" is exactly this call's rows."""
    last = db.execute("SELECT COALESCE(MAX(id), 0) FROM search_text").fetchone()[0]
    if request_ids is None:
        for select in _INDEX:
            db.execute(_index_sql(select).format(requests="1", steps="1"))
    else:
        for n, select in enumerate(_INDEX):
            ids = [*running, *request_ids] if n == 0 else [*request_ids, *finished]  # _INDEX[0]: the question
            if ids:
                marks = ", ".join("?" for _ in ids)
                sql = _index_sql(select).format(requests=f"id IN ({marks})", steps=f"request_id IN ({marks})")
                db.execute(sql, ids)
    db.execute("INSERT INTO search_index (rowid, folded) SELECT id, folded FROM search_content WHERE id > ?", (last,))


def _index_sql(select: str) -> str:
    return (
        f"WITH texts (request_id, field, location, text) AS ({select}) "
        "INSERT INTO search_text (request_id, field, location, text, folded) "
        "SELECT request_id, field, location, text, NULLIF(podium_fold(text), text) FROM texts"
    )


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, trigger bodies kept whole."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""


def check_version(db: sqlite3.Connection, path: Path) -> tuple[int | None, set[str]]:
    """The file's schema version (None for a new file) and its tables; closes ``db`` and raises
    TraceStoreError for a version this podium cannot use (newer, or older than any migration)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None, tables  # a new file
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if "meta" in tables else None
    found = int(row[0]) if row else 0
    if found == SCHEMA_VERSION or found in _MIGRATIONS:
        return found, tables
    db.close()
    raise TraceStoreError(
        f"trace database {str(path)!r} has schema version {found}, this podium uses {SCHEMA_VERSION}; "
        f"nothing was changed. Move it aside to start a new one (mv {path} {path}.v{found}) "
        "or pass --traces with another file"
    )


def create_or_upgrade(db: sqlite3.Connection, path: Path, found: int | None, tables: set[str]) -> None:
    """Create or upgrade the tables in one transaction (``found``, ``tables``: what
    :func:`check_version` read); index the rows of a file that had no search tables yet, or an
    index of unfolded text."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if found is not None and found < SCHEMA_VERSION:
            _migrate(db, path, found)
        for table in RECORD_TABLES:
            db.execute(_create_table(table))
            _add_missing_columns(db, table)
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        if found is not None and ("search_text" not in tables or found < _FOLDED_SINCE):
            index_texts(db, None)  # a file from before search, or before folding: index its rows
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


_SQLITE_TYPES = {"text": "TEXT", "integer": "INTEGER", "real": "REAL"}


def _column_sql(col: Col) -> str:
    sql = f"{col.name} {_SQLITE_TYPES[col.type]}"
    if not col.nullable:
        sql += " NOT NULL"
    if col.default is not None:
        sql += f" DEFAULT {col.default}"
    if col.name == "request_id":
        sql += " REFERENCES requests (id) ON DELETE CASCADE"
    return sql


def _create_table(table: RecordTable) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a record table, from its one declaration."""
    lines = [*(_column_sql(c) for c in table.columns), f"PRIMARY KEY ({', '.join(table.primary_key)})"]
    return f"CREATE TABLE IF NOT EXISTS {table.name} (\n    " + ",\n    ".join(lines) + "\n)"


def _add_missing_columns(db: sqlite3.Connection, table: RecordTable) -> None:
    """Add the declared columns a file's table lacks (a column declared after the file was
    written; :mod:`podium.trace.columns` requires it be nullable or have a default)."""
    present = {row[1] for row in db.execute(f"PRAGMA table_info({table.name})")}
    for col in table.columns:
        if col.name not in present:
            db.execute(f"ALTER TABLE {table.name} ADD COLUMN {_column_sql(col)}")


def _migrate(db: sqlite3.Connection, path: Path, found: int) -> None:
    """Upgrade from version ``found`` to SCHEMA_VERSION (inside :func:`create_or_upgrade`'s
    transaction)."""
    sys.stderr.write(f"podium: upgrading trace database {path} from schema {found} to {SCHEMA_VERSION}\n")
    for version in range(found, SCHEMA_VERSION):
        for statement in _statements(_MIGRATIONS[version]):
            db.execute(statement)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
