"""Crash recovery: a worker that starts (:func:`recover`), and a shards worker in every idle
minute (:func:`idle`), removes the sandboxes that gone workers left on its engine; at start it
also requeues the shards and validations they held (stored episodes are kept). Gone are a
worker's own name (a killed predecessor) and every worker whose heartbeat row is stopped, stale
or absent and none of whose claims has a fresh heartbeat (docs/platform.md, "Queues, sweep and
recovery")."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select

from liberopro_platform.db import transaction
from liberopro_platform.heartbeat import SHARDS, all_rows, is_live
from liberopro_platform.models import Shard, ShardState, Submission, WorkerHeartbeat
from liberopro_platform.pipeline.policies import release_idle_policies
from liberopro_platform.pipeline.state import S, add_event, set_state
from liberopro_platform.sandbox.base import SandboxError

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

log = logging.getLogger("liberopro_platform.pipeline")


def gone_owners(p: Pipeline) -> tuple[set[str], set[str]]:
    """(owners of sandboxes on this engine, gone workers other than this one): a worker that
    labels sandboxes here or serves shards by its row, whose row is stopped, stale or
    absent and none of whose claims has a fresh heartbeat (:func:`recover`)."""
    now, stale_s = p.now(), p.settings.heartbeat_stale_s
    on_engine: set[str] = set()
    try:
        on_engine = set(p.backend.owners())
    except SandboxError as exc:
        log.error("recovery: could not list the sandboxes' owners: %s", exc)
    with p.sessions() as s:
        rows = {r.name: r for r in all_rows(s)}
        claims = s.execute(select(Shard.worker, Shard.heartbeat_at).where(Shard.state == ShardState.running.value))
        vals = s.execute(
            select(Submission.worker, Submission.heartbeat_at).where(Submission.state == S.validating.value)
        )
        busy = {w for w, at in [*claims, *vals] if w and not p.stale(at)}
    candidates = on_engine | {n for n, r in rows.items() if r.serves(SHARDS)}
    gone = {n for n in candidates - {p.worker} if not (n in rows and is_live(rows[n], now, stale_s)) and n not in busy}
    return on_engine, gone


def sweep_owners(p: Pipeline, owners: list[str]) -> int:
    """Remove every sandbox resource of ``owners`` on this engine; returns how many went."""
    swept = 0
    for owner in owners:
        try:
            swept += p.backend.sweep(owner)
        except SandboxError as exc:
            log.error("recovery: could not sweep the sandboxes of %s: %s", owner, exc)
    return swept


def idle(p: Pipeline) -> dict[str, Any]:
    """The shards worker's idle hook (every minute while no task runs, beside the heartbeat):
    release the node sandboxes nothing will use (:func:`.policies.release_idle_policies`) and
    remove the sandboxes that gone workers left on this engine (the rule of :func:`recover`,
    which otherwise runs only when a worker starts: a worker killed and replaced under a new name
    within ``heartbeat_stale_s`` left its policy container, with its memory and GPUs, until the
    next start). Their work is the stuck sweep's (stale claims are requeued there). Returns
    ``{"released", "swept"}``."""
    released = release_idle_policies(p)
    on_engine, gone = gone_owners(p)
    swept = sweep_owners(p, sorted(gone & on_engine))
    if swept:
        log.warning("%s: removed %d sandbox resources of gone owners %s", p.worker, swept, sorted(gone & on_engine))
    return {"released": released, "swept": swept}


def recover(p: Pipeline) -> dict[str, Any]:
    """At worker start: find the owners that are gone (module docstring), remove the sandboxes
    they left on this engine and requeue the shards and validations they held. Rows of gone
    workers are deleted once cleaned up, rows silent for a week too. Returns ``{"swept",
    "shards", "validations", "gone"}``."""
    now = p.now()
    on_engine, gone = gone_owners(p)
    gone |= {p.worker}
    swept = sweep_owners(p, sorted(o for o in gone if o == p.worker or o in on_engine))
    shard_ids, sub_ids = _requeue_claims(p, gone, now)
    for i in shard_ids:
        p.enqueue.run_shard(i)
    for sid in sub_ids:
        p.enqueue.validate(sid)
    others = sorted(gone - {p.worker})
    if swept or shard_ids or sub_ids or others:
        log.warning(
            "recovery of %s: owners gone %s, %d sandbox resources removed, %d shards and %d validations requeued",
            p.worker,
            others,
            swept,
            len(shard_ids),
            len(sub_ids),
        )
    return {"swept": swept, "shards": len(shard_ids), "validations": len(sub_ids), "gone": others}


def _requeue_claims(p: Pipeline, gone: set[str], now: dt.datetime) -> tuple[list[int], list[str]]:
    """Queue again the running shards and validations of the ``gone`` workers and delete their
    heartbeat rows (and rows silent for a week before ``now``); returns the shard and submission ids."""

    def why(owner: str | None) -> str:
        if owner == p.worker:
            return f"its worker {owner} restarted"
        return f"its worker {owner} is gone (no heartbeat); {p.worker} took over"

    shard_ids: list[int] = []
    sub_ids: list[str] = []
    with transaction(p.sessions) as s:
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
        s.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name.in_(gone - {p.worker})))
        s.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.beat_at < now - dt.timedelta(days=7)))
    return shard_ids, sub_ids
