"""``liberopro evaluate`` resumed after a kill, and run as two shards merged by ``liberopro
merge``, give the records and summary of one uninterrupted run (wall-clock fields aside): real
LIBERO episodes of the example zero policy, 1 task x 2 cases x 2 episodes of 5 steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from liberopro.runs.summary import read_episodes

from tests.evaluator.test_cli import liberopro

pytestmark = pytest.mark.sim  # evaluates real LIBERO episodes

ARGS = (
    "--policy-cmd",
    "liberopro serve-example zero",
    "--tasks",
    "libero_goal:0",
    "--shifts",
    "nominal,D01",
    "--episodes",
    "2",
    "--max-steps",
    "5",
    "--render-size",
    "64",
)
#: Summary fields that differ between two runs of the same plan: when and how it ran.
TIMING = ("started", "finished", "command", "workers", "shards")


def _evaluate(out: Path, *extra: str) -> str:
    proc = liberopro("evaluate", *ARGS, *extra, "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def _outcomes(run: Path) -> list[tuple]:
    return [r.outcome_key() for r in read_episodes(run / "episodes.jsonl")]


def _summary(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    for key in TIMING:
        summary.pop(key, None)
    summary["policy"].pop("pids")  # the policy server's process ids
    return summary


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """One uninterrupted run."""
    out = tmp_path_factory.mktemp("whole") / "run"
    _evaluate(out)
    return out


def test_a_run_killed_mid_write_resumes_to_the_records_of_an_uninterrupted_one(whole, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("run.json", "instances.jsonl"):
        shutil.copy(whole / name, out / name)
    lines = (whole / "episodes.jsonl").read_text().splitlines(keepends=True)
    (out / "episodes.jsonl").write_text(lines[0] + lines[1][:120])  # what a kill while writing the 2nd leaves
    kept = lines[0]
    err = _evaluate(out)
    assert f"resuming {out}: 1 of 4 episodes kept, 3 to run" in " ".join(err.split())
    assert (out / "episodes.jsonl").read_text().splitlines(keepends=True)[0] == kept  # kept, not rerun
    assert _outcomes(out) == _outcomes(whole)
    assert _summary(out) == _summary(whole)


def test_a_run_of_other_settings_in_out_is_refused_naming_them(whole, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(whole, out)
    before = (out / "episodes.jsonl").read_text()
    proc = liberopro("evaluate", *ARGS, "--max-steps", "6", "--out", str(out), timeout=300)
    assert proc.returncode == 2
    assert " ".join(proc.stderr.split()).endswith(
        f"error: {out} holds a run with other settings: max_steps 5 -> 6; use another --out or --fresh"
    )
    assert (out / "episodes.jsonl").read_text() == before


def test_two_shards_merged_equal_one_run(whole, tmp_path):
    for i in (0, 1):
        _evaluate(tmp_path / f"shard-{i}", "--shard", f"{i}/2")
    assert len(_outcomes(tmp_path / "shard-0")) == len(_outcomes(tmp_path / "shard-1")) == 2
    proc = liberopro("merge", str(tmp_path / "shard-1"), str(tmp_path / "shard-0"), "--out", str(tmp_path / "all"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(_outcomes(tmp_path / "all")) == set(_outcomes(whole))
    assert _outcomes(tmp_path / "all") == _outcomes(whole)  # in plan order, too
    assert _summary(tmp_path / "all") == _summary(whole)
