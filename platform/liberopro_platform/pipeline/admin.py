"""What people do to a submission: cancel it (its submitter or an admin) and requeue it (an
admin: run it again from where it stopped, stored episodes kept)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.models import ShardState, Submission
from liberopro_platform.pipeline.aggregate import maybe_aggregate
from liberopro_platform.pipeline.state import S, cancel_open_shards, get_submission, set_state

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline


def cancel(session: Session, sub: Submission, by: str) -> None:
    """Cancel ``sub`` (running shards stop within seconds and their sandboxes are removed)."""
    set_state(session, sub, S.cancelled, f"cancelled by {by}")
    cancel_open_shards(sub)


def requeue(p: Pipeline, submission_id: str, by: str) -> str:
    """Restart ``submission_id`` from where it stopped: validation if it never passed, else
    its unfinished shards (stored episodes are kept), else its aggregation. Returns what was
    done; ``ValueError`` for a published submission."""
    with transaction(p.sessions) as s:
        sub = get_submission(s, submission_id, lock=True)
        if sub.state == S.published.value:
            raise ValueError("the submission is published; nothing to requeue")
        sub.requeues += 1
        sub.failure = sub.fix = sub.failure_stage = sub.stuck_reason = None
        sub.finished_at = None
        ids: list[int] = []
        if not sub.shards:
            set_state(s, sub, S.queued, f"requeued by {by}: validation will run again", attempts=0)
            action = "validation"
        elif all(sh.state == ShardState.done.value for sh in sub.shards):
            set_state(s, sub, S.running, f"requeued by {by}: aggregating again")
            action = "aggregate"
        else:
            for sh in sub.shards:
                if sh.state != ShardState.done.value:
                    sh.state, sh.attempts, sh.worker = ShardState.queued.value, 0, None
                    sh.queued_at = p.now()
                    ids.append(sh.id)
            set_state(s, sub, S.running, f"requeued by {by}: {len(ids)} shards will run their missing episodes")
            action = f"{len(ids)} shards"
    if action == "validation":
        p.enqueue.validate(submission_id)
    elif action == "aggregate":
        maybe_aggregate(p, submission_id)
    for i in ids:
        p.enqueue.run_shard(i)
    return action
