"""The local backend, for development: the policy is a child process started from a shell
command (:class:`liberopro.episode.policy_process.PolicyProcess`; for a shard, by the shard runner
through :func:`liberopro.episode.policy_connection.open_policy`) and the evaluator runs inside the worker
process. Same interface as the Docker sandbox, NO isolation: never use it for untrusted
submissions (the API accepts command submissions only when this backend is set).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from liberopro.episode.policy_connection import PolicyConnection
from liberopro.runs.shard import ShardStopped, check, run_shard
from liberopro.schema.results import EpisodeRecord, Event
from liberopro.schema.shard import CheckSpec, ShardSpec

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.base import (
    POLICY_CRASHED,
    POLICY_TRANSPORT_FAILURES,
    PolicyRejected,
    PolicySource,
    ShardCallbacks,
    ShardOutcome,
    ShardStatus,
    ValidationOutcome,
    dispatch_event,
    policy_error_outcome,
    truncate_log,
    validation_outcome,
)

log = logging.getLogger("liberopro_platform.sandbox.local")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


class LocalBackend:
    """Policy as a child process, evaluator in-process."""

    name = "local"

    def __init__(self, settings: Settings, worker: str, deployment: str | None = None) -> None:
        self.settings = settings
        self.worker = worker
        self.logs = Path(settings.data_dir) / "local-logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def prepare(self, source: PolicySource, upload_path: str | None = None) -> None:
        """Only command submissions run here."""
        if not source.command:
            raise PolicyRejected(
                "this platform runs the local (development) backend, which runs policy commands, not images",
                "ask the platform's admin to use the docker backend",
            )

    def validate(self, source: PolicySource, on_heartbeat: Callable[[], bool | None]) -> ValidationOutcome:
        """Start the command and run the conformance check against it."""
        s = self.settings
        stop = threading.Event()

        def beat() -> None:  # the claim stays fresh however long the imports and the command take
            while not stop.wait(s.heartbeat_interval_s):
                try:
                    on_heartbeat()
                except Exception:  # noqa: BLE001 - a missed beat; the next one may pass
                    log.warning("validation heartbeat of %s failed", source.submission_id, exc_info=True)

        on_heartbeat()
        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            from liberopro.episode.policy_process import PolicyProcess
            from submission_spec.client import PolicyError
        except BaseException:
            stop.set()
            raise
        log_path = self.logs / f"{source.submission_id}-validation.log"
        log_path.unlink(missing_ok=True)
        try:
            with PolicyProcess(source.command or "", log_path, startup_timeout=s.validation_health_timeout_s) as proc:
                report = check(
                    proc.url,
                    CheckSpec(
                        protocol=source.protocol,
                        health_timeout_s=s.validation_health_timeout_s,
                        request_timeout_s=s.validation_request_timeout_s,
                        act_limit_s=s.validation_act_limit_s,
                    ),
                )
        except PolicyError as exc:
            return ValidationOutcome(
                ok=False,
                failure=exc.detail.split("; last output")[0],
                fix="make the command start a server on $PORT that answers GET /health",
                policy_log=truncate_log(_read(log_path), s.log_max_bytes),
            )
        finally:
            stop.set()
        return validation_outcome(report, truncate_log(_read(log_path), s.log_max_bytes))

    def run_shard(
        self, source: PolicySource, spec: ShardSpec, callbacks: ShardCallbacks, time_limit_s: float
    ) -> ShardOutcome:
        """Run the shard in this process against the command's server (started by the shard
        runner once the shard's instances were checked, restarted up to ``policy_restarts`` times)."""
        from submission_spec.client import PolicyError

        s = self.settings
        log_path = self.logs / f"{spec.submission_id}-shard{spec.shard_index}.log"
        deadline = time.monotonic() + time_limit_s
        stop = threading.Event()
        flags = {"stopped": False, "timed_out": False}

        def beat() -> None:
            while not stop.wait(s.heartbeat_interval_s):
                callbacks.heartbeat()

        def should_stop() -> bool:
            if callbacks.should_stop():
                flags["stopped"] = True
            elif time.monotonic() > deadline:
                flags["timed_out"] = True
            return flags["stopped"] or flags["timed_out"]

        opened: dict[str, PolicyConnection] = {}

        def name_cause(record: EpisodeRecord) -> EpisodeRecord:
            policy = opened.get("policy")
            if policy is None or record.termination_reason not in POLICY_TRANSPORT_FAILURES or policy.running():
                return record
            return record.with_cause(
                POLICY_CRASHED, f"the policy process exited with code {policy.exit_code()} during the episode"
            )

        def emit(event: Event) -> None:
            dispatch_event(event, callbacks, name_cause)

        callbacks.heartbeat()
        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            run_shard(
                spec,
                emit,
                policy_cmd=source.command or "",
                policy_log=log_path,
                max_restarts=s.policy_restarts,
                should_stop=should_stop,
                on_open=lambda policy: opened.update(policy=policy),
            )
            return ShardOutcome("completed", policy_log=truncate_log(_read(log_path), s.log_max_bytes))
        except ShardStopped:
            status: ShardStatus = "timed_out" if flags["timed_out"] else "stopped"
            message = (
                f"the shard did not finish within its time limit ({time_limit_s:.0f} s)"
                if status == "timed_out"
                else "the submission was cancelled"
            )
            return ShardOutcome(status, message, policy_log=truncate_log(_read(log_path), s.log_max_bytes))
        except PolicyError as exc:
            return policy_error_outcome(
                exc.reason, exc.detail, policy_log=truncate_log(_read(log_path), s.log_max_bytes)
            )
        except Exception as exc:  # noqa: BLE001 - the evaluator's own failure, for admins
            return ShardOutcome(
                "infrastructure_error",
                "internal evaluator error",
                repr(exc),
                truncate_log(_read(log_path), s.log_max_bytes),
            )
        finally:
            stop.set()

    def policy_submissions(self) -> set[str]:
        """None: this backend starts the policy command for each shard and stops it after."""
        return set()

    def release_policy(self, submission_id: str) -> int:
        """Nothing is kept between shards (:meth:`policy_submissions`): 0."""
        return 0

    def auto_streams(self) -> int:
        """One stream: the local backend is for development (``evaluator_streams`` sets more)."""
        return 1

    def sweep(self, worker: str | None = None) -> int:
        """Child processes die with their PolicyProcess (atexit, process group): nothing to sweep."""
        return 0

    def owners(self) -> set[str]:
        """No resource outlives its worker here: no owner."""
        return set()
