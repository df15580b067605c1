"""What a running shard reports, stored as it comes (:class:`StoringCallbacks`, the
:class:`~liberopro_platform.sandbox.base.ShardCallbacks` the pipeline gives a backend): the
evaluator's versions, each episode once and for good (:func:`store_episode`), the heartbeat,
and whether to stop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from liberopro.schema.reasons import Side, reasons_of
from liberopro.schema.results import EpisodeRecord
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from liberopro_platform.db import transaction
from liberopro_platform.models import Episode, Shard, Submission, utcnow
from liberopro_platform.pipeline.state import S, add_event, get_submission

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

#: Termination reasons charged to the platform (:mod:`liberopro.schema.reasons`, side ``platform``:
#: ``evaluator_error``, a fault of the evaluator that no action of the policy causes;
#: ``worker_crashed``, a simulator stream process that died twice). They are never scored: an
#: episode is stored once and for good, so such a record is not stored, the episode stays missing
#: and the shard's next attempt runs it; when it still fails after ``max_stage_attempts`` the
#: submission ends as a platform error, never with a lower score (docs/platform.md, "Who is
#: charged with an episode").
NOT_STORED_REASONS = reasons_of(Side.platform)


def store_episode(p: Pipeline, shard_id: int, submission_id: str, record: EpisodeRecord) -> bool:
    """Store one episode unless it is already stored; True when it was new. Writes the episode
    (``record.model_dump(mode="json")``) and the shard's heartbeat only, never the submission's
    row (whose ``updated_at`` the submitter reads)."""
    try:
        with transaction(p.sessions) as s:
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
            s.execute(update(Shard).where(Shard.id == shard_id).values(heartbeat_at=p.now()))
    except IntegrityError:
        return False  # stored by an earlier attempt: the first record stands
    return True


class StoringCallbacks:
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
                add_event(
                    s,
                    get_submission(s, self.submission_id),
                    f"[admin] episode {record.instance_id}#{record.episode_index} not stored: "
                    f"{reason}: {(record.detail or '')[:500]}",
                )
            return
        store_episode(self.p, self.shard_id, self.submission_id, record)

    def heartbeat(self) -> None:
        with transaction(self.p.sessions) as s:
            s.execute(update(Shard).where(Shard.id == self.shard_id).values(heartbeat_at=utcnow()))

    def should_stop(self) -> bool:
        with self.p.sessions() as s:
            state = s.scalar(select(Submission.state).where(Submission.id == self.submission_id))
        return state != S.running.value
