"""Traces on PostgreSQL: requests, plan_attempts, steps and search_text (tsvector + GIN).

Revision ID: 0002
Revises: 0001

On SQLite nothing changes: the embedded trace file keeps its own schema (podium.trace.sqlite_schema).
The columns are written out here as they were at this revision, not read from the current
schema, so this revision means the same in every release: a column added later to
podium.trace.columns comes with its own revision (a test compares a migrated database with the
current tables).
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TABLES = ("search_text", "steps", "plan_attempts", "requests")
"""Children first (the drop order)."""


def _call_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cached_input_tokens", sa.Integer, nullable=False),
        sa.Column("reasoning_tokens", sa.Integer, nullable=False),
        sa.Column("usage_estimated", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("latency_s", sa.Float, nullable=False),
    ]


def _request_id() -> sa.Column[Any]:
    return sa.Column("request_id", sa.Text, sa.ForeignKey("requests.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.create_table(
        "requests",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("started_at", sa.Text, nullable=False),
        sa.Column("finished_at", sa.Text),
        sa.Column("mode", sa.Text, nullable=False),
        sa.Column("pool", sa.Text, nullable=False),
        sa.Column("workers", sa.Text, nullable=False, server_default="[]"),
        sa.Column("conductor", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("answer", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("workflows", sa.Text, nullable=False, server_default="[]"),
        sa.Column("fallback_reason", sa.Text),
        sa.Column("fallback_detail", sa.Text),
        sa.Column("totals", sa.Text),
        sa.Column("total_cost_usd", sa.Float),
        sa.Column("wall_time_s", sa.Float),
        sa.Column("tags", sa.Text, nullable=False, server_default="[]"),
        sa.Column("subject", sa.Text),
    )
    op.create_index("requests_started", "requests", ["started_at"])
    op.create_index("requests_subject", "requests", ["subject"])
    op.create_index("requests_pool_started", "requests", ["pool", "started_at"])
    op.create_table(
        "plan_attempts",
        _request_id(),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("messages", sa.Text, nullable=False),
        sa.Column("raw_output", sa.Text, nullable=False),
        sa.Column("workflow", sa.Text),
        sa.Column("error_kind", sa.Text),
        sa.Column("error", sa.Text),
        *_call_columns(),
        sa.Column("constrained", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Text),
        sa.Column("finished_at", sa.Text),
        sa.Column("disclosures", sa.Text, nullable=False, server_default="[]"),
        sa.PrimaryKeyConstraint("request_id", "round", "attempt", name="plan_attempts_pk"),
    )
    op.create_table(
        "steps",
        _request_id(),
        sa.Column("phase", sa.Text, nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("worker_index", sa.Integer, nullable=False),
        sa.Column("worker", sa.Text, nullable=False),
        sa.Column("subtask", sa.Text, nullable=False),
        sa.Column("access", sa.Text, nullable=False),
        sa.Column("visible", sa.Text, nullable=False),
        sa.Column("visible_previous", sa.Text, nullable=False),
        sa.Column("messages", sa.Text, nullable=False),
        sa.Column("output", sa.Text, nullable=False),
        *_call_columns(),
        sa.Column("finish_reason", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("error_type", sa.Text),
        sa.Column("started_at", sa.Text, nullable=False),
        sa.Column("finished_at", sa.Text, nullable=False),
        sa.Column("disclosures", sa.Text, nullable=False, server_default="[]"),
        sa.PrimaryKeyConstraint("request_id", "phase", "round", "step_index", name="steps_pk"),
    )
    op.create_index("steps_worker", "steps", ["worker"])
    op.create_table(
        "search_text",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _request_id(),
        sa.Column("field", sa.Text, nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("folded", sa.Text),
        sa.Column("document", TSVECTOR, sa.Computed("to_tsvector('simple', coalesce(folded, text))", persisted=True)),
    )
    op.create_index("search_text_request", "search_text", ["request_id"])
    op.create_index("search_text_document", "search_text", ["document"], postgresql_using="gin")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in _TABLES:
        op.drop_table(table)
