"""Shadow records, the request cache and operator settings in the shared store.

Revision ID: 0003
Revises: 0002

Creates ``shadow``, ``request_cache`` and ``settings`` on either engine (the columns are written
out here, not read from the current schema, so this revision means the same in every release).
The embedded shadow and cache files of a single machine keep their own one-table files
(:func:`podium.store.engine.open_embedded`); in the embedded key file these tables are unused
but harmless, and ``settings`` serves the processes of one host.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shadow",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("mode", sa.Text, nullable=False),
        sa.Column("use_case", sa.Text, nullable=False),
        sa.Column("task_type", sa.Text),
        sa.Column("reference", sa.Text),
        sa.Column("question", sa.Text),
        sa.Column("upstream_model", sa.Text),
        sa.Column("upstream_status", sa.Integer),
        sa.Column("upstream_answer", sa.Text),
        sa.Column("upstream_latency_s", sa.Float),
        sa.Column("upstream_input_tokens", sa.Integer),
        sa.Column("upstream_output_tokens", sa.Integer),
        sa.Column("upstream_cost_usd", sa.Float),
        sa.Column("request_id", sa.Text),
        sa.Column("podium_status", sa.Text),
        sa.Column("podium_answer", sa.Text),
        sa.Column("podium_cost_usd", sa.Float),
        sa.Column("podium_latency_s", sa.Float),
        sa.Column("podium_workers", sa.Text),
        sa.Column("podium_steps", sa.Integer),
        sa.Column("error", sa.Text),
    )
    op.create_index("shadow_at", "shadow", ["at"])
    op.create_index("shadow_request", "shadow", ["request_id"])
    op.create_table(
        "request_cache",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("worker", sa.Text, nullable=False),
        sa.Column("completion", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    op.create_table(
        "settings",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.Column("updated_by", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("settings")
    op.drop_table("request_cache")
    op.drop_index("shadow_request", "shadow")
    op.drop_index("shadow_at", "shadow")
    op.drop_table("shadow")
