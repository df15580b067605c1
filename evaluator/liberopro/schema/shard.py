"""The shard contract between the platform and the evaluator's shard runner (:mod:`liberopro.runs.shard`).

* :class:`ShardSpec`: what one shard run needs (the JSON file ``python -m liberopro.cli.shard run``
  reads; the platform writes it).
* :class:`CheckSpec`: the time limits of the validation check (``python -m liberopro.cli.shard check``
  reads it as its JSON argument).
* :func:`shard_streams` (with :func:`shard_streams_reason`): how many simulator streams a shard
  runs against one policy, the one rule for the platform (which sets ``ShardSpec.streams``) and
  the shard runner (which caps it again by the policy's live ``/metadata``).
* :data:`MARK`, :func:`event_line`, :func:`parse_event`: the runner's stdout protocol, one
  ``LIBEROPRO-EVENT {json}`` line per :data:`liberopro.schema.results.Event` (the union itself,
  keyed on ``type``, lives in :mod:`liberopro.schema.results`; ``docs/results.md``).

Light like every module of :mod:`liberopro.schema`: nothing here imports the simulator
(robosuite, mujoco, libero, cv2), so the platform, whose image has none of them, imports it.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from liberopro.schema.manifest import Instance
from liberopro.schema.results import Event, event_json, parse_event_json

#: The prefix of every event line on the shard runner's stdout (anything else it prints goes to
#: stderr, which the platform keeps for admins and never shows to the submitter).
MARK = "LIBEROPRO-EVENT "

log = logging.getLogger("liberopro.schema.shard")


def event_line(event: Event) -> str:
    """``event`` as one marked stdout line, without the newline: ``MARK`` + its JSON."""
    return MARK + event_json(event)


def parse_event(line: str) -> Event | None:
    """The event on ``line`` (one stdout line, newline stripped), or None for any other line.

    A marked line that is no valid event (bad JSON, unknown ``type``, a field of the wrong type)
    is logged as a warning and skipped (None): never raises."""
    if not line.startswith(MARK):
        return None
    try:
        return parse_event_json(line[len(MARK) :])
    except ValidationError as exc:
        log.warning("skipped a malformed evaluator event: %s", str(exc)[:500])
        return None


class ShardSpec(BaseModel):
    """What one shard run needs: its instances (the slice of the verified hidden manifest,
    :class:`liberopro.schema.manifest.Instance`), the ``(instance_id, episode_index)`` pairs
    still to run, and the limits.

    Fields: ``seed`` (the episode plans' seed, :func:`liberopro.instances.build.plan_episodes`),
    ``max_steps`` (policy steps per episode; None: the task's horizon), ``protocol`` (the
    policy's wire protocol, :mod:`submission_spec.transports`), ``connect_timeout_s`` and
    ``request_timeout_s`` (per request, seconds), ``episode_budget_s`` (the policy's total
    answer time per episode, seconds), ``startup_timeout_s`` (seconds for the policy to answer
    its health check before the first episode), ``restart_wait_s`` (seconds to wait for a
    policy that is down before an episode), ``render_size`` (camera pixels, square; None: from
    the policy's metadata, :func:`liberopro.runs.workers.auto_render_size`), ``streams`` (simulator
    processes run at once against the one policy, capped by what it declares it serves at once
    and by the episodes: :func:`shard_streams`). Unknown keys are refused
    (``extra="forbid"``).
    """

    model_config = ConfigDict(extra="forbid")
    submission_id: str
    shard_index: int
    instances: list[Instance]
    episodes: list[tuple[str, int]]
    seed: int = 0
    max_steps: int | None = None
    protocol: str = "liberopro"
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 30.0
    episode_budget_s: float = 600.0
    startup_timeout_s: float = 120.0
    restart_wait_s: float = 120.0
    render_size: int | None = None
    streams: int = Field(1, ge=1, le=64)


class CheckSpec(BaseModel):
    """Limits of the validation (conformance) check, seconds: ``health_timeout_s`` for the
    server to answer its health check, ``request_timeout_s`` per request, ``act_limit_s`` the
    longest ``/act`` answer that passes; ``protocol`` the policy's wire protocol."""

    protocol: str = "liberopro"
    health_timeout_s: float = 120.0
    request_timeout_s: float = 30.0
    act_limit_s: float = 10.0


# ------------------------------------------------------------------------------ shard scheduling
def declared_concurrency(max_concurrent_episodes: int | None) -> int:
    """Episodes a policy serves at once by its ``/metadata``: its ``max_concurrent_episodes``
    (spec 1.1), 1 when it declares none (every spec-1.0 policy)."""
    return int(max_concurrent_episodes) if max_concurrent_episodes else 1


def _served_at_once(protocol: str, max_concurrent_episodes: int | None) -> int:
    # openpi and OpenVLA servers count as 1: their wire carries no episode, so concurrent streams
    # would only queue behind each other (serialised, docs/platform.md).
    return declared_concurrency(max_concurrent_episodes) if protocol == "liberopro" else 1


def shard_streams(requested: int, protocol: str, max_concurrent_episodes: int | None, episodes: int) -> int:
    """Simulator streams of one shard: ``requested`` (the platform's ``evaluator_streams``, or what
    the engine fits; in the shard runner ``ShardSpec.streams``), at most what the policy serves at
    once (for the ``liberopro`` protocol its declared ``max_concurrent_episodes``,
    :func:`declared_concurrency`; openpi and OpenVLA servers 1: their wire has no episode) and at
    most ``episodes``; at least 1."""
    return max(1, min(int(requested), _served_at_once(protocol, max_concurrent_episodes), int(episodes)))


def shard_streams_reason(requested: int, protocol: str, max_concurrent_episodes: int | None, episodes: int) -> str:
    """One line saying why :func:`shard_streams` chose its number (the shard runner logs it)."""
    n = shard_streams(requested, protocol, max_concurrent_episodes, episodes)
    serves = _served_at_once(protocol, max_concurrent_episodes)
    return f"{n} stream(s): {requested} asked, the policy serves {serves} at once, {episodes} episode(s)"
