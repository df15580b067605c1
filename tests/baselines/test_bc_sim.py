"""The baseline end to end on real scenes (sim tier): a 6-step oracle rollout written by
``liberopro demos collect`` (kept with ``keep_failures``: cut at 6 steps it never succeeds), 30
training steps with ``liberopro-bc train``, then ``liberopro evaluate --policy-cmd 'liberopro-bc
serve ...'`` runs one short episode through the evaluator's own client. Checked: the pipeline
runs and the episode is valid and recorded; not a success rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

BIN = Path(sys.executable).parent
STEPS, SIZE = 6, 64


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.sim
def test_demos_train_serve_evaluate_one_episode(tmp_path: Path) -> None:
    from liberopro.instances.build import make_instance
    from liberopro.runs.demonstrations import collect
    from liberopro.schema.manifest import make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    instances = [make_instance(TaskRef("libero_spatial", 0), [], 0)]
    manifest = tmp_path / "train.jsonl"
    write_manifest(manifest, make_header("train", 0, instances, episodes=1), instances)  # type: ignore[arg-type]
    ds, ckpt, run = tmp_path / "ds", tmp_path / "ckpt", tmp_path / "run"
    result = collect(manifest, ds, 1, image_size=SIZE, max_steps=STEPS, keep_failures=True)
    assert [r["frames"] for r in result.kept] == [STEPS]

    proc = _run("liberopro-bc", "train", "--dataset", str(ds), "--out", str(ckpt), "--steps", "30", "--batch-size", "8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (ckpt / "weights.npz").is_file() and (ckpt / "loss.png").is_file()

    serve = f"liberopro-bc serve --checkpoint {ckpt}"
    proc = _run("liberopro", "evaluate", "--policy-cmd", serve, "--tasks", "libero_spatial:0", "--episodes", "1",
                "--max-steps", "12", "--no-check-static", "--out", str(run))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["valid"], records
    assert records[0]["steps"] == 12 or records[0]["success"], records
