"""shards.queued_at (a waiting shard's place in the sandbox queue), teams.hidden_runs_per_week
(the per-team cap on runs of the hidden stage) and submissions.hidden_view (what the submitter
reads of the hidden stage, refreshed once per tick)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 18:00:00.000000
"""

from __future__ import annotations

import liberopro_platform.models
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("shards", sa.Column("queued_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True))
    op.add_column("teams", sa.Column("hidden_runs_per_week", sa.Integer(), nullable=True))
    op.add_column("submissions", sa.Column("hidden_view", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("submissions", "hidden_view")
    op.drop_column("teams", "hidden_runs_per_week")
    op.drop_column("shards", "queued_at")
