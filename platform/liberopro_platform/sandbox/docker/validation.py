"""A validation on the Docker backend: the policy alone in a fresh sandbox, checked by the
conformance checker of the evaluator image (``python -m liberopro.cli.shard check``) within
``validation_time_limit_s``; what failed, the fix and the policy's output go to the submitter."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from liberopro.schema.results import ConformanceEvent
from liberopro.schema.shard import CheckSpec, parse_event

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.base import (
    LOCAL_RUN_HINT,
    PolicySource,
    SandboxError,
    ValidationOutcome,
    truncate_log,
    validation_outcome,
)
from liberopro_platform.sandbox.docker.containers import Sandbox, logs, state
from liberopro_platform.sandbox.docker.deaths import death_text
from liberopro_platform.sandbox.docker.images import pinned_image
from liberopro_platform.sandbox.docker.labels import POLICY_HOST

if TYPE_CHECKING:
    from liberopro_platform.sandbox.docker_backend import DockerBackend


@dataclass(frozen=True)
class _End:
    """Why the wait for the checker ended: it finished (all False/None), the submission was
    ``cancelled``, the policy container ``died`` (its state), or the stage ``timed_out``."""

    cancelled: bool = False
    died: dict[str, Any] | None = None
    timed_out: bool = False

    @property
    def early(self) -> bool:
        """The checker may still run: stop it."""
        return self.cancelled or self.died is not None or self.timed_out


def validate(b: DockerBackend, source: PolicySource, on_heartbeat: Callable[[], bool | None]) -> ValidationOutcome:
    """Run the validation (module docstring); the host's page cache is dropped first
    (``validation_drop_caches``). Raises :class:`SandboxError` when the checker gave no report."""
    s = b.settings
    spec = CheckSpec(
        protocol=source.protocol,
        health_timeout_s=s.validation_health_timeout_s,
        request_timeout_s=s.validation_request_timeout_s,
        act_limit_s=s.validation_act_limit_s,
    )
    image = pinned_image(source)
    if s.validation_drop_caches:
        b.forget_host_caches()
    with Sandbox(b, source.submission_id, "validation") as sb:
        policy = sb.start_policy(image, restarts=0)
        checker = sb.create_evaluator(["check", f"http://{POLICY_HOST}:{s.policy_port}", spec.model_dump_json()])
        checker.start()
        end = _wait(s, checker, policy, on_heartbeat)
        policy_log = truncate_log(logs(policy), s.log_max_bytes)
        if end.early:
            checker.stop(timeout=2)
        report = _report(checker)
        # Read while the checker exists (the sandbox removes it on the way out).
        checker_err = logs(checker, stdout=False, tail=30)[-2000:] if report is None else ""
    return _outcome(s, end, report, policy_log, checker_err)


def _wait(s: Settings, checker: Any, policy: Any, on_heartbeat: Callable[[], bool | None]) -> _End:
    """Wait for the checker to finish, beating every few seconds; stop waiting when the
    submission is cancelled (``on_heartbeat`` returns False), the policy container dies or the
    stage's time runs out."""
    deadline = time.monotonic() + s.validation_time_limit_s
    next_beat = 0.0
    while True:
        if time.monotonic() >= next_beat:
            next_beat = time.monotonic() + min(2.0, s.heartbeat_interval_s)
            if on_heartbeat() is False:
                return _End(cancelled=True)
        if not state(checker).get("Running"):
            return _End()
        policy_state = state(policy)
        if not policy_state.get("Running"):
            return _End(died=policy_state)
        if time.monotonic() > deadline:
            return _End(timed_out=True)
        time.sleep(0.3)


def _report(checker: Any) -> dict[str, Any] | None:
    """The conformance report the checker printed (its ``conformance`` event), if any."""
    report = None
    for line in logs(checker, stderr=False).splitlines():
        ev = parse_event(line)
        if isinstance(ev, ConformanceEvent):
            report = ev.report
    return report


def _outcome(
    s: Settings, end: _End, report: dict[str, Any] | None, policy_log: str, checker_err: str
) -> ValidationOutcome:
    if end.cancelled:
        return ValidationOutcome(ok=False, policy_log=policy_log, failure="cancelled", fix="")
    if end.died is not None:
        return ValidationOutcome(
            ok=False,
            policy_log=policy_log,
            report=report,
            failure=death_text(s, end.died) + " before passing the conformance check",
            fix=f"make the server start and stay up; {LOCAL_RUN_HINT}. Its output is in the log below",
        )
    if end.timed_out:
        return ValidationOutcome(
            ok=False,
            policy_log=policy_log,
            report=report,
            failure=f"validation did not finish within {s.validation_time_limit_s:.0f} s",
            fix="answer /health, /metadata, /reset and /act promptly; " + LOCAL_RUN_HINT,
        )
    if report is None:
        raise SandboxError(
            "the conformance checker produced no report: " + (checker_err or "(it printed nothing on stderr)")
        )
    return validation_outcome(report, policy_log)
