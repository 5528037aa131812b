"""Key scopes: ``api`` (the OpenAI-compatible API) or ``admin`` (also the web UI and purge).

Revision ID: 0004
Revises: 0003

Every key that exists keeps its meaning for the API (scope ``api``); an operator creates admin
keys with ``podium keys create NAME --scope admin``.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("keys", sa.Column("scope", sa.Text, nullable=False, server_default="api"))


def downgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        batch.drop_column("scope")
