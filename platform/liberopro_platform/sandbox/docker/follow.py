"""A shard on the Docker backend: a fresh evaluator container on the submission's node sandbox,
the shard file on its own volume, and the evaluator's event lines followed as they come (each
handed to the pipeline's callbacks, an episode after its cause is named: :mod:`.deaths`), with
the heartbeat, the cancel check and the shard's time limit; then how it ended."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from liberopro.schema.results import DoneEvent, EpisodeEvent, ErrorEvent
from liberopro.schema.shard import ShardSpec, parse_event

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.base import (
    PolicySource,
    SandboxError,
    ShardCallbacks,
    ShardOutcome,
    dispatch_event,
    policy_error_outcome,
    truncate_log,
)
from liberopro_platform.sandbox.docker.containers import Sandbox, logs, state, tar_one
from liberopro_platform.sandbox.docker.deaths import CauseNamer, PolicyWatch, death_text
from liberopro_platform.sandbox.docker.labels import POLICY_HOST, SHARD_DIR

if TYPE_CHECKING:
    from liberopro_platform.sandbox.docker_backend import DockerBackend

#: What the reader thread hands over: a stdout line, the exception that ended the stream, or
#: None at its end.
_Item = str | Exception | None


def run_shard(
    b: DockerBackend, source: PolicySource, spec: ShardSpec, callbacks: ShardCallbacks, time_limit_s: float
) -> ShardOutcome:
    """Run ``spec`` against the submission's policy container on this worker (the node sandbox,
    :func:`.node.node_policy`: started now or reused from an earlier shard, restarted by the
    engine on a crash up to ``policy_restarts`` times in this shard) with a fresh evaluator
    container on its network, the shard file on its own volume; the evaluator and the volume are
    removed on return, the policy container stays for the next shard. The policy log of the
    outcome is what the policy wrote during this shard."""
    b.ensure_image(source)
    started = time.time()
    network, policy = b.node_policy(source)
    with Sandbox(b, spec.submission_id, f"shard{spec.shard_index}", network=network) as sb:
        volume = sb.volume()
        watch = PolicyWatch(b.client, policy.id)
        try:
            evaluator = sb.create_evaluator(
                ["run", f"http://{POLICY_HOST}:{b.settings.policy_port}", f"{SHARD_DIR}/shard.json"],
                volume=volume,
                stream=spec.shard_index,
                streams=spec.streams,
            )
            if not evaluator.put_archive(SHARD_DIR, tar_one("shard.json", spec.model_dump_json().encode())):
                raise SandboxError("could not copy the shard file into the evaluator's volume")
            evaluator.start()
            return follow(b.settings, evaluator, policy, watch, callbacks, time_limit_s, started)
        finally:
            watch.close()


def follow(
    s: Settings,
    evaluator: Any,
    policy: Any,
    watch: PolicyWatch,
    callbacks: ShardCallbacks,
    time_limit_s: float,
    started: float,
) -> ShardOutcome:
    """Follow the running ``evaluator`` to its end (or stop it: cancelled, over ``time_limit_s``)
    and tell how the shard ended (:func:`outcome`); ``started`` (Unix time) bounds the policy's
    output kept for the admins."""
    lines: queue.Queue[_Item] = queue.Queue()
    threading.Thread(target=_read_lines, args=(evaluator, lines), daemon=True).start()
    namer = CauseNamer(s, policy, watch)
    status, finished = _consume(s, lines, callbacks, namer, time_limit_s)
    if status is not None:
        evaluator.stop(timeout=3)
    exit_code = evaluator.wait(timeout=60).get("StatusCode") if status is None else None
    return outcome(s, evaluator, policy, status, finished, exit_code, time_limit_s, started)


def _read_lines(evaluator: Any, lines: queue.Queue[_Item]) -> None:
    """Put the evaluator's stdout lines into ``lines`` as they come, then None (after the
    exception that ended the stream, if one did)."""
    buf = b""
    try:
        for chunk in evaluator.logs(stream=True, follow=True, stdout=True, stderr=False):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.put(line.decode("utf-8", errors="replace"))
    except Exception as exc:  # noqa: BLE001
        lines.put(exc)
    lines.put(None)


class _Cadence:
    """The periodic duties of a followed shard: the heartbeat every ``heartbeat_interval_s``, the
    cancel check every 2 s, the shard's deadline."""

    def __init__(self, s: Settings, callbacks: ShardCallbacks, time_limit_s: float) -> None:
        self.interval = s.heartbeat_interval_s
        self.callbacks = callbacks
        self.deadline = time.monotonic() + time_limit_s
        self.next_beat = self.next_stop_check = 0.0

    def due(self) -> str | None:
        """Do what is due; ``stopped`` (cancelled) or ``timed_out`` when the shard must end now."""
        if time.monotonic() >= self.next_beat:
            self.callbacks.heartbeat()
            self.next_beat = time.monotonic() + self.interval
        if time.monotonic() >= self.next_stop_check:
            self.next_stop_check = time.monotonic() + 2.0
            if self.callbacks.should_stop():
                return "stopped"
        if time.monotonic() > self.deadline:
            return "timed_out"
        return None


def _consume(
    s: Settings, lines: queue.Queue[_Item], callbacks: ShardCallbacks, namer: CauseNamer, time_limit_s: float
) -> tuple[str | None, DoneEvent | ErrorEvent | None]:
    """Hand the evaluator's events to ``callbacks`` until its output ends (status None) or the
    shard must stop (``stopped``, ``timed_out``); returns that status and the event that ended
    the shard (``done``, ``error``), if one came."""
    cadence = _Cadence(s, callbacks, time_limit_s)
    finished: DoneEvent | ErrorEvent | None = None
    while True:
        status = cadence.due()
        if status is not None:
            return status, finished
        try:
            item = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if item is None or isinstance(item, Exception):
            return None, finished
        ev = parse_event(item)
        if ev is None:
            continue
        end = dispatch_event(ev, callbacks, namer)
        if isinstance(ev, EpisodeEvent):
            namer.last_record_at = time.time()
        if end is not None:
            finished = end


def outcome(
    s: Settings,
    evaluator: Any,
    policy: Any,
    status: str | None,
    finished: DoneEvent | ErrorEvent | None,
    exit_code: int | None,
    time_limit_s: float,
    started: float,
) -> ShardOutcome:
    """How the shard ended: stopped, timed out, completed, the policy's error (with its death
    when the container is down) or the platform's (the evaluator's exit, its OOM)."""
    policy_log = truncate_log(logs(policy, since=started), s.log_max_bytes)
    internal = logs(evaluator, stdout=False, tail=40)[-4000:]
    if status == "stopped":
        return ShardOutcome("stopped", "the submission was cancelled", internal, policy_log)
    if status == "timed_out":
        return ShardOutcome(
            "timed_out", f"the shard did not finish within its time limit ({time_limit_s:.0f} s)", internal, policy_log
        )
    if isinstance(finished, DoneEvent):
        return ShardOutcome("completed", "", internal, policy_log)
    if isinstance(finished, ErrorEvent) and finished.kind == "policy":
        policy_state = state(policy)
        cause = death_text(s, policy_state) if not policy_state.get("Running") else ""
        return policy_error_outcome(
            _failure_reason(finished.reason), str(finished.message), cause, internal, policy_log
        )
    detail = f"{finished.message}" if finished else f"evaluator exited with code {exit_code}"
    if state(evaluator).get("OOMKilled"):
        detail = f"the evaluator ran out of memory ({s.evaluator_memory}); " + detail
    return ShardOutcome("infrastructure_error", "internal evaluator error", f"{detail}\n{internal}", policy_log)


def _failure_reason(value: object) -> str:
    """The evaluator's failure class as sent (a known ``FailureReason``), else a neutral word: the
    event line comes from the evaluator, but a value is only shown when it is one of ours."""
    from typing import get_args

    from submission_spec.client import FailureReason

    return value if isinstance(value, str) and value in get_args(FailureReason) else "policy_error"
