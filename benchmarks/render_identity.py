"""On-demand rendering and worker processes change the work, not the episode (issue 12's full
comparison).

    nice -n 10 uv run --frozen python benchmarks/render_identity.py [--max-steps 40] [--replan 5] [--workers 2]

The same episodes run three times:

- ``on-demand``: one process, :class:`liberopro.episode.runner.EpisodeRunner` rendering a camera only when
  something reads its image (``RunSettings.on_demand_render``, the default);
- ``eager``: one process, every camera rendered at every reset, settle step and step
  (``on_demand_render=False``, the loop before issue 12);
- ``workers``: ``--workers`` simulator processes (:func:`liberopro.runs.workers.run_workers`, as
  ``liberopro evaluate --workers N`` runs them), on demand, each with its own instance of the policy.

The episodes: 3 tasks of different suites (``--tasks``) x the cases nominal, S14 (image noise),
D10 (observation freeze) and D12 (observation latency), one episode each (init state 0, seed 0).
The shift parameters are a real draw (:func:`liberopro.instances.build.make_instance`, seed 0), except
that a runtime shift's ``fallback_step`` is brought to at most ``max_steps // 3`` when the draw's is
later, so that it fires inside the shortened episode. The policy asks for both cameras
(``--image-size`` px, rendered at ``--render-size`` px) and every proprioception field; its action
chunks (``--replan`` actions, replanned after all of them) depend on the step only, and it writes,
per observation it receives, a sha256 of each camera image (shape, dtype and bytes) and of each
proprioception array to ``<episode_id>.json`` in a temporary folder, so that the worker processes'
observations come back to the parent beside their records (``EpisodeRecord.episode_id``).

Compared, per episode: the record's :meth:`~liberopro.runs.summary.EpisodeRecord.outcome_key` and the
sequence of (step, image hashes, proprioception hashes) the policy received, across the three
modes. Printed: a row per (task, case) with the steps, the renders per camera in each mode
(``EpisodeRecord.renders``: agentview/wrist) and whether everything is identical; where something
differs, the first observation that does (step, camera or field); then the totals: renders on
demand vs eager, and per mode the CPU time (``time.process_time`` of this process, plus
``resource.getrusage(RUSAGE_CHILDREN)`` for the worker processes) and wall time, scene builds
included. This process runs with the workers' single-thread settings
(:data:`liberopro.runs.workers.THREAD_ENV`), so that the three modes' CPU times compare. Exit code 1
when anything differs. Not a test (the suite's small versions:
``tests/evaluator/test_determinism.py``, the ``--workers`` test of ``tests/evaluator/test_cli.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from liberopro.runs.workers import THREAD_ENV

os.environ.update(THREAD_ENV)  # one thread, as in the worker processes, before numpy and MuJoCo load

import numpy as np  # noqa: E402
import typer  # noqa: E402

CAMERAS = ("agentview", "wrist")
CASES = ("nominal", "S14", "D10", "D12")
MODES = ("on-demand", "eager", "workers")


def digest(array: np.ndarray) -> str:
    """sha256 (hex, first 16 characters) of an array's shape, dtype and C-order bytes."""
    a = np.ascontiguousarray(array)
    h = hashlib.sha256(f"{a.shape}|{a.dtype.str}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()[:16]


def policy_metadata(image_size: int, replan: int):
    """The hashing policy's :class:`submission_spec.PolicyMetadata`: both cameras at
    ``image_size`` px, every proprioception field, chunks of ``replan`` actions used whole."""
    from submission_spec import PROPRIO_FIELDS, CameraSpec, PolicyMetadata

    return PolicyMetadata(
        policy_name="render-identity",
        cameras=[CameraSpec(name=c, height=image_size, width=image_size) for c in CAMERAS],
        chunk_length=replan,
        replan_steps=replan,
        state_fields=list(PROPRIO_FIELDS),
    )


class HashingPolicy:
    """A deterministic in-process policy (:class:`submission_spec.Policy`) that writes what it sees.

    ``act`` returns a (replan, 7) float64 chunk that depends on the observation's step only (a slow
    sweep of the end effector, gripper open) and rewrites ``out_dir/<episode_id>.json``: a list,
    one item per observation received in the episode, ``{"step": int, "images": {camera: hash},
    "proprio": {field: hash}}`` (:func:`digest`)."""

    def __init__(self, out_dir: str, image_size: int, replan: int) -> None:
        self.metadata = policy_metadata(image_size, replan)
        self.out_dir = Path(out_dir)
        self.replan = replan
        self.seen: dict[str, list[dict]] = {}

    def reset(self, episode_id: str, instruction: str) -> None:
        self.seen[episode_id] = []

    def act(self, obs) -> np.ndarray:
        seen = self.seen.setdefault(obs.episode_id, [])
        seen.append(
            {
                "step": obs.step,
                "images": {c: digest(im) for c, im in sorted(obs.images.items())},
                "proprio": {f: digest(np.asarray(v)) for f, v in sorted(obs.proprio.items())},
            }
        )
        (self.out_dir / f"{obs.episode_id}.json").write_text(json.dumps(seen))
        t = obs.step + np.arange(self.replan)[:, None]
        chunk = np.zeros((self.replan, 7))
        chunk[:, :3] = 0.5 * np.cos(0.3 * t + np.array([0.0, 2.1, 4.2]))
        chunk[:, 6] = -1.0
        return chunk


def make_hashing_policy(out_dir: str, image_size: int, replan: int, scene_of=None) -> HashingPolicy:
    """A :class:`HashingPolicy`; with the first three arguments bound (``functools.partial``) it is
    the ``local_policy`` of :class:`liberopro.runs.workers.PolicyAccess` (``scene_of`` is not read)."""
    return HashingPolicy(out_dir, image_size, replan)


def plans_for(tasks: list[str], max_steps: int) -> tuple[list, list[str]]:
    """(episode plans, lines saying the parameters): one plan per task x case (init state 0, seed 0),
    parameters drawn by :func:`liberopro.instances.build.make_instance` (seed 0), ``fallback_step`` brought
    to at most ``max_steps // 3``. Raises ``ValueError`` when a case does not apply to a task."""
    from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry, make_instance
    from liberopro.sim.tasks import TaskRef

    plans, lines = [], []
    for text in tasks:
        suite, index = text.split(":")
        ref = TaskRef(suite, int(index))
        for case in CASES:
            inst = make_instance(ref, [] if case == "nominal" else [case], seed=0)
            if isinstance(inst, str):
                raise ValueError(inst)
            shifts = []
            for s in inst.shifts:
                params = dict(s.params)
                if "fallback_step" in params and params["fallback_step"] > max_steps // 3:
                    params["fallback_step"] = max(1, max_steps // 3)
                shifts.append(ShiftEntry(id=s.id, params=params))
                lines.append(f"  {ref.suite}:{ref.index} {s.id}: drawn {s.params} -> run {params}")
            inst = Instance(instance_id=inst.instance_id, suite=ref.suite, task_index=ref.index, shifts=shifts)
            plans.append(EpisodePlan(inst, 0, 0, 0))
    return plans, lines


def _first_difference(a: list[dict], b: list[dict]) -> str:
    """Where two observation-hash sequences first differ, in words."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x == y:
            continue
        if x["step"] != y["step"]:
            return f"observation {i}: step {x['step']} vs {y['step']}"
        what = [c for c in x["images"] if x["images"][c] != y["images"].get(c)]
        what += [f for f in x["proprio"] if x["proprio"][f] != y["proprio"].get(f)]
        return f"step {x['step']}: {', '.join(what)}"
    return f"{len(a)} vs {len(b)} observations"


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_mode(mode: str, plans: list, out: Path, meta: Any, settings: Any, image_size: int, replan: int, workers: int):
    """Run ``plans`` in ``mode`` (on-demand, eager, workers), the hashing policy writing what it
    saw under ``out``: the records and ``(CPU s, wall s)`` (CPU: this process and its children)."""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.episode.runner import EpisodeRunner
    from liberopro.runs.workers import PolicyAccess, run_workers

    got: list = []
    c0, k0, w0 = time.process_time(), _cpu_children(), time.perf_counter()
    if mode == "workers":
        access = PolicyAccess(local_policy=functools.partial(make_hashing_policy, str(out), image_size, replan))
        run_workers(plans, workers, access, meta, settings, got.append)
    else:
        client = LocalPolicyClient(HashingPolicy(str(out), image_size, replan))
        EpisodeRunner(client, meta, settings).run(plans, got.append)
    return got, (time.process_time() - c0 + _cpu_children() - k0, time.perf_counter() - w0)


def _problems(recs: list, obs: list[list[dict]]) -> list[str]:
    """What differs between the modes' records and observations of one instance (empty: identical)."""
    problems = []
    if any(r is None for r in recs):
        problems.append("missing record in " + ", ".join(m for m, r in zip(MODES, recs, strict=True) if r is None))
    else:
        for m, r in zip(MODES[1:], recs[1:], strict=True):
            if r.outcome_key() != recs[0].outcome_key():
                diff = [k for (k, v), (_, w) in zip(r.outcome_key(), recs[0].outcome_key(), strict=True) if v != w]
                problems.append(f"record {m} vs on-demand: {', '.join(diff)}")
        if not recs[0].valid or recs[0].termination_reason not in ("horizon", "success"):
            problems.append(f"episode ended {recs[0].termination_reason}: {recs[0].detail}")
    for m, o in zip(MODES[1:], obs[1:], strict=True):
        if o != obs[0]:
            problems.append(f"observations {m} vs on-demand: {_first_difference(obs[0], o)}")
    if not obs[0]:
        problems.append("no observation recorded")
    return problems


def _compare(plans: list, records: dict[str, dict], seen: dict[str, dict[str, list[dict]]]) -> tuple[bool, dict]:
    """Print one row per episode (renders per mode, identical or not, what differs); return
    whether any differs and the renders per mode."""
    print(
        f"\n{'task':<17} {'case':<8} {'steps':>5} {'obs':>4}  "
        + "  ".join(f"{m + ' renders':>17}" for m in MODES)
        + "  identical"
    )
    differs = False
    totals = {m: 0 for m in MODES}
    for plan in plans:
        iid = plan.instance.instance_id
        recs = [records[m].get(iid) for m in MODES]
        obs = [seen[m].get(iid, []) for m in MODES]
        problems = _problems(recs, obs)
        differs = differs or bool(problems)
        renders = []
        for m, r in zip(MODES, recs, strict=True):
            n = (r.renders or {}) if r is not None else {}
            totals[m] += sum(n.values())
            renders.append("/".join(str(n.get(c, 0)) for c in CAMERAS))
        steps = recs[0].steps if recs[0] is not None else 0
        task = f"{plan.instance.suite}:{plan.instance.task_index}"
        print(
            f"{task:<17} {plan.instance.case:<8} {steps:>5} {len(obs[0]):>4}  "
            + "  ".join(f"{x:>17}" for x in renders)
            + f"  {'no' if problems else 'yes'}"
        )
        for p in problems:
            print(f"    ! {p}")
    return differs, totals


def main(
    tasks: str = typer.Option(
        "libero_goal:1,libero_spatial:0,libero_10:0", help="Tasks, SUITE:INDEX, comma-separated."
    ),
    max_steps: int = typer.Option(40, help="Policy steps per episode (the horizon is cut to this)."),
    replan: int = typer.Option(5, help="Actions per chunk, all executed before the next request."),
    render_size: int = typer.Option(256, help="Render resolution of the cameras (px)."),
    image_size: int = typer.Option(224, help="Image size the policy asks for (px)."),
    workers: int = typer.Option(2, help="Simulator processes of the workers mode."),
) -> None:
    """Run the episodes on demand, eagerly and in worker processes; print the comparison; exit 1
    when a record or a delivered observation differs."""
    from liberopro.episode.runner import RunSettings
    from liberopro.runs.summary import EpisodeRecord
    from liberopro.stack import check_stack

    versions = check_stack()
    plans, lines = plans_for([t.strip() for t in tasks.split(",") if t.strip()], max_steps)
    meta = policy_metadata(image_size, replan)
    print(
        f"stack: mujoco {versions['mujoco']}, robosuite {versions['robosuite']}, MUJOCO_GL={versions['mujoco_gl']}; "
        f"{len(plans)} episodes of {max_steps} steps, replan {replan}, cameras {'/'.join(CAMERAS)} "
        f"rendered at {render_size} px, sent at {image_size} px"
    )
    print("shift parameters (drawn with seed 0):")
    print("\n".join(lines))

    records: dict[str, dict[str, EpisodeRecord]] = {m: {} for m in MODES}
    seen: dict[str, dict[str, list[dict]]] = {m: {} for m in MODES}
    cost: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="render-identity-") as tmp:
        for mode in MODES:
            out = Path(tmp) / mode
            out.mkdir()
            settings = RunSettings(render_size=render_size, max_steps=max_steps, on_demand_render=mode != "eager")
            got, cost[mode] = _run_mode(mode, plans, out, meta, settings, image_size, replan, workers)
            for rec in got:
                records[mode][rec.instance_id] = rec
                path = out / f"{rec.episode_id}.json"
                seen[mode][rec.instance_id] = json.loads(path.read_text()) if path.exists() else []
            print(f"{mode}: {len(got)} episodes, {cost[mode][1]:.1f} s wall, {cost[mode][0]:.1f} s CPU", flush=True)

    differs, totals = _compare(plans, records, seen)
    lazy, eager = totals["on-demand"], totals["eager"]
    print(
        f"\nrenders (both cameras, all episodes): on-demand {lazy}, eager {eager} "
        f"({eager / max(lazy, 1):.1f}x), workers {totals['workers']}"
    )
    for m in MODES:
        cpu, wall = cost[m]
        print(
            f"  {m:<10} CPU {cpu:7.1f} s  wall {wall:7.1f} s"
            + ("  (CPU: this process + its children)" if m == "workers" else "")
        )
    print("identical: " + ("no (see the rows marked !)" if differs else "yes, every record and every observation"))
    if differs:
        sys.exit(1)


if __name__ == "__main__":
    typer.run(main)
