"""The shard runner: what the platform runs inside the evaluator container (or in-process for its
local backend).

Its command line is :mod:`liberopro.cli.shard` (``python -m liberopro.cli.shard check|run|warmup``,
the evaluator image's entry point): :func:`check`, :func:`run_shard` and :func:`warmup` here talk
to the platform's worker only through marked lines on stdout (``LIBEROPRO-EVENT {json}``, one
:data:`liberopro.schema.results.Event` each, written by :func:`stdout_emit`;
:mod:`liberopro.schema.shard`); anything else the evaluator prints goes to stderr, which the
worker keeps for admins and never shows to the submitter.

The shard file (:class:`liberopro.schema.shard.ShardSpec`) holds only this shard's instances (a
slice of the hidden manifest) and the ``[instance_id, episode_index]`` pairs still to run.

Streams: ``ShardSpec.streams`` asks for that many simulator processes at once, all sending
requests to the one policy (:func:`shard_streams` caps it by what the policy declares it serves
at once and by the episodes; :func:`liberopro.runs.workers.run_workers` runs them, episodes dealt in
contiguous blocks, :func:`liberopro.runs.workers.assign_blocks`). A record does not depend on the
stream that ran it (an episode is a pure function of its plan and the policy's outputs).
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liberopro.episode.policy_connection import PolicyConnection
from liberopro.runs.workers import RestartWait, ShardStopped
from liberopro.schema.results import (
    DoneEvent,
    EpisodeEvent,
    Event,
    HelloEvent,
    MetadataEvent,
)
from liberopro.schema.shard import CheckSpec, ShardSpec, event_line

log = logging.getLogger("liberopro.runs.shard")

Emit = Callable[[Event], None]


def stdout_emit(event: Event) -> None:
    """Write one event line to stdout and flush it (the worker reads the stream live)."""
    sys.stdout.write(event_line(event) + "\n")
    sys.stdout.flush()


def shard_streams(requested: int, meta: Any, protocol: str, episodes: int) -> tuple[int, str]:
    """(n, why): the simulator streams of a shard, ``requested`` (``ShardSpec.streams``) capped by
    what the policy serves at once and by ``episodes``; at least 1.

    What the policy serves at once: for the liberopro protocol the ``max_concurrent_episodes``
    of its metadata (:func:`liberopro.runs.workers.policy_limit`; a spec-1.0 policy declares none: 1);
    openpi and OpenVLA servers count as 1: their wire carries no episode, so concurrent streams
    would only queue behind each other (the platform serialises them, docs/platform.md).
    """
    from liberopro.runs.workers import policy_limit

    limit = policy_limit(meta, in_process=False) if protocol == "liberopro" else 1
    n = max(1, min(requested, limit or 1, episodes))
    return n, f"{n} stream(s): {requested} asked, the policy serves {limit} at once, {episodes} episode(s)"


def _init_stream(*args: Any) -> None:
    """Runs first in each stream process: its stdout (file descriptor 1 and ``sys.stdout``) goes
    to stderr, so that only the parent writes to the event channel (a library's print in a
    stream could otherwise split an event line); then :func:`liberopro.runs.workers._init_worker`
    with ``args``."""
    import os

    from liberopro.runs.workers import _init_worker

    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _init_worker(*args)


def log_to_stderr() -> None:
    """This module's INFO lines (the streams chosen, a stream that died) on stderr when nothing
    configured logging (``python -m liberopro.cli.shard run``); stdout stays the event channel."""
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


# ---------------------------------------------------------------- validation
def _adapter_check(url: str, spec: CheckSpec) -> dict[str, Any]:
    """The conformance check's shape for a non-liberopro protocol, through its adapter:
    health, metadata, reset, two acts with a synthetic observation. Every request is bounded by
    ``request_timeout_s`` wall-clock seconds (connecting by the client's ``connect_timeout``)."""
    import numpy as np
    from submission_spec.conformance import Check, ConformanceReport, synthetic_observation, timeout_hint
    from submission_spec.transports import make_client

    from submission_spec import PolicyError

    report = ConformanceReport(url=url)
    add = report.checks.append
    client = make_client(url, spec.protocol, request_timeout=spec.request_timeout_s)
    try:
        client.wait_healthy(spec.health_timeout_s)
        add(Check("health", True, "the server answered"))
        meta = client.metadata()
        report.metadata = meta.model_dump(mode="json")
        add(Check("metadata", True, f"{spec.protocol} adapter: {meta.policy_name}"))
        episode_id = uuid.uuid4().hex
        client.reset(episode_id, "put the bowl on the plate")
        rng = np.random.default_rng(0)
        for step in (0, 1):
            t0 = time.perf_counter()
            result = client.act(synthetic_observation(meta, episode_id, step, rng).to_message(), meta.chunk_length)
            elapsed = time.perf_counter() - t0
            add(
                Check(
                    f"act (step {step})",
                    elapsed <= spec.act_limit_s,
                    f"chunk {result.actions.shape} in {elapsed * 1e3:.0f} ms",
                    f"answer within {spec.act_limit_s:.0f} s per request",
                )
            )
    except PolicyError as exc:
        add(
            Check(
                "protocol",
                False,
                f"{exc.reason}: {exc.detail}",
                timeout_hint(spec.request_timeout_s)
                if exc.reason == "policy_timeout"
                else f"the server must speak the {spec.protocol} protocol its image label declares",
            )
        )
    finally:
        client.close()
    return report.to_dict()


def check(url: str, spec: CheckSpec) -> dict[str, Any]:
    """The conformance report of the policy at ``url`` as a dict
    (:meth:`submission_spec.conformance.ConformanceReport.to_dict`); never raises for a policy
    fault (it is a failed check in the report)."""
    if spec.protocol != "liberopro":
        return _adapter_check(url, spec)
    from submission_spec.conformance import check_policy

    report = check_policy(
        url,
        health_timeout=spec.health_timeout_s,
        request_timeout=spec.request_timeout_s,
        act_latency_limit_s=spec.act_limit_s,
    )
    return report.to_dict()


# ---------------------------------------------------------------- a shard
def run_shard(
    spec: ShardSpec,
    emit: Emit,
    *,
    policy_url: str | None = None,
    policy_cmd: str | None = None,
    policy_log: Path | None = None,
    max_restarts: int = 3,
    should_stop: Callable[[], bool] = lambda: False,
    on_open: Callable[[PolicyConnection], None] | None = None,
) -> None:
    """Run the shard's episodes against the policy, emitting events (``hello``, ``metadata``, one
    ``episode`` per episode, ``done``).

    The policy is ``policy_url`` or ``policy_cmd`` (exactly one; a command's output goes to
    ``policy_log`` and it is restarted up to ``max_restarts`` times when it died before an
    episode), opened by :func:`liberopro.episode.policy_connection.open_policy` once the shard's instances
    were checked; ``on_open`` sees the open :class:`~liberopro.episode.policy_connection.PolicyConnection`
    before the first episode. A policy failure ends only its episode; a policy that is down
    (crashed and restarting) is waited for up to ``spec.restart_wait_s`` seconds before the
    next episode (once: a policy that stayed down is not waited for again until it answers).
    ``should_stop`` is asked before every episode and during that wait.

    Raises only for what stops the whole shard: :class:`liberopro.stack.StackError`,
    :class:`liberopro.schema.manifest.ManifestError` (an instance the shift catalog rejects, or
    an episode of no instance: checked whole before the policy is contacted),
    :class:`submission_spec.PolicyError` before the first episode (unreachable policy, bad
    metadata), :class:`ShardStopped`; ``ValueError`` for neither or both of ``policy_url`` and
    ``policy_cmd``.
    """
    from liberopro import EVALUATOR_VERSION
    from liberopro.episode.policy_connection import open_policy
    from liberopro.episode.runner import EpisodeRunner, RunSettings
    from liberopro.instances.build import instance_problems, plan_episodes
    from liberopro.runs.workers import auto_render_size
    from liberopro.schema.manifest import ManifestError
    from liberopro.stack import check_stack

    if (policy_url is None) == (policy_cmd is None):
        raise ValueError("give exactly one of policy_url or policy_cmd")
    versions = check_stack()
    emit(HelloEvent(evaluator_version=EVALUATOR_VERSION, stack=versions))
    instances = {i.instance_id: i for i in spec.instances}
    problems = [f"instance {i.instance_id}: {p}" for i in spec.instances for p in instance_problems(i)]
    problems += [f"episode {e} of unknown instance {iid}" for iid, e in spec.episodes if iid not in instances]
    if problems:
        raise ManifestError(f"shard {spec.shard_index}: " + "; ".join(problems[:10]))
    plans = []
    for instance_id, episode_index in spec.episodes:
        plans.append(plan_episodes([instances[instance_id]], episode_index + 1, spec.seed)[episode_index])
    options: dict[str, Any] = {"connect_timeout": spec.connect_timeout_s, "request_timeout": spec.request_timeout_s}
    with open_policy(
        policy_url,
        policy_cmd,
        protocol=spec.protocol,
        client_options=options,
        startup_timeout=spec.startup_timeout_s,
        log_path=policy_log,
        max_restarts=max_restarts,
    ) as policy:
        if on_open is not None:
            on_open(policy)
        client, meta = policy.client, policy.metadata
        emit(MetadataEvent(metadata=meta.model_dump(mode="json")))
        settings = RunSettings(max_steps=spec.max_steps, episode_policy_budget_s=spec.episode_budget_s)
        settings.render_size = spec.render_size or auto_render_size(meta)
        n, why = shard_streams(spec.streams, meta, spec.protocol, len(plans))
        log.info("shard %d: %s", spec.shard_index, why)
        if n == 1:
            before = RestartWait(client, spec.restart_wait_s, should_stop, policy.ensure_running)
            runner = EpisodeRunner(client, meta, settings, before_episode=before)
            try:
                runner.run(plans, lambda r: emit(EpisodeEvent(record=r)))
            finally:
                runner.close()
        else:
            from liberopro.runs.workers import PolicyAccess, run_workers

            def between() -> None:  # about once a second, in this process
                if should_stop():
                    raise ShardStopped("stop requested")
                policy.ensure_running()

            access = PolicyAccess(
                url=policy.url, protocol=spec.protocol, client_options=options, restart_wait_s=spec.restart_wait_s
            )
            run_workers(
                plans,
                n,
                access,
                meta,
                settings,
                write=lambda _r: None,
                arrived=lambda r: emit(EpisodeEvent(record=r)),
                note=log.warning,
                between=between,
                initializer=_init_stream,
                by_task=False,
            )
        emit(DoneEvent(episodes=len(plans)))


def warmup() -> None:
    """Build one small LIBERO scene and step it, so that robosuite's numba functions are compiled
    into ``NUMBA_CACHE_DIR`` (the evaluator image does this at build time,
    ``docker/evaluator.Dockerfile``: without it every sandbox spends ~30 s compiling before its
    first episode)."""
    import numpy as np

    from liberopro.sim.scene import LiberoScene
    from liberopro.sim.tasks import TaskRef, task_info

    info = task_info(TaskRef("libero_goal", 0))
    scene = LiberoScene(info, cameras=("agentview",), render_size=64)
    try:
        scene.start_episode(info.init_states()[0], 0)
        scene.settle()
        for _ in range(3):
            scene.step(np.array([0.1, 0, 0, 0, 0, 0, -1.0]))
        scene.frame()
    finally:
        scene.close()


def seed_numba_cache() -> None:
    """Copy the image's pre-compiled numba cache (``LIBEROPRO_NUMBA_CACHE_SEED``) to the writable
    ``NUMBA_CACHE_DIR`` once (the container's root file system is read-only)."""
    import os
    import shutil

    seed, target = os.environ.get("LIBEROPRO_NUMBA_CACHE_SEED"), os.environ.get("NUMBA_CACHE_DIR")
    if seed and target and os.path.isdir(seed) and not os.path.exists(target):
        shutil.copytree(seed, target)
