"""Static instances valid on every init state their episodes use (issue 22, item 1): how many
episodes of a manifest's static instances are invalid at reset, on init states 0-9.

    nice -n 10 uv run --frozen python benchmarks/static_validity.py --manifest manifests/train.jsonl
        [--tasks libero_goal:1,...] [--shifts S01,S03] [--init-states 0-9] [--out static_validity.json]

Instances: the manifest's instances whose shifts are all static (nominal left out), filtered by
``--tasks`` (``SUITE:INDEX`` list) and ``--shifts``. Each is realised on every init state of
``--init-states`` (default ``0-9``: the episodes of a 10-episode evaluation, episode ``e`` on
init state ``e``, env seed ``e``) through the real episode runner, for one policy step under the
privileged oracle (no cameras unless an Observation shift needs them): its static shifts are
applied, the scene settled and their post-conditions measured, before any policy action could
matter. An episode is invalid when a shift could not be realised there (``shift_invalid``, with
its reason). No policy steps beyond the first: cheap (a fraction of a second per episode once
the task's scene is built).

Output (stdout, and ``--out`` as JSON): ``episodes``, ``invalid``, ``wall_s``, per shift and per
task the invalid count over the episodes, and every invalid episode (task, case, init state,
reason). Not a test: figures go to the issue and the notes.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import typer


def _parse_states(text: str) -> list[int]:
    """``"0-9"`` or ``"0,3,5"`` -> init state indices."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return sorted(set(out))


def sweep(instances, init_states: list[int]) -> dict[str, Any]:
    """Realise each instance on each init state for one step; returns the counts (see the module
    docstring). Instances are grouped by task so that each task's scenes are built once."""
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.generation import _drop_variant_scenes, _oracle_run

    settings = RunSettings(render_size=64, max_steps=1)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    by_task: dict[Any, list] = {}
    for inst in instances:
        by_task.setdefault(inst.task, []).append(inst)
    for insts in by_task.values():
        cache: dict = {}
        try:
            for inst in insts:
                for i in init_states:
                    rec, _ = _oracle_run(inst, settings, cache, (i, i, i))
                    bad = rec.termination_reason == "shift_invalid"
                    rows.append({"task": str(inst.task), "case": inst.case, "init_state": i, "valid": not bad})
                    if bad:
                        rows[-1]["reason"] = rec.detail
                        print(f"invalid: {inst.task} {inst.case} init state {i}: {rec.detail}", file=sys.stderr)
                _drop_variant_scenes(cache)
        finally:
            for scene in cache.values():
                scene.close()
    wall = time.perf_counter() - t0
    per_shift: dict[str, list[int]] = {}
    per_task: dict[str, list[int]] = {}
    for r in rows:
        for key, table in ((r["case"], per_shift), (r["task"], per_task)):
            cell = table.setdefault(key, [0, 0])
            cell[0] += not r["valid"]
            cell[1] += 1
    return {
        "init_states": init_states,
        "instances": len(instances),
        "episodes": len(rows),
        "invalid": sum(not r["valid"] for r in rows),
        "wall_s": round(wall, 1),
        "per_shift": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_shift.items())},
        "per_task": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_task.items())},
        "invalid_episodes": [r for r in rows if not r["valid"]],
    }


def main(
    manifest: Path = typer.Option(..., help="A generated manifest (liberopro instances generate)."),
    tasks: str | None = typer.Option(None, help="Only these tasks, e.g. libero_spatial:0,libero_goal:1."),
    shifts: str | None = typer.Option(None, help="Only these cases, e.g. S01,S03."),
    init_states: str = typer.Option("0-9", help="Init states, e.g. 0-9 or 0,3,5."),
    out: Path | None = typer.Option(None, help="Also write the result here (JSON)."),
) -> None:
    from liberopro.catalog import get_spec
    from liberopro.instances.generation import check_manifest

    insts = [
        i
        for i in check_manifest(manifest).instances
        if i.shifts and all(get_spec(s.id).kind == "static" for s in i.shifts)
    ]
    if tasks:
        wanted = {t.strip() for t in tasks.split(",")}
        insts = [i for i in insts if str(i.task) in wanted]
    if shifts:
        cases = {c.strip() for c in shifts.split(",")}
        insts = [i for i in insts if i.case in cases]
    if not insts:
        raise typer.BadParameter("no static instance selected: check --tasks and --shifts against the manifest")
    result = sweep(insts, _parse_states(init_states))
    text = json.dumps(result, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n")


if __name__ == "__main__":
    typer.run(main)
