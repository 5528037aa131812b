"""PostgreSQL trace store: the same records, search, purge and register as the SQLite store
(:class:`podium.trace.store.TraceStore`), in a database every replica of ``podium serve``
shares, so a trace written by one replica is found, shown and purged from any.

Same tables and columns as the SQLite file (:mod:`podium.store.schema`, created by ``podium db
upgrade``), the same rows (:mod:`podium.trace.rows`), the same write-behind writer
(:mod:`podium.trace.writer`: group commits off the request path, a request's start held until
its finished record comes or 0.25 s pass; a commit that fails — the
database is down — is retried alone and counted ``lost`` in :meth:`stats`, and the request is
answered all the same).

Reads, full-text search (PostgreSQL's own: ``tsvector``, ``ts_rank_cd``, ``ts_headline``)
included: :mod:`podium.trace.postgres_reads`, the base of :class:`PostgresTraceStore`.

Purge deletes the rows (their attempts, steps and search texts go by ``ON DELETE CASCADE``),
then runs ``VACUUM FULL`` on the four tables, which rewrites them into new files without the dead
rows, so the purged text no longer appears in the table files (docs/scale-out.md shows how to
check). ``VACUUM FULL`` locks the tables while it runs; other replicas' trace writes wait (their
requests do not: writes are off the request path). Copies outside the tables — the write-ahead
log until it is recycled, base backups, replicas' WAL archives — are the operator's, as with any
PostgreSQL data.
"""

from __future__ import annotations

import builtins
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.store.engine import first_line, mask_url, open_store
from podium.store.schema import TRACE_TABLES, plan_attempts, requests, search_text, steps
from podium.trace.backend import TraceStoreError
from podium.trace.postgres_reads import PostgresTraceReads
from podium.trace.query import PurgeListener, PurgeResult, fold
from podium.trace.rows import Begin, Op, dumps, rows_of, search_texts, trace_writer
from podium.trace.writer import WriteBehind, WriterStats

__all__ = ["PostgresTraceStore"]


class PostgresTraceStore(PostgresTraceReads):
    """Request traces in a PostgreSQL database (see the module doc).

    Args:
        url: ``postgresql://USER:PASSWORD@HOST:PORT/DB``, at the current schema (``podium db
            upgrade``).
        retention_days, write_behind, max_pending: as :class:`~podium.trace.store.TraceStore`.

    Attributes:
        path: the URL, password masked (what messages name).
        engine: the database's SQLAlchemy engine (period budgets of the pool share it).

    Raises ConfigError (StoreError) when the database cannot be reached or is behind the code.
    """

    RETENTION_CHECK_S = 3600.0
    MAX_BATCH = 256
    RUNNING_ROW_AFTER_S = 0.25
    """As :attr:`~podium.trace.store.TraceStore.RUNNING_ROW_AFTER_S`."""
    GATHER_S = 0.1
    """As :attr:`~podium.trace.store.TraceStore.GATHER_S`."""

    def __init__(
        self,
        url: str,
        *,
        retention_days: float | None = None,
        write_behind: bool = True,
        max_pending: int = 2000,
    ) -> None:
        if retention_days is not None and not retention_days > 0:
            raise ConfigError(f"retention_days must be positive, got {retention_days}")
        self.url = url
        self.path = mask_url(url)
        self.retention_days = retention_days
        self.engine = open_store(url)
        self._listeners: list[PurgeListener] = []
        self._lock = threading.Lock()
        self._retention_checked = time.monotonic()
        self._writer: WriteBehind[Op] | None = None
        if write_behind:
            self._writer = trace_writer(
                self._commit,
                max_pending=max_pending,
                max_batch=self.MAX_BATCH,
                hold_s=self.RUNNING_ROW_AFTER_S,
                gather_s=self.GATHER_S,
            )
        if retention_days is not None:
            self._retain()

    # ------------------------------------------------------------------ writing

    @property
    def shared_engine(self) -> Any:
        """This database's engine: the pool's period budgets keep one ledger in it (TraceBackend)."""
        return self.engine

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
        """Insert the request row with status ``running`` (queued and held, as the SQLite store)."""
        self._put(Begin(request_id, question, started_at, pool, conductor, mode, tuple(tags), subject))

    def write(self, record: RunRecord) -> None:
        """Store a finished record, replacing its ``running`` row (queued)."""
        self._put(record)

    def _put(self, op: Op) -> None:
        if self._writer is not None:
            self._writer.put(op)
        else:
            self._commit([op])

    def _commit(self, ops: Sequence[Op]) -> None:
        from sqlalchemy import delete, insert
        from sqlalchemy.dialects.postgresql import insert as upsert
        from sqlalchemy.exc import SQLAlchemyError

        finished = {op.id: op for op in ops if isinstance(op, RunRecord)}
        begins = [op for op in ops if isinstance(op, Begin) and op.request_id not in finished]
        request_rows: list[dict[str, Any]] = []
        attempt_rows: list[dict[str, Any]] = []
        step_rows: list[dict[str, Any]] = []
        texts: list[dict[str, Any]] = []
        for record in finished.values():
            request, attempts, step_list = rows_of(record)
            request_rows.append(request)
            attempt_rows += attempts
            step_rows += step_list
            texts += [_text(record.id, field, where, text) for field, where, text in search_texts(record)]
        running = [
            {
                "id": b.request_id, "started_at": b.started_at, "mode": b.mode, "pool": b.pool,
                "conductor": b.conductor, "status": "running", "question": b.question,
                "tags": dumps([*b.tags]), "subject": b.subject,
            }
            for b in begins
        ]  # fmt: skip
        texts += [_text(b.request_id, "question", "", b.question) for b in begins]
        try:
            with self.engine.begin() as db:
                if running:  # a begin that arrives after its finished record changes nothing
                    db.execute(upsert(requests).on_conflict_do_nothing(), running)
                    db.execute(delete(search_text).where(search_text.c.request_id.in_([b.request_id for b in begins])))
                if finished:
                    db.execute(delete(requests).where(requests.c.id.in_(list(finished))))
                    db.execute(insert(requests), request_rows)
                    if attempt_rows:
                        db.execute(insert(plan_attempts), attempt_rows)
                    if step_rows:
                        db.execute(insert(steps), step_rows)
                if texts:
                    db.execute(insert(search_text), texts)
        except SQLAlchemyError as exc:
            raise TraceStoreError(f"cannot write to the trace store {self.path}: {first_line(exc)}") from None
        if (
            finished
            and self.retention_days is not None
            and time.monotonic() - self._retention_checked >= self.RETENTION_CHECK_S
        ):
            self._retain()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued before this call is stored (or counted lost)."""
        return self._writer.flush(timeout) if self._writer is not None else True

    def stats(self) -> WriterStats:
        """What the writer has done: pending, stored, batches, full-queue waits, losses."""
        return self._writer.stats() if self._writer is not None else WriterStats()

    def close(self) -> None:
        """Store what is queued, stop the writer, close the connections. Idempotent."""
        if self._writer is not None:
            self._writer.close()
        self.engine.dispose()

    def _settle(self) -> None:
        """Before a read: wait for the writes queued before it."""
        self.flush()

    # ------------------------------------------------------------------ deleting

    def add_purge_listener(self, listener: PurgeListener) -> None:
        """Have ``listener`` purge another store keyed by request id whenever this one purges."""
        self._listeners.append(listener)

    def select(
        self, *, before: str | None = None, request_ids: Sequence[str] = (), subject: str | None = None
    ) -> tuple[str, ...]:
        """Ids of the requests a purge with these arguments deletes, oldest first."""
        from sqlalchemy import select

        query = select(requests.c.id).where(_selection(before, request_ids, subject))
        rows = self._rows(query.order_by(requests.c.started_at, requests.c.id))
        return tuple(str(r["id"]) for r in rows)

    def purge(
        self,
        *,
        before: str | None = None,
        request_ids: Sequence[str] = (),
        subject: str | None = None,
        dry_run: bool = False,
    ) -> PurgeResult:
        """Delete requests with their attempts, steps and search texts, then ``VACUUM FULL`` the
        trace tables so no purged text stays in their files (see the module doc). Same
        arguments, listeners and result as the SQLite store's; raises ConfigError without a
        selection and TraceStoreError when the database fails (nothing is deleted then)."""
        from sqlalchemy import delete, select
        from sqlalchemy.exc import SQLAlchemyError

        condition = _selection(before, request_ids, subject)
        self.flush()
        size_before = self._bytes()
        if dry_run:
            ids = self.select(before=before, request_ids=request_ids, subject=subject)
            return PurgeResult(ids, self._subjects(ids), True, size_before, size_before, False)
        try:
            with self.engine.begin() as db:
                rows = db.execute(
                    select(requests.c.id, requests.c.subject)
                    .where(condition)
                    .order_by(requests.c.started_at, requests.c.id)
                    .with_for_update()
                ).all()
                ids = tuple(str(r[0]) for r in rows)
                subjects = tuple(sorted({r[1] for r in rows if r[1] is not None}))
                if ids:
                    for listener in self._listeners:
                        listener(ids)
                    db.execute(delete(requests).where(requests.c.id.in_(ids)))
        except SQLAlchemyError as exc:
            raise TraceStoreError(f"cannot purge the trace store {self.path}: {first_line(exc)}") from None
        rewritten = self._vacuum() if ids else False  # reported as log_truncated: the files were rewritten
        return PurgeResult(ids, subjects, False, size_before, self._bytes(), rewritten)

    def _subjects(self, ids: Sequence[str]) -> tuple[str, ...]:
        from sqlalchemy import select

        if not ids:
            return ()
        rows = self._rows(
            select(requests.c.subject).distinct().where(requests.c.id.in_(list(ids)), requests.c.subject.is_not(None))
        )
        return tuple(sorted(str(r["subject"]) for r in rows))

    def _vacuum(self) -> bool:
        """``VACUUM FULL`` the trace tables (outside a transaction, as PostgreSQL requires)."""
        from sqlalchemy.exc import SQLAlchemyError

        names = ", ".join(t.name for t in TRACE_TABLES)
        try:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as db:
                db.exec_driver_sql(f"VACUUM FULL {names}")
        except SQLAlchemyError as exc:
            raise TraceStoreError(
                f"purged rows are deleted but the trace tables of {self.path} were not rewritten: "
                f"{first_line(exc)}; run 'podium trace purge' again"
            ) from None
        return True

    def _bytes(self) -> int:
        """The trace tables' size on disk (indexes and TOAST included), bytes."""
        from sqlalchemy import func, select

        sizes = [func.pg_total_relation_size(t.name) for t in TRACE_TABLES]
        total = sizes[0] + sizes[1] + sizes[2] + sizes[3]
        return int(self._rows(select(total.label("size")))[0]["size"])

    def apply_retention(self) -> PurgeResult | None:
        """Purge requests older than ``retention_days`` (None when no retention is set)."""
        from sqlalchemy import select

        self._retention_checked = time.monotonic()
        if self.retention_days is None:
            return None
        cutoff = (datetime.now(UTC) - timedelta(days=self.retention_days)).isoformat(timespec="milliseconds")
        before = cutoff.replace("+00:00", "Z")
        if not self._rows(select(requests.c.id).where(requests.c.started_at < before).limit(1)):
            size = self._bytes()
            return PurgeResult((), (), False, size, size, False)
        return self.purge(before=before)

    def _retain(self) -> None:
        try:
            self.apply_retention()
        except TraceStoreError as exc:
            sys.stderr.write(f"podium: retention purge failed (retried at the next check): {exc}\n")


def _text(request_id: str, field: str, where: str, text: str) -> dict[str, Any]:
    folded = fold(text)
    return {
        "request_id": request_id, "field": field, "location": where, "text": text,
        "folded": folded if folded != text else None,
    }  # fmt: skip


def _selection(before: str | None, request_ids: Sequence[str], subject: str | None) -> Any:
    from sqlalchemy import and_

    parts: builtins.list[Any] = []
    if before is not None:
        parts.append(requests.c.started_at < before)
    if request_ids:
        parts.append(requests.c.id.in_(list(request_ids)))
    if subject is not None:
        parts.append(requests.c.subject == subject)
    if not parts:
        raise ConfigError("a purge needs a selection: before, request_ids or subject")
    return and_(*parts)
