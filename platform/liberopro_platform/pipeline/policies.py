"""The lifetime of the node sandboxes: the policy container a worker keeps between a submission's
shards (docs/platform.md, "One policy container, K streams"). Released when nothing of that
submission is left for this worker, at the start of another submission's shard or of a
validation (one policy in memory at a time), after a failed shard attempt, at shutdown and every
idle minute. Everything here holds :attr:`Pipeline.policy_lock`, which a shard also holds while
it releases the others before using its own."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from liberopro_platform.models import Shard, ShardState, Submission
from liberopro_platform.pipeline.state import S
from liberopro_platform.sandbox.base import SandboxError

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

log = logging.getLogger("liberopro_platform.pipeline")


def release_idle_policies(p: Pipeline) -> list[str]:
    """Remove this worker's node sandboxes that nothing will use: of a submission that is no
    longer running, or that has no shard queued and none running on this worker. Called after
    every shard and by the worker's heartbeat thread while it is idle; returns the submission ids
    released."""
    with p.policy_lock:
        return release_policies(p)


def release_all_policies(p: Pipeline) -> list[str]:
    """Remove every node sandbox this worker holds, needed or not: before a validation (its
    policy container must not share the node's memory and GPU with another submission's idle
    one, or its failure there would be blamed on it) and when the worker shuts down (nothing
    else removes them until a worker starts again, :func:`.recovery.recover`). Returns the
    submission ids released."""
    with p.policy_lock:
        return release_policies(p, everything=True)


def release_policy_of(p: Pipeline, submission_id: str) -> None:
    """Remove this worker's node sandbox of ``submission_id`` now (its next shard attempt here
    starts a fresh policy container); an engine error is logged."""
    with p.policy_lock:
        try:
            p.backend.release_policy(submission_id)
        except SandboxError as exc:
            log.warning("could not remove the policy container of %s: %s", submission_id, exc)


def release_policies(p: Pipeline, keep: str | None = None, everything: bool = False) -> list[str]:
    """Release the node sandboxes of every submission but ``keep`` (when given: a worker runs one
    shard at a time, and another submission's idle policy would hold its memory and GPU), all
    of them (``everything``), else of the submissions :func:`release_idle_policies` names.
    Hold :attr:`Pipeline.policy_lock`."""
    try:
        held = p.backend.policy_submissions()
    except SandboxError as exc:
        log.warning("could not list this worker's policy containers: %s", exc)
        return []
    released = []
    for sid in sorted(held - {keep}):
        if keep is None and not everything and _needed(p, sid):
            continue
        try:
            p.backend.release_policy(sid)
            released.append(sid)
        except SandboxError as exc:
            log.warning("could not remove the policy container of %s: %s", sid, exc)
    return released


def _needed(p: Pipeline, submission_id: str) -> bool:
    """True while ``submission_id`` runs and has a shard queued, or running on this worker."""
    with p.sessions() as s:
        if s.scalar(select(Submission.state).where(Submission.id == submission_id)) != S.running.value:
            return False
        return bool(
            s.scalar(
                select(func.count())
                .select_from(Shard)
                .where(
                    Shard.submission_id == submission_id,
                    (Shard.state == ShardState.queued.value)
                    | ((Shard.state == ShardState.running.value) & (Shard.worker == p.worker)),
                )
            )
        )
