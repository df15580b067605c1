"""Helpers of the platform tests (processes, servers, polling); fixtures are in conftest.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_IMAGE = os.environ.get("LIBEROPRO_TEST_EXAMPLE_IMAGE", "liberopro/example-zero:latest")
#: The behaviour-cloning baseline's policy image (docker/build-images.sh bc; docs/baselines.md, "Image").
BC_IMAGE = os.environ.get("LIBEROPRO_TEST_BC_IMAGE", "liberopro/example-bc:latest")
WORKER_NAME = "lptest-worker@platform-tests"


class RecordingEnqueue:
    """An ``Enqueue`` (``liberopro_platform.pipeline``) that records ``(stage, argument)`` in
    ``sent`` instead of queueing; ``pending()`` reports ``broker`` (None: the broker is not
    inspected, as when Celery's cannot be read)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []
        self.broker = None

    def validate(self, submission_id, countdown=0):
        self.sent.append(("validate", submission_id))

    def run_shard(self, shard_id, countdown=0):
        self.sent.append(("run_shard", shard_id))

    def aggregate(self, submission_id, countdown=0):
        self.sent.append(("aggregate", submission_id))

    def pending(self):
        return self.broker


class InlineEnqueue(RecordingEnqueue):
    """Runs each recorded stage when drained, in order (the stages are the same ``Pipeline``
    methods the Celery tasks call); set ``pipeline`` first."""

    def __init__(self) -> None:
        super().__init__()
        self.pipeline = None

    def drain(self) -> None:
        while self.sent:
            kind, arg = self.sent.pop(0)
            getattr(self.pipeline, kind)(arg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sandbox_leftovers(docker_client) -> list[str]:
    """Names of sandbox containers, volumes and networks still on the engine."""
    f = {"label": ["org.liberopro.sandbox=1"]}
    return (
        [c.name for c in docker_client.containers.list(all=True, filters=f)]
        + [v.name for v in docker_client.volumes.list(filters=f)]
        + [n.name for n in docker_client.networks.list(filters=f)]
    )


class WorkerProcess:
    """A real Celery worker process (``python -m liberopro_platform worker``: solo pool) with the
    platform settings, serving ``queues`` (``shards,control`` or one of them)."""

    def __init__(
        self, env: dict[str, str], log_path: Path, name: str = WORKER_NAME, queues: str = "shards,control"
    ) -> None:
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.log_path = log_path
        self.name = name
        self.queues = queues
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> WorkerProcess:
        """Start the process and wait until it is ready (its recovery done)."""
        return self.launch().wait_ready(timeout)

    def launch(self) -> WorkerProcess:
        """Start the process without waiting (several workers can then start side by side)."""
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "liberopro_platform",
                "worker",
                "--name",
                self.name,
                "--queues",
                self.queues,
                "--without-heartbeat",
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(REPO),
        )
        log.close()
        return self

    def wait_ready(self, timeout: float = 60.0) -> WorkerProcess:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.log_path.read_bytes()[self._offset :].decode(errors="replace")
            if "recovery:" in text:
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{text[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"worker not ready within {timeout} s:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


class ApiServer:
    """The API on a real socket bound to 0.0.0.0 (so the egress test can show a sandbox cannot
    reach a host service that listens on every interface)."""

    def __init__(self, app, port: int) -> None:
        import uvicorn

        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="0.0.0.0", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ApiServer:  # noqa: PYI034
        self.thread.start()
        end = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > end:
                raise RuntimeError("API server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Canary:
    """A TCP listener on 0.0.0.0 that counts connections (a sandbox must never reach it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connections: list[str] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", port))
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError):
                conn, addr = self.sock.accept()
                self.connections.append(addr[0])
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def wait_final(http, submission_id: str, timeout: float, worker: WorkerProcess | None = None) -> dict:
    """Poll the submission until it is published, failed or cancelled."""
    end = time.monotonic() + timeout
    st = {}
    while time.monotonic() < end:
        st = http.get(f"/submissions/{submission_id}").json()
        if st["state"] in ("published", "failed", "cancelled"):
            return st
        time.sleep(1.0)
    detail = worker.tail() if worker else ""
    raise AssertionError(f"submission {submission_id} not final within {timeout} s: {st}\n{detail}")


class RecordingCallbacks:
    """Shard callbacks that keep what the backend reports."""

    def __init__(self) -> None:
        self.hello, self.metadata, self.records = None, None, []

    def on_hello(self, info):
        self.hello = info

    def on_metadata(self, metadata):
        self.metadata = metadata

    def on_record(self, record):
        self.records.append(record)

    def heartbeat(self):
        pass

    def should_stop(self):
        return False


@contextlib.contextmanager
def local_platform(database_url: str, data_dir: Path, manifest_path: Path, worker: str, **settings):
    """The platform on the local backend (policy = a command, evaluator in this process), its API
    on a real socket and its stages run in order by an :class:`InlineEnqueue` (the same
    ``Pipeline`` methods the Celery tasks call): yields (server, queue, user token, admin token),
    the user and the admin in a fresh team. ``settings``: further :class:`Settings` fields."""
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.pipeline import Pipeline

    settings = Settings(
        database_url=database_url,
        data_dir=data_dir,
        backend="local",
        manifest_path=manifest_path,
        **{"max_concurrent": 5, "submissions_per_day": 20, "heartbeat_interval_s": 1, **settings},
    )
    queue = InlineEnqueue()
    queue.pipeline = Pipeline(settings, make_sessionmaker(make_engine(database_url)), queue, worker)
    app = create_app(settings, enqueue=queue)
    with transaction(app.state.sessions) as s:
        _, _, token, admin_token = team_with_tokens(s, "t")
    with ApiServer(app, free_port()) as server:
        yield server, queue, token, admin_token


def team_with_tokens(session, prefix: str):
    """A fresh team ``<prefix>-<hex>`` with a user and an admin in it: (team, user, user token,
    admin token), tokens valid for a day; the session is flushed, not committed."""
    import secrets

    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    team = Team(name=f"{prefix}-{secrets.token_hex(3)}")
    session.add(team)
    session.flush()
    user = User(name=f"{prefix}-{secrets.token_hex(3)}", team_id=team.id)
    admin = User(name=f"{prefix}-admin-{secrets.token_hex(3)}", team_id=team.id, is_admin=True)
    session.add_all([user, admin])
    session.flush()
    return team, user, issue_token(session, user, 1)[1], issue_token(session, admin, 1)[1]
