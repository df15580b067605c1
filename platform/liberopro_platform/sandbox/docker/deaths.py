"""Death attribution: the evaluator sees only that the policy stopped answering; the engine sees
the policy container die (its ``die`` and ``oom`` events, its state and restart count). An
episode that ended in a transport failure while the container died is charged to the policy's
real cause, ``policy_out_of_memory`` or ``policy_crashed``, with what the evaluator saw kept in
its detail (:meth:`liberopro.schema.results.EpisodeRecord.with_cause`)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import tenacity
from liberopro.schema.results import EpisodeRecord

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.base import POLICY_CRASHED, POLICY_OUT_OF_MEMORY, POLICY_TRANSPORT_FAILURES
from liberopro_platform.sandbox.docker.containers import state

log = logging.getLogger("liberopro_platform.sandbox.docker")


@dataclass(frozen=True)
class Death:
    """One death of the policy container: when (Unix time), whether the kernel's OOM killer
    came first, its exit code."""

    time: float
    oom: bool
    exit_code: int | None


class PolicyWatch:
    """Collects the policy container's ``die`` and ``oom`` events (a thread on the event stream)."""

    def __init__(self, client: Any, container_id: str) -> None:
        self.deaths: list[Death] = []
        self._lock = threading.Lock()
        self._stream = client.events(
            decode=True, since=int(time.time()) - 1, filters={"container": container_id, "type": "container"}
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        oom_pending = False
        try:
            for ev in self._stream:
                action = ev.get("Action") or ev.get("status")
                if action == "oom":
                    oom_pending = True
                elif action == "die":
                    attrs = ev.get("Actor", {}).get("Attributes", {})
                    with self._lock:
                        self.deaths.append(
                            Death(ev.get("timeNano", 0) / 1e9, oom_pending, int(attrs.get("exitCode", -1)))
                        )
                    oom_pending = False
        except Exception as exc:  # noqa: BLE001 - the stream is closed when the sandbox goes away
            log.debug("policy event stream ended: %r", exc)

    def deaths_since(self, t0: float) -> list[Death]:
        with self._lock:
            return [d for d in self.deaths if d.time >= t0]

    def close(self) -> None:
        try:
            self._stream.close()
        except Exception as exc:  # noqa: BLE001
            log.debug("closing the event stream: %r", exc)


def death_text(settings: Settings, container_state: dict[str, Any]) -> str:
    """What ended the policy container, for a validation's failure or the admins: killed over
    its memory limit, or its exit code."""
    if container_state.get("OOMKilled"):
        return f"the policy container was killed for using more than its memory limit ({settings.policy_memory})"
    return f"the policy container exited with code {container_state.get('ExitCode')}"


class CauseNamer:
    """The :data:`~liberopro_platform.sandbox.base.NameCause` of a shard on the Docker backend:
    called with each record as it arrives, it charges a transport failure to the policy's death
    when the container died (or restarted) since the previous record. ``last_record_at``: the
    Unix time the previous record was handled (the follower sets it; made now at first);
    ``restarts_seen`` starts at the container's restart count (an earlier shard's)."""

    def __init__(self, settings: Settings, policy: Any, watch: PolicyWatch) -> None:
        self.settings = settings
        self.policy = policy
        self.watch = watch
        self.last_record_at = time.time()
        self.restarts_seen = int(policy.attrs.get("RestartCount", 0))

    def __call__(self, record: EpisodeRecord) -> EpisodeRecord:
        if record.termination_reason not in POLICY_TRANSPORT_FAILURES:
            return record
        return self._name_death(record)

    def _name_death(self, record: EpisodeRecord) -> EpisodeRecord:
        """If the policy container died during this episode, charge the record to it (OOM or crash)."""
        now = state(self.policy)
        removed = now.get("Status") == "removed"
        restarts = self.restarts_seen if removed else int(self.policy.attrs.get("RestartCount", 0))
        died = (not now.get("Running")) or now.get("Restarting") or restarts > self.restarts_seen
        if not died:
            return record
        self.restarts_seen = max(restarts, self.restarts_seen)
        death = self._last_death(now)
        if death.oom:
            return record.with_cause(
                POLICY_OUT_OF_MEMORY,
                f"the policy container was killed for exceeding its memory limit ({self.settings.policy_memory})",
            )
        return record.with_cause(
            POLICY_CRASHED, f"the policy container exited with code {death.exit_code} during the episode"
        )

    def _last_death(self, now: dict[str, Any]) -> Death:
        """The last die event since the previous record, else what the container's state says."""
        # The engine's die event may trail the state: look again every 0.1 s for up to 5 s.
        deaths: list[Death] = tenacity.Retrying(
            stop=tenacity.stop_after_delay(5.0),
            wait=tenacity.wait_fixed(0.1),
            retry=tenacity.retry_if_not_result(bool),
            retry_error_callback=_last_result,
        )(self.watch.deaths_since, self.last_record_at - 1.0)
        if deaths:
            return deaths[-1]
        return Death(time.time(), bool(now.get("OOMKilled")), now.get("ExitCode"))


def _last_result(retry_state: tenacity.RetryCallState) -> Any:
    """What the last attempt returned (the retries ran out: an empty list)."""
    outcome = retry_state.outcome
    return outcome.result() if outcome is not None else []
