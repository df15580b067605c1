"""Celery on Redis: the pipeline's tasks, thin wrappers around :class:`~.pipeline.Pipeline`.

Two queues (``Settings.queue`` is their prefix): ``<queue>.shards`` holds every task that starts a
sandbox (validation, shards), ``<queue>.control`` the short ones (aggregation). Run a worker with::

    python -m liberopro_platform worker --name worker1            # both queues, solo pool
    python -m liberopro_platform worker --name control --queues control

(``celery -A liberopro_platform.celery_app worker -Q liberopro.shards,liberopro.control
-n worker1@%h --pool=solo`` is the same). With the solo pool a worker runs one task at a time and, with
``acks_late`` and a prefetch of one, holds no other message while it runs one: a busy shard
worker never sits on an aggregation, which a control worker (or any idle worker) takes at once.

Tasks are acknowledged late and rejected back to the queue when the worker process is lost;
stages bound their own attempts in the database. Each worker writes its row of
``worker_heartbeats`` from a thread (:mod:`.heartbeat`); at start it removes the sandboxes of
its killed predecessor of the same name and of every worker whose heartbeat is gone, and
requeues their work (:meth:`Pipeline.recover`). ``celery beat`` (:class:`SweepScheduler`) runs
the stuck sweep every ``sweep_interval_s`` in its own process, so stuck or lost work is found
while every worker is busy or dead.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import socket
from typing import Any

from celery import Celery, signals
from celery.beat import Scheduler
from sqlalchemy.exc import OperationalError

from liberopro_platform.config import Settings, get_settings
from liberopro_platform.db import make_engine, make_sessionmaker

log = logging.getLogger("liberopro_platform.celery_app")

TASK_VALIDATE = "liberopro.validate"
TASK_RUN_SHARD = "liberopro.run_shard"
TASK_AGGREGATE = "liberopro.aggregate"
TASK_SWEEP = "liberopro.sweep"

#: The :class:`~.pipeline.Enqueue` method (the ``kind`` of a :class:`~.pipeline.BrokerView` key) of each task.
KINDS = {TASK_VALIDATE: "validate", TASK_RUN_SHARD: "run_shard", TASK_AGGREGATE: "aggregate"}


def queue_of(task: str, prefix: str) -> str:
    """The queue ``task`` goes to: ``<prefix>.shards`` for the sandbox tasks, else ``<prefix>.control``."""
    return f"{prefix}.shards" if task in (TASK_VALIDATE, TASK_RUN_SHARD) else f"{prefix}.control"


def make_celery(settings: Settings) -> Celery:
    """The Celery app: Redis broker, two queues, late acks, one task at a time per worker
    process, and beat running the sweep itself (:class:`SweepScheduler`)."""
    app = Celery("liberopro_platform", broker=settings.broker_url)
    app.conf.update(
        task_default_queue=settings.control_queue,
        task_routes={
            t: {"queue": queue_of(t, settings.queue)}
            for t in (TASK_VALIDATE, TASK_RUN_SHARD, TASK_AGGREGATE, TASK_SWEEP)
        },
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # A broker restart must not stop a running shard: its claim lives in the database, and the
        # sweep re-sends what the restart lost.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_transport_options={"visibility_timeout": settings.broker_visibility_timeout_s},
        worker_hijack_root_logger=False,
        beat_schedule={"sweep-stuck": {"task": TASK_SWEEP, "schedule": settings.sweep_interval_s}},
        beat_scheduler="liberopro_platform.celery_app:SweepScheduler",
        beat_max_loop_interval=min(60.0, settings.sweep_interval_s),
        timezone="UTC",
    )
    return app


class CeleryEnqueue:
    """:class:`~.pipeline.Enqueue` through Celery (by task name: the API never imports the tasks);
    ``queue`` is the queues' prefix (``Settings.queue``)."""

    def __init__(self, app: Celery, queue: str) -> None:
        self.app = app
        self.queue = queue

    def _send(self, name: str, arg: object, countdown: float) -> None:
        self.app.send_task(name, args=[arg], queue=queue_of(name, self.queue), countdown=countdown or None)

    def validate(self, submission_id: str, countdown: float = 0) -> None:
        self._send(TASK_VALIDATE, submission_id, countdown)

    def run_shard(self, shard_id: int, countdown: float = 0) -> None:
        self._send(TASK_RUN_SHARD, shard_id, countdown)

    def aggregate(self, submission_id: str, countdown: float = 0) -> None:
        self._send(TASK_AGGREGATE, submission_id, countdown)

    def pending(self):
        """What the Redis broker holds for our two queues (a :class:`~.pipeline.BrokerView`), or
        None when the broker is not Redis or does not answer.

        Kombu's Redis transport keeps a queue as a list per priority step (``LRANGE``: waiting
        messages) and the messages handed to a worker and not yet acknowledged in the hash
        ``unacked`` with their hand-over time in the sorted set ``unacked_index``. Both are read
        (O(messages held), once per sweep); a message moving from the list to the hash between
        the two reads can be missed, which costs at most one duplicate of an idempotent task.
        """
        from liberopro_platform.pipeline import BrokerView

        queues = {queue_of(t, self.queue) for t in KINDS}
        try:
            with self.app.connection_for_read() as conn:
                if conn.transport.driver_type != "redis":
                    return None
                conn.ensure_connection(max_retries=1)
                ch = conn.default_channel
                client = ch.client
                keys = [ch._q_for_pri(q, p) for q in sorted(queues) for p in ch.priority_steps]
                with client.pipeline(transaction=True) as pipe:
                    for k in dict.fromkeys(keys):
                        pipe.lrange(k, 0, -1)
                    pipe.hgetall(ch.unacked_key)
                    pipe.zrange(ch.unacked_index_key, 0, -1, withscores=True)
                    *lists, unacked, index = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - an unreadable broker: the sweep falls back to time rules
            log.warning("cannot inspect the broker's queues: %r", exc)
            return None
        view = BrokerView()
        for items in lists:
            for raw in items:
                key = _task_key(json.loads(raw))
                if key is not None:
                    view.waiting.add(key[:2])
        handed = {_text(tag): score for tag, score in index}
        for tag, raw in unacked.items():
            try:
                payload, _exchange, routing_key = json.loads(raw)
            except ValueError:
                continue
            key = _task_key(payload)
            if key is None or routing_key not in queues:
                continue
            at = dt.datetime.fromtimestamp(handed.get(_text(tag), 0.0), dt.UTC)
            eta = key[2]
            view.delivered[key[:2]] = max(at, eta) if eta is not None else at
        return view


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _task_key(message: dict[str, Any]) -> tuple[str, str, dt.datetime | None] | None:
    """``(kind, argument, eta)`` of one of our task messages as kombu stores it in Redis, else None."""
    try:
        headers = message.get("headers") or {}
        task = headers.get("task")
        kind = KINDS.get(task) if isinstance(task, str) else None
        if kind is None:
            return None
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        eta = headers.get("eta")
        eta_at = dt.datetime.fromisoformat(eta) if eta else None
        if eta_at is not None and eta_at.tzinfo is None:
            eta_at = eta_at.replace(tzinfo=dt.UTC)
        return kind, str(args[0]), eta_at
    except (KeyError, IndexError, TypeError, ValueError):
        return None


settings = get_settings()
app = make_celery(settings)
_pipeline = None
_worker_name = f"worker@{socket.gethostname()}"
_heartbeat = None


def pipeline():
    """This process's pipeline (made on first use)."""
    global _pipeline
    if _pipeline is None:
        from liberopro_platform.pipeline import Pipeline

        sessions = make_sessionmaker(make_engine(settings.database_url))
        _pipeline = Pipeline(settings, sessions, CeleryEnqueue(app, settings.queue), _worker_name)
    return _pipeline


def _roles_of(consumer: Any) -> list[str]:
    """The roles (``shards``, ``control``) of the queues ``consumer`` reads."""
    try:
        names = [q.name for q in consumer.task_consumer.queues]
    except AttributeError:
        names = list(consumer.app.amqp.queues.consume_from or {})
    prefix = settings.queue + "."
    return sorted({n[len(prefix) :] for n in names if n.startswith(prefix)})


@signals.worker_ready.connect
def _recover_on_start(sender=None, **_: object) -> None:
    """Write this worker's heartbeat row; then, on a worker that runs sandboxes, clean up after
    its killed predecessor of the same name and after every worker whose heartbeat is gone."""
    global _worker_name, _heartbeat
    from liberopro_platform.heartbeat import SHARDS, HeartbeatWriter

    if sender is not None and getattr(sender, "hostname", None):
        _worker_name = sender.hostname
    roles = _roles_of(sender) if sender is not None else ["shards", "control"]
    p = pipeline()
    p.worker = _worker_name
    _warn_if_twin(p, _worker_name)
    _heartbeat = HeartbeatWriter(
        p.sessions,
        _worker_name,
        roles,
        settings.heartbeat_interval_s,
        idle_hook=p.idle if SHARDS in roles else None,
    ).start()
    if SHARDS in roles:
        result = p.recover()
    else:
        result = "none needed (this worker starts no sandbox)"
    log.info("worker %s ready, queues %s (recovery: %s)", _worker_name, ",".join(roles), result)


def _warn_if_twin(p: Any, name: str) -> None:
    """Log an error when another process with this worker's name looks alive: at start a worker
    removes the sandboxes labelled with its own name, so names must be unique."""
    import os

    from liberopro_platform.heartbeat import is_live
    from liberopro_platform.models import WorkerHeartbeat, utcnow

    try:
        with p.sessions() as s:
            row = s.get(WorkerHeartbeat, name)
    except Exception:  # noqa: BLE001 - only a warning
        return
    if (
        row is not None
        and is_live(row, utcnow(), settings.heartbeat_stale_s)
        and (row.hostname, row.pid) != (socket.gethostname()[:255], os.getpid())
    ):
        log.error(
            "worker %s: a process with this name beat %s ago on %s (pid %d); if it is alive, its sandboxes "
            "are about to be removed: give every worker its own --name",
            name,
            utcnow() - row.beat_at,
            row.hostname,
            row.pid,
        )


@signals.task_prerun.connect
def _task_started(task=None, args=None, **_: object) -> None:
    if _heartbeat is not None and task is not None:
        _heartbeat.set_task(f"{task.name} {args[0] if args else ''}".strip())


@signals.task_postrun.connect
def _task_ended(**_: object) -> None:
    if _heartbeat is not None:
        _heartbeat.set_task(None)


@signals.worker_shutdown.connect
def _stopped(**_: object) -> None:
    """Mark the heartbeat row stopped and remove the policy containers this worker kept between
    shards (the node sandboxes: otherwise they would hold their memory and GPUs until a worker
    starts again and sweeps them)."""
    if _heartbeat is not None:
        _heartbeat.stop()
    if _pipeline is not None and _pipeline.has_backend:
        try:
            released = _pipeline.release_all_policies()
        except Exception:  # noqa: BLE001 - shutting down: log and go on
            log.exception("worker %s: could not release its policy containers", _worker_name)
        else:
            if released:
                log.info("worker %s: released the policy containers of %s", _worker_name, ", ".join(released))


class SweepScheduler(Scheduler):
    """``celery beat``'s scheduler, running the stuck sweep (``liberopro.sweep`` of the beat
    schedule, every ``sweep_interval_s``) in beat's own process instead of sending it to a
    queue: stuck and lost work is found while every worker is busy or dead. Beat keeps its own
    ``worker_heartbeats`` row (role ``beat``) whose ``info`` has the last sweep's time and
    findings. Other entries are sent as usual. The sweep never raises into beat's loop."""

    _beat_pipeline = None
    _beat_heartbeat = None

    @property
    def producer(self):  # noqa: D102 - never connect to the broker up front (a down broker must not block the sweep)
        return None

    def apply_entry(self, entry, producer=None):
        if entry.task != TASK_SWEEP:
            return super().apply_entry(entry, producer)
        self.sweep_now()
        return None

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task != TASK_SWEEP:
            return super().apply_async(entry, producer, advance, **kwargs)
        if advance:
            self.reserve(entry)
        self.sweep_now()
        return None

    def sweep_now(self) -> int:
        """Run one sweep here; returns how many stuck items it found (-1 when it failed)."""
        from liberopro_platform.heartbeat import BEAT, HeartbeatWriter
        from liberopro_platform.pipeline import Pipeline

        if self._beat_pipeline is None:
            name = f"beat@{socket.gethostname()}"
            sessions = make_sessionmaker(make_engine(settings.database_url))
            self._beat_pipeline = Pipeline(settings, sessions, CeleryEnqueue(self.app, settings.queue), name)
            self._beat_heartbeat = HeartbeatWriter(sessions, name, [BEAT], settings.heartbeat_interval_s).start()
        started = dt.datetime.now(dt.UTC)
        try:
            found = self._beat_pipeline.sweep_stuck()
        except Exception:  # noqa: BLE001 - logged; the next tick tries again
            log.exception("sweep failed")
            self._beat_heartbeat.set_info({"last_sweep_at": started.isoformat(), "error": True})
            return -1
        self._beat_heartbeat.set_info(
            {"last_sweep_at": started.isoformat(), "found": len(found), "actions": sorted({f.action for f in found})}
        )
        lines = "".join(f"\n  {f.submission_id} [{f.state}] {f.reason} -> {f.action}" for f in found)
        (log.info if found else log.debug)("sweep: %d stuck item(s)%s", len(found), lines)
        return len(found)

    def close(self) -> None:
        if self._beat_heartbeat is not None:
            self._beat_heartbeat.stop()
        super().close()


# Limits: stages enforce their own deadlines (the solo pool ignores Celery's time limits); these
# are the outer bound under the prefork pool.
_common = {"acks_late": True, "autoretry_for": (OperationalError,), "max_retries": 3, "retry_backoff": True}


@app.task(
    name=TASK_VALIDATE,
    **_common,
    soft_time_limit=settings.validation_time_limit_s + 600,
    time_limit=settings.validation_time_limit_s + 900,
)
def validate_task(submission_id: str) -> None:
    """Validate, then plan the shards."""
    pipeline().validate(submission_id)


@app.task(
    name=TASK_RUN_SHARD,
    **_common,
    soft_time_limit=settings.shard_time_limit_s(settings.episodes_per_shard) + 600,
    time_limit=settings.shard_time_limit_s(settings.episodes_per_shard) + 900,
)
def run_shard_task(shard_id: int) -> None:
    """Run one shard's missing episodes."""
    pipeline().run_shard(shard_id)


@app.task(
    name=TASK_AGGREGATE,
    **_common,
    soft_time_limit=settings.aggregate_time_limit_s,
    time_limit=settings.aggregate_time_limit_s + 60,
)
def aggregate_task(submission_id: str) -> None:
    """Summarise and publish."""
    pipeline().aggregate(submission_id)


@app.task(name=TASK_SWEEP, **_common, soft_time_limit=120, time_limit=180)
def sweep_task() -> int:
    """Handle stuck submissions (when sent by hand: beat runs the sweep itself); returns how many were found."""
    return len(pipeline().sweep_stuck())
