"""Open the policy of a run, whichever way it is given: the one way
:func:`liberopro.runs.evaluation.run_evaluation` (``liberopro evaluate``) and the shard runner
(:func:`liberopro.runs.shard.run_shard`, the platform's evaluator) reach a policy.

:func:`open_policy` takes either the URL of a running server (it waits for its health check) or
a shell command (started as a :class:`liberopro.episode.policy_process.PolicyProcess`, which waits for
it), reads ``GET /metadata`` and yields a :class:`PolicyConnection`; on the way out the client is
closed and the process, if any, stopped (SIGTERM to its process group, then SIGKILL).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from submission_spec.transports import make_client

from liberopro.episode.policy_process import PolicyProcess
from submission_spec import PolicyMetadata


@dataclass
class PolicyConnection:
    """A connected policy: ``client`` (a :func:`submission_spec.transports.make_client` client:
    ``health``, ``metadata``, ``reset``, ``act``), its validated ``metadata``, the ``url`` it
    answers on and, when it was started from a command, its ``process``."""

    client: Any
    metadata: PolicyMetadata
    url: str
    process: PolicyProcess | None = None

    def ensure_running(self) -> None:
        """Restart the policy process if it died (:meth:`PolicyProcess.ensure_running`, bounded by
        its ``max_restarts``); nothing for a URL. Never raises."""
        if self.process is not None:
            self.process.ensure_running()

    @property
    def restarts(self) -> int:
        """How often the process was restarted (0 for a URL)."""
        return self.process.restarts if self.process is not None else 0

    @property
    def pids(self) -> list[int]:
        """Every process id the command ran as, restarts included (empty for a URL)."""
        return list(self.process.pids) if self.process is not None else []

    def running(self) -> bool:
        """Whether the started process still runs (True for a URL: nothing to watch)."""
        if self.process is None:
            return True
        proc = self.process.proc
        return proc is not None and proc.poll() is None

    def exit_code(self) -> int | None:
        """The exit code of the policy process once it ended (negative: the signal that ended
        it); None while it runs, after it was stopped, and for a URL."""
        proc = self.process.proc if self.process is not None else None
        return proc.poll() if proc is not None else None


@contextlib.contextmanager
def open_policy(
    url: str | None = None,
    cmd: str | None = None,
    *,
    protocol: str = "liberopro",
    client_options: dict[str, Any] | None = None,
    startup_timeout: float = 120.0,
    log_path: Path | None = None,
    max_restarts: int = 3,
) -> Iterator[PolicyConnection]:
    """Reach the policy at ``url``, or start ``cmd``, and yield a :class:`PolicyConnection` whose
    metadata was read; close the client and stop the process on the way out (every path).

    Args:
        url, cmd: exactly one: a server's base URL, or a shell command that serves on ``$PORT``
            (run through ``/bin/sh -c`` in a session of its own, output to ``log_path``).
        protocol, client_options: the wire protocol and its client options
            (:func:`submission_spec.transports.make_client`; e.g. ``connect_timeout``,
            ``request_timeout`` in seconds). Checked before anything is started.
        startup_timeout: seconds for the server to answer its health check (polled by the
            client's ``wait_healthy`` for a URL, by :meth:`PolicyProcess.start` for a command,
            both through :func:`submission_spec.polling.poll_until`).
        log_path: where a command's stdout and stderr go (required with ``cmd``).
        max_restarts: how often :meth:`PolicyConnection.ensure_running` may restart a command that died.

    Raises:
        ValueError: neither or both of ``url`` and ``cmd``, ``cmd`` without ``log_path``, or an
            unknown protocol or protocol option.
        submission_spec.PolicyError: ``policy_connect_error`` when the server never answers its
            health check (for a command: it exited or stayed silent, with the tail of its log),
            or the reason ``GET /metadata`` failed (e.g. invalid metadata).
    """
    if (url is None) == (cmd is None):
        raise ValueError("give exactly one of a policy URL or a policy command")
    if cmd is not None and log_path is None:
        raise ValueError("a policy command needs a log path")
    options = dict(client_options or {})
    make_client("http://127.0.0.1:1", protocol, **options).close()  # bad protocol options fail before any start
    with contextlib.ExitStack() as stack:
        process = None
        if cmd is not None:
            assert log_path is not None
            process = PolicyProcess(
                cmd,
                log_path,
                startup_timeout=startup_timeout,
                max_restarts=max_restarts,
                protocol=protocol,
                client_options=options,
            )
            stack.enter_context(process)
            url = process.url
        assert url is not None
        client = stack.enter_context(make_client(url, protocol, **options))
        if process is None:
            client.wait_healthy(startup_timeout)
        yield PolicyConnection(client=client, metadata=client.metadata(), url=url, process=process)
