"""How a shard attempt ended: done (and then maybe aggregate), cancelled, retried (only its
missing episodes run again) or, after ``max_stage_attempts``, failed with the submission.

What the submitter may read of it is the hidden stage's (:mod:`liberopro_platform.disclosure`):
the shard's events are ``[admin]`` ones, and a failure is told in the fixed vocabulary of
:data:`~liberopro_platform.disclosure.HIDDEN_FAILURES`: the failure class of the policy's
replies, the container's exit code and the shard's index stay with the admins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.disclosure import HIDDEN_FAILURES, failure_kind
from liberopro_platform.models import ACTIVE_STATES, Episode, Shard, ShardState, Submission
from liberopro_platform.pipeline.aggregate import maybe_aggregate
from liberopro_platform.pipeline.state import S, add_event, count_done, fail, get_shard
from liberopro_platform.sandbox.base import ShardOutcome, truncate_log

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline


def after_shard(p: Pipeline, shard_id: int, outcome: ShardOutcome, platform_faults: int = 0) -> None:
    """Record how a shard attempt ended (module docstring). ``platform_faults``: episodes of this
    attempt the evaluator could not run for a reason charged to the platform (not stored,
    :data:`.episodes.NOT_STORED_REASONS`)."""
    retry = finished = False
    with transaction(p.sessions) as s:
        shard = get_shard(s, shard_id, lock=True)
        sub = shard.submission
        _keep_policy_log(p, shard, outcome)
        stored = _stored_pairs(s, sub.id, shard)
        if outcome.status == "completed" and stored >= shard.episodes_total:
            shard.state, shard.finished_at, shard.last_error = ShardState.done.value, p.now(), None
            add_event(s, sub, f"[admin] shard {shard.index}: done ({stored} episodes)")
            count_done(sub)
            finished = True
        elif outcome.status == "stopped" or sub.state != S.running.value:
            shard.state = ShardState.cancelled.value
        else:
            retry = _failed_attempt(p, s, sub, shard, outcome, stored, platform_faults)
        attempts = shard.attempts
        sub_id = sub.id
    if retry:
        p.enqueue.run_shard(shard_id, countdown=min(120.0, 5.0 * 2**attempts))
    if finished:
        maybe_aggregate(p, sub_id)


def _keep_policy_log(p: Pipeline, shard: Shard, outcome: ShardOutcome) -> None:
    # The policy's output on hidden instances is for admins only (it may echo instructions or
    # observations of the hidden stage): it stays with the shard, never in sub.policy_log.
    header = f"=== attempt {shard.attempts} ===\n"
    shard.policy_log = truncate_log(
        (shard.policy_log + "\n" if shard.policy_log else "") + header + (outcome.policy_log or "(no output)\n"),
        p.settings.log_max_bytes,
    )


def _failed_attempt(
    p: Pipeline, s: Session, sub: Submission, shard: Shard, outcome: ShardOutcome, stored: int, platform_faults: int
) -> bool:
    """Record an attempt that did not finish the shard; True when it is to be retried (queued
    again), False when its attempts are used up (the shard and the submission fail)."""
    status = "missing" if outcome.status == "completed" else outcome.status
    # shard.last_error holds only text the platform wrote (admins read it); what the evaluator
    # or the policy said goes to the [admin] event with it.
    reason = {
        "missing": f"the evaluator finished with {stored} of {shard.episodes_total} episodes stored"
        + (f" ({platform_faults} not run for a platform fault)" if platform_faults else ""),
        "timed_out": outcome.message,
        "policy_error": outcome.message,
        "infrastructure_error": "the platform could not run the evaluation (internal error)",
    }[status]
    shard.last_error = reason
    internal = f"shard {shard.index}, attempt {shard.attempts}: {reason}; {outcome.message}: {outcome.internal[-1500:]}"
    add_event(s, sub, f"[admin] {internal[:3000]}")
    if shard.attempts >= p.settings.max_stage_attempts:
        fail_shard(p, s, sub, shard, failure_kind(status))
        return False
    shard.state, shard.queued_at = ShardState.queued.value, p.now()
    return True


def finish_shard(p: Pipeline, shard_id: int) -> None:
    """Mark a shard with nothing left to run done (its episodes were stored by earlier attempts)."""
    with transaction(p.sessions) as s:
        shard = get_shard(s, shard_id, lock=True)
        shard.state, shard.finished_at = ShardState.done.value, p.now()
        add_event(s, shard.submission, f"[admin] shard {shard.index}: nothing left to run")
        count_done(shard.submission)
        sub_id = shard.submission_id
    maybe_aggregate(p, sub_id)


def fail_shard(
    p: Pipeline, s: Session, sub: Submission, shard: Shard, kind: str, admin_detail: str = "", reason: str = ""
) -> None:
    """Mark ``shard`` failed and, while ``sub`` is active, fail it with the hidden stage's
    fixed text of ``kind`` (:data:`~liberopro_platform.disclosure.HIDDEN_FAILURES`: policy,
    time or platform). ``reason`` and ``admin_detail`` go to an ``[admin]`` event; a platform
    failure is always one (``platform error``), for the admins to look at and requeue."""
    shard.state, shard.finished_at = ShardState.failed.value, p.now()
    if sub.state in ACTIVE_STATES:
        failure, fix = HIDDEN_FAILURES[kind]
        fail(s, sub, "evaluation", failure, fix)
    detail = "; ".join(x for x in (reason or shard.last_error or "", admin_detail) if x)
    prefix = "platform error" if kind == "platform" else "failed"
    add_event(s, sub, f"[admin] {prefix}: shard {shard.index} after {shard.attempts} attempts: {detail[:3000]}")


def _stored_pairs(s: Session, submission_id: str, shard: Shard) -> int:
    """How many of ``shard``'s pairs have a stored episode."""
    stored = set(
        s.execute(
            select(Episode.instance_id, Episode.episode_index).where(Episode.submission_id == submission_id)
        ).all()
    )
    return sum((pair[0], pair[1]) in stored for pair in shard.plan)
