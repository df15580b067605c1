"""Runtime shifts that act whatever the policy does (issue 11, item 3): how many episodes under a
runtime shift are invalid at run time, over the runtime instances of the training split.

    nice -n 10 uv run --frozen python benchmarks/runtime_validity.py [--manifest manifests/train.jsonl]
        [--tasks libero_goal:1,...] [--shifts D01,D02] [--policies oracle,random,zero] [--workers 2]
        [--out runtime_validity.json] [--resume]

Instances: with ``--manifest``, its single runtime-shift instances (the validated draws a
generated manifest holds: what issue 11 asks to measure), filtered by ``--shifts`` and
``--tasks``; without it, :func:`liberopro.instances.generation.generate` with ``validate=False``
(parameter draw 0 of seed 0, as a manifest draws them before validation; a pair that does not
apply is listed as not applicable), for the runtime shifts D01-D20 (or ``--shifts``) x the
training tasks (or ``--tasks``, within the training split). Each instance runs one episode
(init state 0, env seed 0) under each policy:

* ``oracle``: the privileged scripted controller (:class:`liberopro.instances.generation._ValidationPolicy`),
  which reaches the trigger phases;
* ``random``: the example random policy (:class:`submission_spec.examples.RandomPolicy`) in
  this process (:class:`liberopro.episode.local_policy.LocalPolicyClient`), which mostly reaches no phase
  and meets the fallback step;
* ``zero``: the example zero policy (:class:`submission_spec.examples.ZeroPolicy`: the arm held
  at its start, gripper open), which reaches no phase and meets the fallback step with the arm
  parked where it began.

Episodes stop once their shift has acted (``RunSettings.stop_when_shifts_done``); at most
``fallback_step + MAX_DELAY_STEPS + 60`` steps. Cameras only for Observation shifts (agentview
and wrist at 64 px, :func:`liberopro.instances.generation._validation_metadata`); none otherwise.

Output (stdout and ``--out``, JSON; every episode's row also goes to ``<out>.rows.jsonl`` as it
ends, so an interrupted run keeps what it measured): per policy and shift, ``episodes``, ``phase``, ``fallback``
(fired by), ``delayed`` (fired after a deferral), ``not_fired`` (the episode ended first: a
success, or a policy that ended early), ``invalid`` (the shift could not be realised at run time:
``shift_blocked`` since issue 22, item 5, a failure charged to the policy, or ``shift_invalid``
from an evaluator before it; ``blocked`` counts the former among them) with each such
episode's task and reason, ``delays`` (task -> delay steps) and the wall time; and every
episode's row. ``--resume`` keeps the rows already in ``<out>.rows.jsonl`` whose instance (by
id) and policy are still selected and runs only the other episodes (``resumed_episodes`` counts
the kept ones; ``wall_s`` is this run's): a sweep started on the tasks a generation has finished
is completed on the whole manifest later. Not a test: figures go to the issue and the notes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import typer

RUNTIME = [f"D{i:02d}" for i in range(1, 21)]
POLICIES = ("oracle", "random", "zero")
#: Steps an episode may run beyond its fallback step (the delay bound, plus the longest window
#: of a runtime shift: D18's 14 + 10 release steps, D19's 15 push steps, D10-D17's bursts).
EXTRA_STEPS = 60


def _runner(name: str, shift_id: str, ref, settings, cache: dict):
    """An episode runner driving the policy ``name`` in this process, with the cameras the shift
    needs (none unless it is an Observation shift)."""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.episode.runner import CurrentScene, EpisodeRunner
    from liberopro.instances.generation import _validation_metadata, _ValidationPolicy

    from submission_spec.examples import RandomPolicy, ZeroPolicy

    meta = _validation_metadata([shift_id])
    policy: Any = ZeroPolicy() if name == "zero" else RandomPolicy()
    if name in ("random", "zero"):
        policy.metadata = meta = policy.metadata.model_copy(update={"cameras": meta.cameras})
    scene = CurrentScene()
    if name == "oracle":
        policy = _ValidationPolicy(meta, scene, ref)
    return scene.bind(EpisodeRunner(LocalPolicyClient(policy), meta, settings, scenes=cache))


def _union_scenes(instances, cache: dict) -> None:
    """Build one scene per camera set for a task's instances, holding the props of all of them,
    and register it in ``cache`` under each instance's own scene key (the runner's
    :meth:`~liberopro.episode.runner.EpisodeRunner.scene_for` then uses it): building a LIBERO scene costs
    tens of seconds, stepping one episode a few. Parked props leave the task's scene as it was
    (``tests/evaluator/test_shifts_props.py`` checks it bit for bit, images and physics)."""
    from liberopro.catalog import shift_class
    from liberopro.episode.runner import EpisodeRunner
    from liberopro.instances.generation import _validation_metadata
    from liberopro.sim.scene import LiberoScene, SceneVariant
    from liberopro.sim.tasks import task_info

    by_cams: dict[tuple[str, ...], list[SceneVariant]] = {}
    for inst in instances:
        entry = inst.shifts[0]
        cams = tuple(c.name for c in _validation_metadata([entry.id]).cameras)
        shift = shift_class(entry.id)(entry.params)
        by_cams.setdefault(cams, []).append(EpisodeRunner.variant_of([shift]))
    for cams, variants in by_cams.items():
        union = SceneVariant()
        for v in variants:
            union = union.merged(v)
        ref = instances[0].task
        scene = LiberoScene(task_info(ref), cameras=cams, render_size=64, variant=union)
        for v in variants:
            cache[(ref, cams, 64, v)] = scene


def _run_task(args: tuple) -> list[dict[str, Any]]:
    """All episodes of one task: each instance under each policy. Returns one row per episode."""
    instances, policies, rows_path, skip = args
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import EpisodePlan
    from liberopro.schema.manifest import Instance
    from liberopro.shifts.base import MAX_DELAY_STEPS

    cache: dict = {}
    rows = []
    insts = [Instance.model_validate(raw) for raw in instances]
    _union_scenes(insts, cache)
    try:
        for inst in insts:
            entry = inst.shifts[0]
            fallback = int(entry.params["fallback_step"])
            settings = RunSettings(
                render_size=64, max_steps=fallback + MAX_DELAY_STEPS + EXTRA_STEPS, stop_when_shifts_done=True
            )
            for name in policies:
                if (inst.instance_id, name) in skip:
                    continue
                t0 = time.perf_counter()
                runner = _runner(name, entry.id, inst.task, settings, cache)
                rec = runner.run_episode(EpisodePlan(inst, 0, 0, 0))
                shift = rec.shifts[0]
                rows.append(
                    {
                        "policy": name,
                        "instance_id": inst.instance_id,
                        "shift": entry.id,
                        "task": str(inst.task),
                        "trigger": entry.params.get("trigger"),
                        "fallback_step": fallback,
                        "valid": rec.valid,
                        "termination": rec.termination_reason,
                        "detail": rec.detail,
                        "fired_by": shift.fired_by,
                        "fired_at_step": shift.fired_at_step,
                        "due_at_step": shift.due_at_step,
                        "delay_steps": shift.delay_steps,
                        "deferred_reason": shift.deferred_reason,
                        "phases": rec.phases,
                        "steps": rec.steps,
                        "wall_s": round(time.perf_counter() - t0, 2),
                    }
                )
                with open(rows_path, "a") as fh:  # one line per episode, as it ends (O_APPEND)
                    fh.write(json.dumps(rows[-1]) + "\n")
                print(
                    f"{name:6s} {entry.id} {inst.task}: valid={rec.valid} by={shift.fired_by} "
                    f"at={shift.fired_at_step} delay={shift.delay_steps} steps={rec.steps} "
                    f"{rows[-1]['wall_s']}s {rec.termination_reason} {rec.detail or ''}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        for scene in {id(s): s for s in cache.values()}.values():
            scene.close()
    return rows


def summarize(rows: list[dict[str, Any]], not_applicable: list[dict[str, str]]) -> dict[str, Any]:
    """Per policy and shift: episodes, fired by phase / fallback, delayed, not fired, invalid (with
    each invalid episode's task and reason), the delays, and the wall time (s)."""
    out: dict[str, Any] = {}
    for row in rows:
        s = out.setdefault(row["policy"], {}).setdefault(
            row["shift"],
            {
                "episodes": 0,
                "phase": 0,
                "fallback": 0,
                "delayed": 0,
                "not_fired": 0,
                "invalid": 0,
                "blocked": 0,
                "invalid_cases": [],
                "delays": {},
                "wall_s": 0.0,
            },
        )
        s["episodes"] += 1
        s["wall_s"] = round(s["wall_s"] + row["wall_s"], 1)
        if row["delay_steps"]:
            s["delays"][row["task"]] = row["delay_steps"]
        blocked = row["termination"] == "shift_blocked"
        if not row["valid"] or blocked:
            s["invalid"] += 1
            s["blocked"] += blocked
            s["invalid_cases"].append({"task": row["task"], "reason": row["detail"]})
            continue
        if row["fired_by"] is None:
            s["not_fired"] += 1
            continue
        s[row["fired_by"]] += 1
        if row["delay_steps"]:
            s["delayed"] += 1
    for policy in out.values():
        keys = ("episodes", "phase", "fallback", "delayed", "invalid", "blocked")
        total = {k: sum(v[k] for v in policy.values()) for k in keys}
        policy["total"] = total
    return {"by_policy": out, "not_applicable": not_applicable}


def main(
    tasks: str = typer.Option(
        "", help="tasks (suite:index, comma separated; a suite alone: its ten); default: the training split"
    ),
    shifts: str = typer.Option(",".join(RUNTIME), help="runtime shift ids, comma separated"),
    policies: str = typer.Option("oracle,random", help="oracle, random, zero, comma separated"),
    workers: int = typer.Option(1, help="worker processes (one task each at a time; a scene holds 1.5-2.5 GB)"),
    out: Path = typer.Option(Path("runtime_validity.json"), help="where to write the JSON"),
    manifest: Path | None = typer.Option(
        None, help="take the runtime instances of this manifest (e.g. manifests/train.jsonl) instead of drawing them"
    ),
    resume: bool = typer.Option(
        False,
        help="keep the episodes already in <out>.rows.jsonl of the same instances (instance id and policy) and run the rest",
    ),
) -> None:
    from liberopro.instances.generation import generate
    from liberopro.sim.tasks import parse_task_list

    shift_ids = [s.strip().upper() for s in shifts.split(",") if s.strip()]
    bad = [s for s in shift_ids if s not in RUNTIME]
    if bad:
        raise typer.BadParameter(f"not runtime shifts: {', '.join(bad)}")
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    if not chosen or any(p not in POLICIES for p in chosen):
        raise typer.BadParameter(f"--policies takes {', '.join(POLICIES)}")
    refs = parse_task_list(tasks) if tasks else None
    t0 = time.perf_counter()
    if manifest is not None:
        from liberopro.schema.manifest import ManifestError, read_manifest

        try:
            held = read_manifest(manifest)
        except ManifestError as exc:
            raise typer.BadParameter(str(exc)) from exc
        instances = [
            i
            for i in held.instances
            if len(i.shifts) == 1 and i.shifts[0].id in shift_ids and (refs is None or i.task in refs)
        ]
        source = {"manifest": str(manifest), "content_hash": held.header.content_hash}
        not_applicable: list[dict[str, str]] = []  # the manifest's report lists its dropped pairs
    else:
        _, instances, dropped = generate("train", 0, tasks=refs, cases=[[s] for s in shift_ids], validate=False)
        source = {"drawn": "train split, seed 0, draw 0, not validated"}
        not_applicable = [{"task": f"{d.suite}:{d.task_index}", "shift": d.case, "reason": d.reason} for d in dropped]
    rows_path = out.with_suffix(".rows.jsonl")
    rows: list[dict[str, Any]] = []
    if resume and rows_path.exists():
        wanted = {i.instance_id for i in instances}
        old = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
        rows = [r for r in old if r.get("instance_id") in wanted and r["policy"] in chosen]
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    resumed = len(rows)
    skip = {(r["instance_id"], r["policy"]) for r in rows}
    by_task: dict[str, list[dict]] = {}
    for inst in instances:
        if any((inst.instance_id, p) not in skip for p in chosen):
            by_task.setdefault(str(inst.task), []).append(inst.model_dump(mode="json"))
    jobs = [(insts, chosen, str(rows_path), skip) for insts in by_task.values()]
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            rows += _run_task(job)
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for fut in as_completed([pool.submit(_run_task, job) for job in jobs]):
                rows += fut.result()
    rows.sort(key=lambda r: (r["policy"], r["shift"], r["task"]))
    result = {
        "source": source,
        "instances": len(instances),
        "episodes": len(rows),
        "resumed_episodes": resumed,
        "workers": workers,
        "cpus": os.cpu_count(),
        "wall_s": round(time.perf_counter() - t0, 1),
        **summarize(rows, not_applicable),
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    typer.run(main)
