"""CPU time per control step with on-demand rendering on and off (issue 12 item 1).

    nice -n 10 uv run python benchmarks/render_on_demand.py [--steps 40] [--rounds 3] [--replans 1,5,8]

A zero policy (chunks of K zero-arm actions, gripper open) asking for both cameras at 224 px,
the scene rendering at ``--render-size`` (256: LIBERO's evaluation size), through the evaluator's
own loop (:class:`liberopro.runner.EpisodeRunner`, in-process client: no HTTP). For each replan
K the two modes alternate over ``--rounds`` rounds on the same episode; CPU time is
``time.process_time`` (this process, all threads), wall ``time.perf_counter``. Per control step:
the policy loop's time / policy steps; per episode: everything (reset, 10 settle steps, loop).
Prints one row per (K, mode) with the median over rounds and the eager/on-demand ratio. The
machine may be shared: the CPU figures are the ones to quote. Not a test.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import typer
from liberopro.instances import EpisodePlan, Instance
from liberopro.local_policy import LocalPolicyClient
from liberopro.runner import EpisodeRunner, RunSettings
from liberopro.tasks import TaskRef

from submission_spec import CameraSpec, PolicyMetadata

TASK = TaskRef("libero_goal", 8)


class ZeroPolicy:
    """Chunks of ``k`` zero-arm actions, gripper open."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.metadata = PolicyMetadata(
            policy_name="zero",
            cameras=[CameraSpec(name=c, height=224, width=224) for c in ("agentview", "wrist")],
            chunk_length=k,
            replan_steps=k,
        )

    def reset(self, episode_id: str, instruction: str) -> None:
        return None

    def act(self, obs) -> np.ndarray:
        a = np.zeros((self.k, 7))
        a[:, 6] = -1.0
        return a


class TimedRunner(EpisodeRunner):
    """Measures the policy loop's CPU and wall time."""

    loop_cpu = 0.0
    loop_wall = 0.0

    def _policy_loop(self, *args) -> None:
        c0, w0 = time.process_time(), time.perf_counter()
        super()._policy_loop(*args)
        self.loop_cpu, self.loop_wall = time.process_time() - c0, time.perf_counter() - w0


def main(
    steps: int = typer.Option(40, help="Policy steps per episode."),
    rounds: int = typer.Option(3, help="Rounds; the modes alternate within each."),
    replans: str = typer.Option("1,5,8", help="Replan steps K to measure."),
    render_size: int = typer.Option(256, help="Render resolution of the two cameras (px)."),
) -> None:
    """One row per (K, mode): CPU and wall ms per control step (median over rounds)."""
    scenes: dict = {}
    inst = Instance(instance_id="bench", suite=TASK.suite, task_index=TASK.index)
    rows = []
    try:
        for k in (int(x) for x in replans.split(",")):
            policy = ZeroPolicy(k)
            got: dict[bool, list[tuple[float, float, float, float, dict]]] = {True: [], False: []}
            for r in range(rounds + 1):  # round 0 warms up (scene build, numba, caches)
                for on_demand in (True, False) if r % 2 else (False, True):
                    settings = RunSettings(render_size=render_size, max_steps=steps, on_demand_render=on_demand)
                    runner = TimedRunner(LocalPolicyClient(policy), policy.metadata, settings, scenes=scenes)
                    c0, w0 = time.process_time(), time.perf_counter()
                    rec = runner.run_episode(EpisodePlan(inst, 0, 0, 0))
                    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                    assert rec.steps == steps, (rec.termination_reason, rec.detail)
                    if r:
                        got[on_demand].append((runner.loop_cpu, runner.loop_wall, cpu, wall, rec.renders or {}))
            for on_demand in (False, True):
                runs = got[on_demand]
                rows.append(
                    (
                        k,
                        "on-demand" if on_demand else "eager",
                        1e3 * statistics.median(x[0] for x in runs) / steps,
                        1e3 * statistics.median(x[1] for x in runs) / steps,
                        statistics.median(x[2] for x in runs),
                        statistics.median(x[3] for x in runs),
                        runs[0][4],
                    )
                )
    finally:
        for scene in scenes.values():
            scene.close()
    print(f"{TASK}, {steps} steps, render {render_size} px, 2 cameras, {rounds} rounds (median)")
    print(
        f"{'K':>2} {'mode':<10} {'loop CPU ms/step':>16} {'loop wall ms/step':>17} {'episode CPU s':>13} "
        f"{'episode wall s':>14}  renders"
    )
    for k, mode, cpu, wall, ecpu, ewall, renders in rows:
        print(f"{k:>2} {mode:<10} {cpu:>16.1f} {wall:>17.1f} {ecpu:>13.2f} {ewall:>14.2f}  {renders}")
    for k in sorted({r[0] for r in rows}):
        eager, lazy = (next(r for r in rows if r[0] == k and r[1] == m) for m in ("eager", "on-demand"))
        print(f"K={k}: eager/on-demand loop CPU {eager[2] / lazy[2]:.2f}x, episode CPU {eager[4] / lazy[4]:.2f}x")


if __name__ == "__main__":
    typer.run(main)
