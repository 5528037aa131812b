"""Reads of the SQLite trace file: the request list, full-text search (FTS5, ranked by bm25),
one request's record, id prefixes, spending and the data-flow register's rows.

:class:`SqliteTraceReads` is the read half of :class:`~podium.trace.store.TraceStore`, which
opens the file and writes it. Every read first waits for the writes queued before it (the
store's ``_settle``), then runs under the store's lock. SQLite failures become
:class:`~podium.trace.backend.TraceStoreError`; a query SQLite rejects (raw FTS5 syntax)
a ConfigError naming the fix. Tables and search index: :mod:`podium.trace.sqlite_schema`.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.trace.backend import TraceStoreError
from podium.trace.query import (
    FIELDS,
    MARK_OFF,
    MARK_ON,
    SearchHit,
    TraceFilter,
    TraceSummary,
    fold,
    fts_query,
    restore_snippet,
    unmark,
)
from podium.trace.rows import SUMMARY as _SUMMARY
from podium.trace.rows import DisclosureRow, record_from_rows
from podium.trace.rows import disclosures_from_json as _disclosures
from podium.trace.rows import summary_from_row as _summary

__all__ = ["SqliteTraceReads"]


class SqliteTraceReads:
    """The read queries of a trace file; :class:`~podium.trace.store.TraceStore` opens the file,
    sets the attributes below and writes it.

    Attributes:
        path: the database file (what messages name).
        _db: the open connection (the store's, shared with its writer).
        _lock: held around every use of ``_db``.
    """

    path: Path
    _db: sqlite3.Connection
    _lock: threading.Lock

    def _settle(self) -> None:
        """Before a read: wait for the writes queued before it (the store's; nothing is queued
        here)."""

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
