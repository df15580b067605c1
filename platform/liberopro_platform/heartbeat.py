"""Worker heartbeat rows (table ``worker_heartbeats``): each worker process and each ``celery
beat`` writes its own row every ``heartbeat_interval_s`` from a daemon thread, whatever its
main thread is doing (a solo-pool worker runs a shard for many minutes). From these rows the
platform knows, without asking the broker, which workers are alive, which are gone (their
sandboxes may be removed and their work requeued) and when no worker serves a queue at all
(``liberopro status`` then says so). docs/platform.md, "Queues, sweep and recovery".
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from liberopro_platform.db import transaction
from liberopro_platform.models import WorkerHeartbeat, utcnow

if TYPE_CHECKING:
    from sqlalchemy import CursorResult

log = logging.getLogger("liberopro_platform.heartbeat")

#: Roles a row can have: the queues a worker serves (suffixes of ``Settings.queue``), or beat.
SHARDS, CONTROL, BEAT = "shards", "control", "beat"


def is_live(row: WorkerHeartbeat, now: dt.datetime, stale_s: float) -> bool:
    """True when ``row``'s process stopped neither cleanly (``stopped_at``) nor silently
    (no heartbeat for more than ``stale_s`` seconds)."""
    return row.stopped_at is None and (now - row.beat_at).total_seconds() <= stale_s


def all_rows(session: Session) -> list[WorkerHeartbeat]:
    """Every heartbeat row, most recent heartbeat first (the table holds one row per process)."""
    return list(session.scalars(select(WorkerHeartbeat).order_by(WorkerHeartbeat.beat_at.desc())))


def describe_absence(rows: list[WorkerHeartbeat], role: str, now: dt.datetime) -> str:
    """Why nothing serves ``role``, in words for the submitter: the last worker seen and when
    it stopped, or that none ever reported."""
    what = {SHARDS: "sandbox work (validation and shards)", CONTROL: "aggregation"}.get(role, role)
    seen = [r for r in rows if r.serves(role)]
    if not seen:
        return (
            f"no worker that runs {what} has ever reported to the platform; the submission "
            "waits (nothing is lost) until the platform's admins start one"
        )
    last = seen[0]
    how = (
        f"stopped at {last.stopped_at:%Y-%m-%d %H:%M:%S} UTC"
        if last.stopped_at is not None
        else f"last reported at {last.beat_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    return (
        f"no worker that runs {what} is alive (the last one, {last.name}, {how}); the "
        "submission waits, nothing is lost, and it continues when a worker is back"
    )


class HeartbeatWriter:
    """Keeps the row ``name`` of ``worker_heartbeats`` fresh from a daemon thread.

    ``roles`` are those of :data:`SHARDS`, :data:`CONTROL`, :data:`BEAT`. :meth:`start` writes
    the row before returning (so that a worker's row exists before it runs anything),
    :meth:`set_task` records what the process runs now, :meth:`stop` marks a clean shutdown.
    Database errors are logged and retried at the next beat; they never stop the thread.
    ``idle_hook`` (optional) is called every ``idle_every_s`` seconds while no task runs (a
    shards worker releases the policy containers nothing will use), in a thread of its own (one
    call at a time; the beats go on while it runs); what it raises is logged.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        name: str,
        roles: list[str],
        interval_s: float,
        idle_hook: Callable[[], object] | None = None,
        idle_every_s: float = 60.0,
    ) -> None:
        self.sessions = sessions
        self.idle_hook = idle_hook
        self.idle_every_s = idle_every_s
        self.name = name
        self.roles = ",".join(roles)
        self.interval_s = interval_s
        self.task: str | None = None
        self.task_since: dt.datetime | None = None
        self.info: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> HeartbeatWriter:
        """Write the row now (a fresh ``started_at``) and keep beating every ``interval_s``."""
        self.write(started=True)
        self._thread = threading.Thread(target=self._run, name=f"heartbeat {self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        last_hook = time.monotonic()
        hook: threading.Thread | None = None
        while not self._stop.wait(self.interval_s):
            self.write()
            if (
                self.idle_hook is not None
                and self.task is None
                and time.monotonic() - last_hook >= self.idle_every_s
                and (hook is None or not hook.is_alive())
            ):
                # In a thread of its own: a slow hook (a Docker engine taking minutes to remove a
                # container) must not stop the beats, or the worker would look gone to the others
                # (heartbeat_stale_s) and its sandboxes and claims would be taken.
                last_hook = time.monotonic()
                hook = threading.Thread(target=self._call_hook, name=f"idle hook {self.name}", daemon=True)
                hook.start()

    def _call_hook(self) -> None:
        try:
            self.idle_hook()  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - never stops the heartbeat
            log.exception("idle hook of %s failed", self.name)

    def set_task(self, task: str | None) -> None:
        """Record the task this process runs now (None: idle) and write it at once."""
        self.task = task[:200] if task else None
        self.task_since = utcnow() if task else None
        self.write()

    def set_info(self, info: dict[str, Any]) -> None:
        """Replace the row's ``info`` and write it at once."""
        self.info = info
        self.write()

    def stop(self) -> None:
        """Stop beating and mark the row stopped (a clean shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.write(stopped=True)

    def write(self, started: bool = False, stopped: bool = False) -> bool:
        """Upsert the row; False (logged) when the database did not take it."""
        now = utcnow()
        values: dict[str, Any] = {
            "roles": self.roles,
            "hostname": socket.gethostname()[:255],
            "pid": os.getpid(),
            "beat_at": now,
            "task": self.task,
            "task_since": self.task_since,
            "info": self.info,
            "stopped_at": now if stopped else None,
        }
        if started:
            values["started_at"] = now
        with self._lock:
            try:
                with transaction(self.sessions) as s:
                    res = cast(
                        "CursorResult[Any]",
                        s.execute(update(WorkerHeartbeat).where(WorkerHeartbeat.name == self.name).values(**values)),
                    )
                    if res.rowcount == 0:
                        s.add(WorkerHeartbeat(name=self.name, **{"started_at": now, **values}))
                return True
            except IntegrityError:  # inserted by a twin meanwhile: the next beat updates it
                return False
            except SQLAlchemyError as exc:
                log.warning("heartbeat of %s not written: %s", self.name, exc)
                return False
