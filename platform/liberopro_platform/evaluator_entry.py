"""The evaluator side of a sandbox: what runs inside the evaluator container (or in-process for
the local backend).

Two commands, both talking to the worker only through marked lines on stdout
(``LIBEROPRO-EVENT {json}``, one :data:`liberopro.schema.results.Event` each); anything else the evaluator prints goes to stderr, which the
worker keeps for admins and never shows to the submitter:

``check URL``   the spec conformance check (validation): one ``conformance`` event.
``run URL SHARD_JSON``   the shard's episodes: ``hello`` (evaluator and simulator versions),
                ``metadata``, one ``episode`` per finished episode, then ``done`` or ``error``.

The shard file holds only this shard's instances (a slice of the hidden manifest) and the
``[instance_id, episode_index]`` pairs still to run.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liberopro.schema.manifest import Instance
from liberopro.schema.results import (
    ConformanceEvent,
    DoneEvent,
    EpisodeEvent,
    ErrorEvent,
    Event,
    HelloEvent,
    MetadataEvent,
    event_json,
    parse_event_json,
)
from pydantic import BaseModel, ConfigDict, ValidationError

MARK = "LIBEROPRO-EVENT "

log = logging.getLogger("liberopro_platform.evaluator_entry")

Emit = Callable[[Event], None]


def stdout_emit(event: Event) -> None:
    """Write one event line to stdout and flush it (the worker reads the stream live)."""
    sys.stdout.write(MARK + event_json(event) + "\n")
    sys.stdout.flush()


def parse_event(line: str) -> Event | None:
    """The event on ``line``, or None for any other line (a marked line that is no valid event
    is logged and skipped)."""
    if not line.startswith(MARK):
        return None
    try:
        return parse_event_json(line[len(MARK) :])
    except ValidationError as exc:
        log.warning("skipped a malformed evaluator event: %s", str(exc)[:500])
        return None


class ShardSpec(BaseModel):
    """What one shard run needs: its instances (typed: :class:`liberopro.schema.manifest.Instance`,
    the slice of the verified manifest), the ``(instance_id, episode_index)`` pairs to run, and
    the limits."""

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


class CheckSpec(BaseModel):
    """Time limits of the validation check."""

    protocol: str = "liberopro"
    health_timeout_s: float = 120.0
    request_timeout_s: float = 30.0
    act_limit_s: float = 10.0


class ShardStopped(Exception):
    """The worker asked the shard to stop (cancel or time limit) between episodes."""


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
    """The conformance report of the policy at ``url`` as a dict (never raises for a policy fault)."""
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
    url: str,
    spec: ShardSpec,
    emit: Emit,
    should_stop: Callable[[], bool] = lambda: False,
    on_episode_start: Callable[[], None] | None = None,
) -> None:
    """Run the shard's episodes against the policy at ``url``, emitting events. A policy failure
    ends only its episode; a policy that is down (crashed and restarting) is waited for up to
    ``restart_wait_s`` before the next episode (``on_episode_start`` may restart it first).
    Raises only for what stops the whole shard: :class:`liberopro.stack.StackError`,
    :class:`liberopro.schema.manifest.ManifestError` (an instance the shift catalog rejects, or
    an episode of no instance: checked whole before the policy is contacted),
    :class:`submission_spec.PolicyError` before the first episode (unreachable policy, bad
    metadata), :class:`ShardStopped`."""
    from liberopro import EVALUATOR_VERSION
    from liberopro.evaluation import auto_render_size
    from liberopro.instances import instance_problems, plan_episodes
    from liberopro.runner import EpisodeRunner, RunSettings
    from liberopro.schema.manifest import ManifestError
    from liberopro.stack import check_stack
    from submission_spec.polling import poll_until
    from submission_spec.transports import make_client

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
    client = make_client(url, spec.protocol, **options)
    try:
        client.wait_healthy(spec.startup_timeout_s)
        meta = client.metadata()
        emit(MetadataEvent(metadata=meta.model_dump(mode="json")))
        settings = RunSettings(max_steps=spec.max_steps, episode_policy_budget_s=spec.episode_budget_s)
        settings.render_size = spec.render_size or auto_render_size(meta)
        state = {"down": False}

        def answered(_left: float) -> bool:
            if should_stop():
                raise ShardStopped("stop requested")
            return client.health(timeout=2.0)

        def before_episode() -> None:
            if should_stop():
                raise ShardStopped("stop requested")
            if on_episode_start is not None:
                on_episode_start()
            if client.health(timeout=2.0):
                state["down"] = False
                return
            if state["down"]:
                return  # it stayed down after a full wait: do not wait again for every episode
            if not poll_until(answered, spec.restart_wait_s, 0.5):
                state["down"] = True

        runner = EpisodeRunner(client, meta, settings, before_episode=before_episode)
        try:
            runner.run(plans, lambda r: emit(EpisodeEvent(record=r)))
        finally:
            runner.close()
        emit(DoneEvent(episodes=len(plans)))
    finally:
        client.close()


def warmup() -> None:
    """Build one small LIBERO scene and step it, so that robosuite's numba functions are compiled
    into ``NUMBA_CACHE_DIR`` (the evaluator image does this at build time: without it every
    sandbox spends ~30 s compiling before its first episode)."""
    import numpy as np
    from liberopro.sim import LiberoScene
    from liberopro.tasks import TaskRef, task_info

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


def main(argv: list[str] | None = None) -> int:
    """``python -m liberopro_platform.evaluator_entry check URL CHECK_JSON``,
    ``... run URL SHARD_JSON_PATH`` or ``... warmup``."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["warmup"]:
        warmup()
        return 0
    if len(args) == 3 and args[0] == "check":
        report = check(args[1], CheckSpec.model_validate_json(args[2]))
        stdout_emit(ConformanceEvent(report=report))
        return 0
    if len(args) == 3 and args[0] == "run":
        from liberopro.schema.manifest import ManifestError
        from liberopro.stack import StackError

        from submission_spec import PolicyError

        spec = ShardSpec.model_validate_json(Path(args[2]).read_text())
        try:
            run_shard(args[1], spec, stdout_emit)
        except PolicyError as exc:
            stdout_emit(ErrorEvent(kind="policy", reason=exc.reason, message=exc.detail))
            return 3
        except (StackError, ManifestError) as exc:
            stdout_emit(ErrorEvent(kind="internal", message=str(exc)))
            return 4
        return 0
    print(
        "usage: python -m liberopro_platform.evaluator_entry check URL CHECK_JSON | run URL SHARD_JSON", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
