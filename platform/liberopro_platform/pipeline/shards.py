"""Stage 3, a shard attempt: claim the shard, run its missing episodes in an evaluator container
with :func:`~liberopro.schema.shard.shard_streams` simulator streams against the submission's
policy container on this worker (kept for its next shard, :mod:`.policies`), storing each
episode as it ends (:mod:`.episodes`); how the attempt ended is :mod:`.shard_end`'s."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from liberopro.schema.shard import ShardSpec, shard_streams
from sqlalchemy import select
from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.models import Episode, Shard, ShardState, Submission
from liberopro_platform.pipeline.aggregate import maybe_aggregate
from liberopro_platform.pipeline.episodes import StoringCallbacks
from liberopro_platform.pipeline.policies import release_idle_policies, release_policies, release_policy_of
from liberopro_platform.pipeline.shard_end import after_shard, fail_shard, finish_shard
from liberopro_platform.pipeline.state import S, add_event, get_shard, get_submission
from liberopro_platform.planning import ManifestError, load_manifest
from liberopro_platform.sandbox.base import PolicySource, SandboxError, ShardOutcome

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

log = logging.getLogger("liberopro_platform.pipeline")

#: Shard outcomes after which the submission's policy container on the worker is not reused: the
#: attempt failed as a whole (the policy never answered, the shard ran out of time, the sandbox
#: broke), so a policy server that hung or broke (Running to the engine, deadlocked inside) must
#: not serve the retry as well. Before the node sandbox every attempt had a fresh container.
FRESH_POLICY_AFTER = frozenset({"policy_error", "timed_out", "infrastructure_error"})

_ENDED = (ShardState.done.value, ShardState.failed.value, ShardState.cancelled.value)


def max_concurrent_episodes(metadata: dict[str, Any] | None) -> int | None:
    """What a policy declared it runs at once (``max_concurrent_episodes`` of its ``/metadata`` at
    validation, stored on the submission); None when it declared none (spec 1.0) or nothing was
    recorded. The streams of a shard follow from it by :func:`liberopro.schema.shard.shard_streams`."""
    declared = (metadata or {}).get("max_concurrent_episodes")
    return int(declared) if declared else None


@dataclass(frozen=True)
class Attempt:
    """A claimed shard attempt: the submission's policy, the pairs still to run, the streams."""

    source: PolicySource
    index: int
    remaining: list[tuple[str, int]]
    streams: int
    manifest_sha256: str | None


@dataclass(frozen=True)
class Claim:
    """What :func:`claim` found: an ``attempt`` to run, or a submission to ``aggregate`` (the
    shard was already done), or neither (nothing to do)."""

    attempt: Attempt | None = None
    aggregate: str | None = None


def run_shard(p: Pipeline, shard_id: int) -> None:
    """Run shard ``shard_id``'s missing episodes (module docstring); idempotent: a shard that is
    done, ended or held by another worker's live claim is left alone."""
    # Asked of the engine before the shard's row is locked: a slow engine must not hold the
    # lock (a cancel's update of the shard waits on it).
    requested = requested_streams(p)
    with transaction(p.sessions) as s:
        found = claim(p, s, shard_id, requested)
    if found.aggregate is not None:
        maybe_aggregate(p, found.aggregate)
        return
    attempt = found.attempt
    if attempt is None:
        return
    if not attempt.remaining:
        finish_shard(p, shard_id)
        return
    spec = shard_spec(p, shard_id, attempt)
    if spec is not None:
        _run(p, shard_id, attempt.source, spec)


def requested_streams(p: Pipeline) -> int:
    """``evaluator_streams``, else what the backend finds this node fits (1 when it cannot tell)."""
    if p.settings.evaluator_streams:
        return p.settings.evaluator_streams
    try:
        return p.backend.auto_streams()
    except SandboxError as exc:
        log.warning("%s; shards run one simulator stream", exc)
        return 1


def claim(p: Pipeline, s: Session, shard_id: int, requested: int) -> Claim:
    """Claim shard ``shard_id`` for this worker (in ``s``, the row locked) and count its attempt,
    unless there is nothing to do: the submission is not running (its open shards are cancelled
    once it ended), the shard ended (done: aggregate), another worker holds a live claim, or its
    attempts are used up (the submission fails as a platform error)."""
    shard = s.get(Shard, shard_id, with_for_update=True)
    if shard is None:
        return Claim()
    sub = get_submission(s, shard.submission_id)
    if sub.state != S.running.value:
        if shard.state in (ShardState.queued.value, ShardState.running.value) and S(sub.state).final:
            shard.state = ShardState.cancelled.value
        return Claim()
    if shard.state in _ENDED:
        return Claim(aggregate=sub.id if shard.state == ShardState.done.value else None)
    if shard.state == ShardState.running.value and not p.stale(shard.heartbeat_at) and shard.worker != p.worker:
        return Claim()  # another worker holds a live claim
    if shard.attempts >= p.settings.max_stage_attempts:
        # Every attempt ended without reporting (its worker died, the claim went stale):
        # nothing the policy decided; a platform error for the admins.
        fail_shard(
            p,
            s,
            sub,
            shard,
            "platform",
            reason=f"attempted {shard.attempts} times without finishing; "
            f"last: {shard.last_error or 'no error recorded'}",
        )
        return Claim()
    return Claim(attempt=_start_attempt(p, s, sub, shard, requested))


def _start_attempt(p: Pipeline, s: Session, sub: Submission, shard: Shard, requested: int) -> Attempt:
    """Mark ``shard`` running on this worker, one more attempt; what it has left to run."""
    shard.state = ShardState.running.value
    shard.worker = p.worker
    shard.attempts += 1
    shard.heartbeat_at = shard.started_at = p.now()
    stored = set(
        s.execute(select(Episode.instance_id, Episode.episode_index).where(Episode.submission_id == sub.id)).all()
    )
    remaining = [(str(pair[0]), int(pair[1])) for pair in shard.plan if (pair[0], pair[1]) not in stored]
    streams = shard_streams(requested, sub.protocol, max_concurrent_episodes(sub.policy_metadata), len(remaining))
    add_event(
        s,
        sub,
        f"[admin] shard {shard.index}: attempt {shard.attempts} started on {p.worker}, "
        f"{len(remaining)} of {shard.episodes_total} episodes to run"
        + (f" in {streams} simulator streams at once" if streams > 1 else ""),
    )
    source = PolicySource(
        submission_id=sub.id,
        image=sub.image_digest,
        command=sub.policy_command,
        protocol=sub.protocol,
        upload_path=sub.upload_path,
        reference=sub.image_ref,
    )
    return Attempt(source, shard.index, remaining, streams, sub.manifest_sha256)


def shard_spec(p: Pipeline, shard_id: int, attempt: Attempt) -> ShardSpec | None:
    """The shard file of ``attempt`` (its instances from the manifest planned with), or None after
    failing the shard when the manifest is unusable or changed since planning."""
    st = p.settings
    try:
        manifest = load_manifest(st.manifest_path)
        if manifest.sha256 != attempt.manifest_sha256:
            raise ManifestError(
                f"the manifest changed since planning ({(attempt.manifest_sha256 or '')[:12]} -> "
                f"{(manifest.sha256 or '')[:12]})"
            )
    except ManifestError as exc:
        with transaction(p.sessions) as s:
            shard = get_shard(s, shard_id)
            fail_shard(
                p,
                s,
                shard.submission,
                shard,
                "platform",
                reason="the platform's evaluation manifest is unusable",
                admin_detail=str(exc),
            )
        return None
    by_id = manifest.by_id()
    return ShardSpec(
        submission_id=attempt.source.submission_id,
        shard_index=attempt.index,
        instances=[by_id[i] for i in sorted({pair[0] for pair in attempt.remaining})],
        episodes=attempt.remaining,
        seed=st.episode_seed,
        max_steps=st.max_steps,
        protocol=attempt.source.protocol,
        request_timeout_s=st.request_timeout_s,
        episode_budget_s=st.episode_budget_s,
        startup_timeout_s=st.validation_health_timeout_s,
        restart_wait_s=st.policy_restart_wait_s,
        streams=attempt.streams,
    )


def _run(p: Pipeline, shard_id: int, source: PolicySource, spec: ShardSpec) -> None:
    """Run ``spec`` on the backend (after releasing every other submission's policy container),
    record how it ended, and release the policy containers nothing will use (this one too after an
    attempt that failed as a whole, :data:`FRESH_POLICY_AFTER`)."""
    callbacks = StoringCallbacks(p, shard_id, source.submission_id)
    try:
        with p.policy_lock:  # the idle hook must not remove what this shard is about to use
            release_policies(p, keep=source.submission_id)
        outcome = p.backend.run_shard(source, spec, callbacks, p.settings.shard_time_limit_s(len(spec.episodes)))
    except Exception as exc:  # noqa: BLE001 - an infrastructure fault: bounded retries
        log.exception("shard %s failed", shard_id)
        outcome = ShardOutcome("infrastructure_error", "internal sandbox error", f"{exc.__class__.__name__}: {exc}")
    after_shard(p, shard_id, outcome, callbacks.platform_faults)
    if outcome.status in FRESH_POLICY_AFTER:
        release_policy_of(p, source.submission_id)
    release_idle_policies(p)
