"""Evaluator throughput, measured so that it can be believed (issue 12 item 5).

    nice -n 10 uv run --frozen python benchmarks/throughput.py [--steps 40] [--rounds 3] [--render-size 256]

What it measures, per control step, on one LIBERO task (``libero_goal:8``), zero actions:

- ``physics``: raw robosuite/LIBERO steps without cameras (:class:`liberopro.sim.scene.LiberoScene`
  with no camera);
- ``raw+cameras``: raw steps rendering both cameras at every step (robosuite's own eager
  sampling, the frame read every step): what a plain LIBERO loop costs, the reference of the
  ratios;
- ``loop K=1|5|8``: the evaluator's full loop (:class:`liberopro.episode.runner.EpisodeRunner`, on-demand
  rendering, in-process zero policy asking for both cameras at 224 px, replan K), in this process;
- ``loop K=5 eager``: the same at K=5 rendering every camera at every step (the loop before
  on-demand rendering);
- ``loop K=1 http``: the full loop through the example zero policy served over HTTP in a child
  process (msgpack, as ``--policy-cmd`` runs it; the server's own CPU is not counted). That policy
  sends one action per request, so this is replan 1: compare it with ``loop K=1``;
- ``1 proc x 1 thread`` and ``N procs x 1 thread``: the full loop at K=5 in child processes with
  ``LP_NUM_THREADS=1`` (Mesa llvmpipe's rendering threads), one alone and then N = this
  machine's cores at once. Scaling is measured in CPU time (CPU per step of one process alone /
  CPU per step of each of N at once: what sharing caches and memory costs), which holds on a
  shared machine; the wall-clock ratio (N procs' steps/s / (N x 1 proc's)) is printed too and
  means something only when the load average stays under N.

Modes alternate over ``--rounds`` rounds (the order reverses every round; round 0 builds the scenes
and warms up, and is not counted). CPU time (``time.process_time``: this process, all its
threads; children measure their own) is printed beside wall time, with the load average before
and after each round: on a shared machine the CPU figures and the ratios measured in one round
are the ones to quote. Episode set-up (reset, init state, 10 settle steps) is measured apart.

Last, the projected wall time of the study's evaluation (``docs/definition.md``: the 8 held-out
tasks x 43 cases x 10 episodes, every episode of a failing policy to its suite's horizon plus
the settle steps) with the full loop at K=5, N single-thread processes, on this machine and on a
16-core node (assumed to scale as measured here), and the same for the eager loop in one process
(the evaluator before issue 12). Not a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import typer

TASK = ("libero_goal", 8)
CASES = 43  # nominal + 22 static + 20 runtime shifts (docs/definition.md)
EPISODES = 10


def _zero_policy(k: int):
    """An in-process policy: chunks of ``k`` zero-arm actions, gripper open, both cameras at 224 px."""
    from submission_spec import CameraSpec, PolicyMetadata

    class ZeroPolicy:
        metadata = PolicyMetadata(
            policy_name="zero",
            cameras=[CameraSpec(name=c, height=224, width=224) for c in ("agentview", "wrist")],
            chunk_length=k,
            replan_steps=k,
        )

        def reset(self, episode_id: str, instruction: str) -> None:
            return None

        def act(self, obs) -> np.ndarray:
            a = np.zeros((k, 7))
            a[:, 6] = -1.0
            return a

    return ZeroPolicy()


class _Loop:
    """The evaluator's full loop at replan ``k`` on one reused scene; :meth:`run` returns
    (loop CPU s, loop wall s, set-up CPU s, set-up wall s, camera renders) of one episode of
    ``steps`` policy steps. Set-up = reset, init state and settle steps."""

    def __init__(self, k: int, steps: int, render_size: int, on_demand: bool, scenes: dict, client=None) -> None:
        from liberopro.episode.local_policy import LocalPolicyClient
        from liberopro.episode.runner import EpisodeRunner, RunSettings
        from liberopro.instances.build import EpisodePlan, Instance

        policy = _zero_policy(k)
        metadata = policy.metadata if client is None else client.metadata()
        timing: dict[str, float] = {}

        class TimedRunner(EpisodeRunner):
            def _policy_loop(self, *args) -> None:
                timing["c0"], timing["w0"] = time.process_time(), time.perf_counter()
                super()._policy_loop(*args)
                timing["c1"], timing["w1"] = time.process_time(), time.perf_counter()

        settings = RunSettings(render_size=render_size, max_steps=steps, on_demand_render=on_demand, replan_steps=k)
        client = client or LocalPolicyClient(policy)
        self.runner = TimedRunner(client, metadata, settings, scenes=scenes)
        self.plan = EpisodePlan(Instance(instance_id="bench", suite=TASK[0], task_index=TASK[1]), 0, 0, 0)
        self.steps, self.timing = steps, timing

    def run(self) -> tuple[float, float, float, float, int]:
        c0, w0 = time.process_time(), time.perf_counter()
        rec = self.runner.run_episode(self.plan)
        c1, w1 = time.process_time(), time.perf_counter()
        if rec.steps != self.steps:
            raise RuntimeError(f"the episode ran {rec.steps} steps, not {self.steps}: {rec.termination_reason}")
        t = self.timing
        loop_cpu, loop_wall = t["c1"] - t["c0"], t["w1"] - t["w0"]
        return loop_cpu, loop_wall, (c1 - c0) - loop_cpu, (w1 - w0) - loop_wall, sum((rec.renders or {}).values())


class _Raw:
    """Raw LIBERO steps (settle action) on a :class:`liberopro.sim.scene.LiberoScene`: no camera, or both
    cameras rendered eagerly and read every step."""

    def __init__(self, cameras: tuple[str, ...], steps: int, render_size: int) -> None:
        from liberopro.sim.scene import LiberoScene
        from liberopro.sim.tasks import TaskRef, task_info

        self.info = task_info(TaskRef(*TASK))
        self.scene = LiberoScene(self.info, cameras=cameras, render_size=render_size, on_demand=False)
        self.steps = steps

    def run(self) -> tuple[float, float, float, float, int]:
        from liberopro.sim.scene import SETTLE_ACTION

        scene = self.scene
        scene.start_episode(self.info.init_states()[0], 0)
        scene.settle()
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(self.steps):
            scene.step(SETTLE_ACTION)
            dict(scene.frame().images)  # read every image, as a plain LIBERO loop gets them
        return time.process_time() - c0, time.perf_counter() - w0, 0.0, 0.0, sum(scene.render_count.values())

    def close(self) -> None:
        self.scene.close()


def _child(steps: int, render_size: int) -> None:
    """Child process: one full-loop episode at K=5 after one warm-up; prints its figures as JSON."""
    scenes: dict = {}
    loop = _Loop(5, steps, render_size, True, scenes)
    loop.run()
    cpu, wall, set_cpu, set_wall, renders = loop.run()
    for scene in scenes.values():
        scene.close()  # in its own GL context, before the interpreter's exit frees it in another
    print(json.dumps({"cpu": cpu, "wall": wall, "setup_cpu": set_cpu, "setup_wall": set_wall, "renders": renders}))


def _children(n: int, steps: int, render_size: int) -> list[dict]:
    """``n`` child processes at once, each single-threaded (``LP_NUM_THREADS=1`` and the BLAS/OpenMP
    thread counts); their own figures (each child's loop, after its scene is built and warm)."""
    from liberopro.runs.workers import THREAD_ENV

    env = {**os.environ, **THREAD_ENV}  # as `evaluate --workers` runs its processes
    cmd = [sys.executable, __file__, "--child", "--steps", str(steps), "--render-size", str(render_size)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"a child process failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def _study_steps() -> tuple[int, int]:
    """(episodes, control steps incl. settle) of the study's evaluation with a failing policy."""
    from liberopro.sim.tasks import HORIZONS, SETTLE_STEPS
    from liberopro.split import split_tasks

    tasks = split_tasks("eval")
    episodes = len(tasks) * CASES * EPISODES
    steps = sum((HORIZONS[t.suite] + SETTLE_STEPS) * CASES * EPISODES for t in tasks)
    return episodes, steps


def _measure(modes: dict[str, object], rounds: int, cores: int, steps: int, render_size: int):
    """``rounds`` counted rounds after a warm-up, the modes alternating in order within each, and
    one and ``cores`` child processes: per mode its figures per round, per process count its
    children's figures per round, and the load average before and after each round."""
    got: dict[str, list[tuple[float, float, float, float, int]]] = {m: [] for m in modes}
    par: dict[int, list[list[dict]]] = {1: [], cores: []}
    loads = []
    for r in range(rounds + 1):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        load0 = os.getloadavg()[0]
        for name in order:
            fig = modes[name].run()  # type: ignore[attr-defined]
            if r:
                got[name].append(fig)
        if r:  # children build their own scenes: not in the warm-up round
            for n in (1, cores) if r % 2 else (cores, 1):
                par[n].append(_children(n, steps, render_size))
        loads.append((load0, os.getloadavg()[0]))
        print(f"round {r}{' (warm-up)' if r == 0 else ''}: load average {load0:.2f} -> {loads[-1][1]:.2f}", flush=True)
    return got, par, loads


def _report_study(
    got: dict, per_step: dict[str, tuple[float, float]], one: list[dict], one_cpu: float, cores: int, scaling: float
) -> None:
    """Print the projected cost of the study's evaluation from the per-step figures."""
    med = statistics.median
    episodes, study_steps = _study_steps()
    setup_cpu = med(c["setup_cpu"] for c in one)
    cpu_s = study_steps * one_cpu + episodes * setup_cpu  # one single-thread process alone
    eager_setup = med(f[2] for f in got["loop K=5 eager"])
    eager_cpu_s = study_steps * per_step["loop K=5 eager"][0] + episodes * eager_setup
    print(
        f"\nstudy evaluation (failing policy, K=5): {episodes} episodes, {study_steps / 1e6:.2f} M control steps, "
        f"{cpu_s / 3600:.1f} CPU-hours single-thread ({1e3 * one_cpu:.1f} ms/step + {setup_cpu:.1f} s set-up per episode)"
    )
    for label, n in ((f"this machine ({cores} cores)", cores), ("a 16-core node", 16)):
        print(
            f"  projected wall on {label}: {cpu_s / (n * scaling) / 3600:.1f} h ({n} processes, scaling {scaling:.2f})"
        )
    print(
        f"  before issue 12 (eager loop, one process): {eager_cpu_s / 3600:.1f} CPU-hours "
        f"({1e3 * per_step['loop K=5 eager'][0]:.1f} ms/step + {eager_setup:.1f} s set-up per episode), "
        f"{eager_cpu_s / cpu_s:.1f}x the CPU of the loop above"
    )


def _report(
    got: dict,
    par: dict[int, list[list[dict]]],
    loads: list,
    cores: int,
    steps: int,
    rounds: int,
    render_size: int,
    versions: dict,
) -> None:
    """Print the per-step table, the scaling over the cores and the study's projection."""
    med = statistics.median
    print(
        f"\nstack: mujoco {versions['mujoco']}, robosuite {versions['robosuite']}, MUJOCO_GL={versions['mujoco_gl']}; "
        f"{TASK[0]}:{TASK[1]}, {steps} steps, 2 cameras at {render_size} px, {rounds} rounds (median), "
        f"{cores} cores available, load average {min(x for p in loads for x in p):.2f}-{max(x for p in loads for x in p):.2f}"
    )
    print(f"{'mode':<22} {'CPU ms/step':>11} {'wall ms/step':>12} {'steps/s':>8} {'CPU vs raw+cam':>14} {'renders':>8}")
    raw_cpu = med(f[0] for f in got["raw+cameras"]) / steps
    per_step: dict[str, tuple[float, float]] = {}
    for name, figs in got.items():
        cpu, wall = med(f[0] for f in figs) / steps, med(f[1] for f in figs) / steps
        per_step[name] = (cpu, wall)
        print(
            f"{name:<22} {1e3 * cpu:>11.1f} {1e3 * wall:>12.1f} {1 / wall:>8.2f} {cpu / raw_cpu:>13.2f}x {figs[0][4]:>8}"
        )
    one = [c[0] for c in par[1]]
    many = par[cores]
    one_cpu, one_wall = med(c["cpu"] for c in one) / steps, med(c["wall"] for c in one) / steps
    many_cpu = med(med(c["cpu"] for c in rnd) for rnd in many) / steps
    many_wall = med(max(c["wall"] for c in rnd) for rnd in many) / steps
    agg_one, agg_many = 1 / one_wall, cores / many_wall
    scaling = one_cpu / many_cpu  # CPU time: each of N processes against one alone
    wall_scaling = agg_many / (cores * agg_one)
    for label, cpu, wall, rate in (
        ("1 proc x 1 thread", one_cpu, one_wall, agg_one),
        (f"{cores} procs x 1 thread", many_cpu, many_wall, agg_many),
    ):
        print(f"{label:<22} {1e3 * cpu:>11.1f} {1e3 * wall:>12.1f} {rate:>8.2f} {cpu / raw_cpu:>13.2f}x {'':>8}")
    print(
        f"scaling: each of {cores} single-thread processes at once needs {many_cpu / one_cpu:.2f}x the CPU per step "
        f"of one alone: {cores} processes = {scaling:.2f} x {cores} x one process (CPU time); by wall clock "
        f"{wall_scaling:.2f} (meaningful only on an idle machine: see the load average)"
    )
    lazy, eager = per_step["loop K=5"][0], per_step["loop K=5 eager"][0]
    print(f"K=5: on-demand loop CPU per step = {lazy / eager:.2f} of the eager loop's ({eager / lazy:.2f}x less)")
    _report_study(got, per_step, one, one_cpu, cores, scaling)


def main(
    steps: int = typer.Option(40, help="Policy steps per measured episode."),
    rounds: int = typer.Option(3, help="Counted rounds; the modes alternate within each."),
    render_size: int = typer.Option(256, help="Render resolution of the two cameras (px)."),
    child: bool = typer.Option(False, "--child", hidden=True),
) -> None:
    """Per-step CPU and wall time of raw LIBERO and the evaluator's loop, the scaling over this
    machine's cores, and the projected wall time of the study's evaluation."""
    if child:
        _child(steps, render_size)
        return
    from liberopro.episode.policy_process import PolicyProcess
    from liberopro.stack import check_stack
    from submission_spec.transports import make_client

    versions = check_stack()
    from liberopro.runs.workers import available_cpus

    cores = available_cpus()[0]  # affinity and the cgroup quota, as `evaluate --workers` counts them
    scenes: dict = {}
    stack = contextlib.ExitStack()  # the policy server is stopped whatever happens
    server = stack.enter_context(
        PolicyProcess(f"{sys.executable} -m submission_spec.examples zero", log_path=Path("/tmp/bench-policy.log"))
    )
    http = stack.enter_context(make_client(server.url, "liberopro"))
    modes: dict[str, object] = {
        "physics": _Raw((), steps, render_size),
        "raw+cameras": _Raw(("agentview", "wrist"), steps, render_size),
        "loop K=1": _Loop(1, steps, render_size, True, scenes),
        "loop K=5": _Loop(5, steps, render_size, True, scenes),
        "loop K=8": _Loop(8, steps, render_size, True, scenes),
        "loop K=5 eager": _Loop(5, steps, render_size, False, scenes),
        "loop K=1 http": _Loop(1, steps, render_size, True, scenes, client=http),
    }
    got, par, loads = _measure(modes, rounds, cores, steps, render_size)
    stack.close()
    for scene in scenes.values():
        scene.close()
    for mode in modes.values():
        if isinstance(mode, _Raw):
            mode.close()
    _report(got, par, loads, cores, steps, rounds, render_size, versions)


if __name__ == "__main__":
    typer.run(main)
