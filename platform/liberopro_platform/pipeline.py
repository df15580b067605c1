"""The submission pipeline as plain functions over the database: validate -> plan shards ->
run shards -> aggregate -> publish, plus cancel, requeue, stuck detection and crash recovery.

Celery tasks (:mod:`liberopro_platform.celery_app`) only call these; each stage hands over to the
next through an :class:`Enqueue`. Every stage is idempotent: a duplicate or redelivered task
finds the work claimed or done and returns. Claims are compare-and-set updates with a
heartbeat; a claim whose heartbeat went stale may be taken over.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from liberopro.schema.reasons import Side, reasons_of
from liberopro.schema.results import EpisodeRecord
from liberopro.schema.shard import ShardSpec, shard_streams
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from liberopro_platform.config import Settings
from liberopro_platform.db import transaction
from liberopro_platform.disclosure import HIDDEN_FAILURES, INTERNAL_FIX, failure_kind
from liberopro_platform.heartbeat import CONTROL, SHARDS, all_rows, describe_absence, is_live
from liberopro_platform.image_refs import IMAGE_ID
from liberopro_platform.models import (
    ACTIVE_STATES,
    FINAL_STATES,
    Episode,
    Result,
    Shard,
    ShardState,
    Submission,
    SubmissionEvent,
    SubmissionState,
    WorkerHeartbeat,
    utcnow,
)
from liberopro_platform.planning import ManifestError, load_manifest, plan_shards
from liberopro_platform.sandbox.base import (
    PolicyRejected,
    PolicySource,
    SandboxBackend,
    SandboxError,
    ShardOutcome,
    truncate_log,
)

log = logging.getLogger("liberopro_platform.pipeline")

S = SubmissionState


@dataclass
class BrokerView:
    """The pipeline's task messages that the broker holds, keyed ``(kind, argument)``: kind is
    ``validate``, ``run_shard`` or ``aggregate`` (the :class:`Enqueue` method that sent it), the
    argument its submission or shard id as a string.

    ``waiting``: in a queue, not handed to a worker yet. ``delivered``: handed to a worker and
    not acknowledged (running, or held by the worker until its countdown ends), with the later
    of the hand-over time and the countdown's end (UTC). A message delivered to a worker that
    died stays "delivered" until the broker's visibility timeout, so for work the database
    says is still queued only a recent delivery counts (:meth:`Pipeline.find_stuck`).
    """

    waiting: set[tuple[str, str]] = field(default_factory=set)
    delivered: dict[tuple[str, str], dt.datetime] = field(default_factory=dict)

    def holds(self, kind: str, arg: object, delivered_after: dt.datetime | None = None) -> bool:
        """True when the broker holds a message ``kind(arg)``: waiting, or delivered (after
        ``delivered_after`` when given)."""
        key = (kind, str(arg))
        if key in self.waiting:
            return True
        at = self.delivered.get(key)
        return at is not None and (delivered_after is None or at >= delivered_after)


class Enqueue(Protocol):
    """How a stage hands work to the next one (Celery in production)."""

    def validate(self, submission_id: str, countdown: float = 0) -> None: ...
    def run_shard(self, shard_id: int, countdown: float = 0) -> None: ...
    def aggregate(self, submission_id: str, countdown: float = 0) -> None: ...

    def pending(self) -> BrokerView | None:
        """What the broker holds now; None when it cannot be inspected (down, or not Redis)."""


def add_event(session: Session, sub: Submission, message: str) -> None:
    session.add(SubmissionEvent(submission_id=sub.id, state=sub.state, message=message))


def set_state(session: Session, sub: Submission, state: SubmissionState, message: str, **fields: Any) -> None:
    """Move ``sub`` to ``state`` with ``message`` (shown to the submitter) and log the event; a
    final state clears ``stuck_reason`` (what a failure was about is in ``failure``)."""
    now = utcnow()
    if sub.state != state.value:
        sub.state_since = now
    if state.final:
        sub.stuck_reason = None
    sub.state = state.value
    sub.message = message
    for k, v in fields.items():
        setattr(sub, k, v)
    if state.final and sub.finished_at is None:
        sub.finished_at = now
    add_event(session, sub, message)


def fail(session: Session, sub: Submission, stage: str, failure: str, fix: str) -> None:
    """End ``sub`` as failed at ``stage``: ``failure`` says what failed, ``fix`` what to do."""
    set_state(session, sub, S.failed, f"failed at {stage}: {failure}", failure_stage=stage, failure=failure, fix=fix)
    for shard in sub.shards:
        if shard.state in (ShardState.queued.value, ShardState.running.value):
            shard.state = ShardState.cancelled.value


def queue_position(session: Session, sub: Submission) -> int | None:
    """How many active submissions were submitted before ``sub`` (None once it is final)."""
    if sub.state not in ACTIVE_STATES:
        return None
    return (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .where(Submission.state.in_(ACTIVE_STATES), Submission.created_at < sub.created_at)
        )
        or 0
    )


@dataclass(frozen=True)
class SandboxWait:
    """What a submission's next sandbox task (its validation, or its next shard when none of its
    shards runs) waits for: a free worker. Tasks of the sandbox queue are taken in the order they
    were queued (``Submission.state_since`` of a queued validation, ``Shard.queued_at`` of a shard).

    ``running``: sandbox tasks running now (fresh heartbeat), on every worker; ``queued_before``:
    sandbox tasks of other submissions queued before this one's; ``workers``: live workers that run
    sandbox work."""

    running: int
    queued_before: int
    workers: int

    def text(self) -> str:
        ahead = self.running + self.queued_before
        return (
            f"waiting for a free worker: {ahead} sandbox task{'s' if ahead != 1 else ''} ahead of it "
            f"({self.running} running, {self.queued_before} queued before it; "
            f"{self.workers} worker{'s' if self.workers != 1 else ''} run{'s' if self.workers == 1 else ''} "
            "sandbox work)"
        )


def sandbox_wait(
    session: Session, sub: Submission, stale_s: float, now: dt.datetime | None = None
) -> SandboxWait | None:
    """The wait of ``sub``'s next sandbox task (:class:`SandboxWait`), or None when it waits for
    none: it is not queued for validation nor running, a shard of it is running (fresh
    heartbeat), or no shard of it waits for its first attempt (a retry's wait is not told:
    disclosure.py)."""
    now = now or utcnow()
    fresh = now - dt.timedelta(seconds=stale_s)
    if sub.state == S.queued.value:
        since = sub.state_since
    elif sub.state == S.running.value:
        mine = sub.shards
        if any(sh.state == ShardState.running.value and sh.heartbeat_at and sh.heartbeat_at >= fresh for sh in mine):
            return None
        # A shard waiting for a retry (its attempt failed: the policy can make it fail) is not told:
        # when its attempts fail would be readable at once; its first turn is.
        times = [
            sh.queued_at or sub.state_since for sh in mine if sh.state == ShardState.queued.value and not sh.attempts
        ]
        if not times:
            return None
        since = min(times)
    else:
        return None
    running = (
        session.scalar(
            select(func.count())
            .select_from(Shard)
            .where(Shard.state == ShardState.running.value, Shard.heartbeat_at >= fresh)
        )
        or 0
    ) + (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .where(Submission.state == S.validating.value, Submission.heartbeat_at >= fresh)
        )
        or 0
    )
    queued_before = (
        session.scalar(
            select(func.count())
            .select_from(Shard)
            .join(Submission, Shard.submission_id == Submission.id)
            .where(
                Shard.state == ShardState.queued.value,
                Submission.state == S.running.value,
                Shard.submission_id != sub.id,
                func.coalesce(Shard.queued_at, Submission.state_since) < since,
            )
        )
        or 0
    ) + (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .where(Submission.state == S.queued.value, Submission.id != sub.id, Submission.state_since < since)
        )
        or 0
    )
    workers = sum(1 for r in all_rows(session) if r.serves(SHARDS) and is_live(r, now, stale_s))
    return SandboxWait(running, queued_before, workers)


@dataclass
class Stuck:
    """A submission that has not moved as it should: why, and what the sweep does about it."""

    submission_id: str
    state: str
    reason: str
    # requeue_validation | requeue_shard | requeue_aggregate: the work was claimed and its claim
    # went stale (counts in ``requeues``); resend_validation | resend_shard | resend_aggregate:
    # its task message was lost (sent again, free); wait: nothing to do but wait (no worker);
    # fail: over the submission's total time limit.
    action: str
    shard_id: int | None = None
    #: The reason as the submitter reads it, when it differs: a shard's reason names no shard (which
    #: of a submission's shards is where belongs to the hidden stage, disclosure.py).
    shown: str | None = None

    @property
    def public(self) -> str:
        """The reason for the submitter."""
        return self.shown or self.reason


class Pipeline:
    """The pipeline of one worker process (``worker`` names it in claims and sandbox labels)."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        enqueue: Enqueue,
        worker: str,
        backend: SandboxBackend | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.enqueue = enqueue
        self.worker = worker
        self._backend: SandboxBackend | None = backend
        self._policy_lock = threading.Lock()  # node sandboxes: acquired by shards, released by the idle hook

    @property
    def backend(self) -> SandboxBackend:
        """The sandbox backend, made on first use (a Docker engine that is down fails here, not at import)."""
        if self._backend is None:
            from liberopro_platform.db import deployment_id
            from liberopro_platform.sandbox import make_backend

            self._backend = make_backend(self.settings, self.worker, deployment_id(self.sessions))
        return self._backend

    def _now(self) -> dt.datetime:
        return utcnow()

    def _stale(self, at: dt.datetime | None) -> bool:
        return at is None or (self._now() - at).total_seconds() > self.settings.heartbeat_stale_s

    # ------------------------------------------------------------------ validation
    def validate(self, submission_id: str) -> None:
        """Stage 1: check that the team may submit the image (again: the API did, the settings may
        have changed since), pin and check it, record that the team owns an uploaded or pulled
        image, start it alone, run the conformance check; then plan."""
        from liberopro_platform.ownership import grant_image, reference_refusal

        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub is None or sub.state in (
                S.published.value,
                S.failed.value,
                S.cancelled.value,
                S.running.value,
                S.aggregating.value,
            ):
                return
            if sub.state == S.validating.value and not self._stale(sub.heartbeat_at):
                return  # another worker is on it
            if sub.attempts >= self.settings.max_stage_attempts:
                fail(
                    s,
                    sub,
                    "validation",
                    f"validation was attempted {sub.attempts} times without finishing",
                    INTERNAL_FIX,
                )
                return
            if sub.source == "reference" and sub.image_ref:
                refusal = reference_refusal(
                    s, sub.team_id, sub.team.name, sub.image_ref, self.settings.allowed_registries
                )
                if refusal is not None:
                    fail(s, sub, "validation", refusal.failure, refusal.fix)
                    return
            set_state(
                s,
                sub,
                S.validating,
                "validating: checking the image",
                worker=self.worker,
                heartbeat_at=self._now(),
                attempts=sub.attempts + 1,
                stuck_reason=None,
            )
            source = PolicySource(
                submission_id=sub.id,
                image=sub.image_digest or sub.image_ref,
                command=sub.policy_command,
                protocol=sub.protocol,
            )
            upload = sub.upload_path if not sub.image_digest else None
            team_id, kind = sub.team_id, sub.source
            ref_is_id = bool(sub.image_ref and IMAGE_ID.match(sub.image_ref))
        try:
            backend = self.backend
            self.release_all_policies()  # this validation's policy container runs alone on the node
            prepared = backend.prepare(source, upload)
            if prepared is not None:
                from submission_spec.transports import protocol_from_labels

                source = PolicySource(
                    submission_id=submission_id, image=prepared.digest, protocol=protocol_from_labels(prepared.labels)
                )
                if kind == "upload" or (kind == "reference" and not ref_is_id):
                    grant_image(
                        self.sessions,
                        team_id,
                        prepared.digest,
                        "upload" if kind == "upload" else "registry",
                        submission_id,
                    )
                with transaction(self.sessions) as s:
                    sub = s.get(Submission, submission_id)
                    sub.image_digest, sub.image_size = prepared.digest, prepared.size
                    sub.protocol = source.protocol
                    for note in prepared.notes:
                        add_event(s, sub, note)
                    set_state(
                        s,
                        sub,
                        S.validating,
                        f"validating: image {prepared.digest[:19]} "
                        f"({prepared.size / 2**30:.2f} GiB) started in the sandbox, conformance check running",
                    )
                if upload and not self.settings.keep_uploads_until_done:
                    _remove_quietly(upload)
            outcome = backend.validate(source, lambda: self._beat_submission(submission_id))
        except PolicyRejected as exc:
            with transaction(self.sessions) as s:
                sub = s.get(Submission, submission_id)
                fail(s, sub, "validation", exc.failure, exc.fix)
                if exc.admin_detail:
                    add_event(s, sub, f"[admin] {exc.admin_detail[:2000]}")
            if upload:
                _remove_quietly(upload)
            return
        except Exception as exc:  # noqa: BLE001 - an infrastructure fault: bounded retries
            log.exception("validation of %s failed", submission_id)
            self._validation_infrastructure_error(submission_id, f"{exc.__class__.__name__}: {exc}")
            return
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub.state != S.validating.value:
                return  # cancelled meanwhile
            sub.validation_report = outcome.report
            sub.policy_log = "=== validation ===\n" + (outcome.policy_log or "(no output)\n")
            if outcome.metadata:
                sub.policy_metadata = outcome.metadata
                sub.policy_name = outcome.metadata.get("policy_name")
                sub.spec_version = outcome.metadata.get("spec_version")
            if not outcome.ok:
                fail(s, sub, "validation", outcome.failure or "validation failed", outcome.fix or "")
                return
        self.plan(submission_id)

    def _beat_submission(self, submission_id: str) -> bool:
        """Heartbeat of a validation; False when the submission was cancelled (stop now)."""
        with transaction(self.sessions) as s:
            s.execute(update(Submission).where(Submission.id == submission_id).values(heartbeat_at=self._now()))
            return s.scalar(select(Submission.state).where(Submission.id == submission_id)) == S.validating.value

    def _validation_infrastructure_error(self, submission_id: str, detail: str) -> None:
        log.warning("validation of %s: infrastructure error: %s", submission_id, detail)
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub.state != S.validating.value:
                return
            if sub.attempts >= self.settings.max_stage_attempts:
                fail(
                    s,
                    sub,
                    "validation",
                    f"the platform could not validate the image (internal error, {sub.attempts} attempts)",
                    INTERNAL_FIX,
                )
                add_event(s, sub, f"[admin] last error: {detail[:2000]}")
                return
            set_state(
                s,
                sub,
                S.queued,
                f"validation will be retried after a platform error "
                f"(attempt {sub.attempts} of {self.settings.max_stage_attempts})",
                worker=None,
            )
            add_event(s, sub, f"[admin] {detail[:2000]}")
        self.enqueue.validate(submission_id, countdown=min(60.0, 5.0 * 2**sub.attempts))

    # ------------------------------------------------------------------ planning
    def plan(self, submission_id: str) -> None:
        """Stage 2: cut the hidden manifest's episodes into shards and queue them."""
        s_ = self.settings
        try:
            manifest = load_manifest(s_.manifest_path)
        except ManifestError as exc:
            with transaction(self.sessions) as s:
                sub = s.get(Submission, submission_id)
                fail(s, sub, "planning", "the platform has no usable evaluation manifest", INTERNAL_FIX)
                add_event(s, sub, f"[admin] {exc}")
            return
        shards = plan_shards(manifest, s_.episodes_per_instance, s_.episodes_per_shard)
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub.state != S.validating.value or sub.shards:
                return
            now = self._now()
            rows = [
                Shard(submission_id=sub.id, index=i, plan=pairs, episodes_total=len(pairs), queued_at=now)
                for i, pairs in enumerate(shards)
            ]
            s.add_all(rows)
            total = sum(len(p) for p in shards)
            set_state(
                s,
                sub,
                S.running,
                f"running on the hidden instances: {total} episodes in {len(shards)} shards",
                manifest_sha256=manifest.sha256,
                episodes_total=total,
                episodes_done=0,
                attempts=0,
            )
            s.flush()
            shard_ids = [sh.id for sh in rows]
        for shard_id in shard_ids:
            self.enqueue.run_shard(shard_id)

    # ------------------------------------------------------------------ shards
    def run_shard(self, shard_id: int) -> None:
        """Stage 3: run the shard's missing episodes and store each one: an evaluator container
        with :func:`~liberopro.schema.shard.shard_streams` simulator streams, against the submission's policy container on
        this worker (kept for its next shard; :meth:`release_idle_policies`)."""
        st = self.settings
        # Asked of the engine before the shard's row is locked: a slow engine must not hold the
        # lock (a cancel's update of the shard waits on it).
        requested = self._requested_streams()
        with transaction(self.sessions) as s:
            shard = s.get(Shard, shard_id, with_for_update=True)
            if shard is None:
                return
            sub = s.get(Submission, shard.submission_id)
            if sub.state != S.running.value:
                if shard.state in (ShardState.queued.value, ShardState.running.value) and S(sub.state).final:
                    shard.state = ShardState.cancelled.value
                return
            if shard.state in (ShardState.done.value, ShardState.failed.value, ShardState.cancelled.value):
                done = shard.state == ShardState.done.value
                shard_done = True
            else:
                done = shard_done = False
            if not shard_done:
                if (
                    shard.state == ShardState.running.value
                    and not self._stale(shard.heartbeat_at)
                    and shard.worker != self.worker
                ):
                    return  # another worker holds a live claim
                if shard.attempts >= st.max_stage_attempts:
                    # Every attempt ended without reporting (its worker died, the claim went stale):
                    # nothing the policy decided; a platform error for the admins.
                    self._fail_shard(
                        s,
                        sub,
                        shard,
                        "platform",
                        reason=f"attempted {shard.attempts} times without finishing; "
                        f"last: {shard.last_error or 'no error recorded'}",
                    )
                    return
                shard.state = ShardState.running.value
                shard.worker = self.worker
                shard.attempts += 1
                shard.heartbeat_at = shard.started_at = self._now()
                stored = set(
                    s.execute(
                        select(Episode.instance_id, Episode.episode_index).where(Episode.submission_id == sub.id)
                    ).all()
                )
                remaining = [p for p in shard.plan if (p[0], p[1]) not in stored]
                streams = shard_streams(
                    requested, sub.protocol, max_concurrent_episodes(sub.policy_metadata), len(remaining)
                )
                source = PolicySource(
                    submission_id=sub.id,
                    image=sub.image_digest,
                    command=sub.policy_command,
                    protocol=sub.protocol,
                    upload_path=sub.upload_path,
                    reference=sub.image_ref,
                )
                attempt, index, manifest_sha = shard.attempts, shard.index, sub.manifest_sha256
                add_event(
                    s,
                    sub,
                    f"[admin] shard {index}: attempt {attempt} started on {self.worker}, "
                    f"{len(remaining)} of {shard.episodes_total} episodes to run"
                    + (f" in {streams} simulator streams at once" if streams > 1 else ""),
                )
        if done:
            self._maybe_aggregate(sub.id)
            return
        if shard_done:
            return
        if not remaining:
            self._finish_shard(shard_id)
            return
        try:
            manifest = load_manifest(st.manifest_path)
            if manifest.sha256 != manifest_sha:
                raise ManifestError(
                    f"the manifest changed since planning ({manifest_sha[:12]} -> {manifest.sha256[:12]})"
                )
        except ManifestError as exc:
            with transaction(self.sessions) as s:
                shard = s.get(Shard, shard_id)
                self._fail_shard(
                    s,
                    shard.submission,
                    shard,
                    "platform",
                    reason="the platform's evaluation manifest is unusable",
                    admin_detail=str(exc),
                )
            return
        by_id = manifest.by_id()
        ids = sorted({p[0] for p in remaining})
        spec = ShardSpec(
            submission_id=source.submission_id,
            shard_index=index,
            instances=[by_id[i] for i in ids],
            episodes=[(p[0], int(p[1])) for p in remaining],
            seed=st.episode_seed,
            max_steps=st.max_steps,
            protocol=source.protocol,
            request_timeout_s=st.request_timeout_s,
            episode_budget_s=st.episode_budget_s,
            startup_timeout_s=st.validation_health_timeout_s,
            restart_wait_s=st.policy_restart_wait_s,
            streams=streams,
        )
        callbacks = _ShardCallbacks(self, shard_id, source.submission_id)
        try:
            with self._policy_lock:  # the idle hook must not remove what this shard is about to use
                self._release_policies(keep=source.submission_id)
            outcome = self.backend.run_shard(source, spec, callbacks, st.shard_time_limit_s(len(remaining)))
        except Exception as exc:  # noqa: BLE001 - an infrastructure fault: bounded retries
            log.exception("shard %s failed", shard_id)
            outcome = ShardOutcome("infrastructure_error", "internal sandbox error", f"{exc.__class__.__name__}: {exc}")
        self._after_shard(shard_id, outcome, callbacks.platform_faults)
        if outcome.status in FRESH_POLICY_AFTER:
            self._release_policy_of(source.submission_id)
        self.release_idle_policies()

    def _release_policy_of(self, submission_id: str) -> None:
        """Remove this worker's node sandbox of ``submission_id`` now (its next shard attempt here
        starts a fresh policy container); an engine error is logged."""
        with self._policy_lock:
            try:
                self.backend.release_policy(submission_id)
            except SandboxError as exc:
                log.warning("could not remove the policy container of %s: %s", submission_id, exc)

    def _requested_streams(self) -> int:
        """``evaluator_streams``, else what the backend finds this node fits (1 when it cannot tell)."""
        if self.settings.evaluator_streams:
            return self.settings.evaluator_streams
        try:
            return self.backend.auto_streams()
        except SandboxError as exc:
            log.warning("%s; shards run one simulator stream", exc)
            return 1

    def release_idle_policies(self) -> list[str]:
        """Remove this worker's node sandboxes (policy containers kept between a submission's
        shards) that nothing will use: of a submission that is no longer running, or that has no
        shard queued and none running on this worker. Called after every shard and by the
        worker's heartbeat thread while it is idle; returns the submission ids released."""
        with self._policy_lock:
            return self._release_policies()

    def release_all_policies(self) -> list[str]:
        """Remove every node sandbox this worker holds, needed or not: before a validation (its
        policy container must not share the node's memory and GPU with another submission's idle
        one, or its failure there would be blamed on it) and when the worker shuts down (nothing
        else removes them until a worker starts again, :meth:`recover`). Returns the submission
        ids released."""
        with self._policy_lock:
            return self._release_policies(everything=True)

    def _release_policies(self, keep: str | None = None, everything: bool = False) -> list[str]:
        """Release the node sandboxes of every submission but ``keep`` (when given: a worker runs one
        shard at a time, and another submission's idle policy would hold its memory and GPU), all
        of them (``everything``), else of the submissions :meth:`release_idle_policies` names.
        Hold ``_policy_lock``."""
        try:
            held = self.backend.policy_submissions()
        except SandboxError as exc:
            log.warning("could not list this worker's policy containers: %s", exc)
            return []
        released = []
        for sid in sorted(held - {keep}):
            if keep is None and not everything and self._policy_needed(sid):
                continue
            try:
                self.backend.release_policy(sid)
                released.append(sid)
            except SandboxError as exc:
                log.warning("could not remove the policy container of %s: %s", sid, exc)
        return released

    def _policy_needed(self, submission_id: str) -> bool:
        with self.sessions() as s:
            if s.scalar(select(Submission.state).where(Submission.id == submission_id)) != S.running.value:
                return False
            return bool(
                s.scalar(
                    select(func.count())
                    .select_from(Shard)
                    .where(
                        Shard.submission_id == submission_id,
                        (Shard.state == ShardState.queued.value)
                        | ((Shard.state == ShardState.running.value) & (Shard.worker == self.worker)),
                    )
                )
            )

    def _after_shard(self, shard_id: int, outcome: ShardOutcome, platform_faults: int = 0) -> None:
        """Record how a shard attempt ended: done, cancelled, or retried (only its missing episodes
        run again) until ``max_stage_attempts``, when the submission fails. ``platform_faults``:
        episodes of this attempt the evaluator could not run for a reason charged to the platform
        (not stored, :data:`NOT_STORED_REASONS`).

        What the submitter may read of it is the hidden stage's (:mod:`liberopro_platform.disclosure`):
        the shard's events are ``[admin]`` ones, and a failure is told in the fixed vocabulary of
        :data:`~liberopro_platform.disclosure.HIDDEN_FAILURES`: the failure class of the policy's
        replies, the container's exit code and the shard's index stay with the admins."""
        st = self.settings
        retry = False
        with transaction(self.sessions) as s:
            shard = s.get(Shard, shard_id, with_for_update=True)
            sub = shard.submission
            # The policy's output on hidden instances is for admins only (it may echo instructions
            # or observations of the hidden stage): it stays with the shard, never in sub.policy_log.
            header = f"=== attempt {shard.attempts} ===\n"
            shard.policy_log = truncate_log(
                (shard.policy_log + "\n" if shard.policy_log else "")
                + header
                + (outcome.policy_log or "(no output)\n"),
                st.log_max_bytes,
            )
            stored = self._stored_pairs(s, sub.id, shard)
            if outcome.status == "completed" and stored >= shard.episodes_total:
                shard.state, shard.finished_at, shard.last_error = ShardState.done.value, self._now(), None
                add_event(s, sub, f"[admin] shard {shard.index}: done ({stored} episodes)")
                self._count_done(s, sub)
                finished = True
            elif outcome.status == "stopped" or sub.state != S.running.value:
                shard.state = ShardState.cancelled.value
                finished = False
            else:
                finished = False
                status = "missing" if outcome.status == "completed" else outcome.status
                # shard.last_error holds only text the platform wrote (admins read it); what the
                # evaluator or the policy said goes to the [admin] event with it.
                reason = {
                    "missing": f"the evaluator finished with {stored} of {shard.episodes_total} episodes stored"
                    + (f" ({platform_faults} not run for a platform fault)" if platform_faults else ""),
                    "timed_out": outcome.message,
                    "policy_error": outcome.message,
                    "infrastructure_error": "the platform could not run the evaluation (internal error)",
                }[status]
                shard.last_error = reason
                internal = (
                    f"shard {shard.index}, attempt {shard.attempts}: {reason}; {outcome.message}: "
                    f"{outcome.internal[-1500:]}"
                )
                add_event(s, sub, f"[admin] {internal[:3000]}")
                if shard.attempts >= st.max_stage_attempts:
                    self._fail_shard(s, sub, shard, failure_kind(status))
                else:
                    shard.state, shard.queued_at = ShardState.queued.value, self._now()
                    retry = True
            attempts = shard.attempts
            sub_id = sub.id
        if retry:
            self.enqueue.run_shard(shard_id, countdown=min(120.0, 5.0 * 2**attempts))
        if finished:
            self._maybe_aggregate(sub_id)

    @staticmethod
    def _count_done(s: Session, sub: Submission) -> None:
        """``sub.episodes_done``: the episodes of its finished shards (written once per shard, never
        per episode: a row written per episode would time the hidden episodes for the submitter)."""
        sub.episodes_done = sum(sh.episodes_total for sh in sub.shards if sh.state == ShardState.done.value)

    def _finish_shard(self, shard_id: int) -> None:
        with transaction(self.sessions) as s:
            shard = s.get(Shard, shard_id, with_for_update=True)
            shard.state, shard.finished_at = ShardState.done.value, self._now()
            add_event(s, shard.submission, f"[admin] shard {shard.index}: nothing left to run")
            self._count_done(s, shard.submission)
            sub_id = shard.submission_id
        self._maybe_aggregate(sub_id)

    @staticmethod
    def _stored_pairs(s: Session, submission_id: str, shard: Shard) -> int:
        stored = set(
            s.execute(
                select(Episode.instance_id, Episode.episode_index).where(Episode.submission_id == submission_id)
            ).all()
        )
        return sum((p[0], p[1]) in stored for p in shard.plan)

    def _fail_shard(
        self, s: Session, sub: Submission, shard: Shard, kind: str, admin_detail: str = "", reason: str = ""
    ) -> None:
        """Mark ``shard`` failed and, while ``sub`` is active, fail it with the hidden stage's
        fixed text of ``kind`` (:data:`~liberopro_platform.disclosure.HIDDEN_FAILURES`: policy,
        time or platform). ``reason`` and ``admin_detail`` go to an ``[admin]`` event; a platform
        failure is always one (``platform error``), for the admins to look at and requeue."""
        shard.state, shard.finished_at = ShardState.failed.value, self._now()
        if sub.state in ACTIVE_STATES:
            failure, fix = HIDDEN_FAILURES[kind]
            fail(s, sub, "evaluation", failure, fix)
        detail = "; ".join(x for x in (reason or shard.last_error or "", admin_detail) if x)
        prefix = "platform error" if kind == "platform" else "failed"
        add_event(s, sub, f"[admin] {prefix}: shard {shard.index} after {shard.attempts} attempts: {detail[:3000]}")

    def store_episode(self, shard_id: int, submission_id: str, record: EpisodeRecord) -> bool:
        """Store one episode unless it is already stored; True when it was new. Writes the
        episode and the shard's heartbeat only, never the submission's row (whose ``updated_at``
        the submitter reads)."""
        try:
            with transaction(self.sessions) as s:
                s.add(
                    Episode(
                        submission_id=submission_id,
                        shard_id=shard_id,
                        instance_id=record.instance_id,
                        episode_index=record.episode_index,
                        success=record.success,
                        termination_reason=str(record.termination_reason),
                        record=record.model_dump(mode="json"),
                    )
                )
                s.flush()
                s.execute(update(Shard).where(Shard.id == shard_id).values(heartbeat_at=self._now()))
        except IntegrityError:
            return False  # stored by an earlier attempt: the first record stands
        return True

    def _maybe_aggregate(self, submission_id: str) -> None:
        with transaction(self.sessions) as s:
            open_shards = s.scalar(
                select(func.count())
                .select_from(Shard)
                .where(Shard.submission_id == submission_id, Shard.state != ShardState.done.value)
            )
            if open_shards:
                return
            res = s.execute(
                update(Submission)
                .where(Submission.id == submission_id, Submission.state == S.running.value)
                .values(
                    state=S.aggregating.value, state_since=self._now(), message="aggregating: computing the summary"
                )
            )
            if res.rowcount != 1:
                return
            add_event(s, s.get(Submission, submission_id), "[admin] all shards done; aggregating")
        self.enqueue.aggregate(submission_id)

    # ------------------------------------------------------------------ aggregate + publish
    def aggregate(self, submission_id: str) -> None:
        """Stages 4 and 5: summarise the stored episodes and publish the result (once)."""
        from liberopro.results import EpisodeRecord, summarize
        from liberopro.schema.results import run_header

        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub is None or sub.state != S.aggregating.value:
                return
            if s.scalar(select(Result.id).where(Result.submission_id == sub.id)) is not None:
                set_state(s, sub, S.published, "published")
                return
            rows = s.scalars(
                select(Episode)
                .where(Episode.submission_id == sub.id)
                .order_by(Episode.instance_id, Episode.episode_index)
            ).all()
            records = [EpisodeRecord.model_validate(r.record) for r in rows]
            evaluators = [sh.evaluator for sh in sub.shards if sh.evaluator]
            versions = {e.get("evaluator_version") for e in evaluators}
            stacks = {repr(sorted((e.get("stack") or {}).items())) for e in evaluators}
            if len(versions) > 1 or len(stacks) > 1:
                fail(
                    s,
                    sub,
                    "aggregation",
                    "shards ran on different evaluator or simulator versions, so the result would not be comparable",
                    INTERNAL_FIX,
                )
                add_event(s, sub, f"[admin] evaluator versions {sorted(map(str, versions))}, stacks {sorted(stacks)}")
                return
            ev = evaluators[0] if evaluators else {"evaluator_version": None, "stack": {}}
            st = self.settings
            header = run_header(
                evaluator_version=ev["evaluator_version"],
                stack=ev["stack"],
                started=sub.created_at.isoformat(timespec="seconds"),
                finished=self._now().isoformat(timespec="seconds"),
                submission_id=sub.id,
                team=sub.team.name,
                policy={
                    "image_ref": sub.image_ref,
                    "image_digest": sub.image_digest,
                    "source": sub.source,
                    "protocol": sub.protocol,
                    "metadata": sub.policy_metadata,
                },
                settings={
                    "episodes_per_instance": st.episodes_per_instance,
                    "seed": st.episode_seed,
                    "max_steps": st.max_steps,
                    "request_timeout_s": st.request_timeout_s,
                    "episode_budget_s": st.episode_budget_s,
                    "backend": self.backend_name(),
                },
                manifest_sha256=sub.manifest_sha256,
                instances=len({r.instance_id for r in records}),
            )
            summary = summarize(records, header)
            s.add(
                Result(
                    submission_id=sub.id,
                    team_id=sub.team_id,
                    team_name=sub.team.name,
                    policy_name=sub.policy_name or "unnamed",
                    image_digest=sub.image_digest or "",
                    spec_version=sub.spec_version or "",
                    evaluator_version=str(ev["evaluator_version"]),
                    stack=ev["stack"] or {},
                    manifest_sha256=sub.manifest_sha256 or "",
                    summary=summary.to_json(),
                )
            )
            nominal = summary.case("nominal")
            headline = (
                f"; nominal success rate {100 * nominal.success_rate:.1f}%"
                if nominal and nominal.success_rate is not None
                else ""
            )
            set_state(s, sub, S.published, f"published: {len(records)} episodes{headline}")

    def backend_name(self) -> str:
        return self.settings.backend

    # ------------------------------------------------------------------ cancel, requeue
    def cancel(self, session: Session, sub: Submission, by: str) -> None:
        """Cancel ``sub`` (running shards stop within seconds and their sandboxes are removed)."""
        set_state(session, sub, S.cancelled, f"cancelled by {by}")
        for shard in sub.shards:
            if shard.state in (ShardState.queued.value, ShardState.running.value):
                shard.state = ShardState.cancelled.value

    def requeue(self, submission_id: str, by: str) -> str:
        """Restart ``submission_id`` from where it stopped: validation if it never passed, else
        its unfinished shards (stored episodes are kept). Returns what was done."""
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub.state == S.published.value:
                raise ValueError("the submission is published; nothing to requeue")
            sub.requeues += 1
            sub.failure = sub.fix = sub.failure_stage = sub.stuck_reason = sub.finished_at = None
            if not sub.shards:
                set_state(s, sub, S.queued, f"requeued by {by}: validation will run again", attempts=0)
                action, ids = "validation", []
            elif all(sh.state == ShardState.done.value for sh in sub.shards):
                set_state(s, sub, S.running, f"requeued by {by}: aggregating again")
                action, ids = "aggregate", []
            else:
                ids = []
                for sh in sub.shards:
                    if sh.state != ShardState.done.value:
                        sh.state, sh.attempts, sh.worker = ShardState.queued.value, 0, None
                        sh.queued_at = self._now()
                        ids.append(sh.id)
                set_state(s, sub, S.running, f"requeued by {by}: {len(ids)} shards will run their missing episodes")
                action = f"{len(ids)} shards"
        if action == "validation":
            self.enqueue.validate(submission_id)
        elif action == "aggregate":
            self._maybe_aggregate(submission_id)
        for i in ids:
            self.enqueue.run_shard(i)
        return action

    # ------------------------------------------------------------------ stuck detection
    def find_stuck(self, session: Session, broker: BrokerView | None = None) -> list[Stuck]:
        """Every active submission that is not moving as it should, with the reason.

        - a claim (validation, shard) whose heartbeat is older than ``heartbeat_stale_s``:
          ``requeue_*``; aggregation over ``aggregate_time_limit_s`` while not waiting in the
          broker: ``requeue_aggregate``;
        - with ``broker`` (what the broker holds, read by the sweep): a queued validation or shard,
          or an aggregation, whose task message the broker does not hold although it was sent
          more than ``resend_grace_s`` ago: ``resend_*`` (the message was lost, e.g. by a Redis
          restart; a re-sent task that was merely waiting is a no-op, every stage is idempotent).
          Without it (the API's status), queued work older than ``queue_stale_s`` while live
          workers run nothing is reported (and requeued, if the sweep could not read the broker);
        - work waiting on a queue that no live worker serves (rows of ``worker_heartbeats``):
          ``wait``, with the last worker seen.
        """
        st, now = self.settings, self._now()
        grace = dt.timedelta(seconds=st.resend_grace_s)
        out: list[Stuck] = []
        subs = session.scalars(
            select(Submission).where(Submission.state.in_(ACTIVE_STATES)).order_by(Submission.created_at)
        ).all()
        any_live_shard = any(
            not self._stale(sh.heartbeat_at)
            for sh in session.scalars(select(Shard).where(Shard.state == ShardState.running.value))
        )
        rows = all_rows(session)
        live = [r for r in rows if is_live(r, now, st.heartbeat_stale_s)]
        no_sandbox = None if any(r.serves(SHARDS) for r in live) else describe_absence(rows, SHARDS, now)
        no_control = None if any(r.serves(CONTROL) for r in live) else describe_absence(rows, CONTROL, now)

        def lost(kind: str, arg: object, sent: dt.datetime, fresh_only: bool = True) -> bool:
            return (
                broker is not None
                and now - sent > grace
                and not broker.holds(kind, arg, now - grace if fresh_only else None)
            )

        for sub in subs:
            age = (now - sub.created_at).total_seconds()
            in_state = (now - sub.state_since).total_seconds()
            if age > st.submission_time_limit_s:
                out.append(
                    Stuck(
                        sub.id,
                        sub.state,
                        f"the submission did not finish within the platform's total "
                        f"time limit ({st.submission_time_limit_s / 3600:.0f} h)",
                        "fail",
                    )
                )
                continue
            waits_on = None
            if sub.state == S.queued.value:
                waits_on = no_sandbox
                if lost("validate", sub.id, sub.state_since):
                    out.append(
                        Stuck(
                            sub.id,
                            sub.state,
                            "its validation task was not in the broker (lost, e.g. by a broker restart); sent again",
                            "resend_validation",
                        )
                    )
                elif (
                    broker is None
                    and not no_sandbox
                    and in_state > st.queue_stale_s
                    and queue_position(session, sub) == 0
                ):
                    out.append(
                        Stuck(
                            sub.id,
                            sub.state,
                            f"no worker picked it up for {in_state / 60:.0f} min "
                            "although nothing is ahead of it in the queue (the task was lost?)",
                            "requeue_validation",
                        )
                    )
            elif sub.state == S.validating.value and self._stale(sub.heartbeat_at):
                waits_on = no_sandbox
                out.append(
                    Stuck(
                        sub.id,
                        sub.state,
                        f"the worker validating it ({sub.worker}) stopped reporting {_ago(now, sub.heartbeat_at)}",
                        "requeue_validation",
                    )
                )
            elif sub.state == S.aggregating.value:
                waits_on = no_control
                if lost("aggregate", sub.id, sub.state_since, fresh_only=False):
                    out.append(
                        Stuck(
                            sub.id,
                            sub.state,
                            "its aggregation task was not in the broker (lost, e.g. by a broker restart); sent again",
                            "resend_aggregate",
                        )
                    )
                elif (
                    in_state > st.aggregate_time_limit_s
                    and not (broker and ("aggregate", sub.id) in broker.waiting)
                    and not no_control
                ):
                    out.append(
                        Stuck(
                            sub.id,
                            sub.state,
                            f"aggregation did not finish within {st.aggregate_time_limit_s:.0f} s",
                            "requeue_aggregate",
                        )
                    )
            elif sub.state == S.running.value:
                for sh in sub.shards:
                    if sh.state == ShardState.running.value and self._stale(sh.heartbeat_at):
                        waits_on = no_sandbox
                        out.append(
                            Stuck(
                                sub.id,
                                sub.state,
                                f"shard {sh.index}: its worker ({sh.worker}) stopped "
                                f"reporting {_ago(now, sh.heartbeat_at)}",
                                "requeue_shard",
                                sh.id,
                                f"the worker running one of its shards ({sh.worker}) stopped reporting "
                                f"{_ago(now, sh.heartbeat_at)}; the shard is requeued (stored episodes are kept)",
                            )
                        )
                    elif sh.state == ShardState.queued.value:
                        waits_on = no_sandbox
                        last = max([t for t in (sh.heartbeat_at, sub.state_since) if t is not None])
                        if lost("run_shard", sh.id, last):
                            out.append(
                                Stuck(
                                    sub.id,
                                    sub.state,
                                    f"shard {sh.index}: its task was not in the broker "
                                    "(lost, e.g. by a broker restart); sent again",
                                    "resend_shard",
                                    sh.id,
                                    "the task of one of its shards was not in the broker (lost, e.g. by a broker "
                                    "restart); sent again",
                                )
                            )
                        elif (
                            broker is None
                            and not no_sandbox
                            and in_state > st.queue_stale_s
                            and not any_live_shard
                            and (now - last).total_seconds() > st.queue_stale_s
                        ):
                            out.append(
                                Stuck(
                                    sub.id,
                                    sub.state,
                                    f"shard {sh.index} has waited "
                                    f"{(now - last).total_seconds() / 60:.0f} min while no worker runs any "
                                    "shard (the task was lost?)",
                                    "requeue_shard",
                                    sh.id,
                                    f"one of its shards has waited {(now - last).total_seconds() / 60:.0f} min while "
                                    "no worker runs any shard (the task was lost?); requeued",
                                )
                            )
            if waits_on:
                out.append(Stuck(sub.id, sub.state, waits_on, "wait"))
        return out

    def sweep_stuck(self) -> list[Stuck]:
        """Act on :meth:`find_stuck` with what the broker holds: re-send lost task messages (free,
        not counted), requeue work whose claim went stale (counted in ``requeues``, and a
        submission requeued ``3 * max_stage_attempts`` times fails with the reason) or fail it.
        The reasons are stored in ``stuck_reason`` for the submitter to read (and cleared once
        the submission moves again); each new reason is also an event."""
        broker = None
        try:
            pending = getattr(self.enqueue, "pending", None)  # test doubles may not inspect a broker
            broker = pending() if pending is not None else None
        except Exception as exc:  # noqa: BLE001 - the sweep must go on without the broker's view
            log.warning("sweep: could not inspect the broker: %r", exc)
        with transaction(self.sessions) as s:
            found = self.find_stuck(s, broker)
            reasons: dict[str, list[Stuck]] = {}
            for st in found:
                reasons.setdefault(st.submission_id, []).append(st)
            for sid, items in reasons.items():
                sub = s.get(Submission, sid)
                text = "; ".join(dict.fromkeys(x.public for x in items))
                if sub.stuck_reason != text:
                    add_event(s, sub, f"stuck: {text}")
                    if any(x.shown for x in items):
                        add_event(s, sub, "[admin] stuck: " + "; ".join(x.reason for x in items))
                sub.stuck_reason = text
            s.execute(
                update(Submission)
                .where(
                    Submission.state.in_(ACTIVE_STATES),
                    Submission.stuck_reason.isnot(None),
                    Submission.id.notin_(list(reasons) or [""]),
                )
                .values(stuck_reason=None)
            )
            for st in found:
                sub = s.get(Submission, st.submission_id)
                if S(sub.state).final:
                    continue
                if st.action == "fail" or (
                    st.action.startswith("requeue_") and sub.requeues >= 3 * self.settings.max_stage_attempts
                ):
                    if sub.state in (S.running.value, S.aggregating.value):  # the hidden stage: fixed words
                        fail(s, sub, "evaluation", *HIDDEN_FAILURES["total" if st.action == "fail" else "platform"])
                        add_event(s, sub, f"[admin] stuck: {st.reason}")
                    else:
                        fail(s, sub, sub.state, f"stuck: {st.public}", INTERNAL_FIX)
                elif st.action == "requeue_validation":
                    sub.requeues += 1
                    set_state(s, sub, S.queued, f"requeued after: {st.public}", worker=None)
                elif st.action == "requeue_shard":
                    sub.requeues += 1
                    sh = s.get(Shard, st.shard_id)
                    sh.state, sh.worker, sh.queued_at = ShardState.queued.value, None, self._now()
                elif st.action == "requeue_aggregate":
                    sub.requeues += 1
                    sub.state_since = self._now()
            final = {sid for sid in reasons if S(s.get(Submission, sid).state).final}
            self._remove_finished_uploads(s)
        for st in found:
            if st.submission_id in final:
                continue
            if st.action in ("requeue_validation", "resend_validation"):
                self.enqueue.validate(st.submission_id)
            elif st.action in ("requeue_shard", "resend_shard") and st.shard_id is not None:
                self.enqueue.run_shard(st.shard_id)
            elif st.action in ("requeue_aggregate", "resend_aggregate"):
                self.enqueue.aggregate(st.submission_id)
        return found

    def _remove_finished_uploads(self, s) -> None:
        """Remove the uploaded archives kept for shards on other nodes (``keep_uploads_until_done``)
        of submissions that have ended; their rows forget the path."""
        for sub in s.scalars(
            select(Submission).where(Submission.state.in_(FINAL_STATES), Submission.upload_path.isnot(None))
        ):
            _remove_quietly(sub.upload_path)
            sub.upload_path = None

    # ------------------------------------------------------------------ crash recovery
    def _gone_owners(self) -> tuple[set[str], set[str]]:
        """(owners of sandboxes on this engine, gone workers other than this one): a worker that
        labels sandboxes here or serves shards by its row, whose row is stopped, stale or
        absent and none of whose claims has a fresh heartbeat (:meth:`recover`)."""
        now, stale_s = self._now(), self.settings.heartbeat_stale_s
        on_engine: set[str] = set()
        try:
            on_engine = set(self.backend.owners())
        except SandboxError as exc:
            log.error("recovery: could not list the sandboxes' owners: %s", exc)
        with self.sessions() as s:
            rows = {r.name: r for r in all_rows(s)}
            claims = s.execute(select(Shard.worker, Shard.heartbeat_at).where(Shard.state == ShardState.running.value))
            vals = s.execute(
                select(Submission.worker, Submission.heartbeat_at).where(Submission.state == S.validating.value)
            )
            busy = {w for w, at in [*claims, *vals] if w and not self._stale(at)}
        candidates = on_engine | {n for n, r in rows.items() if r.serves(SHARDS)}
        gone = {
            n
            for n in candidates - {self.worker}
            if not (n in rows and is_live(rows[n], now, stale_s)) and n not in busy
        }
        return on_engine, gone

    def _sweep_owners(self, owners: list[str]) -> int:
        swept = 0
        for owner in owners:
            try:
                swept += self.backend.sweep(owner)
            except SandboxError as exc:
                log.error("recovery: could not sweep the sandboxes of %s: %s", owner, exc)
        return swept

    def idle(self) -> dict[str, Any]:
        """The shards worker's idle hook (every minute while no task runs, beside the heartbeat):
        release the node sandboxes nothing will use (:meth:`release_idle_policies`) and remove
        the sandboxes that gone workers left on this engine (the rule of :meth:`recover`, which
        otherwise runs only when a worker starts: a worker killed and replaced under a new name
        within ``heartbeat_stale_s`` left its policy container, with its memory and GPUs, until the
        next start). Their work is the stuck sweep's (stale claims are requeued there). Returns
        ``{"released", "swept"}``."""
        released = self.release_idle_policies()
        on_engine, gone = self._gone_owners()
        swept = self._sweep_owners(sorted(gone & on_engine))
        if swept:
            log.warning(
                "%s: removed %d sandbox resources of gone owners %s", self.worker, swept, sorted(gone & on_engine)
            )
        return {"released": released, "swept": swept}

    def recover(self) -> dict[str, Any]:
        """At worker start: find the owners that are gone, remove the sandboxes they left on this
        engine and requeue the shards and validations they held (stored episodes are kept).

        Gone are this worker's own name (a killed predecessor of the same name) and every other
        worker that either labels sandboxes on this engine or has a row in ``worker_heartbeats``,
        whose row is stopped, stale (``heartbeat_stale_s``) or absent, and none of whose claims
        has a fresh heartbeat. Rows of gone workers are deleted once cleaned up, rows silent for
        a week too. Returns ``{"swept", "shards", "validations", "gone"}``.
        """
        now = self._now()
        on_engine, gone = self._gone_owners()
        gone |= {self.worker}
        swept = self._sweep_owners(sorted(o for o in gone if o == self.worker or o in on_engine))
        shard_ids, sub_ids = [], []
        with transaction(self.sessions) as s:

            def why(owner: str | None) -> str:
                if owner == self.worker:
                    return f"its worker {owner} restarted"
                return f"its worker {owner} is gone (no heartbeat); {self.worker} took over"

            for sh in s.scalars(select(Shard).where(Shard.state == ShardState.running.value, Shard.worker.in_(gone))):
                add_event(
                    s, sh.submission, f"[admin] shard {sh.index}: {why(sh.worker)}; requeued (stored episodes are kept)"
                )
                sh.state, sh.worker, sh.queued_at = ShardState.queued.value, None, now
                shard_ids.append(sh.id)
            for sub in s.scalars(
                select(Submission).where(Submission.state == S.validating.value, Submission.worker.in_(gone))
            ):
                set_state(s, sub, S.queued, f"{why(sub.worker)}; validation requeued", worker=None)
                sub_ids.append(sub.id)
            s.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name.in_(gone - {self.worker})))
            s.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.beat_at < now - dt.timedelta(days=7)))
        for i in shard_ids:
            self.enqueue.run_shard(i)
        for i in sub_ids:
            self.enqueue.validate(i)
        others = sorted(gone - {self.worker})
        if swept or shard_ids or sub_ids or others:
            log.warning(
                "recovery of %s: owners gone %s, %d sandbox resources removed, %d shards and %d validations requeued",
                self.worker,
                others,
                swept,
                len(shard_ids),
                len(sub_ids),
            )
        return {"swept": swept, "shards": len(shard_ids), "validations": len(sub_ids), "gone": others}


def max_concurrent_episodes(metadata: dict[str, Any] | None) -> int | None:
    """What a policy declared it runs at once (``max_concurrent_episodes`` of its ``/metadata`` at
    validation, stored on the submission); None when it declared none (spec 1.0) or nothing was
    recorded. The streams of a shard follow from it by :func:`liberopro.schema.shard.shard_streams`."""
    declared = (metadata or {}).get("max_concurrent_episodes")
    return int(declared) if declared else None


#: Shard outcomes after which the submission's policy container on the worker is not reused: the
#: attempt failed as a whole (the policy never answered, the shard ran out of time, the sandbox
#: broke), so a policy server that hung or broke (Running to the engine, deadlocked inside) must
#: not serve the retry as well. Before the node sandbox every attempt had a fresh container.
FRESH_POLICY_AFTER = frozenset({"policy_error", "timed_out", "infrastructure_error"})

#: Termination reasons charged to the platform (:mod:`liberopro.schema.reasons`, side ``platform``:
#: ``evaluator_error``, a fault of the evaluator that no action of the policy causes;
#: ``worker_crashed``, a simulator stream process that died twice). They are never scored: an
#: episode is stored once and for good, so such a record is not stored, the episode stays missing
#: and the shard's next attempt runs it; when it still fails after ``max_stage_attempts`` the
#: submission ends as a platform error, never with a lower score (docs/platform.md, "Who is
#: charged with an episode").
NOT_STORED_REASONS = reasons_of(Side.platform)


class _ShardCallbacks:
    """Stores what the sandbox reports while a shard runs (each call in its own transaction)."""

    def __init__(self, pipeline: Pipeline, shard_id: int, submission_id: str) -> None:
        self.p = pipeline
        self.shard_id = shard_id
        self.submission_id = submission_id
        #: Episodes of this attempt not stored because their reason is the platform's.
        self.platform_faults = 0

    def on_hello(self, info: dict[str, Any]) -> None:
        with transaction(self.p.sessions) as s:
            s.execute(update(Shard).where(Shard.id == self.shard_id).values(evaluator=info))

    def on_metadata(self, metadata: dict[str, Any]) -> None:
        pass

    def on_record(self, record: EpisodeRecord) -> None:
        """Store the episode, unless the evaluator could not run it (:data:`NOT_STORED_REASONS`:
        the platform's fault, not the policy's): then it stays missing, an [admin] event says
        why, and the shard's next attempt runs it again."""
        reason = record.termination_reason
        if reason in NOT_STORED_REASONS:
            self.platform_faults += 1
            with transaction(self.p.sessions) as s:
                sub = s.get(Submission, self.submission_id)
                add_event(
                    s,
                    sub,
                    f"[admin] episode {record.instance_id}#{record.episode_index} not stored: "
                    f"{reason}: {(record.detail or '')[:500]}",
                )
            return
        self.p.store_episode(self.shard_id, self.submission_id, record)

    def heartbeat(self) -> None:
        with transaction(self.p.sessions) as s:
            s.execute(update(Shard).where(Shard.id == self.shard_id).values(heartbeat_at=utcnow()))

    def should_stop(self) -> bool:
        with self.p.sessions() as s:
            state = s.scalar(select(Submission.state).where(Submission.id == self.submission_id))
        return state != S.running.value


def _ago(now: dt.datetime, at: dt.datetime | None) -> str:
    if at is None:
        return "(never reported)"
    return f"{(now - at).total_seconds() / 60:.1f} min ago (last heartbeat {at:%H:%M:%S} UTC)"


def _remove_quietly(path: str) -> None:
    import os

    try:
        os.remove(path)
    except OSError:
        pass
