"""Traces on PostgreSQL: requests, plan_attempts, steps and search_text (tsvector + GIN).

Revision ID: 0002
Revises: 0001

On SQLite nothing changes: the embedded trace file keeps its own schema (podium.trace.store).
"""

from alembic import op

from podium.store.schema import TRACE_TABLES

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in TRACE_TABLES:
        table.create(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in reversed(TRACE_TABLES):
        table.drop(bind)
