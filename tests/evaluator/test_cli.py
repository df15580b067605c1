"""The CLI as a user runs it: the main-job command of the issue, end to end, in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

BIN = Path(sys.executable).parent


def liberopro(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / "liberopro"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.sim  # evaluates real LIBERO episodes
def test_evaluate_with_policy_cmd_writes_records_naming_each_shift(tmp_path):
    out = tmp_path / "run"
    proc = liberopro(
        "evaluate",
        "--policy-cmd",
        "liberopro serve-example zero",
        "--tasks",
        "libero_goal:0",
        "--shifts",
        "nominal,S01,D01",
        "--episodes",
        "1",
        "--max-steps",
        "20",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(r["case"] for r in records) == ["D01", "S01", "nominal"]
    for r in records:
        for s in r["shifts"]:
            assert (s["id"], s["category"], s["kind"]) in {
                ("S01", "Condition", "static"),
                ("D01", "Condition", "runtime"),
            }
        assert r["init_state_id"] == 0 and r["seed"] == 0 and r["horizon"] == 20
        # S01's first draw does not fit this crowded scene: the run takes the first draw whose
        # post-conditions hold on init state 0 (as a manifest does), so every episode is valid
        assert r["termination_reason"] == "horizon" and r["valid"], r.get("detail")
        assert r["latency"]["requests"] == 20
    assert "S01 on libero_goal:0: draw " in proc.stderr
    d01 = next(r for r in records if r["case"] == "D01")["shifts"][0]
    assert "fired_at_step" in d01 and "fired_by" in d01
    # 20 steps end before D01's fallback step (26 on libero_goal:0: a quarter of the oracle's fastest
    # success there, 106 steps; liberopro.catalog.fallbacks) and the zero policy never approaches: said aloud
    assert d01["fired_at_step"] is None and "D01: in 1 episode(s) the runtime shift never fired" in proc.stdout
    assert {c["case"] for c in summary["cases"]} == {"nominal", "S01", "D01"}
    assert summary["stack"]["mujoco"] == "2.3.7" and summary["policy"]["metadata"]["policy_name"] == "example-zero"
    assert "LIBERO-Pro2.0 results" in proc.stdout and "nominal" in proc.stdout
    renders = sum(sum(r["renders"].values()) for r in records)  # on demand: the frames the policy read
    assert 0 < renders <= 3 * 20 * 2 and f"camera renders: {renders} for 60 policy steps" in proc.stdout
    # The policy server was stopped: no live process of its group is left (a zombie is dead; the
    # sandbox's PID 1 does not reap orphans).
    pids = summary["policy"]["pids"]
    assert len(pids) == 1
    assert not [p for p in psutil.process_iter() if (p.pid in pids or _pgid(p.pid) in pids) and _alive(p)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def in_process(*args: str) -> tuple[int, str]:
    """The same command run in this process (typer's test runner): exit code and output. Faster
    than :func:`liberopro` (no interpreter start, no imports), for variations of one command."""
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_bad_arguments_get_clear_errors():
    proc = liberopro("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:11")
    assert proc.returncode == 2 and "libero_goal:11" in proc.stderr  # the installed command, once
    code, text = in_process("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1", "--shifts", "S99")
    assert code == 2 and "unknown shift 'S99'" in text
    code, text = in_process("evaluate", "--tasks", "libero_goal:1")
    assert code == 2 and "--policy" in text
    code, text = in_process("evaluate", "--policy", "127.0.0.1:8999", "--tasks", "libero_goal:1")
    assert code == 2 and "is not a URL" in text
    code, text = in_process("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:x")
    assert code == 2 and "the index 'x' is not a number" in text
    code, text = in_process(
        "evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1", "--max-steps", "0"
    )
    assert code == 2 and "--max-steps must be at least 1" in text


def test_version_names_the_evaluator_and_the_pinned_stack():
    """``liberopro --version``: the evaluator's, the spec's and the results schema's versions, then
    each simulation package with its installed version, marked pinned (the test venv is pinned)."""
    from liberopro import EVALUATOR_VERSION
    from liberopro.stack import PINNED

    code, text = in_process("--version")
    assert code == 0 and text.startswith(f"liberopro {EVALUATOR_VERSION} (policy contract spec ")
    for dist, pin in PINNED.items():
        assert f"  {dist} {pin} (pinned)" in text, text


def test_a_dead_policy_url_fails_in_seconds_and_leaves_no_run_folder(tmp_path):
    """Nothing listens at the URL: the run ends after the 5 s refusal grace (not the 120 s
    startup timeout, which is for servers that accept connections but are not healthy yet),
    names the address, and makes no run folder (issue 23: it took 128 s and left one)."""
    out = tmp_path / "run"
    t0 = time.monotonic()
    code, text = in_process("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1", "--out", str(out))
    assert code == 2 and "nothing listens at 127.0.0.1:9" in text and "--policy-cmd" in text, text
    assert time.monotonic() - t0 < 60 and not out.exists()


def test_a_shard_says_its_own_episodes_and_of_how_many(tmp_path):
    """With --shard I/N the first line counts this shard's episodes, not the plan's (a fresh user
    read 6 for a shard of 2): 6 episodes in 4 blocks of sizes 1, 2, 1, 2."""
    args = ["evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1,libero_goal:2", "--episodes", "3"]
    code, text = in_process(*args, "--shard", "1/4", "--out", str(tmp_path / "run"))
    assert code == 2 and "2 episodes: shard 1/4 of 6 episodes (2 instances x 3 x 1 condition(s))" in text, text
    code, text = in_process(*args, "--shard", "7/8", "--out", str(tmp_path / "run"))
    assert code == 2 and "the plan has only 6 episode(s); use at most 6 shards" in text, text
    assert "episodes: shard" not in text, text


def test_proof_options_that_cannot_apply_are_refused_naming_the_option(tmp_path):
    """The solvability proof runs on validated instances: asking for it without validation, or
    for proof init states without the proof, or init states that are not numbers, is refused in
    one line before any scene is built (a fresh user's --proof --no-validate went unremarked)."""
    base = ["instances", "generate", "--split", "train", "--seed", "0", "--out", str(tmp_path / "m.jsonl")]
    code, text = in_process(*base, "--proof", "--no-validate")
    assert code == 2 and "--proof needs --validate" in text
    code, text = in_process(*base, "--no-proof", "--proof-init-states", "0")
    assert code == 2 and "--proof-init-states only applies" in text
    code, text = in_process(*base, "--proof-init-states", "abc")
    assert code == 2 and "--proof-init-states takes init state indices" in text and "'abc'" in text
    assert not (tmp_path / "m.jsonl").exists()


@pytest.mark.parametrize("cmd", ["exit 3", "sleep 600"])
def test_a_policy_command_that_never_serves_fails_fast_with_its_output(tmp_path, cmd):
    code, text = in_process(
        "evaluate",
        "--policy-cmd",
        f"echo booting; {cmd}",
        "--tasks",
        "libero_goal:1",
        "--out",
        str(tmp_path),
        "--startup-timeout",
        "3",
    )
    assert code == 2
    assert "policy_connect_error" in text and "booting" in text


def test_split_prints_the_held_out_tasks():
    proc = liberopro("split", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["held_out"]["libero_goal"] == [7, 9]
    assert sum(t["split"] == "eval" for t in data["tasks"]) == 8


# ---------------------------------------------------------------- bad input stops before anything runs
def _no_run(tmp_path: Path) -> tuple[str, Path, Path]:
    """A policy command that leaves a marker when started, and an output directory not yet there."""
    marker, out = tmp_path / "policy-started", tmp_path / "out"
    return f"touch {marker} && liberopro serve-example zero", marker, out


def _bad_param_manifest(path: Path) -> int:
    """A training manifest of three instances whose S12 line has a parameter out of its range
    (written through the real writer, so the header and content hash are right); its line number."""
    from liberopro.instances.build import make_instance
    from liberopro.schema.manifest import ShiftEntry, make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    instances = [
        make_instance(TaskRef("libero_goal", t), case, seed=0) for t, case in ((0, []), (0, ["S12"]), (1, ["S12"]))
    ]
    bad = instances[1].shifts[0]
    instances[1] = instances[1].model_copy(
        update={"shifts": [ShiftEntry(id="S12", params={**bad.params, "intensity_scale": 7.5})]}
    )
    write_manifest(path, make_header("train", 0, instances, episodes=1), instances)
    return 3


def test_a_manifest_with_one_bad_line_is_refused_whole_before_the_policy_starts(tmp_path):
    manifest = tmp_path / "m.jsonl"
    line = _bad_param_manifest(manifest)
    cmd, marker, out = _no_run(tmp_path)
    proc = liberopro("evaluate", "--policy-cmd", cmd, "--manifest", str(manifest), "--out", str(out), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"m.jsonl:{line}: S12 parameters: intensity_scale: Input should be less than or equal to 3" in proc.stderr
    assert "m.jsonl: 1 problem(s):" in proc.stderr and "nothing was run" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not marker.exists()


def test_an_earlier_run_of_another_plan_is_refused_before_the_policy_starts(tmp_path):
    """OUT holds a run of another plan (its run.json and episodes): refused, naming it, without
    starting the policy command (no marker, no policy.log) and without changing OUT."""
    cmd, marker, out = _no_run(tmp_path)
    out.mkdir()
    identity = {"instance_ids": ["x"], "plan": [["x", 0, "live", "none", 0, 0]], "settings": {}, "shard": None}
    (out / "run.json").write_text(json.dumps(identity) + "\n")
    (out / "episodes.jsonl").write_text("")
    before = sorted(p.name for p in out.iterdir())
    proc = liberopro(
        "evaluate", "--policy-cmd", cmd, "--tasks", "libero_goal:0", "--no-check-static", "--out", str(out), timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "holds a run of another plan: 2 episode(s) differ (1 planned there, 1 here)" in proc.stderr
    assert "use another --out or --fresh" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists() and sorted(p.name for p in out.iterdir()) == before


def test_workers_above_the_policys_declared_concurrency_are_refused_naming_both(tmp_path):
    """--workers 2 against a --policy-cmd server that declares no max_concurrent_episodes (spec
    1.0: one episode at a time): every worker would share that one server, so the command ends
    before any worker starts or the run folder changes (no run.json, no episodes.jsonl), naming
    both numbers and what to give instead."""
    repo = Path(__file__).resolve().parents[2]
    server = (
        "from submission_spec.server import serve; from tests.evaluator.policies import Recorder, metadata; "
        "serve(Recorder(metadata('one-at-a-time')))"
    )
    out = tmp_path / "out"
    proc = liberopro(
        "evaluate", "--policy-cmd", f'cd {repo} && {sys.executable} -c "{server}"',
        "--tasks", "libero_goal:0,libero_goal:1", "--no-check-static", "--workers", "2", "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--workers 2: the policy declares it runs 1 episode(s) at once" in proc.stderr
    assert "Give --workers 1 or leave --workers out" in proc.stderr and "Traceback" not in proc.stderr
    assert [p.name for p in out.iterdir()] == ["policy.log"]  # the run folder otherwise untouched


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


GL_CASES = {
    "glx without a display": (
        {"MUJOCO_GL": "glx"},
        "MUJOCO_GL=glx needs an X display and DISPLAY is not set: "
        "unset MUJOCO_GL (headless EGL is the default) or set MUJOCO_GL=egl",
    ),
    "glx on a display that is not there": (
        {"MUJOCO_GL": "glx", "DISPLAY": ":97"},
        "MUJOCO_GL=glx cannot render on display :97 (X11: Failed to open display",
    ),
    "an unknown renderer": ({"MUJOCO_GL": "vulkan"}, "MUJOCO_GL=vulkan is not a renderer the evaluator runs with"),
    # issue 12: a GPU stream's device index that this machine (or container) does not have
    "an EGL device that is not there": (
        {"MUJOCO_GL": "egl", "MUJOCO_EGL_DEVICE_ID": "99"},
        "MUJOCO_EGL_DEVICE_ID=99 names no EGL device here (",
    ),
    "an EGL device that is not a number": (
        {"MUJOCO_GL": "egl", "MUJOCO_EGL_DEVICE_ID": "gpu1"},
        "MUJOCO_EGL_DEVICE_ID='gpu1' is not an EGL device index",
    ),
    "egl with osmesa's PyOpenGL": (
        {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "osmesa"},
        "PYOPENGL_PLATFORM=osmesa does not match MUJOCO_GL=egl",
    ),
}


def _env_without_display(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID", "CUDA_VISIBLE_DEVICES")
    }
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra}


@pytest.mark.parametrize("case", list(GL_CASES))
def test_a_rendering_misconfiguration_ends_evaluate_with_one_line(tmp_path, case):
    gl_env, expected = GL_CASES[case]
    cmd, marker, out = _no_run(tmp_path)
    proc = subprocess.run(
        [
            str(BIN / "liberopro"),
            "evaluate",
            "--policy-cmd",
            cmd,
            "--tasks",
            "libero_goal:0",
            "--shifts",
            "nominal,S12",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=_env_without_display(gl_env),
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert proc.returncode == 2
    assert expected in _one_line(proc.stderr)
    assert not out.exists() and not marker.exists()


@pytest.mark.parametrize(
    "args",
    [
        [
            "instances",
            "generate",
            "--split",
            "train",
            "--seed",
            "0",
            "--tasks",
            "libero_goal:0",
            "--shifts",
            "S12",
            "--out",
            "{tmp}/m.jsonl",
        ],
        ["review", "--manifest", "{tmp}/m.jsonl", "--out", "{tmp}/review"],
    ],
)
def test_a_rendering_misconfiguration_ends_generate_and_review_with_one_line(tmp_path, args):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run(
        [str(BIN / "liberopro"), *argv],
        capture_output=True,
        text=True,
        env=_env_without_display({"MUJOCO_GL": "vulkan"}),
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    # an unknown value breaks mujoco's own import: the check must come before anything imports it
    assert proc.returncode == 2
    assert "MUJOCO_GL=vulkan is not a renderer the evaluator runs with" in _one_line(proc.stderr)
    assert list(tmp_path.iterdir()) == []


def test_osmesa_is_refused_with_one_line_where_it_is_not_installed_and_accepted_where_it_is():
    import ctypes.util

    code = (
        "from liberopro.stack import RenderingError, check_rendering\n"
        "try:\n    print(check_rendering())\nexcept RenderingError as exc:\n    print(exc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env_without_display({"MUJOCO_GL": "osmesa"}),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    if ctypes.util.find_library("OSMesa") is None:
        assert proc.stdout.strip().startswith("MUJOCO_GL=osmesa needs the OSMesa library, which is not installed")
    else:
        assert proc.stdout.strip() == "osmesa"


def test_sigterm_stops_the_policy_server_and_says_so(tmp_path):
    """A batch scheduler's SIGTERM ends evaluate as Ctrl-C does: the --policy-cmd server (in a
    session of its own) is stopped, not orphaned, and one line says what happened."""
    import signal
    import time

    marker = f"{7000 + os.getpid() % 1000}.25"  # `sleep` of a length no other process uses
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "liberopro.cli",
            "evaluate",
            "--policy-cmd",
            f"echo booting; exec sleep {marker}",
            "--tasks",
            "libero_goal:1",
            "--out",
            str(tmp_path),
            "--startup-timeout",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def servers() -> list:
        return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker]]

    deadline = time.monotonic() + 60
    while not servers():
        assert proc.poll() is None and time.monotonic() < deadline, "the policy server never started"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert "interrupted (SIGTERM)" in out + err and "the policy server was stopped" in out + err
    psutil.wait_procs(servers(), timeout=10)
    assert not servers(), "the policy server was left running"


def test_an_evaluator_killed_with_sigkill_leaves_no_policy_server(tmp_path):
    """SIGKILL runs none of the evaluator's code: the --policy-cmd server (the example zero policy,
    which /bin/sh forks rather than runs in its own place) is ended by its watcher
    (liberopro.episode.policy_watch) within seconds instead of being orphaned, and the watcher exits."""
    cmd = [sys.executable, "-m", "liberopro.cli", "evaluate", "--policy-cmd", "liberopro serve-example zero"]
    proc = subprocess.Popen(
        [*cmd, "--tasks", "libero_goal:1", "--out", str(tmp_path), "--startup-timeout", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    evaluator = psutil.Process(proc.pid)

    def server_started() -> bool:
        for p in evaluator.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.cmdline()[1:] == [str(BIN / "liberopro"), "serve-example", "zero"]:
                    return True
        return False

    procs: list = []
    try:
        deadline = time.monotonic() + 60
        while not server_started():
            assert proc.poll() is None and time.monotonic() < deadline, "the policy server never started"
            time.sleep(0.2)
        time.sleep(1)  # the watcher starts right after the shell, well within this
    finally:
        with contextlib.suppress(psutil.Error):
            procs = evaluator.children(recursive=True)  # the shell, the server, the watcher
        proc.kill()
        proc.wait(timeout=10)
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:  # not to leave them running after a failure
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not alive, f"left running 10 s after the evaluator was killed: {[p.cmdline() for p in alive]}"


def test_only_the_render_teardown_errors_of_an_interrupted_scene_build_are_silenced():
    """Ctrl-C while a scene is built left half-built robosuite render contexts, whose ``__del__``
    printed two "Exception ignored in ..." tracebacks at exit (an AttributeError, then EGL_NOT_INITIALIZED
    once robosuite's atexit had terminated the EGL display): those two are dropped, nothing else."""
    from liberopro.sim.scene import is_interrupted_render_teardown
    from OpenGL.raw.EGL._errors import EGLError
    from robosuite.renderers.context.egl_context import EGLGLContext
    from robosuite.utils.binding_utils import MjRenderContext

    def unraisable(exc: BaseException, obj: object) -> Any:  # what sys.unraisablehook receives
        return SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None, object=obj)

    half_built = AttributeError("'MjRenderContextOffscreen' object has no attribute 'con'")
    terminated, other_egl = EGLError(err=0x3001), EGLError(err=0x3003)  # EGL_NOT_INITIALIZED, EGL_BAD_ALLOC
    for obj in (MjRenderContext.__del__, EGLGLContext.__del__):
        assert is_interrupted_render_teardown(unraisable(terminated, obj))
        assert not is_interrupted_render_teardown(unraisable(other_egl, obj))
        assert not is_interrupted_render_teardown(unraisable(RuntimeError("x"), obj))
    assert is_interrupted_render_teardown(unraisable(half_built, MjRenderContext.__del__))
    assert not is_interrupted_render_teardown(unraisable(half_built, EGLGLContext.__del__))
    assert not is_interrupted_render_teardown(unraisable(terminated, test_bad_arguments_get_clear_errors))
    assert not is_interrupted_render_teardown(unraisable(half_built, None))


def test_a_runtime_shift_whose_fallback_lies_past_max_steps_is_named_before_the_run():
    from liberopro.cli.evaluate import _late_fallbacks
    from liberopro.instances.build import make_instance
    from liberopro.sim.tasks import TaskRef

    d10, s12 = (make_instance(TaskRef("libero_goal", 0), [sid], seed=0) for sid in ("D10", "S12"))
    step = dict(d10.shifts[0].params)["fallback_step"]
    assert _late_fallbacks([d10, s12], step) == [
        f"D10: fallback step {step} is past --max-steps {step}; it fires only if its trigger phase comes first "
        "(raise --max-steps to be sure it acts)"
    ]
    assert _late_fallbacks([d10, s12], step + 1) == [] and _late_fallbacks([d10, s12], None) == []


@pytest.mark.sim  # two runs of 4 short episodes, one with two worker processes (~1.5 min on 2 shared cores)
def test_evaluate_with_two_workers_writes_the_records_of_one(tmp_path):
    """``--workers 2`` (liberopro.runs.workers): the records of ``--workers 1`` apart from wall-clock fields
    and episode ids, written in the same order. openvla protocol: its wire has no episodes, so two
    workers may share the example server that declares no concurrency (the liberopro protocol's is
    refused: tests/evaluator/test_workers.py)."""
    from liberopro.runs.summary import read_episodes

    runs = {}
    for n in (2, 1):
        out = tmp_path / f"workers-{n}"
        proc = liberopro(
            "evaluate",
            "--policy-cmd",
            "liberopro serve-example zero --protocol openvla",
            "--protocol",
            "openvla",
            "--tasks",
            "libero_goal:0,libero_spatial:0",
            "--shifts",
            "nominal,D01",
            "--max-steps",
            "8",
            "--render-size",
            "64",
            "--workers",
            str(n),
            "--out",
            str(out),
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert ("workers: 2 (--workers 2; the policy declares 1 episode(s) at once" in proc.stderr) == (n == 2)
        assert json.loads((out / "summary.json").read_text())["workers"] == n
        runs[n] = read_episodes(out / "episodes.jsonl")
    one, two = runs[1], runs[2]
    assert len(one) == len(two) == 4 and len({r.episode_id for r in one + two}) == 8
    assert [(r.task_key, r.case, r.episode_index) for r in two] == [(r.task_key, r.case, r.episode_index) for r in one]
    for a, b in zip(one, two, strict=True):
        assert a.outcome_key() == b.outcome_key()
        assert (a.renders, a.latency.requests) == (b.renders, b.latency.requests) and a.steps == 8


@pytest.mark.parametrize("width", [80, 100])
def test_results_table_and_help_fit_80_columns(monkeypatch, width):
    """At 80 (and 100) columns the results table stacks its columns: every line fits, no header
    or value is cut ("succ..." before), the runtime shifts' firing is printed under it; the help of
    the top level and of evaluate is rewrapped to the width with no Sphinx markup (issue 23)."""
    import io

    from liberopro.cli import tables
    from liberopro.runs.summary import summarize
    from rich.console import Console

    from .report_runs import TASKS, header, record

    records = [
        record(case, task, ep, ok=(ep + task) % 2 == 0)
        for case in ("nominal", "S01", "D10", "S01+D10")
        for task in TASKS
        for ep in range(3)
    ]
    buffer = io.StringIO()
    monkeypatch.setattr(tables, "out", Console(file=buffer, width=width, color_system=None))
    tables.print_summary(summarize(records, header("p")), title="a run")
    text = buffer.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "…" not in text and " SR " in text and "S01+D10" in text and "D10 3/3/0/0" not in text, text
    assert "runtime shifts fired at phase/fallback step/blocked/not: D10 0/6/0/0" in text, text
    for args in ((), ("evaluate",)):
        proc = subprocess.run(
            [str(BIN / "liberopro"), *args, "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "80"},
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0 and max(len(line) for line in proc.stdout.splitlines()) <= 80, proc.stdout
        assert ":mod:" not in proc.stdout and "…" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("columns", [None, "80", "60"])
def test_shift_listing_is_readable_at_80_columns(columns):
    """``liberopro shifts`` piped (100 columns when COLUMNS is unset) or at COLUMNS 80 or 60: every
    line fits 80 (or COLUMNS), no cell is cut to "…" (183 cuts at 80 before it was stacked), and every
    shift shows its ID, name, what changes and parameters; ``--wide`` folds, never cuts, too."""
    from liberopro.catalog.listing import rows

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
    texts = []
    for args in ((), ("--wide",)):
        cmd = [str(BIN / "liberopro"), "shifts", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0 and "…" not in proc.stdout, proc.stdout
        texts.append(proc.stdout)
    text = texts[0]
    assert max(len(line) for line in text.splitlines()) <= int(columns or 80), text
    flat = " ".join(text.split())
    for r in rows():
        assert f" {r['id']} {r['name']}: {r['category']}, {r['kind']}" in f" {flat}", r["id"]
        assert " ".join(r["summary"].split()) in flat, r["id"]
