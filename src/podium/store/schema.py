"""The tables of podium's shared store (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Alembic migrations (``podium/store/migrations``) create and change them; this module is their
current shape, which the stores query. Times are Unix seconds (float) unless named ``*_at`` as
UTC ISO 8601 text; money is USD.

Tables:
    keys: API keys of ``podium serve`` — name, SHA-256 digest of the secret, budget USD per
        period, period name, created/revoked (UTC ISO 8601).
    usage: one row per answered request — key name, request id (= trace id), time (Unix s),
        cost USD.
    budget_periods: one row per (ledger scope, period start, Unix s) — the settled cost, USD.
    budget_holds: reservations of calls in flight — id, scope, amount USD, created and expiry
        (Unix s), holder (host:pid); an expired hold no longer counts (its process died).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, MetaData, PrimaryKeyConstraint, String, Table, Text

__all__ = ["budget_holds", "budget_periods", "keys", "metadata", "usage"]

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

budget_periods = Table(
    "budget_periods",
    metadata,
    Column("scope", Text, nullable=False),
    Column("period_start", Float, nullable=False),
    Column("spent_usd", Float, nullable=False),
    PrimaryKeyConstraint("scope", "period_start", name="budget_periods_pk"),
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
