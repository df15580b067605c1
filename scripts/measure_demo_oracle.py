"""Measure the privileged oracle (``liberopro.oracle.policy``) through the real episode runner on
candidate demo cases, one JSON line per (task, case) on stdout; what chose ``liberopro demo``'s
cases (``evaluator/liberopro/data/demo_oracle_cases.json`` holds the lines of 2026-12-02).

    nice -n 10 uv run --frozen python scripts/measure_demo_oracle.py TASKS CASES EPISODES MAX_STEPS
    e.g. ... libero_spatial:0,libero_spatial:5 nominal,S19,S20,D18 5 220

Each case's instance is the seed-0 draw (``make_instance(ref, case, 0)``, attempt 0, as
``liberopro demo`` runs it); episode e starts from init state e with env seed e, camera-less.
"""

from __future__ import annotations

import json
import time

import typer
from liberopro.episode.runner import RunSettings
from liberopro.instances.build import EpisodePlan, make_instance, parse_cases
from liberopro.oracle.policy import oracle_runner
from liberopro.sim.tasks import parse_task_list


def main(
    tasks: str = typer.Argument(..., help="Tasks, SUITE:INDEX, comma-separated."),
    cases: str = typer.Argument(..., help="Cases, comma-separated (nominal, S19, S19+D18, ...)."),
    episodes: int = typer.Argument(..., help="Episodes per case (episode e: init state e, env seed e)."),
    max_steps: int = typer.Argument(..., help="Policy steps per episode."),
) -> None:
    """Run the oracle on each (task, case) and print one JSON line each."""
    runner = oracle_runner(RunSettings(max_steps=max_steps))
    try:
        for ref in parse_task_list(tasks):
            for case in parse_cases(cases):
                inst = make_instance(ref, case, 0)
                if isinstance(inst, str):
                    print(json.dumps({"task": str(ref), "case": "+".join(case) or "nominal", "skipped": inst}))
                    continue
                t0 = time.perf_counter()
                recs = [runner.run_episode(EpisodePlan(inst, e, e, e)) for e in range(episodes)]
                line = {
                    "task": str(ref),
                    "case": "+".join(case) or "nominal",
                    "ok": sum(r.success for r in recs),
                    "n": episodes,
                    "steps": [r.steps for r in recs],
                    "reasons": [r.termination_reason for r in recs],
                    "valid": [r.valid for r in recs],
                    "detail": [(r.detail or "")[:160] for r in recs if not r.valid][:1],
                    "fired": [
                        [(s.id, s.fired_at_step, s.fired_by) for s in r.shifts if s.kind == "runtime"] for r in recs
                    ],
                    "s": round(time.perf_counter() - t0, 1),
                }
                print(json.dumps(line), flush=True)
    finally:
        runner.close()


if __name__ == "__main__":
    typer.run(main)
