"""Keys, their usage, and the shared budget ledger (ledgers + holds).

Revision ID: 0001
Revises: none

A key file written by podium before the store had migrations already has ``keys`` and ``usage``
(the same columns): those are kept as they are, with their rows.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    if "keys" not in existing:
        op.create_table(
            "keys",
            sa.Column("name", sa.Text, primary_key=True),
            sa.Column("digest", sa.Text, nullable=False, unique=True),
            sa.Column("budget_usd", sa.Float),
            sa.Column("period", sa.Text, nullable=False),
            sa.Column("created_at", sa.Text, nullable=False),
            sa.Column("revoked_at", sa.Text),
        )
    if "usage" not in existing:
        op.create_table(
            "usage",
            sa.Column("key", sa.Text, nullable=False),
            sa.Column("request_id", sa.Text, nullable=False),
            sa.Column("at", sa.Float, nullable=False),
            sa.Column("cost_usd", sa.Float, nullable=False),
        )
        op.create_index("usage_key_at", "usage", ["key", "at"])
    op.create_table(
        "budget_ledgers",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("period_start", sa.Float, nullable=False),
        sa.Column("spent_usd", sa.Float, nullable=False),
        sa.Column("reserved_usd", sa.Float, nullable=False),
    )
    op.create_table(
        "budget_holds",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("amount_usd", sa.Float, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
        sa.Column("holder", sa.Text, nullable=False),
    )
    op.create_index("budget_holds_scope_expires", "budget_holds", ["scope", "expires"])


def downgrade() -> None:
    op.drop_table("budget_holds")
    op.drop_table("budget_ledgers")
