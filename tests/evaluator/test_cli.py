"""The CLI as a user runs it: the main-job command of the issue, end to end, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

BIN = Path(sys.executable).parent


def liberopro(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(BIN / "liberopro"), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)


def test_evaluate_with_policy_cmd_writes_records_naming_each_shift(tmp_path):
    out = tmp_path / "run"
    proc = liberopro("evaluate", "--policy-cmd", "liberopro serve-example zero", "--tasks", "libero_goal:0",
                     "--shifts", "nominal,S01,D01", "--episodes", "1", "--max-steps", "30", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(r["case"] for r in records) == ["D01", "S01", "nominal"]
    for r in records:
        for s in r["shifts"]:
            assert (s["id"], s["category"], s["kind"]) in {("S01", "Condition", "static"), ("D01", "Condition", "runtime")}
        assert r["init_state_id"] == 0 and r["seed"] == 0 and r["horizon"] == 30
        # S01's first draw does not fit this crowded scene: the run takes the first draw whose
        # post-conditions hold on init state 0 (as a manifest does), so every episode is valid
        assert r["termination_reason"] == "horizon" and r["valid"], r.get("detail")
        assert r["latency"]["requests"] == 30
    assert "S01 on libero_goal:0: draw " in proc.stderr
    d01 = next(r for r in records if r["case"] == "D01")["shifts"][0]
    assert "fired_at_step" in d01 and "fired_by" in d01
    # 30 steps end before D01's fallback step (40) and the zero policy never approaches: said aloud
    assert d01["fired_at_step"] is None and "D01: in 1 episode(s) the runtime shift never fired" in proc.stdout
    assert {c["case"] for c in summary["cases"]} == {"nominal", "S01", "D01"}
    assert summary["stack"]["mujoco"] == "2.3.7" and summary["policy"]["metadata"]["policy_name"] == "example-zero"
    assert "LIBERO-Pro2.0 results" in proc.stdout and "nominal" in proc.stdout
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


def test_bad_arguments_get_clear_errors():
    proc = liberopro("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:11")
    assert proc.returncode == 2 and "libero_goal:11" in proc.stderr
    proc = liberopro("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1", "--shifts", "S99")
    assert proc.returncode == 2 and "unknown shift 'S99'" in proc.stderr
    proc = liberopro("evaluate", "--tasks", "libero_goal:1")
    assert proc.returncode == 2 and "--policy" in proc.stderr
    proc = liberopro("evaluate", "--policy", "127.0.0.1:8999", "--tasks", "libero_goal:1")
    assert proc.returncode == 2 and "is not a URL" in proc.stderr
    proc = liberopro("evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:x")
    assert proc.returncode == 2 and "the index 'x' is not a number" in proc.stderr


@pytest.mark.parametrize("cmd", ["exit 3", "sleep 600"])
def test_a_policy_command_that_never_serves_fails_fast_with_its_output(tmp_path, cmd):
    proc = liberopro("evaluate", "--policy-cmd", f"echo booting; {cmd}", "--tasks", "libero_goal:1",
                     "--out", str(tmp_path), "--startup-timeout", "3", timeout=120)
    assert proc.returncode == 2
    assert "policy_connect_error" in proc.stderr and "booting" in proc.stderr


def test_split_prints_the_held_out_tasks():
    proc = liberopro("split", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["held_out"]["libero_goal"] == [7, 9]
    assert sum(t["split"] == "eval" for t in data["tasks"]) == 8
