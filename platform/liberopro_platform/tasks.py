"""Celery on Redis: the pipeline's tasks, thin wrappers around :class:`~.pipeline.Pipeline`.

Run a worker with::

    celery -A liberopro_platform.tasks worker -Q liberopro -n worker1@%h --pool=solo \\
        --without-mingle --without-gossip

(``python -m liberopro_platform worker`` does the same). Tasks are acknowledged late and
rejected back to the queue when the worker process is lost; stages bound their own attempts in
the database. A restarted worker (same ``-n`` name) sweeps the sandboxes its predecessor left
and requeues the work it held (:meth:`Pipeline.recover`). ``liberopro.sweep`` runs every minute
under ``celery beat`` and handles stuck submissions.
"""

from __future__ import annotations

import logging
import socket

from celery import Celery, signals
from sqlalchemy.exc import OperationalError

from liberopro_platform.config import Settings, get_settings
from liberopro_platform.db import make_engine, make_sessionmaker

log = logging.getLogger("liberopro_platform.tasks")

TASK_VALIDATE = "liberopro.validate"
TASK_RUN_SHARD = "liberopro.run_shard"
TASK_AGGREGATE = "liberopro.aggregate"
TASK_SWEEP = "liberopro.sweep"


def make_celery(settings: Settings) -> Celery:
    """The Celery app: Redis broker, late acks, one task at a time per worker process."""
    app = Celery("liberopro_platform", broker=settings.broker_url)
    app.conf.update(
        task_default_queue=settings.queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": settings.broker_visibility_timeout_s},
        worker_hijack_root_logger=False,
        beat_schedule={"sweep-stuck": {"task": TASK_SWEEP, "schedule": 60.0}},
        timezone="UTC",
    )
    return app


class CeleryEnqueue:
    """:class:`~.pipeline.Enqueue` through Celery (by task name: the API never imports the tasks)."""

    def __init__(self, app: Celery, queue: str) -> None:
        self.app = app
        self.queue = queue

    def _send(self, name: str, arg: object, countdown: float) -> None:
        self.app.send_task(name, args=[arg], queue=self.queue, countdown=countdown or None)

    def validate(self, submission_id: str, countdown: float = 0) -> None:
        self._send(TASK_VALIDATE, submission_id, countdown)

    def run_shard(self, shard_id: int, countdown: float = 0) -> None:
        self._send(TASK_RUN_SHARD, shard_id, countdown)

    def aggregate(self, submission_id: str, countdown: float = 0) -> None:
        self._send(TASK_AGGREGATE, submission_id, countdown)


settings = get_settings()
app = make_celery(settings)
_pipeline = None
_worker_name = f"worker@{socket.gethostname()}"


def pipeline():
    """This process's pipeline (made on first use)."""
    global _pipeline
    if _pipeline is None:
        from liberopro_platform.pipeline import Pipeline

        sessions = make_sessionmaker(make_engine(settings.database_url))
        _pipeline = Pipeline(settings, sessions, CeleryEnqueue(app, settings.queue), _worker_name)
    return _pipeline


@signals.worker_ready.connect
def _recover_on_start(sender=None, **_: object) -> None:
    """A restarted worker cleans up after its killed predecessor of the same name."""
    global _worker_name
    if sender is not None and getattr(sender, "hostname", None):
        _worker_name = sender.hostname
    p = pipeline()
    p.worker = _worker_name
    result = p.recover()
    log.info("worker %s ready (recovery: %s)", _worker_name, result)


# Limits: stages enforce their own deadlines (the solo pool ignores Celery's time limits); these
# are the outer bound under the prefork pool.
_common = {"acks_late": True, "autoretry_for": (OperationalError,), "max_retries": 3, "retry_backoff": True}


@app.task(name=TASK_VALIDATE, **_common,
          soft_time_limit=settings.validation_time_limit_s + 600, time_limit=settings.validation_time_limit_s + 900)
def validate_task(submission_id: str) -> None:
    """Validate, then plan the shards."""
    pipeline().validate(submission_id)


@app.task(name=TASK_RUN_SHARD, **_common,
          soft_time_limit=settings.shard_time_limit_s(settings.episodes_per_shard) + 600,
          time_limit=settings.shard_time_limit_s(settings.episodes_per_shard) + 900)
def run_shard_task(shard_id: int) -> None:
    """Run one shard's missing episodes."""
    pipeline().run_shard(shard_id)


@app.task(name=TASK_AGGREGATE, **_common, soft_time_limit=settings.aggregate_time_limit_s,
          time_limit=settings.aggregate_time_limit_s + 60)
def aggregate_task(submission_id: str) -> None:
    """Summarise and publish."""
    pipeline().aggregate(submission_id)


@app.task(name=TASK_SWEEP, **_common, soft_time_limit=120, time_limit=180)
def sweep_task() -> int:
    """Handle stuck submissions; returns how many were found."""
    return len(pipeline().sweep_stuck())
