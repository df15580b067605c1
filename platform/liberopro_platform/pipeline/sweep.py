"""Never stuck forever: :func:`find_stuck` names every active submission that is not moving as it
should, with the reason, one small check per state; :func:`sweep_stuck` (celery beat, every
``sweep_interval_s``; ``POST /admin/sweep``; ``python -m liberopro_platform stuck --act``) acts
on them with what the broker holds: lost task messages are sent again (free), work whose claim
went stale is requeued (counted in ``requeues``), a submission over its limits fails."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.disclosure import HIDDEN_FAILURES, INTERNAL_FIX
from liberopro_platform.heartbeat import CONTROL, SHARDS, all_rows, describe_absence, is_live
from liberopro_platform.models import ACTIVE_STATES, FINAL_STATES, Shard, ShardState, Submission
from liberopro_platform.pipeline.messages import BrokerView
from liberopro_platform.pipeline.state import (
    S,
    add_event,
    ago,
    fail,
    get_shard,
    get_submission,
    queue_position,
    remove_quietly,
    set_state,
)

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

log = logging.getLogger("liberopro_platform.pipeline")


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


# ------------------------------------------------------------------------------ finding
@dataclass(frozen=True)
class _View:
    """What one look at the platform sees, shared by the checks of every submission."""

    p: Pipeline
    session: Session
    now: dt.datetime
    broker: BrokerView | None
    #: Why no live worker serves the shards (sandbox) queue, or the control queue; None when one does.
    no_sandbox: str | None
    no_control: str | None
    #: Whether any worker runs a shard now (fresh heartbeat).
    any_live_shard: bool

    def lost(self, kind: str, arg: object, sent: dt.datetime, fresh_only: bool = True) -> bool:
        """True when the broker (read by the sweep) does not hold the task message ``kind(arg)``
        although it was sent more than ``resend_grace_s`` ago (a delivery counts only when recent,
        unless not ``fresh_only``: :class:`BrokerView`)."""
        grace = dt.timedelta(seconds=self.p.settings.resend_grace_s)
        return (
            self.broker is not None
            and self.now - sent > grace
            and not self.broker.holds(kind, arg, self.now - grace if fresh_only else None)
        )

    def in_state_s(self, sub: Submission) -> float:
        """Seconds since ``sub`` entered its state."""
        return (self.now - sub.state_since).total_seconds()


#: A state's check: the stuck items of a submission in that state, and whether it waits on the
#: workers of its queue (then "no live worker" is a reason too).
_Found = tuple[list[Stuck], bool]


def find_stuck(p: Pipeline, session: Session, broker: BrokerView | None = None) -> list[Stuck]:
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
    view = _look(p, session, broker)
    subs = session.scalars(
        select(Submission).where(Submission.state.in_(ACTIVE_STATES)).order_by(Submission.created_at)
    ).all()
    out: list[Stuck] = []
    for sub in subs:
        out += _stuck(view, sub)
    return out


def _look(p: Pipeline, session: Session, broker: BrokerView | None) -> _View:
    now = p.now()
    any_live_shard = any(
        not p.stale(sh.heartbeat_at)
        for sh in session.scalars(select(Shard).where(Shard.state == ShardState.running.value))
    )
    rows = all_rows(session)
    live = [r for r in rows if is_live(r, now, p.settings.heartbeat_stale_s)]
    no_sandbox = None if any(r.serves(SHARDS) for r in live) else describe_absence(rows, SHARDS, now)
    no_control = None if any(r.serves(CONTROL) for r in live) else describe_absence(rows, CONTROL, now)
    return _View(p, session, now, broker, no_sandbox, no_control, any_live_shard)


def _stuck(v: _View, sub: Submission) -> list[Stuck]:
    """The stuck items of one active submission: over the total time limit, else its state's check."""
    limit = v.p.settings.submission_time_limit_s
    if (v.now - sub.created_at).total_seconds() > limit:
        reason = f"the submission did not finish within the platform's total time limit ({limit / 3600:.0f} h)"
        return [Stuck(sub.id, sub.state, reason, "fail")]
    check = _CHECKS.get(sub.state)
    if check is None:
        return []
    found, waits = check(v, sub)
    waits_on = (v.no_control if sub.state == S.aggregating.value else v.no_sandbox) if waits else None
    if waits_on:
        found.append(Stuck(sub.id, sub.state, waits_on, "wait"))
    return found


def _queued(v: _View, sub: Submission) -> _Found:
    """A validation waiting for a worker: its message lost, or (without the broker's view) no
    worker took it for ``queue_stale_s`` although nothing is ahead of it."""
    if v.lost("validate", sub.id, sub.state_since):
        reason = "its validation task was not in the broker (lost, e.g. by a broker restart); sent again"
        return [Stuck(sub.id, sub.state, reason, "resend_validation")], True
    if (
        v.broker is None
        and not v.no_sandbox
        and v.in_state_s(sub) > v.p.settings.queue_stale_s
        and queue_position(v.session, sub) == 0
    ):
        reason = (
            f"no worker picked it up for {v.in_state_s(sub) / 60:.0f} min "
            "although nothing is ahead of it in the queue (the task was lost?)"
        )
        return [Stuck(sub.id, sub.state, reason, "requeue_validation")], True
    return [], True


def _validating(v: _View, sub: Submission) -> _Found:
    """A validation whose worker stopped reporting."""
    if not v.p.stale(sub.heartbeat_at):
        return [], False
    reason = f"the worker validating it ({sub.worker}) stopped reporting {ago(v.now, sub.heartbeat_at)}"
    return [Stuck(sub.id, sub.state, reason, "requeue_validation")], True


def _aggregating(v: _View, sub: Submission) -> _Found:
    """An aggregation whose message was lost, or that runs over ``aggregate_time_limit_s``."""
    limit = v.p.settings.aggregate_time_limit_s
    if v.lost("aggregate", sub.id, sub.state_since, fresh_only=False):
        reason = "its aggregation task was not in the broker (lost, e.g. by a broker restart); sent again"
        return [Stuck(sub.id, sub.state, reason, "resend_aggregate")], True
    if v.in_state_s(sub) > limit and not (v.broker and ("aggregate", sub.id) in v.broker.waiting) and not v.no_control:
        reason = f"aggregation did not finish within {limit:.0f} s"
        return [Stuck(sub.id, sub.state, reason, "requeue_aggregate")], True
    return [], True


def _running(v: _View, sub: Submission) -> _Found:
    """The shards of a running submission (:func:`_running_shard`, :func:`_queued_shard`)."""
    out: list[Stuck] = []
    waits = False
    for sh in sub.shards:
        if sh.state == ShardState.running.value and v.p.stale(sh.heartbeat_at):
            out.append(_running_shard(v, sub, sh))
            waits = True
        elif sh.state == ShardState.queued.value:
            out += _queued_shard(v, sub, sh)
            waits = True
    return out, waits


def _running_shard(v: _View, sub: Submission, sh: Shard) -> Stuck:
    """A shard whose worker stopped reporting: requeued (stored episodes are kept)."""
    return Stuck(
        sub.id,
        sub.state,
        f"shard {sh.index}: its worker ({sh.worker}) stopped reporting {ago(v.now, sh.heartbeat_at)}",
        "requeue_shard",
        sh.id,
        f"the worker running one of its shards ({sh.worker}) stopped reporting "
        f"{ago(v.now, sh.heartbeat_at)}; the shard is requeued (stored episodes are kept)",
    )


def _queued_shard(v: _View, sub: Submission, sh: Shard) -> list[Stuck]:
    """A queued shard whose message was lost, or (without the broker's view) that waited over
    ``queue_stale_s`` while no worker runs any shard. The submitter's reason names no shard."""
    last = max([t for t in (sh.heartbeat_at, sub.state_since) if t is not None])
    if v.lost("run_shard", sh.id, last):
        return [
            Stuck(
                sub.id,
                sub.state,
                f"shard {sh.index}: its task was not in the broker (lost, e.g. by a broker restart); sent again",
                "resend_shard",
                sh.id,
                "the task of one of its shards was not in the broker (lost, e.g. by a broker restart); sent again",
            )
        ]
    stale_s = v.p.settings.queue_stale_s
    waited = (v.now - last).total_seconds()
    if (
        v.broker is None
        and not v.no_sandbox
        and v.in_state_s(sub) > stale_s
        and not v.any_live_shard
        and waited > stale_s
    ):
        return [
            Stuck(
                sub.id,
                sub.state,
                f"shard {sh.index} has waited {waited / 60:.0f} min while no worker runs any shard (the task was lost?)",
                "requeue_shard",
                sh.id,
                f"one of its shards has waited {waited / 60:.0f} min while no worker runs any shard (the task was "
                "lost?); requeued",
            )
        ]
    return []


_CHECKS: dict[str, Callable[[_View, Submission], _Found]] = {
    S.queued.value: _queued,
    S.validating.value: _validating,
    S.aggregating.value: _aggregating,
    S.running.value: _running,
}


# ------------------------------------------------------------------------------ acting
def sweep_stuck(p: Pipeline) -> list[Stuck]:
    """Act on :func:`find_stuck` with what the broker holds: re-send lost task messages (free,
    not counted), requeue work whose claim went stale (counted in ``requeues``, and a
    submission requeued ``3 * max_stage_attempts`` times fails with the reason) or fail it.
    The reasons are stored in ``stuck_reason`` for the submitter to read (and cleared once
    the submission moves again); each new reason is also an event."""
    broker = _broker_view(p)
    with transaction(p.sessions) as s:
        found = find_stuck(p, s, broker)
        reasons = _store_reasons(s, found)
        for st in found:
            _act(p, s, st)
        final = {sid for sid in reasons if S(get_submission(s, sid).state).final}
        remove_finished_uploads(s)
    for st in found:
        if st.submission_id not in final:
            _send_again(p, st)
    return found


def _broker_view(p: Pipeline) -> BrokerView | None:
    """What the broker holds, or None when it cannot be read (the sweep goes on by the time rules)."""
    try:
        pending = getattr(p.enqueue, "pending", None)  # test doubles may not inspect a broker
        return pending() if pending is not None else None
    except Exception as exc:  # noqa: BLE001 - the sweep must go on without the broker's view
        log.warning("sweep: could not inspect the broker: %r", exc)
        return None


def _store_reasons(s: Session, found: list[Stuck]) -> dict[str, list[Stuck]]:
    """Write each stuck submission's reasons to ``stuck_reason`` (an event when they changed; the
    shards' own reasons as an ``[admin]`` one) and clear the reason of those that move again.
    Returns the items by submission."""
    reasons: dict[str, list[Stuck]] = {}
    for st in found:
        reasons.setdefault(st.submission_id, []).append(st)
    for sid, items in reasons.items():
        sub = get_submission(s, sid)
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
    return reasons


def _act(p: Pipeline, s: Session, st: Stuck) -> None:
    """Fail, requeue or leave ``st``'s submission (a re-send needs nothing in the database)."""
    sub = get_submission(s, st.submission_id)
    if S(sub.state).final:
        return
    requeue = st.action.startswith("requeue_")
    if st.action == "fail" or (requeue and sub.requeues >= 3 * p.settings.max_stage_attempts):
        _give_up(s, sub, st)
        return
    if requeue:
        sub.requeues += 1
    if st.action == "requeue_validation":
        set_state(s, sub, S.queued, f"requeued after: {st.public}", worker=None)
    elif st.action == "requeue_shard" and st.shard_id is not None:
        sh = get_shard(s, st.shard_id)
        sh.state, sh.worker, sh.queued_at = ShardState.queued.value, None, p.now()
    elif st.action == "requeue_aggregate":
        sub.state_since = p.now()


def _give_up(s: Session, sub: Submission, st: Stuck) -> None:
    """Fail ``sub`` for ``st``: in the hidden stage's fixed words while its shards run or it
    aggregates (the reason for the admins), else with the reason."""
    if sub.state in (S.running.value, S.aggregating.value):
        fail(s, sub, "evaluation", *HIDDEN_FAILURES["total" if st.action == "fail" else "platform"])
        add_event(s, sub, f"[admin] stuck: {st.reason}")
    else:
        fail(s, sub, sub.state, f"stuck: {st.public}", INTERNAL_FIX)


def _send_again(p: Pipeline, st: Stuck) -> None:
    """Send the task message of requeued or lost work."""
    if st.action in ("requeue_validation", "resend_validation"):
        p.enqueue.validate(st.submission_id)
    elif st.action in ("requeue_shard", "resend_shard") and st.shard_id is not None:
        p.enqueue.run_shard(st.shard_id)
    elif st.action in ("requeue_aggregate", "resend_aggregate"):
        p.enqueue.aggregate(st.submission_id)


def remove_finished_uploads(s: Session) -> None:
    """Remove the uploaded archives kept for shards on other nodes (``keep_uploads_until_done``)
    of submissions that have ended; their rows forget the path."""
    for sub in s.scalars(
        select(Submission).where(Submission.state.in_(FINAL_STATES), Submission.upload_path.isnot(None))
    ):
        if sub.upload_path:
            remove_quietly(sub.upload_path)
        sub.upload_path = None
