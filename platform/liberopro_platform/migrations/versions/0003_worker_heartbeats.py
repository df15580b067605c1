"""worker heartbeats: one row per worker process and per beat

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

import liberopro_platform.models
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_heartbeats",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("roles", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("beat_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=True),
        sa.Column("task_since", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("stopped_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("info", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("worker_heartbeats", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_worker_heartbeats_beat_at"), ["beat_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("worker_heartbeats", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_heartbeats_beat_at"))
    op.drop_table("worker_heartbeats")
