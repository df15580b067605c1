"""Are frames rendered on a GPU the frames rendered on the CPU? (issue 12 item 4)

    uv run --frozen python benchmarks/render_parity.py [--a gpu] [--b cpu] [--tasks 4] [--out /tmp/parity]

Renders a fixed set of observations - the first task of each suite (``--tasks`` of them), init
states 0 and 1, after LIBERO's 10 settle steps and after 20 more steps of a fixed action, both
cameras at 256 px - once per renderer, each in its own process, and reports per camera the
per-pixel differences: mean absolute difference (grey levels), share of pixels that differ at all
and by more than 8 levels, the largest difference. Renderers:

- ``cpu``: Mesa's llvmpipe through EGL (glvnd told to load only Mesa's vendor file,
  ``__EGL_VENDOR_LIBRARY_FILENAMES``), what the evaluator image uses without a GPU;
- ``gpu``: the NVIDIA driver's EGL (``MUJOCO_EGL_DEVICE_ID``, default 0; ``--device``);
- ``osmesa``: Mesa's OSMesa (``MUJOCO_GL=osmesa``), a second CPU rasteriser for comparison.

Each process prints its ``GL_VENDOR``/``GL_RENDERER``; physics is on the CPU either way, so the
states are identical and any difference is the rasteriser's. Run it on a GPU host (``--a gpu
--b cpu``); here, without a GPU, ``--a cpu --b cpu`` checks the script (0 differences) and
``--b osmesa`` compares two CPU rasterisers. Frames are saved to ``--out`` as .npz for a closer
look. Not a test; figures go to ``docs/simulation-stack.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import typer

MESA_VENDOR_FILE = "/usr/share/glvnd/egl_vendor.d/50_mesa.json"
ACTION = np.array([0.3, -0.2, -0.3, 0.0, 0.0, 0.0, -1.0])


def _env(renderer: str, device: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_EGL_DEVICE_ID", "PYOPENGL_PLATFORM")}
    if renderer == "cpu":
        return {**env, "MUJOCO_GL": "egl", "__EGL_VENDOR_LIBRARY_FILENAMES": MESA_VENDOR_FILE}
    if renderer == "gpu":
        return {**env, "MUJOCO_GL": "egl", "MUJOCO_EGL_DEVICE_ID": str(device)}
    if renderer == "osmesa":
        return {**env, "MUJOCO_GL": "osmesa"}
    raise typer.BadParameter(f"renderer {renderer!r}: use cpu, gpu or osmesa")


def _render(tasks: int, out: Path) -> None:
    """Child: render the fixed observations with this process's renderer into ``out`` (.npz)."""
    from liberopro.sim.scene import LiberoScene
    from liberopro.sim.tasks import SUITES, TaskRef, task_info
    from liberopro.stack import check_stack

    stack = check_stack()
    frames: dict[str, np.ndarray] = {}
    for suite in SUITES[:tasks]:
        info = task_info(TaskRef(suite, 0))
        scene = LiberoScene(info, cameras=("agentview", "wrist"), render_size=256, on_demand=False)
        try:
            for init in (0, 1):
                scene.start_episode(info.init_states()[init], 0)
                scene.settle()
                for when in ("settled", "moved"):
                    if when == "moved":
                        for _ in range(20):
                            scene.step(ACTION)
                    for cam, img in scene.frame().images.items():
                        frames[f"{suite}/{init}/{when}/{cam}"] = np.array(img)
        finally:
            scene.close()
    np.savez_compressed(out, **frames)
    print(json.dumps({"gl_vendor": stack.get("gl_vendor"), "gl_renderer": stack.get("gl_renderer")}))


def main(
    a: str = typer.Option("gpu", help="First renderer: gpu, cpu or osmesa."),
    b: str = typer.Option("cpu", help="Second renderer."),
    tasks: int = typer.Option(4, help="Suites whose first task is rendered (1-4)."),
    device: int = typer.Option(0, help="EGL device of the gpu renderer."),
    out: Path = typer.Option(Path("/tmp/render-parity"), help="Where the frames are saved."),
    child: Path | None = typer.Option(None, "--child", hidden=True),
) -> None:
    """Render the same observations with two renderers and print their per-pixel differences."""
    if child is not None:
        _render(tasks, child)
        return
    out.mkdir(parents=True, exist_ok=True)
    got = {}
    for name, renderer in (("a", a), ("b", b)):
        path = out / f"{name}-{renderer}.npz"
        cmd = [sys.executable, __file__, "--tasks", str(tasks), "--child", str(path)]
        proc = subprocess.run(cmd, env=_env(renderer, device), capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"the {renderer} renderer failed: {proc.stderr.strip().splitlines()[-1:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name} = {renderer}: {info['gl_vendor']} / {info['gl_renderer']}")
        got[name] = np.load(path)
    print(f"\n{'frame':<40} {'mean |d|':>8} {'differ':>7} {'> 8':>7} {'max':>4}")
    per_cam: dict[str, list[np.ndarray]] = {}
    for key in got["a"].files:
        d = np.abs(got["a"][key].astype(np.int16) - got["b"][key].astype(np.int16))
        per_cam.setdefault(key.rsplit("/", 1)[1], []).append(d)
        print(f"{key:<40} {d.mean():>8.3f} {(d > 0).mean():>7.2%} {(d > 8).mean():>7.2%} {d.max():>4}")
    for cam, ds in per_cam.items():
        d = np.stack(ds)
        print(
            f"{'all ' + cam:<40} {d.mean():>8.3f} {(d > 0).mean():>7.2%} {(d > 8).mean():>7.2%} {d.max():>4}"
            f"  ({len(ds)} frames)"
        )


if __name__ == "__main__":
    typer.run(main)
