"""Reads of the PostgreSQL trace store: the request list, full-text search, one request's
record, id prefixes, spending and the data-flow register's rows, as SQLAlchemy queries.

:class:`PostgresTraceReads` is the read half of :class:`~podium.trace.postgres.PostgresTraceStore`,
which opens the database and writes and purges it; every read first waits for the writes queued
before it (the store's ``_settle``). Failures become
:class:`~podium.trace.backend.TraceStoreError`.

Full-text search uses PostgreSQL's own: each searchable text is stored as written and folded
(:func:`~podium.trace.query.fold`), with a generated ``tsvector`` (the ``simple`` configuration:
lower-cased words, no stemming, no stop words, like FTS5's default tokenizer) under a GIN index.
Plain queries mean what they mean on SQLite: every word must occur, a ``"quoted phrase"`` as
written, ``word*`` as a prefix; hits are ranked by ``ts_rank_cd`` and shown with
``ts_headline`` in the text as written. ``raw`` queries use PostgreSQL's web search syntax
(``or``, ``-word``, ``"phrase"``) instead of FTS5's. One difference: PostgreSQL's parser keeps an
e-mail address, a URL or a host name as one word, where FTS5 splits it at the dots.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Sequence
from typing import Any

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.store.engine import first_line
from podium.store.schema import plan_attempts, requests, search_text, steps
from podium.trace.backend import TraceStoreError
from podium.trace.query import (
    FIELDS,
    MARK_OFF,
    MARK_ON,
    SearchHit,
    TraceFilter,
    TraceSummary,
    fold,
    restore_snippet,
    search_terms,
    unmark,
)
from podium.trace.rows import DisclosureRow, disclosures_from_json, record_from_rows

__all__ = ["PostgresTraceReads"]


class PostgresTraceReads:
    """The read queries of the PostgreSQL trace store;
    :class:`~podium.trace.postgres.PostgresTraceStore` opens the database, sets the attributes
    below, and writes and purges it.

    Attributes:
        path: the database URL, password masked (what messages name).
        engine: the database's SQLAlchemy engine.
    """

    path: str
    engine: Any

    def _settle(self) -> None:
        """Before a read: wait for the writes queued before it (the store's; nothing is queued
        here)."""

    def _rows(self, query: Any) -> builtins.list[Any]:
        from sqlalchemy.exc import SQLAlchemyError

        self._settle()
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
