"""platform_meta: facts about the deployment (its random deployment id)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "platform_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.bulk_insert(table, [{"key": "deployment_id", "value": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("platform_meta")
