"""Add the solvability proof to a manifest generated with ``--no-proof`` and time it per instance.

``uv run --frozen python scripts/prove_manifest.py manifests/train.jsonl --out proved.jsonl``
runs :func:`liberopro.instances.generation.prove_instance` on every instance, in file order, exactly as
``liberopro instances generate`` does after validation (the nominal oracle episode per task and
init state is run once and shared by the task's instances), applies the drop rule
(:func:`liberopro.instances.generation.proof_verdict`), and writes the proved manifest, its generation
report (``OUT.report.json``, with the proof's counts, as ``instances generate`` writes it) and
``OUT.timing.json`` (seconds per instance and per task, wall clock). The time measured is the
proof's alone; the one difference from a proof inside generation is that the scene of a prop or
swap variant is built again here (validation had dropped it), which this script times apart
(``scene_build_s``).

Used to measure the proof's added generation time (``docs/instances.md``, "Solvability proof").
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer


def main(
    manifest: Path = typer.Argument(..., help="A manifest generated with --no-proof."),
    out: Path = typer.Option(
        ..., "--out", help="Where to write the proved manifest (and OUT.report.json, OUT.timing.json)."
    ),
    init_states: str | None = typer.Option(None, help="e.g. 0,1 (default: as generation derives them)"),
) -> None:
    """Add the solvability proof to MANIFEST, write the proved manifest to OUT and time the proof."""

    from liberopro.instances.generation import (
        DroppedPair,
        _drop_variant_scenes,
        check_manifest,
        proof_init_states,
        prove_instance,
        report,
    )
    from liberopro.schema.manifest import make_header, write_manifest
    from liberopro.sim.scene import SceneVariant

    src = check_manifest(manifest)
    h = src.header
    given = [int(x) for x in init_states.split(",")] if init_states else None
    states = proof_init_states(h.split, h.episodes_per_instance, given)
    kept, dropped, timing = [], [], []
    by_task: dict[str, list] = {}
    for inst in src.instances:
        by_task.setdefault(str(inst.task), []).append(inst)
    for task, insts in by_task.items():
        cache: dict = {}
        nominal: dict = {}
        t_task = time.perf_counter()
        try:
            for inst in insts:
                t0 = time.perf_counter()
                n_before = sum(1 for k in cache if k[-1] != SceneVariant())
                proved, why = prove_instance(inst, cache, states, nominal)
                dt = time.perf_counter() - t0
                variant_built = sum(1 for k in cache if k[-1] != SceneVariant()) > n_before
                _drop_variant_scenes(cache)
                timing.append({"task": task, "case": inst.case, "seconds": round(dt, 2), "variant": variant_built})
                if proved is None:
                    dropped.append(
                        DroppedPair(
                            suite=inst.suite, task_index=inst.task_index, case=inst.case, stage="proof", reason=why
                        )
                    )
                else:
                    kept.append(proved)
                print(f"{task} {inst.case}: {dt:.1f} s {proved.oracle.verdict if proved else 'dropped'}", flush=True)
        finally:
            for scene in cache.values():
                scene.close()
        print(f"{task}: {time.perf_counter() - t_task:.1f} s", flush=True)
    header = make_header(
        h.split, 0, kept, episodes=h.episodes_per_instance, dropped=h.dropped + len(dropped), stack=h.stack
    )
    header = header.model_copy(update={"seed_sha256": h.seed_sha256})
    write_manifest(out, header, kept)
    rep = report(header, dropped, len(src.instances) + h.dropped, kept)
    src_report = manifest.with_name(manifest.name + ".report.json")
    if src_report.exists():  # keep the generation's own drops (applicability, validation)
        before = json.loads(src_report.read_text())
        rep["dropped_pairs"] = before["dropped_pairs"] + rep["dropped_pairs"]
        rep["dropped_by_shift"] = dict(
            sorted(
                {
                    k: before["dropped_by_shift"].get(k, 0) + rep["dropped_by_shift"].get(k, 0)
                    for k in set(before["dropped_by_shift"]) | set(rep["dropped_by_shift"])
                }.items()
            )
        )
        rep["dropped"] = len(rep["dropped_pairs"])
        for key in ("reference_instances", "difference_vs_reference", "tasks", "cases"):
            rep[key] = before.get(key, rep.get(key))
    rep["validated"] = rep["proved"] = True
    out.with_name(out.name + ".report.json").write_text(json.dumps(rep, indent=2) + "\n")
    out.with_name(out.name + ".timing.json").write_text(
        json.dumps({"init_states": states, "instances": timing}, indent=1) + "\n"
    )


if __name__ == "__main__":
    typer.run(main)
