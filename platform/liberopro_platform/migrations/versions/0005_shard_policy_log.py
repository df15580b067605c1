"""shards.policy_log: the policy's output on hidden instances, for admins only

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 16:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("shards", sa.Column("policy_log", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("shards", "policy_log")
