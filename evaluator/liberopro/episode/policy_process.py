"""Start a policy server as a child process (``--policy-cmd``), wait for it, stop it on every path.

The command runs through ``/bin/sh -c`` in its own session with ``PORT`` set to a free port;
its output is appended to a log file: a start onto a log that holds an earlier start's output (a
resumed run's ``policy.log``, a restart) first writes a :data:`SEPARATOR` line with the time, so
every start's output is kept and told apart. :meth:`PolicyProcess.stop` sends SIGTERM to the whole process
group, then SIGKILL after a grace period, and is registered with ``atexit`` so that an
interrupted evaluation never leaves a server behind. An evaluator killed outright (SIGKILL, which
runs no code of its own) does not leave it either: a watcher process started beside each server
(:mod:`liberopro.episode.policy_watch`) ends the server's process group within a second of the
evaluator's death.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from submission_spec.polling import poll_until
from submission_spec.transports import make_client

from submission_spec import PolicyError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The line written into a log before a start's output when the log holds an earlier start's.
SEPARATOR = "----- policy command started again at {time} (the output above is an earlier start's) -----"


def _tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of the log at ``path`` written since the last start (after the
    last :data:`SEPARATOR` line); "" when it cannot be read."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    marker = SEPARATOR.split("{", 1)[0]
    starts = [n for n, line in enumerate(text) if line.startswith(marker)]
    return "\n".join(text[starts[-1] + 1 if starts else 0 :][-lines:])


def _open_log(path: Path) -> BinaryIO:
    """``path`` opened to append (its folder made), after a :data:`SEPARATOR` line when it holds
    output already."""
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.open("ab")
    if log.tell() > 0:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        log.write(f"\n{SEPARATOR.format(time=now)}\n".encode())
        log.flush()
    return log


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
        self.watcher: subprocess.Popen | None = None  # liberopro.episode.policy_watch of self.proc
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
        log = _open_log(self.log_path)
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", self.cmd],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._watch(self.proc.pid, log)
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

    def _watch(self, group: int, log: BinaryIO) -> None:
        """Start :mod:`liberopro.episode.policy_watch` for the server's process group ``group``
        (the shell's pid; its errors go to ``log``), in place of an earlier start's watcher."""
        self._stop_watcher()
        self.watcher = subprocess.Popen(
            [sys.executable, "-m", "liberopro.episode.policy_watch", str(group), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )

    def _stop_watcher(self) -> None:
        """End the watcher (it holds nothing: a SIGKILL is enough)."""
        watcher, self.watcher = self.watcher, None
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait()

    def ensure_running(self) -> None:
        """Restart the server if it died (at most ``max_restarts`` times); never raises."""
        if self.proc is None or self.proc.poll() is None or self.restarts >= self.max_restarts:
            return
        self.restarts += 1
        with contextlib.suppress(PolicyError):
            self.start()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds; then its watcher. Idempotent."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        finally:
            self._stop_watcher()

    def __enter__(self) -> PolicyProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
