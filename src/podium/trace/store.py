"""SQLite trace store: one record per request, written in WAL mode.

A request row is inserted with status ``running`` when the request starts, so even a process
killed mid-request leaves a trace; :meth:`TraceStore.write` then stores the finished record —
request row, conductor attempts and steps — in one transaction.

Writes are off the request path (write-behind, :mod:`podium.trace.writer`): ``begin`` and
``write`` queue the operation and return; one writer thread stores whatever is queued in one
transaction (group commit: rows and search index together; a ``running`` row whose finished
record is in the same batch is not written at all). Every read of this store object first
waits for the writes queued before it (:meth:`TraceStore.flush`), so in-process reads see every
finished request; another process sees a write once its batch commits (milliseconds, unless the
disk stalls). :meth:`TraceStore.close` — called by ``podium run``'s exit, ``podium serve``'s
shutdown, and at interpreter exit for stores left open — flushes first, so a clean shutdown
keeps everything, as before; a crash loses what was still queued (docs/traces.md).
``write_behind=False`` writes in the caller's thread, one transaction per call, raising on
failure.

Tables: ``requests`` (one row per request), ``plan_attempts`` (one row per conductor call),
``steps`` (one row per executed step, workflow and fallback). JSON columns hold messages,
workflows, access lists and disclosures (third-party recipients of a call and the PII kinds they
received; never PII values unless the pool file says ``record_values``). Times are UTC ISO 8601.

Full-text search: ``search_text`` holds the searchable texts of each request (question, answer,
conductor output, subtasks, outputs, errors; see :data:`~podium.trace.query.FIELDS`), each as
written and folded (:func:`~podium.trace.query.fold`: no accents, ø → o, æ → ae), and
``search_index`` is an SQLite FTS5 index of the folded texts (external content, kept in step by
triggers); queries are folded alike, and snippets are shown in the text as written. Both are
written in the same transaction as the rows they index, and the foreign key's ``ON DELETE
CASCADE`` takes a request's texts and index entries with it, so the index cannot drift.

Deletion: :meth:`TraceStore.purge` deletes requests with everything above, then merges the FTS5
index, ``VACUUM`` s the file and truncates the write-ahead log, so no purged text stays in the
database files. ``retention_days`` purges old requests automatically.
"""

from __future__ import annotations

import atexit
import builtins
import json
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.store.engine import connect_sqlite, use_wal
from podium.trace.query import (
    FIELDS,
    MARK_OFF,
    MARK_ON,
    PurgeListener,
    PurgeResult,
    SearchHit,
    TraceFilter,
    TraceSummary,
    fold,
    fts_query,
    restore_snippet,
    unmark,
)
from podium.trace.rows import SUMMARY as _SUMMARY
from podium.trace.rows import Begin as _Begin
from podium.trace.rows import DisclosureRow, record_from_rows
from podium.trace.rows import Op as _Op
from podium.trace.rows import describe as _describe
from podium.trace.rows import disclosures_from_json as _disclosures
from podium.trace.rows import dumps as _dumps
from podium.trace.rows import rows_of as _rows
from podium.trace.rows import summary_from_row as _summary
from podium.trace.writer import WriteBehind, WriterStats

__all__ = [
    "SCHEMA_VERSION",
    "DisclosureRow",
    "PurgeResult",
    "SearchHit",
    "TraceStore",
    "TraceStoreError",
    "TraceSummary",
    "WriterStats",
]


class TraceStoreError(ConfigError):
    """The trace database cannot be opened, read or written (names the file and the fix)."""


SCHEMA_VERSION = 5
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
}
"""SQL that upgrades version ``k`` to ``k + 1``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    mode TEXT NOT NULL,
    pool TEXT NOT NULL,
    workers TEXT NOT NULL DEFAULT '[]',
    conductor TEXT NOT NULL,
    status TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    workflows TEXT NOT NULL DEFAULT '[]',
    fallback_reason TEXT,
    fallback_detail TEXT,
    totals TEXT,
    total_cost_usd REAL,
    wall_time_s REAL,
    tags TEXT NOT NULL DEFAULT '[]',
    subject TEXT
);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE INDEX IF NOT EXISTS requests_subject ON requests (subject) WHERE subject IS NOT NULL;
CREATE TABLE IF NOT EXISTS plan_attempts (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    messages TEXT NOT NULL,
    raw_output TEXT NOT NULL,
    workflow TEXT,
    error_kind TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    constrained INTEGER NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    disclosures TEXT NOT NULL DEFAULT '[]',
    usage_estimated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (request_id, round, attempt)
);
CREATE TABLE IF NOT EXISTS steps (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    round INTEGER NOT NULL,
    step_index INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    worker TEXT NOT NULL,
    subtask TEXT NOT NULL,
    access TEXT NOT NULL,
    visible TEXT NOT NULL,
    visible_previous TEXT NOT NULL,
    messages TEXT NOT NULL,
    output TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    error TEXT,
    error_type TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    disclosures TEXT NOT NULL DEFAULT '[]',
    usage_estimated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (request_id, phase, round, step_index)
);
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
CREATE TRIGGER IF NOT EXISTS search_text_insert AFTER INSERT ON search_text BEGIN
    INSERT INTO search_index (rowid, folded) VALUES (new.id, COALESCE(new.folded, new.text));
END;
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


def _index(db: sqlite3.Connection, request_ids: Sequence[str] | None) -> None:
    """Fill ``search_text`` (and so ``search_index``) from the stored rows of these requests
    (one statement per kind of text for the whole batch), or of every request when
    ``request_ids`` is None (an upgrade). Each text is stored as written (for display) and,
    where folding changes it, folded (``podium_fold``, :func:`~podium.trace.query.fold`); the
    index reads the folded form (view ``search_content``)."""
    if request_ids is None:
        requests = steps = "1"
        params: tuple[str, ...] = ()
    else:
        if not request_ids:
            return
        marks = ", ".join("?" for _ in request_ids)
        requests, steps = f"id IN ({marks})", f"request_id IN ({marks})"
        params = tuple(request_ids)
    for select in _INDEX:
        sql = (
            f"WITH texts (request_id, field, location, text) AS ({select}) "
            "INSERT INTO search_text (request_id, field, location, text, folded) "
            "SELECT request_id, field, location, text, NULLIF(podium_fold(text), text) FROM texts"
        )
        db.execute(sql.format(requests=requests, steps=steps), params)


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, trigger bodies kept whole."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""


_OPEN: weakref.WeakSet[TraceStore] = weakref.WeakSet()
"""Stores with write-behind, flushed and closed at interpreter exit if still open."""


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN):
        try:
            store.close()
        except Exception as exc:  # exit goes on; say what could not be stored
            sys.stderr.write(f"podium: closing trace database {store.path} at exit failed: {exc}\n")


class TraceStore:
    """A SQLite file of request traces.

    Args:
        path: the database file (created with its folder if missing).
        retention_days: purge requests that started more than this many days ago (see
            :meth:`purge`): when the store opens, then at most once an hour after a write.
            None (default) keeps everything.
        write_behind: queue writes for the writer thread (default; see the module doc), or
            (False) store each in the caller's thread and raise TraceStoreError on failure.
        max_pending: most writes queued before callers wait for room (``begin`` and ``write``
            count one each).

    Raises ConfigError when the file cannot be opened or is not a podium trace database, or
    ``retention_days`` is not positive.
    """

    RETENTION_CHECK_S = 3600.0
    """Seconds between automatic retention purges of a long-lived store."""

    MAX_BATCH = 256
    """Most writes stored in one transaction."""

    def __init__(
        self,
        path: str | Path,
        *,
        retention_days: float | None = None,
        write_behind: bool = True,
        max_pending: int = 2000,
    ) -> None:
        self.path = Path(path).expanduser()
        self._key = str(self.path.resolve())
        if retention_days is not None and not retention_days > 0:
            raise ConfigError(f"retention_days must be positive, got {retention_days}")
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._listeners: list[PurgeListener] = []
        try:
            # deleted content zeroed (some builds default to off); foreign keys cascade a purge
            self._db = connect_sqlite(self.path, wal=False, secure_delete=True, foreign_keys=True)
            self._db.create_function("podium_fold", 1, fold, deterministic=True)
            found, tables = self._check_version()  # before anything that writes, WAL mode included
            # WAL with synchronous=NORMAL: a commit survives a crash of podium and the file is
            # never corrupted; only a power loss may lose the last commits (FULL would fsync on
            # every commit, ≈ 4 ms each here).
            use_wal(self._db)
            self._setup(found, tables)
        except (sqlite3.Error, OSError) as exc:
            raise TraceStoreError(f"cannot open trace database {str(self.path)!r}: {exc}") from None
        self._retention_checked = time.monotonic()
        self._writer: WriteBehind[_Op] | None = None
        if write_behind:
            self._writer = WriteBehind(
                self._commit, describe=_describe, max_pending=max_pending, max_batch=self.MAX_BATCH
            )
            _OPEN.add(self)
        if retention_days is not None:
            self._retain()

    def _retain(self) -> None:
        """Apply retention; a failure (e.g. another process holds the file) is reported on
        stderr and retried at the next check, never passed on to the request being served."""
        try:
            self.apply_retention()
        except TraceStoreError as exc:
            sys.stderr.write(f"podium: retention purge failed (retried at the next check): {exc}\n")

    def _setup(self, found: int | None, tables: set[str]) -> None:
        """Create or upgrade the tables in one transaction; index the rows of a file that had
        no search tables yet."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if found is not None and found < SCHEMA_VERSION:
                self._migrate(found)
            for statement in _statements(_SCHEMA):
                self._db.execute(statement)
            if found is not None and ("search_text" not in tables or found < _FOLDED_SINCE):
                _index(self._db, None)  # a file from before search, or before folding: index its rows
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _check_version(self) -> tuple[int | None, set[str]]:
        """The file's schema version (None for a new file) and its tables; raises
        TraceStoreError for a version this podium cannot use (newer, or older than any
        migration)."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None, tables  # a new file
        row = (
            self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if "meta" in tables
            else None
        )
        found = int(row[0]) if row else 0
        if found == SCHEMA_VERSION or found in _MIGRATIONS:
            return found, tables
        self._db.close()
        raise TraceStoreError(
            f"trace database {str(self.path)!r} has schema version {found}, this podium uses {SCHEMA_VERSION}; "
            f"nothing was changed. Move it aside to start a new one (mv {self.path} {self.path}.v{found}) "
            "or pass --traces with another file"
        )

    def _migrate(self, found: int) -> None:
        """Upgrade from version ``found`` to SCHEMA_VERSION (inside :meth:`_setup`'s transaction)."""
        sys.stderr.write(f"podium: upgrading trace database {self.path} from schema {found} to {SCHEMA_VERSION}\n")
        for version in range(found, SCHEMA_VERSION):
            for statement in _statements(_MIGRATIONS[version]):
                self._db.execute(statement)
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued before this call is stored (or counted lost, see
        :meth:`stats`); False when ``timeout`` seconds ran out first. Reads call it themselves."""
        return self._writer.flush(timeout) if self._writer is not None else True

    def _settle(self) -> None:
        """Before a read: wait for the writes queued by every store of this process on this file
        (a second store object opened on it sees what the first one's requests wrote)."""
        for store in list(_OPEN):
            if store._key == self._key:
                store.flush()

    def stats(self) -> WriterStats:
        """What the writer has done: writes pending, stored, batches, full-queue waits, losses."""
        return self._writer.stats() if self._writer is not None else WriterStats()

    def close(self) -> None:
        """Store every queued write, stop the writer thread and close the file. Idempotent."""
        if self._writer is not None:
            self._writer.close()
            _OPEN.discard(self)
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; SQLite failures (locked, disk full, ...) become TraceStoreError."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise TraceStoreError(f"cannot write to trace database {str(self.path)!r}: {exc}") from None

    def begin(
        self,
        request_id: str,
        question: str,
        *,
        started_at: str,
        pool: str,
        conductor: str,
        mode: str,
        tags: tuple[str, ...] = (),
        subject: str | None = None,
    ) -> None:
        """Insert the request row with status ``running``, its question searchable (queued:
        stored with the writer's next batch, unless this request's finished record is in it)."""
        self._put(_Begin(request_id, question, started_at, pool, conductor, mode, tuple(tags), subject))

    def write(self, record: RunRecord) -> None:
        """Store a finished record (replacing its ``running`` row) and its search index
        entries in one transaction (queued, see the module doc); then, at most once an hour,
        apply ``retention_days``."""
        self._put(record)

    def _put(self, op: _Op) -> None:
        if self._writer is not None:
            self._writer.put(op)
        else:
            self._commit([op])

    def _commit(self, ops: Sequence[_Op]) -> None:
        """Store a batch of writes in one transaction: the ``running`` rows of requests whose
        finished record is not in the batch, the finished records (replacing their rows), and
        the search index entries of all of them."""
        finished = {op.id: op for op in ops if isinstance(op, RunRecord)}  # the last one of an id wins
        begins = [
            (op.request_id, op.started_at, op.mode, op.pool, op.conductor, op.question, _dumps([*op.tags]), op.subject)
            for op in ops
            if isinstance(op, _Begin) and op.request_id not in finished
        ]
        request_rows: list[dict[str, Any]] = []
        attempt_rows: list[dict[str, Any]] = []
        step_rows: list[dict[str, Any]] = []
        for record in finished.values():
            request, attempts, steps = _rows(record)
            request_rows.append(request)
            attempt_rows += attempts
            step_rows += steps
        with self._tx() as db:
            if begins:
                db.executemany(
                    "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question, tags, subject) "
                    "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                    begins,
                )
            if finished:
                db.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in finished])
                _insert(db, "requests", request_rows)
                _insert(db, "plan_attempts", attempt_rows)
                _insert(db, "steps", step_rows)
            _index(db, [b[0] for b in begins] + list(finished))
        if (
            finished
            and self.retention_days is not None
            and time.monotonic() - self._retention_checked >= self.RETENTION_CHECK_S
        ):
            self._retain()  # the records are already stored

    def list(self, *, limit: int = 20, where: TraceFilter | None = None) -> list[TraceSummary]:
        """The most recent requests first, narrowed by ``where``."""
        condition, params = (where or TraceFilter()).sql()
        rows = self._read(
            f"SELECT {_SUMMARY} FROM requests r WHERE {condition} ORDER BY r.started_at DESC, r.id DESC LIMIT ?",
            (*params, limit),
        )
        return [_summary(row) for row in rows]

    def search(
        self,
        query: str,
        *,
        where: TraceFilter | None = None,
        fields: Sequence[str] = (),
        limit: int = 20,
        raw: bool = False,
    ) -> builtins.list[SearchHit]:
        """Requests whose texts match ``query``, best match first (FTS5 bm25), one hit per
        request with its best-ranked text.

        Args:
            query: plain words (see :func:`~podium.trace.query.fts_query`), or with ``raw``
                FTS5 query syntax (``AND``/``OR``/``NOT``, ``NEAR(...)``, ``"phrases"``, ``pre*``).
            where: request filters.
            fields: search only these texts (:data:`~podium.trace.query.FIELDS`); default all.
            limit: most requests returned.

        Raises ConfigError for an empty query, an unknown field, or (``raw``) FTS5 syntax
        SQLite rejects.
        """
        unknown = [f for f in fields if f not in FIELDS]
        if unknown:
            raise ConfigError(f"unknown search field(s) {', '.join(unknown)}; use {', '.join(FIELDS)}")
        match = fold(query.strip()) if raw else fts_query(query)
        if not match:
            raise ConfigError("the search query is empty")
        condition, params = (where or TraceFilter()).sql()
        in_fields = f" AND t.field IN ({', '.join('?' for _ in fields)})" if fields else ""
        sql = f"""
            WITH hits AS (
                SELECT t.request_id, t.field, t.location, bm25(search_index) AS score, t.text,
                       snippet(search_index, 0, '{MARK_ON}', '{MARK_OFF}', '…', 12) AS snip
                FROM search_index JOIN search_text t ON t.id = search_index.rowid
                JOIN requests r ON r.id = t.request_id
                WHERE search_index MATCH ?{in_fields} AND {condition}
            ), ranked AS (
                SELECT *, ROW_NUMBER() OVER (PARTITION BY request_id ORDER BY score, field, location) AS n,
                       COUNT(*) OVER (PARTITION BY request_id) AS matches
                FROM hits
            )
            SELECT {_SUMMARY}, h.field, h.location, h.snip, h.matches, h.score, h.text
            FROM ranked h JOIN requests r ON r.id = h.request_id
            WHERE h.n = 1 ORDER BY h.score, r.started_at DESC LIMIT ?"""
        try:
            rows = self._read(sql, (match, *fields, *params, limit))
        except sqlite3.OperationalError as exc:
            if not raw:
                raise TraceStoreError(f"cannot search trace database {str(self.path)!r}: {exc}") from None
            raise ConfigError(
                f"invalid FTS5 query {query!r}: {exc}; fix the syntax or drop --fts to search plain words"
            ) from None
        hits: builtins.list[SearchHit] = []
        for row in rows:
            snippet, highlights = restore_snippet(*unmark(row[14]), row[17])  # shown as written, not folded
            hits.append(SearchHit(_summary(row[:12]), row[12], row[13], snippet, highlights, row[15], row[16]))
        return hits

    def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[Any]:
        """Rows of a read query (after the writes queued before it); SQLite failures other than
        a bad query become TraceStoreError."""
        self._settle()
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "fts5" in str(exc) or "no such column" in str(exc) or "unterminated" in str(exc):
                    raise  # a bad FTS5 query: the caller words the error
                raise TraceStoreError(f"cannot read trace database {str(self.path)!r}: {exc}") from None
            except sqlite3.Error as exc:
                raise TraceStoreError(f"cannot read trace database {str(self.path)!r}: {exc}") from None

    def add_purge_listener(self, listener: PurgeListener) -> None:
        """Have ``listener`` purge another store (a PII vault, a cache) keyed by request id
        whenever this store purges, retention included (see :data:`PurgeListener`)."""
        self._listeners.append(listener)

    def select(
        self, *, before: str | None = None, request_ids: Sequence[str] = (), subject: str | None = None
    ) -> tuple[str, ...]:
        """Ids of the requests a purge with these arguments deletes, oldest first (see
        :meth:`purge`)."""
        condition, params = _selection(before, request_ids, subject)
        rows = self._read(f"SELECT id FROM requests WHERE {condition} ORDER BY started_at, rowid", params)
        return tuple(row[0] for row in rows)

    def purge(
        self,
        *,
        before: str | None = None,
        request_ids: Sequence[str] = (),
        subject: str | None = None,
        dry_run: bool = False,
    ) -> PurgeResult:
        """Delete requests — their rows, conductor attempts, steps, searchable texts and index
        entries — and scrub the file so none of their text remains in it.

        Args:
            before: requests that started before this instant (UTC, the store's form; see
                :func:`~podium.trace.query.parse_utc`).
            request_ids: these requests (full ids; see :meth:`resolve_id`).
            subject: the requests of this data subject.
            dry_run: only report what would be deleted.

        Several arguments narrow the selection (all must hold). After deleting, the FTS5 index
        is merged (deleted entries dropped), the file is rebuilt by ``VACUUM`` and the
        write-ahead log is checkpointed and truncated, all before returning. Purge listeners run
        inside the deleting transaction; one that raises aborts the purge. A request still
        running when it is purged comes back when its process writes the finished record.

        Returns what was (or would be) purged. Raises ConfigError without a selection, and
        TraceStoreError when SQLite fails (nothing is deleted then).
        """
        condition, params = _selection(before, request_ids, subject)
        self._settle()  # a request finished before the purge is purged too
        bytes_before = self._bytes()
        if dry_run:
            ids = self.select(before=before, request_ids=request_ids, subject=subject)
            subjects = self._subjects(ids)
            return PurgeResult(ids, subjects, True, bytes_before, bytes_before, False)
        with self._tx() as db:
            rows = db.execute(
                f"SELECT id, subject FROM requests WHERE {condition} ORDER BY started_at, rowid", params
            ).fetchall()
            ids = tuple(row[0] for row in rows)
            subjects = tuple(sorted({row[1] for row in rows if row[1] is not None}))
            if ids:
                for listener in self._listeners:
                    listener(ids)
                db.execute(f"DELETE FROM requests WHERE {condition}", params)
                db.execute("INSERT INTO search_index (search_index) VALUES ('optimize')")
        truncated = self._scrub() if ids else False
        return PurgeResult(ids, subjects, False, bytes_before, self._bytes(), truncated)

    def _subjects(self, ids: Sequence[str]) -> tuple[str, ...]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._read(
                f"SELECT DISTINCT subject FROM requests WHERE subject IS NOT NULL AND id IN "
                f"({', '.join('?' for _ in chunk)})",
                chunk,
            )
            found.update(row[0] for row in rows)
        return tuple(sorted(found))

    def _scrub(self) -> bool:
        """VACUUM, then checkpoint and truncate the write-ahead log; True when it was emptied."""
        with self._lock:
            try:
                self._db.execute("VACUUM")
                busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                raise TraceStoreError(
                    f"purged rows are deleted but the file {str(self.path)!r} was not rebuilt: {exc}; "
                    "run 'podium trace purge' again when no other process uses it"
                ) from None
        return bool(busy == 0)

    def _bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    def apply_retention(self) -> PurgeResult | None:
        """Purge requests older than ``retention_days`` (None when no retention is set)."""
        self._retention_checked = time.monotonic()
        if self.retention_days is None:
            return None
        cutoff = (datetime.now(UTC) - timedelta(days=self.retention_days)).isoformat(timespec="milliseconds")
        before = cutoff.replace("+00:00", "Z")
        if not self._read("SELECT 1 FROM requests WHERE started_at < ? LIMIT 1", (before,)):
            size = self._bytes()  # nothing expired: no write lock taken
            return PurgeResult((), (), False, size, size, False)
        return self.purge(before=before)

    def spent_since(self, pool: str, since: str) -> float:
        """USD spent by requests of ``pool`` started at or after ``since`` (UTC ISO 8601),
        finished or not, conductor included."""
        (row,) = self._read(
            "SELECT COALESCE(SUM(total_cost_usd), 0) FROM requests WHERE pool = ? AND started_at >= ?", (pool, since)
        )
        return float(row[0])

    def disclosures(self, since: str, until: str) -> tuple[DisclosureRow, ...]:
        """Steps and conductor attempts with third-party recipients, of requests started at or
        after ``since`` and before ``until`` (UTC ISO 8601), oldest first (after the writes queued
        before the call, as every read)."""
        self._settle()
        with self._lock:
            steps = self._db.execute(
                "SELECT s.request_id, s.started_at, s.phase, s.round, s.step_index, s.visible, s.visible_previous, "
                "json_extract(s.messages, '$[0].role') = 'system', s.disclosures FROM steps s "
                "JOIN requests r ON r.id = s.request_id "
                "WHERE r.started_at >= ? AND r.started_at < ? AND s.disclosures != '[]' "
                "ORDER BY s.started_at",
                (since, until),
            ).fetchall()
            attempts = self._db.execute(
                "SELECT a.request_id, r.started_at, a.round, a.attempt, "
                "json_extract(a.messages, '$[0].role') = 'system', a.disclosures FROM plan_attempts a "
                "JOIN requests r ON r.id = a.request_id "
                "WHERE r.started_at >= ? AND r.started_at < ? AND a.disclosures != '[]' "
                "ORDER BY r.started_at, a.round, a.attempt",
                (since, until),
            ).fetchall()
        rows = [
            DisclosureRow(
                request_id=rid,
                at=at,
                source="step" if phase == "workflow" else "fallback",
                round=rnd,
                index=idx,
                visible=tuple(json.loads(vis)),
                visible_previous=tuple((p[0], p[1]) for p in json.loads(prev)),
                system_prompt=bool(system),
                disclosures=_disclosures(disc),
            )
            for rid, at, phase, rnd, idx, vis, prev, system, disc in steps
        ]
        rows += [
            DisclosureRow(rid, at, "conductor", rnd, idx, (), (), bool(system), _disclosures(disc))
            for rid, at, rnd, idx, system, disc in attempts
        ]
        return tuple(sorted(rows, key=lambda r: r.at))

    def resolve_id(self, prefix: str) -> str:
        """The full request id for an id or unique prefix (as ``git`` resolves short hashes).

        Raises ConfigError when nothing or more than one request matches.
        """
        cleaned = prefix.strip().lower()
        if not cleaned or not all(c in "0123456789abcdef" for c in cleaned):
            raise ConfigError(f"{prefix!r} is not a request id (hex); see 'podium trace list'")
        rows = self._read("SELECT id FROM requests WHERE id >= ? AND id < ? LIMIT 2", (cleaned, cleaned + "g"))
        if not rows:
            raise ConfigError(f"no request with id {prefix!r}; see 'podium trace list'")
        if len(rows) > 1:
            raise ConfigError(f"id prefix {prefix!r} is ambiguous; give more characters")
        return cast(str, rows[0][0])

    def get(self, request_id: str) -> RunRecord | None:
        """The stored record, or None. A request still ``running`` (or cut off) comes back with
        status ``"error"`` and error ``"unfinished"`` and whatever was stored."""
        self._settle()
        db = self._db
        with self._lock:
            db.row_factory = sqlite3.Row
            try:
                r = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
                if r is None:
                    return None
                attempts = db.execute(
                    "SELECT * FROM plan_attempts WHERE request_id = ? ORDER BY round, attempt", (request_id,)
                ).fetchall()
                steps = db.execute(
                    "SELECT * FROM steps WHERE request_id = ? ORDER BY phase = 'fallback', round, step_index",
                    (request_id,),
                ).fetchall()
                return record_from_rows(r, attempts, steps)
            finally:
                db.row_factory = None


def _selection(before: str | None, request_ids: Sequence[str], subject: str | None) -> tuple[str, list[Any]]:
    """The WHERE condition over ``requests`` (no alias) of a purge, and its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    if before is not None:
        parts.append("started_at < ?")
        params.append(before)
    if request_ids:
        parts.append(f"id IN ({', '.join('?' for _ in request_ids)})")
        params.extend(request_ids)
    if subject is not None:
        parts.append("subject = ?")
        params.append(subject)
    if not parts:
        raise ConfigError("a purge needs a selection: before, request_ids or subject")
    return " AND ".join(parts), params


def _insert(db: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert dict rows by column name (the names are this module's own, never user input)."""
    if not rows:
        return
    columns = list(rows[0])
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    db.executemany(sql, [tuple(row[c] for c in columns) for row in rows])
