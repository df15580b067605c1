"""What every stage shares: loading a row it must find, moving a submission between states (with
its event), failing it, and what a waiting submission reads about its place (queue position,
the wait of its next sandbox task)."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from liberopro_platform.heartbeat import SHARDS, all_rows, is_live
from liberopro_platform.models import (
    ACTIVE_STATES,
    Shard,
    ShardState,
    Submission,
    SubmissionEvent,
    SubmissionState,
    utcnow,
)

S = SubmissionState


def get_submission(session: Session, submission_id: str, lock: bool = False) -> Submission:
    """The submission ``submission_id`` (``lock``: ``SELECT ... FOR UPDATE``); ``LookupError``
    when there is none (submissions are never deleted, so a stage that holds its id finds it)."""
    sub = session.get(Submission, submission_id, with_for_update=lock)
    if sub is None:
        raise LookupError(f"no submission {submission_id}")
    return sub


def get_shard(session: Session, shard_id: int, lock: bool = False) -> Shard:
    """The shard ``shard_id`` (``lock``: ``SELECT ... FOR UPDATE``); ``LookupError`` when there is none."""
    shard = session.get(Shard, shard_id, with_for_update=lock)
    if shard is None:
        raise LookupError(f"no shard {shard_id}")
    return shard


def add_event(session: Session, sub: Submission, message: str) -> None:
    """Add ``message`` to ``sub``'s history (``[admin]`` lines are hidden from submitters)."""
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
    cancel_open_shards(sub)


def cancel_open_shards(sub: Submission) -> None:
    """Mark ``sub``'s queued and running shards cancelled (a running one stops within seconds)."""
    for shard in sub.shards:
        if shard.state in (ShardState.queued.value, ShardState.running.value):
            shard.state = ShardState.cancelled.value


def count_done(sub: Submission) -> None:
    """``sub.episodes_done``: the episodes of its finished shards (written once per shard, never
    per episode: a row written per episode would time the hidden episodes for the submitter)."""
    sub.episodes_done = sum(sh.episodes_total for sh in sub.shards if sh.state == ShardState.done.value)


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


def _waiting_since(sub: Submission, fresh: dt.datetime) -> dt.datetime | None:
    """When ``sub``'s next sandbox task was queued, or None when it waits for none (see
    :func:`sandbox_wait`)."""
    if sub.state == S.queued.value:
        return sub.state_since
    if sub.state != S.running.value:
        return None
    mine = sub.shards
    if any(sh.state == ShardState.running.value and sh.heartbeat_at and sh.heartbeat_at >= fresh for sh in mine):
        return None
    # A shard waiting for a retry (its attempt failed: the policy can make it fail) is not told:
    # when its attempts fail would be readable at once; its first turn is.
    times = [sh.queued_at or sub.state_since for sh in mine if sh.state == ShardState.queued.value and not sh.attempts]
    return min(times) if times else None


def _count(session: Session, query: Any) -> int:
    return session.scalar(query) or 0


def sandbox_wait(
    session: Session, sub: Submission, stale_s: float, now: dt.datetime | None = None
) -> SandboxWait | None:
    """The wait of ``sub``'s next sandbox task (:class:`SandboxWait`), or None when it waits for
    none: it is not queued for validation nor running, a shard of it is running (fresh
    heartbeat), or no shard of it waits for its first attempt (a retry's wait is not told:
    disclosure.py)."""
    now = now or utcnow()
    fresh = now - dt.timedelta(seconds=stale_s)
    since = _waiting_since(sub, fresh)
    if since is None:
        return None
    count = select(func.count())
    running = _count(
        session,
        count.select_from(Shard).where(Shard.state == ShardState.running.value, Shard.heartbeat_at >= fresh),
    ) + _count(
        session,
        count.select_from(Submission).where(Submission.state == S.validating.value, Submission.heartbeat_at >= fresh),
    )
    queued_before = _count(
        session,
        count.select_from(Shard)
        .join(Submission, Shard.submission_id == Submission.id)
        .where(
            Shard.state == ShardState.queued.value,
            Submission.state == S.running.value,
            Shard.submission_id != sub.id,
            func.coalesce(Shard.queued_at, Submission.state_since) < since,
        ),
    ) + _count(
        session,
        count.select_from(Submission).where(
            Submission.state == S.queued.value, Submission.id != sub.id, Submission.state_since < since
        ),
    )
    workers = sum(1 for r in all_rows(session) if r.serves(SHARDS) and is_live(r, now, stale_s))
    return SandboxWait(running, queued_before, workers)


def ago(now: dt.datetime, at: dt.datetime | None) -> str:
    """How long ago a heartbeat at ``at`` was, for a stuck reason."""
    if at is None:
        return "(never reported)"
    return f"{(now - at).total_seconds() / 60:.1f} min ago (last heartbeat {at:%H:%M:%S} UTC)"


def remove_quietly(path: str) -> None:
    """Remove the file at ``path`` if it is there (an uploaded archive)."""
    try:
        os.remove(path)
    except OSError:
        pass
