"""The tables of podium's shared store (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Alembic migrations (``podium/store/migrations``) create and change them; this module is their
current shape, which the stores query. Times are Unix seconds (float) unless named ``*_at`` as
UTC ISO 8601 text; money is USD.

Tables:
    keys: API keys of ``podium serve`` — name, SHA-256 digest of the secret, budget USD per
        period, period name, created/revoked (UTC ISO 8601), scope (``api`` or ``admin``).
    usage: one row per answered request — key name, request id (= trace id), time (Unix s),
        cost USD.
    budget_ledgers: one row per ledger scope (e.g. ``key:team-a/day``) — the current period's
        start (Unix s), its settled cost and the cost reserved by calls in flight, USD.
    budget_holds: one row per call in flight — id, scope, amount USD, created and expiry (Unix
        s), holder (host:pid); an expired hold's amount is released (its process died).
    shadow: one row per chat completion the shadow proxy forwarded (:mod:`podium.store.shadow`):
        the upstream's answer, latency and usage beside podium's run of the same request.
    request_cache: stored worker completions by request key (:mod:`podium.store.request_cache`,
        read by :mod:`podium.workers.cache`): the
        sha256 key, the worker's name, the completion as JSON, when it was stored.
    settings: operator switches every replica reads (:mod:`podium.store.settings`) — name,
        value, when and by whom it was set.
    requests, plan_attempts, steps, search_text: the traces, on PostgreSQL. The first three are
        built from :mod:`podium.trace.columns`, the one declaration the embedded SQLite trace
        file's tables come from too; the search texts carry a ``tsvector`` of their folded form
        with a GIN index (SQLite's search index is its own: :mod:`podium.trace.sqlite_schema`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Computed,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR

from podium.trace.columns import ATTEMPTS, REQUESTS, STEPS, RecordTable

__all__ = [
    "TRACE_TABLES",
    "budget_holds",
    "budget_ledgers",
    "keys",
    "metadata",
    "plan_attempts",
    "request_cache",
    "requests",
    "search_text",
    "settings",
    "shadow",
    "steps",
    "usage",
]

metadata = MetaData()

keys = Table(
    "keys",
    metadata,
    Column("name", Text, primary_key=True),
    Column("digest", Text, nullable=False, unique=True),
    Column("budget_usd", Float),
    Column("period", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("revoked_at", Text),
    Column("scope", Text, nullable=False, server_default="api"),
)

usage = Table(
    "usage",
    metadata,
    Column("key", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("at", Float, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Index("usage_key_at", "key", "at"),
)

budget_ledgers = Table(
    "budget_ledgers",
    metadata,
    Column("scope", Text, primary_key=True),
    Column("period_start", Float, nullable=False),
    Column("spent_usd", Float, nullable=False),
    Column("reserved_usd", Float, nullable=False),
)

budget_holds = Table(
    "budget_holds",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("scope", Text, nullable=False),
    Column("amount_usd", Float, nullable=False),
    Column("created", Float, nullable=False),
    Column("expires", Float, nullable=False),
    Column("holder", Text, nullable=False),
    Index("budget_holds_scope_expires", "scope", "expires"),
)


def _cascade() -> ForeignKey:
    return ForeignKey("requests.id", ondelete="CASCADE")


_TYPES = {"text": Text, "integer": Integer, "real": Float}


def _record_table(spec: RecordTable, *extra: Index) -> Table:
    """The SQLAlchemy table of a trace record table, from its one declaration
    (:mod:`podium.trace.columns`); its indexes are this engine's own."""
    single = len(spec.primary_key) == 1
    columns: list[Column[Any]] = [
        Column(
            c.name,
            _TYPES[c.type],
            *((_cascade(),) if c.name == "request_id" else ()),
            primary_key=single and c.name in spec.primary_key,
            nullable=c.nullable,
            server_default=None if c.default is None else text(c.default),
        )
        for c in spec.columns
    ]
    key = () if single else (PrimaryKeyConstraint(*spec.primary_key, name=f"{spec.name}_pk"),)
    return Table(spec.name, metadata, *columns, *key, *extra)


requests = _record_table(
    REQUESTS,
    Index("requests_started", "started_at"),
    Index("requests_subject", "subject"),
    Index("requests_pool_started", "pool", "started_at"),
)
plan_attempts = _record_table(ATTEMPTS)
steps = _record_table(STEPS, Index("steps_worker", "worker"))

search_text = Table(
    "search_text",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("request_id", Text, _cascade(), nullable=False),
    Column("field", Text, nullable=False),
    Column("location", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("folded", Text),
    Column("document", TSVECTOR, Computed("to_tsvector('simple', coalesce(folded, text))", persisted=True)),
    Index("search_text_request", "request_id"),
    Index("search_text_document", "document", postgresql_using="gin"),
)

TRACE_TABLES = (requests, plan_attempts, steps, search_text)
"""The trace tables, parents first (PostgreSQL only; created by migration 0002)."""


shadow = Table(
    "shadow",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("mode", Text, nullable=False),
    Column("use_case", Text, nullable=False),
    Column("task_type", Text),
    Column("reference", Text),
    Column("question", Text),
    Column("upstream_model", Text),
    Column("upstream_status", Integer),
    Column("upstream_answer", Text),
    Column("upstream_latency_s", Float),
    Column("upstream_input_tokens", Integer),
    Column("upstream_output_tokens", Integer),
    Column("upstream_cost_usd", Float),
    Column("request_id", Text),
    Column("podium_status", Text),
    Column("podium_answer", Text),
    Column("podium_cost_usd", Float),
    Column("podium_latency_s", Float),
    Column("podium_workers", Text),
    Column("podium_steps", Integer),
    Column("error", Text),
    Index("shadow_at", "at"),
    Index("shadow_request", "request_id"),
)

request_cache = Table(
    "request_cache",
    metadata,
    Column("key", Text, primary_key=True),
    Column("worker", Text, nullable=False),
    Column("completion", Text, nullable=False),
    Column("created_at", Text, nullable=False),
)

settings = Table(
    "settings",
    metadata,
    Column("name", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("updated_by", Text, nullable=False),
)
