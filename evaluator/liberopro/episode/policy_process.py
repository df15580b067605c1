"""Start a policy server as a child process (``--policy-cmd``), wait for it, stop it on every path.

The command runs through ``/bin/sh -c`` in its own session with ``PORT`` set to a free port;
its output goes to a log file. :meth:`PolicyProcess.stop` sends SIGTERM to the whole process
group, then SIGKILL after a grace period, and is registered with ``atexit`` so that an
interrupted evaluation never leaves a server behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from submission_spec.polling import poll_until
from submission_spec.transports import make_client

from submission_spec import PolicyError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class PolicyProcess:
    """A policy server started from a shell command.

    Args:
        cmd: the command, e.g. ``liberopro serve-example zero``.
        log_path: where its stdout and stderr go.
        startup_timeout: seconds to wait for ``GET /health`` to answer 200.
        max_restarts: how often :meth:`ensure_running` may restart a process that died.
        protocol, client_options: the server's wire protocol and its client options
            (:func:`submission_spec.transports.make_client`); health is probed the protocol's
            way (``/health``, openpi's ``/healthz``, any HTTP answer for OpenVLA).

    Raises :class:`submission_spec.PolicyError` (``policy_connect_error``) from :meth:`start`
    when the server exits or stays unhealthy, with the tail of its log.
    """

    def __init__(
        self,
        cmd: str,
        log_path: Path,
        startup_timeout: float = 120.0,
        max_restarts: int = 3,
        protocol: str = "liberopro",
        client_options: dict | None = None,
    ) -> None:
        self.cmd = cmd
        self.protocol, self.client_options = protocol, dict(client_options or {})
        self.log_path = Path(log_path)
        self.startup_timeout = startup_timeout
        self.max_restarts = max_restarts
        self.restarts = 0
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.pids: list[int] = []  # every process started, restarts included
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # The evaluator's own environment (its venv's bin first), so `liberopro serve-example`
        # resolves even when the venv is not activated.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "PORT": str(self.port), "HOST": "127.0.0.1", "PATH": path}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", self.cmd],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.pids.append(self.proc.pid)
        proc = self.proc

        def answered(_left: float) -> bool:
            if proc.poll() is not None:
                raise PolicyError(
                    "policy_connect_error",
                    f"policy command exited with code {proc.returncode} "
                    f"before answering /health; last output:\n{_tail(self.log_path)}",
                )
            return client.health(timeout=1.0)

        with make_client(self.url, self.protocol, **self.client_options) as client:
            if poll_until(answered, self.startup_timeout, 0.2):
                return
        self.stop()
        raise PolicyError(
            "policy_connect_error",
            f"policy command did not answer GET /health within "
            f"{self.startup_timeout:.0f} s on port {self.port}; last output:\n{_tail(self.log_path)}",
        )

    def ensure_running(self) -> None:
        """Restart the server if it died (at most ``max_restarts`` times); never raises."""
        if self.proc is None or self.proc.poll() is None or self.restarts >= self.max_restarts:
            return
        self.restarts += 1
        with contextlib.suppress(PolicyError):
            self.start()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> PolicyProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
