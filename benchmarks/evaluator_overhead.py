"""The evaluator's own overhead: steps per second of a raw in-process LIBERO loop with zero
actions versus the full loop through the HTTP policy server (the example zero policy in a child
process, as `--policy-cmd` runs it), in each encoding, on the same tasks, in one run.

    uv run python benchmarks/evaluator_overhead.py [--steps 100] [--render-size 128]

Prints one row per (task, mode) and the ratios full/raw. Not a test: figures go to the docs
and the notes.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import typer
from liberopro.instances import EpisodePlan, Instance
from liberopro.policy_process import PolicyProcess
from liberopro.runner import EpisodeRunner, RunSettings
from liberopro.sim import SETTLE_ACTION, LiberoScene
from liberopro.stack import check_stack
from liberopro.tasks import TaskRef
from submission_spec.transports import make_client

TASKS = [TaskRef("libero_goal", 8), TaskRef("libero_spatial", 5)]


def raw_steps_per_s(scene: LiberoScene, steps: int, reps: int) -> float:
    rates = []
    for rep in range(reps):
        scene.start_episode(scene.task.init_states()[0], rep)
        scene.settle()
        t0 = time.perf_counter()
        for _ in range(steps):
            scene.step(SETTLE_ACTION)
            scene.frame()  # the runner builds a frame every step too
        rates.append(steps / (time.perf_counter() - t0))
    return statistics.median(rates)


def full_steps_per_s(runner: EpisodeRunner, ref: TaskRef, steps: int, reps: int) -> tuple[float, float]:
    inst = Instance(instance_id="bench", suite=ref.suite, task_index=ref.index)
    rates, lat = [], []
    for rep in range(reps):
        rec = runner.run_episode(EpisodePlan(inst, rep, 0, rep))
        assert rec.steps == steps, rec.termination_reason
        rates.append(rec.steps / rec.loop_s)
        lat.append(rec.latency.mean_ms)
    return statistics.median(rates), statistics.median(lat)


def main(
    steps: int = typer.Option(100, help="Policy steps per episode."),
    reps: int = typer.Option(2, help="Episodes per task and mode (the median is printed)."),
    render_size: int = typer.Option(128, help="Render resolution of the two cameras (px)."),
) -> None:
    """Steps per second of a raw in-process LIBERO loop with zero actions versus the full loop
    through the example zero policy's HTTP server, in each encoding (one row per task and mode)."""
    versions = check_stack()
    print(
        f"stack: mujoco {versions['mujoco']}, robosuite {versions['robosuite']}, MUJOCO_GL={versions['mujoco_gl']}; "
        f"{steps} steps x {reps} reps, two cameras at {render_size}px"
    )
    print(f"{'task':<18} {'mode':<14} {'steps/s':>8} {'ratio':>6} {'/act ms':>8}")
    with PolicyProcess(
        f"{sys.executable} -m submission_spec.examples zero",
        log_path=__import__("pathlib").Path("/tmp/bench-policy.log"),
    ) as proc:
        for ref in TASKS:
            scenes: dict = {}
            settings = RunSettings(render_size=render_size, max_steps=steps)
            raw = None
            for encoding in ("raw", "json", "msgpack"):
                if encoding == "raw":
                    with make_client(proc.url, "liberopro") as client:
                        meta = client.metadata()
                    scene = EpisodeRunner(None, meta, settings, scenes=scenes).scene_for(ref)
                    raw = raw_steps_per_s(scene, steps, reps)
                    print(f"{ref!s:<18} {'raw in-process':<14} {raw:8.2f} {1.0:6.2f} {'-':>8}")
                    continue
                with make_client(proc.url, "liberopro", encoding=encoding) as client:
                    runner = EpisodeRunner(client, client.metadata(), settings, scenes=scenes)
                    rate, lat = full_steps_per_s(runner, ref, steps, reps)
                print(f"{ref!s:<18} {'http ' + encoding:<14} {rate:8.2f} {rate / raw:6.2f} {lat:8.2f}")
            for s in scenes.values():
                s.close()
    np.set_printoptions()


if __name__ == "__main__":
    typer.run(main)
