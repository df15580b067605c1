"""The sandbox interface: how the pipeline validates a policy and runs a shard, whatever runs
them (Docker containers in production, child processes for development).

A backend never raises for a policy's fault: it reports it in the outcome with a message for
the submitter. It raises :class:`SandboxError` only for infrastructure faults (engine down,
evaluator image missing), which the pipeline retries a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from liberopro.schema.reasons import TerminationReason
from liberopro.schema.results import (
    DoneEvent,
    EpisodeEvent,
    EpisodeRecord,
    ErrorEvent,
    Event,
    HelloEvent,
    MetadataEvent,
)
from liberopro.schema.shard import ShardSpec

#: Termination reasons the platform adds to the evaluator's (it sees the policy container die),
#: from the one vocabulary (:mod:`liberopro.schema.reasons`).
POLICY_OUT_OF_MEMORY = TerminationReason.policy_out_of_memory
POLICY_CRASHED = TerminationReason.policy_crashed

#: Evaluator reasons that mean "the policy did not answer properly": the platform checks whether
#: the policy process died during such an episode and then names the real cause.
POLICY_TRANSPORT_FAILURES = frozenset(
    {
        TerminationReason.policy_connect_error,
        TerminationReason.policy_http_error,
        TerminationReason.policy_timeout,
        TerminationReason.policy_bad_response,
        TerminationReason.policy_episode_timeout,
    }
)


class SandboxError(RuntimeError):
    """An infrastructure fault (not the policy's): worth a retry."""


@dataclass(frozen=True)
class PolicySource:
    """What to run for submission ``submission_id``: a pinned image id (Docker) or a shell
    command (local backend), and the wire protocol it speaks. For a stage on a node whose engine
    lacks the image (several nodes, docs/platform.md "Several nodes"): ``upload_path``, the
    uploaded archive (on the shared data directory), or ``reference``, the registry digest it was
    pulled by."""

    submission_id: str
    image: str | None = None
    command: str | None = None
    protocol: str = "liberopro"
    upload_path: str | None = None
    reference: str | None = None


@dataclass
class PreparedImage:
    """The result of resolving a submission's image: pinned digest (the image id), size, labels,
    and ``notes`` for the submitter (e.g. which VOLUMEs became tmpfs mounts)."""

    digest: str
    size: int
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class ValidationOutcome:
    """``ok`` when the policy started and passed the conformance check.

    ``failure`` (what failed) and ``fix`` (what to do) are shown to the submitter, with
    ``report`` (every conformance check) and ``policy_log`` (the policy's own output).
    """

    ok: bool
    report: dict[str, Any] | None = None
    failure: str | None = None
    fix: str | None = None
    metadata: dict[str, Any] | None = None
    policy_log: str = ""


ShardStatus = Literal["completed", "stopped", "timed_out", "policy_error", "infrastructure_error"]


@dataclass
class ShardOutcome:
    """How a shard attempt ended: ``status``, and for the admins ``message`` (the platform's
    account: the failure class, the container's exit code), ``internal`` (the evaluator's stderr
    tail, the policy's error reply) and ``policy_log`` (the policy's output during the shard).
    None of it reaches the submitter: a shard runs hidden instances, and the policy can steer
    all of it (its replies quote what it was shown; an exit code or a failure class is a number it
    chooses). The submitter reads only the status's kind in the fixed words of
    :data:`liberopro_platform.disclosure.HIDDEN_FAILURES`."""

    status: ShardStatus
    message: str = ""
    internal: str = ""
    policy_log: str = ""


#: How a submitter reproduces a validation failure on their machine, with the sandbox's restrictions.
LOCAL_RUN_HINT = (
    "reproduce it locally: `docker run --rm -p 8000:8000 --read-only --tmpfs /tmp "
    "--user 65534:65534 --cap-drop ALL --security-opt no-new-privileges IMAGE`, then "
    "`liberopro check-policy http://127.0.0.1:8000`"
)


def validation_outcome(report: dict[str, Any], policy_log: str) -> ValidationOutcome:
    """Turn a conformance report into what the submitter reads (both backends)."""
    if report.get("ok"):
        return ValidationOutcome(ok=True, report=report, metadata=report.get("metadata"), policy_log=policy_log)
    failed = [c for c in report.get("checks", []) if not c.get("ok")]
    failure = (
        "the policy failed the conformance check: "
        + "; ".join(f"{c['name']}: {c.get('detail') or 'failed'}" for c in failed)
        if failed
        else "the conformance check ran no check"
    )
    hints = [c["hint"] for c in failed if c.get("hint")]
    fix = (hints[0] + "; " if hints else "") + LOCAL_RUN_HINT
    return ValidationOutcome(
        ok=False, report=report, failure=failure, fix=fix, metadata=report.get("metadata"), policy_log=policy_log
    )


def policy_error_outcome(
    reason: str, detail: str, cause: str = "", internal: str = "", policy_log: str = ""
) -> ShardOutcome:
    """The outcome of a shard the evaluator could not start because of the policy (a
    :class:`submission_spec.PolicyError` before the first episode): ``message`` holds the failure
    class ``reason`` (one of ``submission_spec.client.FailureReason``) and ``cause`` (the
    platform's own account, e.g. the container's exit code), ``internal`` the policy's reply
    (``detail``) and the rest; all for the admins (:class:`ShardOutcome`)."""
    message = (f"{cause}; " if cause else "") + (
        f"the evaluator could not use the policy in the evaluation sandbox ({reason})"
    )
    return ShardOutcome("policy_error", message, f"policy error {reason}: {detail}\n{internal}".rstrip(), policy_log)


class ShardCallbacks(Protocol):
    """What a backend calls while a shard runs (the pipeline stores, the backend only reports)."""

    def on_hello(self, info: dict[str, Any]) -> None:
        """The evaluator's versions (``evaluator_version``, ``stack``)."""

    def on_metadata(self, metadata: dict[str, Any]) -> None:
        """The policy's ``/metadata``."""

    def on_record(self, record: EpisodeRecord) -> None:
        """One finished episode, its cause named (:data:`NameCause`)."""

    def heartbeat(self) -> None:
        """Called at least every ``heartbeat_interval_s`` while the shard runs."""

    def should_stop(self) -> bool:
        """True when the shard must stop now (the submission was cancelled)."""


#: What a backend knows of an episode that the evaluator cannot: given a record, the record to
#: store (the same one, or :meth:`EpisodeRecord.with_cause` when the policy died during it).
NameCause = Callable[[EpisodeRecord], EpisodeRecord]


def dispatch_event(
    event: Event, callbacks: ShardCallbacks, name_cause: NameCause | None = None
) -> DoneEvent | ErrorEvent | None:
    """Hand one event of a shard to ``callbacks`` (the one place backends consume the evaluator's
    events, :data:`liberopro.schema.results.Event`): ``hello`` to ``on_hello`` (versions),
    ``metadata`` to ``on_metadata``, ``episode`` to ``on_record`` as the typed record, after
    ``name_cause`` (which may charge it to ``policy_crashed`` or ``policy_out_of_memory`` when the
    policy died during the episode). Returns the event that ends the shard (``done``, ``error``),
    else None; a ``conformance`` event (validation's, not a shard's) is ignored."""
    if isinstance(event, HelloEvent):
        callbacks.on_hello({"evaluator_version": event.evaluator_version, "stack": event.stack})
    elif isinstance(event, MetadataEvent):
        callbacks.on_metadata(event.metadata)
    elif isinstance(event, EpisodeEvent):
        record = event.record if name_cause is None else name_cause(event.record)
        callbacks.on_record(record)
    elif isinstance(event, (DoneEvent, ErrorEvent)):
        return event
    return None


class SandboxBackend(Protocol):
    """Validates policies and runs shards. Implementations: :class:`~.docker_backend.DockerBackend`
    (its parts in :mod:`.docker`)
    and :class:`~.local_backend.LocalBackend`."""

    name: str

    def prepare(self, source: PolicySource, upload_path: str | None = None) -> PreparedImage | None:
        """Make the image present (load an uploaded archive, pull a digest reference), pin it and
        measure it. None for a backend without images. Raises :class:`PolicyRejected`."""

    def validate(self, source: PolicySource, on_heartbeat: Callable[[], bool | None]) -> ValidationOutcome:
        """Start the policy alone in a sandbox and run the conformance check within the limits;
        ``on_heartbeat`` is called every few seconds and stops the check when it returns False."""

    def run_shard(
        self, source: PolicySource, spec: ShardSpec, callbacks: ShardCallbacks, time_limit_s: float
    ) -> ShardOutcome:
        """Run ``spec``'s episodes (``spec.streams`` simulator processes at once) against the
        submission's policy on this worker; removes on return everything it created but the
        policy, which a backend may keep for the submission's next shard (:meth:`release_policy`)."""

    def policy_submissions(self) -> set[str]:
        """Ids of the submissions whose policy this worker keeps between shards (none for a
        backend that starts one per shard)."""

    def release_policy(self, submission_id: str) -> int:
        """Stop and remove the policy kept for ``submission_id``; returns how many resources went."""

    def auto_streams(self) -> int:
        """Simulator streams per shard that fit this node when ``evaluator_streams`` is not set."""

    def sweep(self, worker: str | None = None) -> int:
        """Remove leftover sandbox resources (of ``worker``, or all); returns how many."""

    def owners(self) -> set[str]:
        """Names of the workers whose sandbox resources exist now (the owner label)."""


class PolicyRejected(Exception):
    """The submission cannot run at all (image absent, too large, unknown protocol, not the
    team's): ``failure`` and ``fix`` go to the submitter, ``admin_detail`` (e.g. the engine's own
    error, which may name hosts and ports) to the admins only."""

    def __init__(self, failure: str, fix: str, admin_detail: str = "") -> None:
        super().__init__(failure)
        self.failure = failure
        self.fix = fix
        self.admin_detail = admin_detail


def truncate_log(text: str, limit: int) -> str:
    """The last ``limit`` bytes of ``text`` (a policy log), marked when cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return "[... earlier output truncated ...]\n" + data[-limit:].decode("utf-8", errors="replace")
