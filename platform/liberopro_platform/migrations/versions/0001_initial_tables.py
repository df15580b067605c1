"""initial tables

Revision ID: 0001
Revises:
Create Date: 2026-11-30 14:53:24.505409
"""

from __future__ import annotations

import liberopro_platform.models
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _accounts() -> None:
    """Teams, their users and the users' API tokens."""
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("submissions_per_day", sa.Integer(), nullable=True),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("created_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("created_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )


def _submissions() -> None:
    """Submissions and their indexes (creation time, state, team)."""
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("image_ref", sa.String(length=500), nullable=True),
        sa.Column("upload_path", sa.String(length=500), nullable=True),
        sa.Column("policy_command", sa.Text(), nullable=True),
        sa.Column("image_digest", sa.String(length=100), nullable=True),
        sa.Column("image_size", sa.BigInteger(), nullable=True),
        sa.Column("protocol", sa.String(length=20), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("policy_name", sa.String(length=200), nullable=True),
        sa.Column("spec_version", sa.String(length=20), nullable=True),
        sa.Column("policy_metadata", sa.JSON(), nullable=True),
        sa.Column("validation_report", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_since", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("failure_stage", sa.String(length=32), nullable=True),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column("fix", sa.Text(), nullable=True),
        sa.Column("stuck_reason", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("heartbeat_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("requeues", sa.Integer(), nullable=False),
        sa.Column("policy_log", sa.Text(), nullable=False),
        sa.Column("manifest_sha256", sa.String(length=64), nullable=True),
        sa.Column("episodes_total", sa.Integer(), nullable=False),
        sa.Column("episodes_done", sa.Integer(), nullable=False),
        sa.Column("created_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submissions_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_team_id"), ["team_id"], unique=False)


def _results() -> None:
    """Published results and their indexes (hidden, publication time, team)."""
    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=16), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("team_name", sa.String(length=100), nullable=False),
        sa.Column("policy_name", sa.String(length=200), nullable=False),
        sa.Column("image_digest", sa.String(length=100), nullable=False),
        sa.Column("spec_version", sa.String(length=20), nullable=False),
        sa.Column("evaluator_version", sa.String(length=40), nullable=False),
        sa.Column("stack", sa.JSON(), nullable=False),
        sa.Column("manifest_sha256", sa.String(length=64), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        sa.Column("published_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("submission_id"),
    )
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_results_hidden"), ["hidden"], unique=False)
        batch_op.create_index(batch_op.f("ix_results_published_at"), ["published_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_results_team_id"), ["team_id"], unique=False)


def _shards() -> None:
    """A submission's shards and their indexes (state, submission)."""
    op.create_table(
        "shards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=16), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("episodes_total", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("heartbeat_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("started_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("evaluator", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("submission_id", "index", name="uq_shard_index"),
    )
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_shards_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_shards_submission_id"), ["submission_id"], unique=False)


def _events() -> None:
    """A submission's state changes, indexed by submission."""
    op.create_table(
        "submission_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=16), nullable=False),
        sa.Column("at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("submission_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submission_events_submission_id"), ["submission_id"], unique=False)


def _episodes() -> None:
    """Episode records, indexed by submission."""
    op.create_table(
        "episodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=16), nullable=False),
        sa.Column("shard_id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=64), nullable=False),
        sa.Column("episode_index", sa.Integer(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("termination_reason", sa.String(length=64), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("created_at", liberopro_platform.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["shard_id"], ["shards.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("submission_id", "instance_id", "episode_index", name="uq_episode"),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_episodes_submission_id"), ["submission_id"], unique=False)


def upgrade() -> None:
    # auto generated by Alembic, then cut into one function per table group (same operations, same order)
    _accounts()
    _submissions()
    _results()
    _shards()
    _events()
    _episodes()


def downgrade() -> None:
    # ### commands auto generated by Alembic - please adjust! ###
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_episodes_submission_id"))

    op.drop_table("episodes")
    with op.batch_alter_table("submission_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submission_events_submission_id"))

    op.drop_table("submission_events")
    with op.batch_alter_table("shards", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_shards_submission_id"))
        batch_op.drop_index(batch_op.f("ix_shards_state"))

    op.drop_table("shards")
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_results_team_id"))
        batch_op.drop_index(batch_op.f("ix_results_published_at"))
        batch_op.drop_index(batch_op.f("ix_results_hidden"))

    op.drop_table("results")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_team_id"))
        batch_op.drop_index(batch_op.f("ix_submissions_state"))
        batch_op.drop_index(batch_op.f("ix_submissions_created_at"))

    op.drop_table("submissions")
    op.drop_table("api_tokens")
    op.drop_table("users")
    op.drop_table("teams")
    # ### end Alembic commands ###
