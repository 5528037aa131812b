"""SQLite trace store: one record per request, written in WAL mode.

A request row is inserted with status ``running`` once the request has run for
:attr:`TraceStore.RUNNING_ROW_AFTER_S` (0.25 s), so even a process killed mid-request leaves a
trace; :meth:`TraceStore.write` then stores the finished record — request row, conductor attempts
and steps — in one transaction, over that row. A request that finishes sooner is written once,
finished.

Writes are off the request path (write-behind, :mod:`podium.trace.writer`): ``begin`` and
``write`` queue the operation and return; one writer thread stores whatever is queued in one
transaction (group commit: rows and search index together; a request's start is held until its
finished record comes or 0.25 s pass, see :mod:`podium.trace.writer`). Every read of this store object first
waits for the writes queued before it (:meth:`TraceStore.flush`), so in-process reads see every
finished request; another process sees a write once its batch commits (milliseconds, unless the
disk stalls). :meth:`TraceStore.close` — called by ``podium run``'s exit, ``podium serve``'s
shutdown, and at interpreter exit for stores left open — flushes first, so a clean shutdown
keeps everything, as before; a crash loses what was still queued, and the ``running`` rows of
requests started in the last 0.25 s (docs/traces.md).
``write_behind=False`` writes in the caller's thread, one transaction per call, raising on
failure.

Tables, migrations and the full-text index: :mod:`podium.trace.sqlite_schema`. Reads (list,
search, records, the data-flow register): :mod:`podium.trace.sqlite_reads`, the base of
:class:`TraceStore`.

Deletion: :meth:`TraceStore.purge` deletes requests with everything above, then merges the FTS5
index, ``VACUUM`` s the file and truncates the write-ahead log, so no purged text stays in the
database files. ``retention_days`` purges old requests automatically.
"""

from __future__ import annotations

import atexit
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.sqlite_files import connect_sqlite, use_wal
from podium.trace.backend import TraceStoreError
from podium.trace.query import PurgeListener, PurgeResult, SearchHit, TraceSummary, fold
from podium.trace.rows import Begin as _Begin
from podium.trace.rows import DisclosureRow, trace_writer
from podium.trace.rows import Op as _Op
from podium.trace.rows import dumps as _dumps
from podium.trace.rows import rows_of as _rows
from podium.trace.sqlite_reads import SqliteTraceReads
from podium.trace.sqlite_schema import SCHEMA_VERSION, check_version, create_or_upgrade, index_texts
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


_OPEN: weakref.WeakSet[TraceStore] = weakref.WeakSet()
"""Stores with write-behind, flushed and closed at interpreter exit if still open."""


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN):
        try:
            store.close()
        except Exception as exc:  # exit goes on; say what could not be stored
            sys.stderr.write(f"podium: closing trace database {store.path} at exit failed: {exc}\n")


class TraceStore(SqliteTraceReads):
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

    shared_engine = None
    """A file of one machine: the pool's period budgets stay in each process (see TraceBackend)."""

    RETENTION_CHECK_S = 3600.0
    """Seconds between automatic retention purges of a long-lived store."""

    MAX_BATCH = 256
    """Most writes stored in one transaction."""

    RUNNING_ROW_AFTER_S = 0.25
    """Seconds a request's start is held by the writer before its ``running`` row is written: a
    request that finishes sooner is written once, finished (no ``running`` row, no second index
    update); one still running then gets its row, as ``trace list --status running`` shows."""

    GATHER_S = 0.1
    """Most seconds the idle writer, woken by a write, waits for more to share its commit
    (:mod:`podium.trace.writer`)."""

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
            found, tables = check_version(self._db, self.path)  # before anything that writes, WAL mode included
            # WAL with synchronous=NORMAL: a commit survives a crash of podium and the file is
            # never corrupted; only a power loss may lose the last commits (FULL would fsync on
            # every commit, ≈ 4 ms each here).
            use_wal(self._db)
            create_or_upgrade(self._db, self.path, found, tables)
        except (sqlite3.Error, OSError) as exc:
            raise TraceStoreError(f"cannot open trace database {str(self.path)!r}: {exc}") from None
        self._retention_checked = time.monotonic()
        self._writer: WriteBehind[_Op] | None = None
        if write_behind:
            self._writer = trace_writer(
                self._commit,
                max_pending=max_pending,
                max_batch=self.MAX_BATCH,
                hold_s=self.RUNNING_ROW_AFTER_S,
                gather_s=self.GATHER_S,
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
        """Insert the request row with status ``running``, its question searchable (queued and
        held: stored after :attr:`RUNNING_ROW_AFTER_S`, or by a read or :meth:`flush`, unless the
        request's finished record comes first; then only that is stored)."""
        self._put(_Begin(request_id, question, started_at, pool, conductor, mode, tuple(tags), subject))

    def write(self, record: RunRecord) -> None:
        """Store a finished record (over its ``running`` row, if one was written) and its
        search index entries in one transaction (queued, see the module doc); then, at most once an hour,
        apply ``retention_days``."""
        self._put(record)

    def _put(self, op: _Op) -> None:
        if self._writer is not None:
            self._writer.put(op)
        else:
            self._commit([op])

    def _commit(self, ops: Sequence[_Op]) -> None:
        """Store a batch of writes in one transaction: the ``running`` rows of requests whose
        finished record is not in the batch, the finished records, and the search index entries
        of all of them. A finished record whose ``running`` row is stored (an earlier batch) is
        written over it in place: its question stays indexed as it is, only its other texts are
        added; any other stored row of its id is replaced (deleted, then inserted)."""
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
            over: list[dict[str, Any]] = []  # over their running row, question unchanged
            new: list[dict[str, Any]] = []
            if finished:
                stored = _stored(db, list(finished))
                for row in request_rows:
                    (over if stored.get(row["id"]) == ("running", row["question"]) else new).append(row)
                if stale := [(row["id"],) for row in new if row["id"] in stored]:
                    db.executemany("DELETE FROM requests WHERE id = ?", stale)  # e.g. a record written again
                _insert(db, "requests", new)
                if over:
                    columns = [c for c in over[0] if c != "id"]
                    db.executemany(
                        f"UPDATE requests SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                        [(*(row[c] for c in columns), row["id"]) for row in over],
                    )
                _insert(db, "plan_attempts", attempt_rows)
                _insert(db, "steps", step_rows)
            index_texts(
                db, [row["id"] for row in new], running=[b[0] for b in begins], finished=[row["id"] for row in over]
            )
        if (
            finished
            and self.retention_days is not None
            and time.monotonic() - self._retention_checked >= self.RETENTION_CHECK_S
        ):
            self._retain()  # the records are already stored

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


def _stored(db: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The status and question of those of ``ids`` (a batch: at most MAX_BATCH) already
    stored, by id."""
    marks = ", ".join("?" for _ in ids)
    rows = db.execute(f"SELECT id, status, question FROM requests WHERE id IN ({marks})", ids)
    return {row[0]: (row[1], row[2]) for row in rows}


def _insert(db: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert dict rows by column name (the names are this module's own, never user input)."""
    if not rows:
        return
    columns = list(rows[0])
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    db.executemany(sql, [tuple(row[c] for c in columns) for row in rows])
