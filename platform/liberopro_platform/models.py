"""The platform's tables (SQLAlchemy 2). All of them live in this module; ``docs/platform.md``
describes each, and ``migrations/`` holds their Alembic history.

teams -> users -> api_tokens; teams -> submissions -> shards, episodes, events; submissions ->
results (the published row the leaderboard reads); teams -> team_images (the images a team
uploaded or had pulled, which alone it may name by id);
worker_heartbeats (one row per worker process and per beat, independent of the rest);
platform_meta (the deployment id that scopes sandbox labels).
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


def utcnow() -> dt.datetime:
    """Timezone-aware now (UTC)."""
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given; use liberopro_platform.models.utcnow()")
        return value.astimezone(dt.UTC) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value


def new_id() -> str:
    """A short random public id (12 hex digits)."""
    return uuid.uuid4().hex[:12]


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dt.datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


class SubmissionState(enum.StrEnum):
    """Where a submission is. ``published``, ``failed`` and ``cancelled`` are final."""

    queued = "queued"  # accepted, waiting for a worker to validate it
    validating = "validating"  # image checked, started in the sandbox, conformance check
    running = "running"  # shards planned; episodes running
    aggregating = "aggregating"  # all shards done; summary being computed
    published = "published"  # result stored (visible on the leaderboard unless hidden)
    failed = "failed"  # see failure_stage / failure / fix
    cancelled = "cancelled"

    @property
    def final(self) -> bool:
        return self in (SubmissionState.published, SubmissionState.failed, SubmissionState.cancelled)


FINAL_STATES = tuple(s.value for s in SubmissionState if s.final)
ACTIVE_STATES = tuple(s.value for s in SubmissionState if not s.final)


class ShardState(enum.StrEnum):
    """Where a shard is. ``done``, ``failed`` and ``cancelled`` are final."""

    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"


class Team(Base):
    """A team that submits; limits are per team (None: the platform default)."""

    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    submissions_per_day: Mapped[int | None] = mapped_column(Integer, default=None)
    max_concurrent: Mapped[int | None] = mapped_column(Integer, default=None)
    # Submissions that may reach the hidden stage in 7 days (docs/platform.md, "What remains observable").
    hidden_runs_per_week: Mapped[int | None] = mapped_column(Integer, default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    users: Mapped[list[User]] = relationship(back_populates="team")


class User(Base):
    """A person (or a bot) of a team; ``is_admin`` grants the admin endpoints."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    name: Mapped[str] = mapped_column(String(200), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    team: Mapped[Team] = relationship(back_populates="users")
    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user")


class ApiToken(Base):
    """An API token: ``lp_<id>_<secret>``; only the SHA-256 of the secret is stored."""

    __tablename__ = "api_tokens"
    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    secret_sha256: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime]
    revoked_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    user: Mapped[User] = relationship(back_populates="tokens")


class Submission(Base):
    """One policy image submitted by a team, and where it is in the pipeline.

    ``image_ref`` is what was submitted; ``image_digest`` the content-addressed image id it was
    pinned to (what runs, and what the result names). ``failure`` says what failed and ``fix``
    what to do about it; both are shown to the submitter and hold only text the platform wrote.
    ``policy_log`` is the policy container's own output during validation (truncated), the only
    log a submitter sees; its output on the hidden instances stays in ``Shard.policy_log``.
    """

    __tablename__ = "submissions"
    id: Mapped[str] = mapped_column(String(16), primary_key=True, default=new_id)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    source: Mapped[str] = mapped_column(String(16))  # reference | upload | command
    image_ref: Mapped[str | None] = mapped_column(String(500), default=None)
    upload_path: Mapped[str | None] = mapped_column(String(500), default=None)
    policy_command: Mapped[str | None] = mapped_column(Text, default=None)
    image_digest: Mapped[str | None] = mapped_column(String(100), default=None)
    image_size: Mapped[int | None] = mapped_column(BigInteger, default=None)
    protocol: Mapped[str] = mapped_column(String(20), default="liberopro")  # from the image label
    note: Mapped[str] = mapped_column(Text, default="")
    policy_name: Mapped[str | None] = mapped_column(String(200), default=None)
    spec_version: Mapped[str | None] = mapped_column(String(20), default=None)
    policy_metadata: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    validation_report: Mapped[dict[str, Any] | None] = mapped_column(default=None)

    state: Mapped[str] = mapped_column(String(16), default=SubmissionState.queued.value, index=True)
    state_since: Mapped[dt.datetime] = mapped_column(default=utcnow)
    message: Mapped[str] = mapped_column(Text, default="waiting for a worker")
    failure_stage: Mapped[str | None] = mapped_column(String(32), default=None)
    failure: Mapped[str | None] = mapped_column(Text, default=None)
    fix: Mapped[str | None] = mapped_column(Text, default=None)
    stuck_reason: Mapped[str | None] = mapped_column(Text, default=None)
    worker: Mapped[str | None] = mapped_column(String(200), default=None)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    requeues: Mapped[int] = mapped_column(Integer, default=0)
    policy_log: Mapped[str] = mapped_column(Text, default="")

    manifest_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    # What the submitter reads of the hidden stage, refreshed once per tick (api/routes/submissions.py).
    hidden_view: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    episodes_total: Mapped[int] = mapped_column(Integer, default=0)
    episodes_done: Mapped[int] = mapped_column(Integer, default=0)

    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    team: Mapped[Team] = relationship()
    user: Mapped[User] = relationship()
    shards: Mapped[list[Shard]] = relationship(back_populates="submission", order_by="Shard.index")
    events: Mapped[list[SubmissionEvent]] = relationship(order_by="SubmissionEvent.id")


class Shard(Base):
    """A slice of the submission's episodes run in one sandbox. ``plan`` lists
    ``[instance_id, episode_index]`` pairs; a re-run runs only those without a stored episode."""

    __tablename__ = "shards"
    __table_args__ = (UniqueConstraint("submission_id", "index", name="uq_shard_index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    plan: Mapped[list[Any]] = mapped_column()
    episodes_total: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default=ShardState.queued.value, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200), default=None)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    started_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    # When it last became queued (planned, retried, requeued): its place in the sandbox queue.
    queued_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)  # platform-written text only
    policy_log: Mapped[str] = mapped_column(Text, default="", server_default="")  # admins only: its output
    evaluator: Mapped[dict[str, Any] | None] = mapped_column(default=None)  # versions, from the evaluator
    submission: Mapped[Submission] = relationship(back_populates="shards")


class Episode(Base):
    """One finished episode (an :class:`liberopro.runs.summary.EpisodeRecord` as JSON), stored once
    per (submission, instance, episode index) whatever the number of shard attempts."""

    __tablename__ = "episodes"
    __table_args__ = (UniqueConstraint("submission_id", "instance_id", "episode_index", name="uq_episode"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    shard_id: Mapped[int] = mapped_column(ForeignKey("shards.id", ondelete="CASCADE"))
    instance_id: Mapped[str] = mapped_column(String(64))
    episode_index: Mapped[int] = mapped_column(Integer)
    success: Mapped[bool] = mapped_column(Boolean)
    termination_reason: Mapped[str] = mapped_column(String(64))
    record: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class SubmissionEvent(Base):
    """The history of a submission: every state change and notable event, with its message."""

    __tablename__ = "submission_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    state: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)


class TeamImage(Base):
    """An image id a team may submit by ``sha256:<id>``: one it uploaded (``source`` upload) or
    whose allowed-registry digest the platform pulled for it (``source`` registry). Recorded by
    the worker once the image is loaded and checked; never for a platform image. See
    docs/platform.md, "Image identity"."""

    __tablename__ = "team_images"
    __table_args__ = (UniqueConstraint("team_id", "image_id", name="uq_team_image"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))  # indexed by uq_team_image
    image_id: Mapped[str] = mapped_column(String(100), index=True)
    source: Mapped[str] = mapped_column(String(16))  # upload | registry
    submission_id: Mapped[str | None] = mapped_column(ForeignKey("submissions.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Result(Base):
    """A published result: everything the leaderboard shows and everything needed to trace the
    number (image digest, spec, evaluator and simulator versions, the manifest's hash)."""

    __tablename__ = "results"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), unique=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    team_name: Mapped[str] = mapped_column(String(100))
    policy_name: Mapped[str] = mapped_column(String(200))
    image_digest: Mapped[str] = mapped_column(String(100))
    spec_version: Mapped[str] = mapped_column(String(20))
    evaluator_version: Mapped[str] = mapped_column(String(40))
    stack: Mapped[dict[str, Any]] = mapped_column()
    manifest_sha256: Mapped[str] = mapped_column(String(64))
    summary: Mapped[dict[str, Any]] = mapped_column()
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    published_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    submission: Mapped[Submission] = relationship()


class WorkerHeartbeat(Base):
    """One row per worker process (and per ``celery beat``), written every
    ``heartbeat_interval_s`` by a thread of that process, so that "the owner of this work is
    gone" and "no worker is running" are known from the database (docs/platform.md, "Queues,
    sweep and recovery").

    ``roles``: the queues it serves, comma-separated (``shards``, ``control``), or ``beat``.
    ``task``: what it runs now (task name and argument), None when idle. ``stopped_at``: set on
    a clean shutdown (a killed process just stops beating). ``info``: role-specific facts, for
    beat the time and findings of the last sweep.
    """

    __tablename__ = "worker_heartbeats"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    roles: Mapped[str] = mapped_column(String(200))
    hostname: Mapped[str] = mapped_column(String(255), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    beat_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    task: Mapped[str | None] = mapped_column(String(200), default=None)
    task_since: Mapped[dt.datetime | None] = mapped_column(default=None)
    stopped_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    info: Mapped[dict[str, Any] | None] = mapped_column(default=None)

    def serves(self, role: str) -> bool:
        """True when ``role`` (``shards``, ``control`` or ``beat``) is one of its roles."""
        return role in self.roles.split(",")


class PlatformMeta(Base):
    """Facts about this deployment, one row per key. ``deployment_id``: a random id made when the
    database was created (migration 0004); every sandbox resource carries it as a label, so that
    a worker cleaning up after gone owners never touches the sandboxes of another platform on the
    same Docker engine (docs/platform.md, "Queues, sweep and recovery")."""

    __tablename__ = "platform_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(255))
