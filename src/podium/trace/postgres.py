"""PostgreSQL trace store: the same records, search, purge and register as the SQLite store
(:class:`podium.trace.store.TraceStore`), in a database every replica of ``podium serve``
shares, so a trace written by one replica is found, shown and purged from any.

Same tables and columns as the SQLite file (:mod:`podium.store.schema`, created by ``podium db
upgrade``), the same rows (:mod:`podium.trace.rows`), the same write-behind writer
(:mod:`podium.trace.writer`: group commits off the request path; a commit that fails — the
database is down — is retried alone and counted ``lost`` in :meth:`stats`, and the request is
answered all the same).

Full-text search uses PostgreSQL's own: each searchable text is stored as written and folded
(:func:`~podium.trace.query.fold`), with a generated ``tsvector`` (the ``simple`` configuration:
lower-cased words, no stemming, no stop words, like FTS5's default tokenizer) under a GIN index.
Plain queries mean what they mean on SQLite: every word must occur, a ``"quoted phrase"`` as
written, ``word*`` as a prefix; hits are ranked by ``ts_rank_cd`` and shown with
``ts_headline`` in the text as written. ``raw`` queries use PostgreSQL's web search syntax
(``or``, ``-word``, ``"phrase"``) instead of FTS5's. One difference: PostgreSQL's parser keeps an
e-mail address, a URL or a host name as one word, where FTS5 splits it at the dots.

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
import json
import re
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
    restore_snippet,
    search_terms,
    unmark,
)
from podium.trace.rows import (
    Begin,
    DisclosureRow,
    Op,
    describe,
    disclosures_from_json,
    dumps,
    record_from_rows,
    rows_of,
    search_texts,
)
from podium.trace.store import TraceStoreError
from podium.trace.writer import WriteBehind, WriterStats

__all__ = ["PostgresTraceStore"]


class PostgresTraceStore:
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
            self._writer = WriteBehind(
                self._commit, describe=describe, max_pending=max_pending, max_batch=self.MAX_BATCH
            )
        if retention_days is not None:
            self._retain()

    # ------------------------------------------------------------------ writing

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
        """Insert the request row with status ``running`` (queued, as the SQLite store)."""
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

    # ------------------------------------------------------------------ reading

    def _rows(self, query: Any) -> builtins.list[Any]:
        from sqlalchemy.exc import SQLAlchemyError

        self.flush()
        try:
            with self.engine.connect() as db:
                return list(db.execute(query).mappings())
        except SQLAlchemyError as exc:
            raise TraceStoreError(f"cannot read the trace store {self.path}: {first_line(exc)}") from None

    def list(self, *, limit: int = 20, where: TraceFilter | None = None) -> builtins.list[TraceSummary]:
        """The most recent requests first, narrowed by ``where``."""
        query = _summary_query().where(_condition(where)).order_by(requests.c.started_at.desc(), requests.c.id.desc())
        return [_summary(row) for row in self._rows(query.limit(limit))]

    def search(
        self,
        query: str,
        *,
        where: TraceFilter | None = None,
        fields: Sequence[str] = (),
        limit: int = 20,
        raw: bool = False,
    ) -> builtins.list[SearchHit]:
        """Requests whose texts match ``query``, best first (``ts_rank_cd``), one hit per request
        with its best-ranked text. Same arguments and errors as the SQLite store's; ``raw``
        takes PostgreSQL's web search syntax."""
        from sqlalchemy import func, literal, select

        unknown = [f for f in fields if f not in FIELDS]
        if unknown:
            raise ConfigError(f"unknown search field(s) {', '.join(unknown)}; use {', '.join(FIELDS)}")
        tsquery = func.websearch_to_tsquery("simple", fold(query.strip())) if raw else _tsquery(query)
        if raw and not query.strip():
            raise ConfigError("the search query is empty")
        score = func.ts_rank_cd(search_text.c.document, tsquery)
        hits = (
            select(
                search_text.c.request_id, search_text.c.field, search_text.c.location, search_text.c.text,
                search_text.c.folded, score.label("score"),
                func.row_number().over(
                    partition_by=search_text.c.request_id,
                    order_by=(score.desc(), search_text.c.field, search_text.c.location),
                ).label("n"),
                func.count().over(partition_by=search_text.c.request_id).label("matches"),
            )
            .join(requests, requests.c.id == search_text.c.request_id)
            .where(search_text.c.document.op("@@")(tsquery), _condition(where))
        )  # fmt: skip
        if fields:
            hits = hits.where(search_text.c.field.in_(list(fields)))
        best = hits.subquery()
        options = f"StartSel={MARK_ON}, StopSel={MARK_OFF}, HighlightAll=true"
        headline = func.ts_headline(
            "simple", func.coalesce(best.c.folded, best.c.text), tsquery, literal(options)
        ).label("snip")
        rows = self._rows(
            _summary_query()
            .add_columns(best.c.field, best.c.location, headline, best.c.matches, best.c.score, best.c.text)
            .join(best, best.c.request_id == requests.c.id)
            .where(best.c.n == 1)
            .order_by(best.c.score.desc(), requests.c.started_at.desc())
            .limit(limit)
        )
        out: builtins.list[SearchHit] = []
        for row in rows:
            snippet, highlights = restore_snippet(*unmark(_window(row["snip"])), row["text"])
            out.append(
                SearchHit(
                    _summary(row), row["field"], row["location"], snippet, highlights, row["matches"], -row["score"]
                )
            )
        return out

    def get(self, request_id: str) -> RunRecord | None:
        """The stored record, or None (a ``running`` one comes back as ``unfinished``)."""
        from sqlalchemy import select

        found = self._rows(select(requests).where(requests.c.id == request_id))
        if not found:
            return None
        attempts = self._rows(
            select(plan_attempts)
            .where(plan_attempts.c.request_id == request_id)
            .order_by(plan_attempts.c.round, plan_attempts.c.attempt)
        )
        step_rows = self._rows(
            select(steps)
            .where(steps.c.request_id == request_id)
            .order_by(steps.c.phase == "fallback", steps.c.round, steps.c.step_index)
        )
        return record_from_rows(found[0], attempts, step_rows)

    def resolve_id(self, prefix: str) -> str:
        """The full request id for an id or unique prefix. Raises ConfigError when nothing or
        more than one request matches."""
        from sqlalchemy import select

        cleaned = prefix.strip().lower()
        if not cleaned or not all(c in "0123456789abcdef" for c in cleaned):
            raise ConfigError(f"{prefix!r} is not a request id (hex); see 'podium trace list'")
        query = select(requests.c.id).where(requests.c.id >= cleaned, requests.c.id < cleaned + "g").limit(2)
        rows = self._rows(query)
        if not rows:
            raise ConfigError(f"no request with id {prefix!r}; see 'podium trace list'")
        if len(rows) > 1:
            raise ConfigError(f"id prefix {prefix!r} is ambiguous; give more characters")
        return str(rows[0]["id"])

    def spent_since(self, pool: str, since: str) -> float:
        """USD spent by requests of ``pool`` started at or after ``since`` (UTC ISO 8601)."""
        from sqlalchemy import func, select

        total = func.coalesce(func.sum(requests.c.total_cost_usd), 0.0).label("spent")
        rows = self._rows(select(total).where(requests.c.pool == pool, requests.c.started_at >= since))
        return float(rows[0]["spent"])

    def disclosures(self, since: str, until: str) -> tuple[DisclosureRow, ...]:
        """Steps and conductor attempts with third-party recipients, of requests started in
        [since, until) (UTC ISO 8601), oldest first."""
        from sqlalchemy import JSON, cast, select

        def system(messages: Any) -> Any:
            return cast(messages, JSON)[0]["role"].as_string() == "system"

        in_window = (requests.c.started_at >= since, requests.c.started_at < until)
        step_rows = self._rows(
            select(
                steps.c.request_id, steps.c.started_at, steps.c.phase, steps.c.round, steps.c.step_index,
                steps.c.visible, steps.c.visible_previous, system(steps.c.messages).label("system"),
                steps.c.disclosures,
            )
            .join(requests, requests.c.id == steps.c.request_id)
            .where(*in_window, steps.c.disclosures != "[]")
        )  # fmt: skip
        attempt_rows = self._rows(
            select(
                plan_attempts.c.request_id, requests.c.started_at, plan_attempts.c.round, plan_attempts.c.attempt,
                system(plan_attempts.c.messages).label("system"), plan_attempts.c.disclosures,
            )
            .join(requests, requests.c.id == plan_attempts.c.request_id)
            .where(*in_window, plan_attempts.c.disclosures != "[]")
        )  # fmt: skip
        rows = [
            DisclosureRow(
                request_id=s["request_id"],
                at=s["started_at"],
                source="step" if s["phase"] == "workflow" else "fallback",
                round=s["round"],
                index=s["step_index"],
                visible=tuple(json.loads(s["visible"])),
                visible_previous=tuple((p[0], p[1]) for p in json.loads(s["visible_previous"])),
                system_prompt=bool(s["system"]),
                disclosures=disclosures_from_json(s["disclosures"]),
            )
            for s in step_rows
        ]
        rows += [
            DisclosureRow(
                a["request_id"], a["started_at"], "conductor", a["round"], a["attempt"], (), (), bool(a["system"]),
                disclosures_from_json(a["disclosures"]),
            )
            for a in attempt_rows
        ]  # fmt: skip
        return tuple(sorted(rows, key=lambda r: r.at))

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


def _summary_query() -> Any:
    from sqlalchemy import distinct, func, select

    step_count = select(func.count()).where(steps.c.request_id == requests.c.id).scalar_subquery()
    used = select(func.array_agg(distinct(steps.c.worker))).where(steps.c.request_id == requests.c.id)
    return select(
        requests.c.id, requests.c.started_at, requests.c.status, requests.c.mode, requests.c.question,
        step_count.label("steps"), requests.c.total_cost_usd, requests.c.wall_time_s, requests.c.conductor,
        requests.c.tags, requests.c.subject, used.scalar_subquery().label("workers_used"),
    )  # fmt: skip


def _summary(row: Any) -> TraceSummary:
    return TraceSummary(
        row["id"], row["started_at"], row["status"], row["mode"], row["question"], row["steps"],
        row["total_cost_usd"], row["wall_time_s"], row["conductor"], tuple(json.loads(row["tags"])), row["subject"],
        tuple(sorted(row["workers_used"] or ())),
    )  # fmt: skip


def _condition(where: TraceFilter | None) -> Any:
    """A TraceFilter as an SQLAlchemy condition over ``requests`` (the same meaning as its
    SQLite form, :meth:`~podium.trace.query.TraceFilter.sql`)."""
    from sqlalchemy import and_, cast, exists, select, true, tuple_
    from sqlalchemy.dialects.postgresql import JSONB

    f = where or TraceFilter()
    parts: builtins.list[Any] = []
    r = requests.c
    if f.since is not None:
        parts.append(r.started_at >= f.since)
    if f.until is not None:
        parts.append(r.started_at < f.until)
    if f.status is not None:
        parts.append(r.status == f.status)
    if f.min_cost_usd is not None:
        parts.append(r.total_cost_usd >= f.min_cost_usd)
    if f.max_cost_usd is not None:
        parts.append(r.total_cost_usd <= f.max_cost_usd)
    if f.min_wall_s is not None:
        parts.append(r.wall_time_s >= f.min_wall_s)
    if f.max_wall_s is not None:
        parts.append(r.wall_time_s <= f.max_wall_s)
    if f.conductor is not None:
        parts.append(r.conductor.regexp_match(_glob_regex(f.conductor)))
    if f.subject is not None:
        parts.append(r.subject == f.subject)
    if f.older_than is not None:
        parts.append(tuple_(r.started_at, r.id) < tuple_(*f.older_than))
    if f.worker is not None:
        parts.append(exists(select(steps.c.request_id).where(steps.c.request_id == r.id, steps.c.worker == f.worker)))
    for tag in f.tags:
        parts.append(cast(r.tags, JSONB).contains([tag]))
    return and_(true(), *parts)


def _glob_regex(pattern: str) -> str:
    """A GLOB pattern (``*``, ``?``, ``[...]``, case-sensitive, as SQLite's) as an anchored regex."""
    out, i = ["^"], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("^") else body).replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out) + "$"


def _tsquery(text: str) -> Any:
    """Plain search words (:func:`~podium.trace.query.search_terms`, the meaning they have on
    SQLite) as a tsquery. Raises ConfigError when ``text`` holds no word."""
    from sqlalchemy import func

    parts: builtins.list[Any] = []
    for kind, term in search_terms(text):
        if kind == "phrase":
            parts.append(func.phraseto_tsquery("simple", term))
        elif kind == "prefix" and (stem := re.sub(r"\W", "", term.lower())):
            parts.append(func.to_tsquery("simple", stem + ":*"))
        else:
            parts.append(func.plainto_tsquery("simple", term))
    query = parts[0]
    for part in parts[1:]:
        query = query.op("&&")(part)
    return query


_WORD = re.compile(r"\S+\s*")


def _window(marked: str, words: int = 12) -> str:
    """The excerpt of a whole highlighted text that FTS5's ``snippet(…, 12)`` would show: about
    ``words`` words from just before the first match, with ``…`` where text was left out."""
    pieces = _WORD.findall(marked)
    if len(pieces) <= words:
        return marked
    first = next((i for i, piece in enumerate(pieces) if MARK_ON in piece), 0)
    start = max(0, min(first - 2, len(pieces) - words))
    end = start + words
    text = "".join(pieces[start:end]).rstrip()
    return ("…" if start > 0 else "") + text + ("…" if end < len(pieces) else "")


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
