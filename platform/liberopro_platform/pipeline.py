"""The submission pipeline as plain functions over the database: validate -> plan shards ->
run shards -> aggregate -> publish, plus cancel, requeue, stuck detection and crash recovery.

Celery tasks (:mod:`liberopro_platform.tasks`) only call these; each stage hands over to the
next through an :class:`Enqueue`. Every stage is idempotent: a duplicate or redelivered task
finds the work claimed or done and returns. Claims are compare-and-set updates with a
heartbeat; a claim whose heartbeat went stale may be taken over.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from liberopro_platform.config import Settings
from liberopro_platform.db import transaction
from liberopro_platform.evaluator_entry import ShardSpec
from liberopro_platform.manifest import ManifestError, load_manifest, plan_shards
from liberopro_platform.models import (
    ACTIVE_STATES,
    Episode,
    Result,
    Shard,
    ShardState,
    Submission,
    SubmissionEvent,
    SubmissionState,
    utcnow,
)
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
INTERNAL_FIX = "nothing to change on your side: the platform's admins can see the details and requeue it"


class Enqueue(Protocol):
    """How a stage hands work to the next one (Celery in production)."""

    def validate(self, submission_id: str, countdown: float = 0) -> None: ...
    def run_shard(self, shard_id: int, countdown: float = 0) -> None: ...
    def aggregate(self, submission_id: str, countdown: float = 0) -> None: ...


def add_event(session: Session, sub: Submission, message: str) -> None:
    session.add(SubmissionEvent(submission_id=sub.id, state=sub.state, message=message))


def set_state(session: Session, sub: Submission, state: SubmissionState, message: str, **fields: Any) -> None:
    """Move ``sub`` to ``state`` with ``message`` (shown to the submitter) and log the event."""
    now = utcnow()
    if sub.state != state.value:
        sub.state_since = now
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
    return session.scalar(select(func.count()).select_from(Submission).where(
        Submission.state.in_(ACTIVE_STATES), Submission.created_at < sub.created_at)) or 0


@dataclass
class Stuck:
    """A submission that has not moved as it should: why, and what the sweep does about it."""

    submission_id: str
    state: str
    reason: str
    action: str  # requeue_validation | requeue_shard | requeue_aggregate | fail
    shard_id: int | None = None


class Pipeline:
    """The pipeline of one worker process (``worker`` names it in claims and sandbox labels)."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session], enqueue: Enqueue, worker: str,
                 backend: SandboxBackend | None = None) -> None:
        self.settings = settings
        self.sessions = sessions
        self.enqueue = enqueue
        self.worker = worker
        self._backend: SandboxBackend | None = backend

    @property
    def backend(self) -> SandboxBackend:
        """The sandbox backend, made on first use (a Docker engine that is down fails here, not at import)."""
        if self._backend is None:
            from liberopro_platform.sandbox import make_backend

            self._backend = make_backend(self.settings, self.worker)
        return self._backend

    def _now(self) -> dt.datetime:
        return utcnow()

    def _stale(self, at: dt.datetime | None) -> bool:
        return at is None or (self._now() - at).total_seconds() > self.settings.heartbeat_stale_s

    # ------------------------------------------------------------------ validation
    def validate(self, submission_id: str) -> None:
        """Stage 1: pin and check the image, start it alone, run the conformance check; then plan."""
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub is None or sub.state in (S.published.value, S.failed.value, S.cancelled.value,
                                            S.running.value, S.aggregating.value):
                return
            if sub.state == S.validating.value and not self._stale(sub.heartbeat_at):
                return  # another worker is on it
            if sub.attempts >= self.settings.max_stage_attempts:
                fail(s, sub, "validation", f"validation was attempted {sub.attempts} times without finishing",
                     INTERNAL_FIX)
                return
            set_state(s, sub, S.validating, "validating: checking the image", worker=self.worker,
                      heartbeat_at=self._now(), attempts=sub.attempts + 1, stuck_reason=None)
            source = PolicySource(submission_id=sub.id, image=sub.image_digest or sub.image_ref,
                                  command=sub.policy_command, protocol=sub.protocol)
            upload = sub.upload_path if not sub.image_digest else None
        try:
            backend = self.backend
            prepared = backend.prepare(source, upload)
            if prepared is not None:
                from submission_spec.transports import protocol_from_labels

                source = PolicySource(submission_id=submission_id, image=prepared.digest,
                                      protocol=protocol_from_labels(prepared.labels))
                with transaction(self.sessions) as s:
                    sub = s.get(Submission, submission_id)
                    sub.image_digest, sub.image_size = prepared.digest, prepared.size
                    sub.protocol = source.protocol
                    set_state(s, sub, S.validating, f"validating: image {prepared.digest[:19]} "
                              f"({prepared.size / 2**30:.2f} GiB) started in the sandbox, conformance check running")
                if upload:
                    _remove_quietly(upload)
            outcome = backend.validate(source, lambda: self._beat_submission(submission_id))
        except PolicyRejected as exc:
            with transaction(self.sessions) as s:
                fail(s, s.get(Submission, submission_id), "validation", exc.failure, exc.fix)
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
                fail(s, sub, "validation", "the platform could not validate the image (internal error, "
                     f"{sub.attempts} attempts)", INTERNAL_FIX)
                add_event(s, sub, f"[admin] last error: {detail[:2000]}")
                return
            set_state(s, sub, S.queued, f"validation will be retried after a platform error "
                      f"(attempt {sub.attempts} of {self.settings.max_stage_attempts})", worker=None)
            add_event(s, sub, f"[admin] {detail[:2000]}")
        self.enqueue.validate(submission_id, countdown=min(60.0, 5.0 * 2 ** sub.attempts))

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
            rows = [Shard(submission_id=sub.id, index=i, plan=pairs, episodes_total=len(pairs))
                    for i, pairs in enumerate(shards)]
            s.add_all(rows)
            total = sum(len(p) for p in shards)
            set_state(s, sub, S.running, f"running: 0 of {total} episodes done ({len(shards)} shards)",
                      manifest_sha256=manifest.sha256, episodes_total=total, episodes_done=0, attempts=0)
            s.flush()
            shard_ids = [sh.id for sh in rows]
        for shard_id in shard_ids:
            self.enqueue.run_shard(shard_id)

    # ------------------------------------------------------------------ shards
    def run_shard(self, shard_id: int) -> None:
        """Stage 3: run the shard's missing episodes in a fresh sandbox and store each one."""
        st = self.settings
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
                if shard.state == ShardState.running.value and not self._stale(shard.heartbeat_at) \
                        and shard.worker != self.worker:
                    return  # another worker holds a live claim
                if shard.attempts >= st.max_stage_attempts:
                    self._fail_shard(s, sub, shard, f"shard {shard.index} was attempted {shard.attempts} times "
                                     f"without finishing; last: {shard.last_error or 'no error recorded'}")
                    return
                shard.state = ShardState.running.value
                shard.worker = self.worker
                shard.attempts += 1
                shard.heartbeat_at = shard.started_at = self._now()
                stored = set(s.execute(select(Episode.instance_id, Episode.episode_index)
                                       .where(Episode.submission_id == sub.id)).all())
                remaining = [p for p in shard.plan if (p[0], p[1]) not in stored]
                source = PolicySource(submission_id=sub.id, image=sub.image_digest, command=sub.policy_command,
                                      protocol=sub.protocol)
                attempt, index, manifest_sha = shard.attempts, shard.index, sub.manifest_sha256
                add_event(s, sub, f"shard {index}: attempt {attempt} started on {self.worker}, "
                          f"{len(remaining)} of {shard.episodes_total} episodes to run")
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
                raise ManifestError(f"the manifest changed since planning ({manifest_sha[:12]} -> {manifest.sha256[:12]})")
        except ManifestError as exc:
            with transaction(self.sessions) as s:
                shard = s.get(Shard, shard_id)
                self._fail_shard(s, shard.submission, shard, "the platform's evaluation manifest is unusable",
                                 admin_detail=str(exc))
            return
        by_id = manifest.by_id()
        ids = sorted({p[0] for p in remaining})
        spec = ShardSpec(
            submission_id=source.submission_id, shard_index=index, instances=[by_id[i] for i in ids],
            episodes=[(p[0], int(p[1])) for p in remaining], seed=st.episode_seed, max_steps=st.max_steps,
            protocol=source.protocol, request_timeout_s=st.request_timeout_s, episode_budget_s=st.episode_budget_s,
            startup_timeout_s=st.validation_health_timeout_s, restart_wait_s=st.policy_restart_wait_s,
        )
        callbacks = _ShardCallbacks(self, shard_id, source.submission_id)
        try:
            outcome = self.backend.run_shard(source, spec, callbacks, st.shard_time_limit_s(len(remaining)))
        except Exception as exc:  # noqa: BLE001 - an infrastructure fault: bounded retries
            log.exception("shard %s failed", shard_id)
            outcome = ShardOutcome("infrastructure_error", "internal sandbox error", f"{exc.__class__.__name__}: {exc}")
        self._after_shard(shard_id, outcome)

    def _after_shard(self, shard_id: int, outcome: ShardOutcome) -> None:
        st = self.settings
        retry = False
        with transaction(self.sessions) as s:
            shard = s.get(Shard, shard_id, with_for_update=True)
            sub = shard.submission
            # The policy's output on hidden instances is for admins only (it may echo instructions
            # or observations of the hidden stage): it stays with the shard, never in sub.policy_log.
            header = f"=== attempt {shard.attempts} ===\n"
            shard.policy_log = truncate_log((shard.policy_log + "\n" if shard.policy_log else "") + header
                                            + (outcome.policy_log or "(no output)\n"), st.log_max_bytes)
            stored = self._stored_pairs(s, sub.id, shard)
            if outcome.status == "completed" and stored >= shard.episodes_total:
                shard.state, shard.finished_at, shard.last_error = ShardState.done.value, self._now(), None
                add_event(s, sub, f"shard {shard.index}: done ({stored} episodes)")
                finished = True
            elif outcome.status == "stopped" or sub.state != S.running.value:
                shard.state = ShardState.cancelled.value
                finished = False
            else:
                finished = False
                # shard.last_error holds only text the platform wrote (it may reach the submitter);
                # what the evaluator or the policy said goes to an [admin] event.
                reason = {
                    "completed": f"the evaluator finished with {stored} of {shard.episodes_total} episodes stored",
                    "timed_out": outcome.message, "policy_error": outcome.message,
                    "infrastructure_error": "the platform could not run the evaluation (internal error)",
                }[outcome.status]
                shard.last_error = reason
                internal = f"shard {shard.index}, attempt {shard.attempts}: {outcome.message}: {outcome.internal[-1500:]}"
                if shard.attempts >= st.max_stage_attempts:
                    self._fail_shard(s, sub, shard, f"shard {shard.index} failed {shard.attempts} times: {reason}",
                                     admin_detail=internal)
                else:
                    shard.state = ShardState.queued.value
                    add_event(s, sub, f"shard {shard.index}: attempt {shard.attempts} ended ({outcome.status}); "
                              f"retrying, only missing episodes will run")
                    if outcome.status in ("infrastructure_error", "policy_error"):
                        add_event(s, sub, f"[admin] {internal[:3000]}")
                    retry = True
            attempts = shard.attempts
            sub_id = sub.id
        if retry:
            self.enqueue.run_shard(shard_id, countdown=min(120.0, 5.0 * 2 ** attempts))
        if finished:
            self._maybe_aggregate(sub_id)

    def _finish_shard(self, shard_id: int) -> None:
        with transaction(self.sessions) as s:
            shard = s.get(Shard, shard_id, with_for_update=True)
            shard.state, shard.finished_at = ShardState.done.value, self._now()
            add_event(s, shard.submission, f"shard {shard.index}: nothing left to run")
            sub_id = shard.submission_id
        self._maybe_aggregate(sub_id)

    @staticmethod
    def _stored_pairs(s: Session, submission_id: str, shard: Shard) -> int:
        stored = set(s.execute(select(Episode.instance_id, Episode.episode_index)
                               .where(Episode.submission_id == submission_id)).all())
        return sum((p[0], p[1]) in stored for p in shard.plan)

    def _fail_shard(self, s: Session, sub: Submission, shard: Shard, failure: str, admin_detail: str = "") -> None:
        shard.state, shard.finished_at = ShardState.failed.value, self._now()
        if sub.state in ACTIVE_STATES:
            fix = ("check the termination reasons and run your image against the evaluator locally (`liberopro "
                   "evaluate --policy URL`, docs/evaluator.md): the policy's output on the hidden instances is not "
                   f"shown; the platform runs each shard at most {self.settings.max_stage_attempts} times")
            fail(s, sub, "evaluation", failure, fix)
        if admin_detail:
            add_event(s, sub, f"[admin] {admin_detail[:3000]}")

    def store_episode(self, shard_id: int, submission_id: str, record: dict[str, Any]) -> bool:
        """Store one episode unless it is already stored; True when it was new."""
        try:
            with transaction(self.sessions) as s:
                s.add(Episode(submission_id=submission_id, shard_id=shard_id, instance_id=record["instance_id"],
                              episode_index=int(record["episode_index"]), success=bool(record["success"]),
                              termination_reason=str(record["termination_reason"]), record=record))
        except IntegrityError:
            return False  # stored by an earlier attempt: the first record stands
        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id)
            done = s.scalar(select(func.count()).select_from(Episode).where(Episode.submission_id == submission_id))
            sub.episodes_done = done
            if sub.state == S.running.value:
                sub.message = f"running: {done} of {sub.episodes_total} episodes done"
            s.execute(update(Shard).where(Shard.id == shard_id).values(heartbeat_at=self._now()))
        return True

    def _maybe_aggregate(self, submission_id: str) -> None:
        with transaction(self.sessions) as s:
            open_shards = s.scalar(select(func.count()).select_from(Shard).where(
                Shard.submission_id == submission_id, Shard.state != ShardState.done.value))
            if open_shards:
                return
            res = s.execute(update(Submission).where(Submission.id == submission_id,
                                                     Submission.state == S.running.value)
                            .values(state=S.aggregating.value, state_since=self._now(),
                                    message="aggregating: computing the summary"))
            if res.rowcount != 1:
                return
            add_event(s, s.get(Submission, submission_id), "all shards done; aggregating")
        self.enqueue.aggregate(submission_id)

    # ------------------------------------------------------------------ aggregate + publish
    def aggregate(self, submission_id: str) -> None:
        """Stages 4 and 5: summarise the stored episodes and publish the result (once)."""
        from liberopro.results import EpisodeRecord, summarize

        with transaction(self.sessions) as s:
            sub = s.get(Submission, submission_id, with_for_update=True)
            if sub is None or sub.state != S.aggregating.value:
                return
            if s.scalar(select(Result.id).where(Result.submission_id == sub.id)) is not None:
                set_state(s, sub, S.published, "published")
                return
            rows = s.scalars(select(Episode).where(Episode.submission_id == sub.id)
                             .order_by(Episode.instance_id, Episode.episode_index)).all()
            records = [EpisodeRecord.model_validate(r.record) for r in rows]
            evaluators = [sh.evaluator for sh in sub.shards if sh.evaluator]
            versions = {e.get("evaluator_version") for e in evaluators}
            stacks = {repr(sorted((e.get("stack") or {}).items())) for e in evaluators}
            if len(versions) > 1 or len(stacks) > 1:
                fail(s, sub, "aggregation", "shards ran on different evaluator or simulator versions, so the "
                     "result would not be comparable", INTERNAL_FIX)
                add_event(s, sub, f"[admin] evaluator versions {sorted(map(str, versions))}, stacks {sorted(stacks)}")
                return
            ev = evaluators[0] if evaluators else {"evaluator_version": None, "stack": {}}
            st = self.settings
            header = {
                "evaluator_version": ev["evaluator_version"],
                "stack": ev["stack"],
                "started": sub.created_at.isoformat(timespec="seconds"),
                "finished": self._now().isoformat(timespec="seconds"),
                "submission_id": sub.id,
                "team": sub.team.name,
                "policy": {"image_ref": sub.image_ref, "image_digest": sub.image_digest, "source": sub.source,
                           "protocol": sub.protocol, "metadata": sub.policy_metadata},
                "settings": {"episodes_per_instance": st.episodes_per_instance, "seed": st.episode_seed,
                             "max_steps": st.max_steps, "request_timeout_s": st.request_timeout_s,
                             "episode_budget_s": st.episode_budget_s, "backend": self.backend_name()},
                "manifest_sha256": sub.manifest_sha256,
                "instances": len({r.instance_id for r in records}),
            }
            summary = summarize(records, header)
            s.add(Result(submission_id=sub.id, team_id=sub.team_id, team_name=sub.team.name,
                         policy_name=sub.policy_name or "unnamed", image_digest=sub.image_digest or "",
                         spec_version=sub.spec_version or "", evaluator_version=str(ev["evaluator_version"]),
                         stack=ev["stack"] or {}, manifest_sha256=sub.manifest_sha256 or "", summary=summary))
            nominal = next((c for c in summary["cases"] if c["case"] == "nominal"), None)
            headline = (f"; nominal success rate {100 * nominal['success_rate']:.1f}%"
                        if nominal and nominal.get("success_rate") is not None else "")
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
    def find_stuck(self, session: Session) -> list[Stuck]:
        """Every active submission that is not moving as it should, with the reason."""
        st, now = self.settings, self._now()
        out: list[Stuck] = []
        subs = session.scalars(select(Submission).where(Submission.state.in_(ACTIVE_STATES))
                               .order_by(Submission.created_at)).all()
        any_live_shard = any(not self._stale(sh.heartbeat_at) for sh in session.scalars(
            select(Shard).where(Shard.state == ShardState.running.value)))
        for sub in subs:
            age = (now - sub.created_at).total_seconds()
            in_state = (now - sub.state_since).total_seconds()
            if age > st.submission_time_limit_s:
                out.append(Stuck(sub.id, sub.state, f"the submission did not finish within the platform's total "
                                 f"time limit ({st.submission_time_limit_s / 3600:.0f} h)", "fail"))
            elif sub.state == S.queued.value and in_state > st.queue_stale_s and queue_position(session, sub) == 0:
                out.append(Stuck(sub.id, sub.state, f"no worker picked it up for {in_state / 60:.0f} min although "
                                 "nothing is ahead of it in the queue (workers down or the task was lost)",
                                 "requeue_validation"))
            elif sub.state == S.validating.value and self._stale(sub.heartbeat_at):
                out.append(Stuck(sub.id, sub.state, f"the worker validating it ({sub.worker}) stopped reporting "
                                 f"{_ago(now, sub.heartbeat_at)}", "requeue_validation"))
            elif sub.state == S.aggregating.value and in_state > st.aggregate_time_limit_s:
                out.append(Stuck(sub.id, sub.state, f"aggregation did not finish within "
                                 f"{st.aggregate_time_limit_s:.0f} s", "requeue_aggregate"))
            elif sub.state == S.running.value:
                for sh in sub.shards:
                    if sh.state == ShardState.running.value and self._stale(sh.heartbeat_at):
                        out.append(Stuck(sub.id, sub.state, f"shard {sh.index}: its worker ({sh.worker}) stopped "
                                         f"reporting {_ago(now, sh.heartbeat_at)}", "requeue_shard", sh.id))
                    elif sh.state == ShardState.queued.value and in_state > st.queue_stale_s and not any_live_shard:
                        last = max([t for t in (sh.heartbeat_at, sub.state_since) if t is not None])
                        if (now - last).total_seconds() > st.queue_stale_s:
                            out.append(Stuck(sub.id, sub.state, f"shard {sh.index} has waited "
                                             f"{(now - last).total_seconds() / 60:.0f} min while no worker runs any "
                                             "shard (workers down or the task was lost)", "requeue_shard", sh.id))
        return out

    def sweep_stuck(self) -> list[Stuck]:
        """Act on :meth:`find_stuck`: re-send the lost work (bounded by the stage attempts, which
        fail the submission with the reason when used up) or fail it; the reason is stored for
        the submitter to read."""
        with transaction(self.sessions) as s:
            found = self.find_stuck(s)
            for st in found:
                sub = s.get(Submission, st.submission_id)
                sub.stuck_reason = st.reason
                add_event(s, sub, f"stuck: {st.reason}; action: {st.action}")
                if st.action == "fail" or sub.requeues >= 3 * self.settings.max_stage_attempts:
                    fail(s, sub, sub.state, f"stuck: {st.reason}", INTERNAL_FIX)
                elif st.action == "requeue_validation":
                    sub.requeues += 1
                    set_state(s, sub, S.queued, f"requeued after: {st.reason}", worker=None)
                elif st.action == "requeue_shard":
                    sub.requeues += 1
                    sh = s.get(Shard, st.shard_id)
                    sh.state, sh.worker = ShardState.queued.value, None
                elif st.action == "requeue_aggregate":
                    sub.requeues += 1
                    sub.state_since = self._now()
        for st in found:
            if st.action == "requeue_validation":
                self.enqueue.validate(st.submission_id)
            elif st.action == "requeue_shard" and st.shard_id is not None:
                self.enqueue.run_shard(st.shard_id)
            elif st.action == "requeue_aggregate":
                self.enqueue.aggregate(st.submission_id)
        return found

    # ------------------------------------------------------------------ crash recovery
    def recover(self) -> dict[str, int]:
        """At worker start: remove the sandboxes a killed predecessor of the same name left
        behind and requeue the work it held (stored episodes are kept)."""
        swept = 0
        try:
            swept = self.backend.sweep(self.worker)
        except SandboxError as exc:
            log.error("recovery: could not sweep sandboxes: %s", exc)
        shard_ids, sub_ids = [], []
        with transaction(self.sessions) as s:
            for sh in s.scalars(select(Shard).where(Shard.state == ShardState.running.value,
                                                    Shard.worker == self.worker)):
                sh.state, sh.worker = ShardState.queued.value, None
                add_event(s, sh.submission, f"shard {sh.index}: its worker {self.worker} restarted; requeued "
                          "(stored episodes are kept)")
                shard_ids.append(sh.id)
            for sub in s.scalars(select(Submission).where(Submission.state == S.validating.value,
                                                          Submission.worker == self.worker)):
                set_state(s, sub, S.queued, f"its worker {self.worker} restarted; validation requeued", worker=None)
                sub_ids.append(sub.id)
        for i in shard_ids:
            self.enqueue.run_shard(i)
        for i in sub_ids:
            self.enqueue.validate(i)
        if swept or shard_ids or sub_ids:
            log.warning("recovery of %s: %d sandbox resources removed, %d shards and %d validations requeued",
                        self.worker, swept, len(shard_ids), len(sub_ids))
        return {"swept": swept, "shards": len(shard_ids), "validations": len(sub_ids)}


class _ShardCallbacks:
    """Stores what the sandbox reports while a shard runs (each call in its own transaction)."""

    def __init__(self, pipeline: Pipeline, shard_id: int, submission_id: str) -> None:
        self.p = pipeline
        self.shard_id = shard_id
        self.submission_id = submission_id

    def on_hello(self, info: dict[str, Any]) -> None:
        with transaction(self.p.sessions) as s:
            s.execute(update(Shard).where(Shard.id == self.shard_id).values(evaluator=info))

    def on_metadata(self, metadata: dict[str, Any]) -> None:
        pass

    def on_record(self, record: dict[str, Any]) -> None:
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
