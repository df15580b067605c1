"""The pipeline of one worker process: :class:`Pipeline` holds what every stage needs (settings,
sessions, the hand-over to the next stage, the worker's name, its sandbox backend, its clock)
and names the stages, each a function of its own module that takes it as first argument."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from liberopro.schema.results import EpisodeRecord
from sqlalchemy.orm import Session, sessionmaker

from liberopro_platform.config import Settings
from liberopro_platform.models import Submission, utcnow
from liberopro_platform.pipeline import admin, aggregate, episodes, plan, policies, recovery, shards, sweep, validate
from liberopro_platform.pipeline.messages import BrokerView, Enqueue
from liberopro_platform.pipeline.sweep import Stuck
from liberopro_platform.sandbox.base import SandboxBackend


class Pipeline:
    """The pipeline of one worker process (``worker`` names it in claims and sandbox labels).

    The stages (:mod:`.validate`, :mod:`.plan`, :mod:`.shards`, :mod:`.aggregate`) and the
    upkeep (:mod:`.sweep`, :mod:`.recovery`, :mod:`.policies`, :mod:`.admin`) are plain
    functions over the database taking a pipeline as their context; the methods below only
    call them, for the Celery tasks, the API and the CLI."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        enqueue: Enqueue,
        worker: str,
        backend: SandboxBackend | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.enqueue = enqueue
        self.worker = worker
        self._backend: SandboxBackend | None = backend
        #: Held while node sandboxes (policy containers kept between shards) are released or about
        #: to be used: by a shard's start and by the idle hook (:mod:`.policies`).
        self.policy_lock = threading.Lock()

    @property
    def backend(self) -> SandboxBackend:
        """The sandbox backend, made on first use (a Docker engine that is down fails here, not at import)."""
        if self._backend is None:
            from liberopro_platform.db import deployment_id
            from liberopro_platform.sandbox import make_backend

            self._backend = make_backend(self.settings, self.worker, deployment_id(self.sessions))
        return self._backend

    @property
    def has_backend(self) -> bool:
        """Whether the backend was made (a worker that ran no sandbox task has none to clean up)."""
        return self._backend is not None

    def now(self) -> dt.datetime:
        """The pipeline's clock (UTC; tests move it)."""
        return utcnow()

    def stale(self, at: dt.datetime | None) -> bool:
        """True when a heartbeat at ``at`` is older than ``heartbeat_stale_s`` (or never came)."""
        return at is None or (self.now() - at).total_seconds() > self.settings.heartbeat_stale_s

    # ------------------------------------------------------------------ the stages (Celery tasks)
    def validate(self, submission_id: str) -> None:
        """Stage 1, then planning (:func:`.validate.validate`)."""
        validate.validate(self, submission_id)

    def plan(self, submission_id: str) -> None:
        """Stage 2 (:func:`.plan.plan`)."""
        plan.plan(self, submission_id)

    def run_shard(self, shard_id: int) -> None:
        """Stage 3 (:func:`.shards.run_shard`)."""
        shards.run_shard(self, shard_id)

    def aggregate(self, submission_id: str) -> None:
        """Stages 4 and 5 (:func:`.aggregate.aggregate`)."""
        aggregate.aggregate(self, submission_id)

    def store_episode(self, shard_id: int, submission_id: str, record: EpisodeRecord) -> bool:
        """:func:`.episodes.store_episode`."""
        return episodes.store_episode(self, shard_id, submission_id, record)

    # ------------------------------------------------------------------ the API's and the CLI's
    def cancel(self, session: Session, sub: Submission, by: str) -> None:
        """:func:`.admin.cancel`."""
        admin.cancel(session, sub, by)

    def requeue(self, submission_id: str, by: str) -> str:
        """:func:`.admin.requeue`."""
        return admin.requeue(self, submission_id, by)

    def find_stuck(self, session: Session, broker: BrokerView | None = None) -> list[Stuck]:
        """:func:`.sweep.find_stuck`."""
        return sweep.find_stuck(self, session, broker)

    def sweep_stuck(self) -> list[Stuck]:
        """:func:`.sweep.sweep_stuck`."""
        return sweep.sweep_stuck(self)

    # ------------------------------------------------------------------ the worker's upkeep
    def recover(self) -> dict[str, Any]:
        """At worker start (:func:`.recovery.recover`)."""
        return recovery.recover(self)

    def idle(self) -> dict[str, Any]:
        """The shards worker's idle hook (:func:`.recovery.idle`)."""
        return recovery.idle(self)

    def release_idle_policies(self) -> list[str]:
        """:func:`.policies.release_idle_policies`."""
        return policies.release_idle_policies(self)

    def release_all_policies(self) -> list[str]:
        """:func:`.policies.release_all_policies`."""
        return policies.release_all_policies(self)
