"""The submission pipeline as plain functions over the database: validate -> plan shards ->
run shards -> aggregate -> publish, plus cancel, requeue, stuck detection and crash recovery.

Celery tasks (:mod:`liberopro_platform.celery_app`) only call a :class:`Pipeline`'s methods, which
only call the stage functions; each stage hands over to the next through an :class:`Enqueue`.
Every stage is idempotent: a duplicate or redelivered task finds the work claimed or done and
returns. Claims are compare-and-set updates with a heartbeat; a claim whose heartbeat went stale
may be taken over.

One module per stage or job, each a set of functions taking the :class:`Pipeline` (settings,
sessions, enqueue, worker name, backend, clock) as their first argument:

* :mod:`.validate` stage 1 (pin, check, start alone, conformance check), then :mod:`.plan`
  stage 2 (the manifest's pairs cut into shards);
* :mod:`.shards` stage 3 (claim a shard, run its missing episodes), :mod:`.episodes` (what a
  running shard reports, stored once), :mod:`.shard_end` (done, retried or failed);
* :mod:`.aggregate` stages 4 and 5 (summary, publication);
* :mod:`.sweep` the stuck sweep (:func:`~.sweep.find_stuck`, one check per state;
  :func:`~.sweep.sweep_stuck`), :mod:`.recovery` (a worker's start and idle minutes),
  :mod:`.policies` (the node sandboxes' lifetime), :mod:`.admin` (cancel, requeue);
* :mod:`.state` what they share (state changes and their events, failing, the queue position and
  the wait of a sandbox task), :mod:`.messages` the hand-over (:class:`Enqueue`, :class:`BrokerView`),
  :mod:`.core` the :class:`Pipeline`.
"""

from __future__ import annotations

from liberopro_platform.pipeline.core import Pipeline
from liberopro_platform.pipeline.episodes import NOT_STORED_REASONS, StoringCallbacks, store_episode
from liberopro_platform.pipeline.messages import BrokerView, Enqueue
from liberopro_platform.pipeline.shards import FRESH_POLICY_AFTER, max_concurrent_episodes
from liberopro_platform.pipeline.state import (
    SandboxWait,
    add_event,
    fail,
    queue_position,
    sandbox_wait,
    set_state,
)
from liberopro_platform.pipeline.sweep import Stuck

__all__ = [
    "FRESH_POLICY_AFTER",
    "NOT_STORED_REASONS",
    "BrokerView",
    "Enqueue",
    "Pipeline",
    "SandboxWait",
    "StoringCallbacks",
    "Stuck",
    "add_event",
    "fail",
    "max_concurrent_episodes",
    "queue_position",
    "sandbox_wait",
    "set_state",
    "store_episode",
]
