"""The trace record tables' columns, declared once for both trace stores.

``requests`` (one row per request), ``plan_attempts`` (one per conductor call) and ``steps``
(one per executed step) have the same columns in the embedded SQLite trace file
(:mod:`podium.trace.sqlite_schema` writes its ``CREATE TABLE`` from :data:`RECORD_TABLES`) and on
PostgreSQL (:mod:`podium.store.schema` builds its SQLAlchemy tables from them). What a record
puts in each column is :func:`podium.trace.rows.rows_of`.

Adding a column: declare it here (nullable, or with a ``default``, so existing rows get a value),
write and read it in :mod:`podium.trace.rows`, add an Alembic revision for PostgreSQL
(``podium/store/migrations/versions``: ``op.add_column`` with the same nullability and a
``server_default`` equal to the ``default``), and set the field in ``_every_field_set`` of
``tests/test_trace_columns.py``. Tests compare the migrated database with these tables (defaults
included), upgrade a database with rows, and round-trip a record with every field set.
An SQLite trace file gets a missing column on its next open (:func:`~podium.trace.sqlite_schema.
create_or_upgrade`). The search tables are not here: each engine indexes text its own way.

Plain data, no SQLAlchemy: the SQLite path (every ``podium run``) does not import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ATTEMPTS", "RECORD_TABLES", "REQUESTS", "STEPS", "Col", "RecordTable"]


@dataclass(frozen=True)
class Col:
    """One column.

    Attributes:
        name: the column's name (a key of :func:`~podium.trace.rows.rows_of`'s rows).
        type: ``text`` (also JSON and UTC ISO 8601 times), ``integer`` (also booleans as 0/1) or
            ``real`` (Unix seconds, USD, seconds).
        nullable: whether NULL is allowed.
        default: the database's default for rows written without it (an SQL literal), or None.
    """

    name: str
    type: Literal["text", "integer", "real"]
    nullable: bool = False
    default: str | None = None


@dataclass(frozen=True)
class RecordTable:
    """A record table: its columns in order and its primary key. A ``request_id`` column (every
    table's but ``requests``) references ``requests (id)`` with ``ON DELETE CASCADE``, so
    deleting a request deletes its rows."""

    name: str
    columns: tuple[Col, ...]
    primary_key: tuple[str, ...]


_CALL = (
    Col("input_tokens", "integer"),
    Col("output_tokens", "integer"),
    Col("cached_input_tokens", "integer"),
    Col("reasoning_tokens", "integer"),
    Col("usage_estimated", "integer"),
    Col("cost_usd", "real"),
    Col("latency_s", "real"),
)
"""A call's usage (token counts, whether they are podium's estimate), cost USD and latency s."""

REQUESTS = RecordTable(
    "requests",
    (
        Col("id", "text"),
        Col("started_at", "text"),
        Col("finished_at", "text", nullable=True),
        Col("mode", "text"),
        Col("pool", "text"),
        Col("workers", "text", default="'[]'"),
        Col("conductor", "text"),
        Col("status", "text"),
        Col("question", "text"),
        Col("answer", "text", nullable=True),
        Col("error", "text", nullable=True),
        Col("workflows", "text", default="'[]'"),
        Col("fallback_reason", "text", nullable=True),
        Col("fallback_detail", "text", nullable=True),
        Col("totals", "text", nullable=True),
        Col("total_cost_usd", "real", nullable=True),
        Col("wall_time_s", "real", nullable=True),
        Col("tags", "text", default="'[]'"),
        Col("subject", "text", nullable=True),
    ),
    ("id",),
)

ATTEMPTS = RecordTable(
    "plan_attempts",
    (
        Col("request_id", "text"),
        Col("round", "integer"),
        Col("attempt", "integer"),
        Col("messages", "text"),
        Col("raw_output", "text"),
        Col("workflow", "text", nullable=True),
        Col("error_kind", "text", nullable=True),
        Col("error", "text", nullable=True),
        *_CALL,
        Col("constrained", "integer"),
        Col("started_at", "text", nullable=True),
        Col("finished_at", "text", nullable=True),
        Col("disclosures", "text", default="'[]'"),
    ),
    ("request_id", "round", "attempt"),
)

STEPS = RecordTable(
    "steps",
    (
        Col("request_id", "text"),
        Col("phase", "text"),
        Col("round", "integer"),
        Col("step_index", "integer"),
        Col("worker_index", "integer"),
        Col("worker", "text"),
        Col("subtask", "text"),
        Col("access", "text"),
        Col("visible", "text"),
        Col("visible_previous", "text"),
        Col("messages", "text"),
        Col("output", "text"),
        *_CALL,
        Col("finish_reason", "text"),
        Col("error", "text", nullable=True),
        Col("error_type", "text", nullable=True),
        Col("started_at", "text"),
        Col("finished_at", "text"),
        Col("disclosures", "text", default="'[]'"),
    ),
    ("request_id", "phase", "round", "step_index"),
)

RECORD_TABLES = (REQUESTS, ATTEMPTS, STEPS)
"""Parents first."""
