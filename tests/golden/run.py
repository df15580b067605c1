"""The golden run: a fixed manifest evaluated through the documented command line by a recording
policy, reduced to what must not change when the code is reorganised.

``python -m tests.golden.run --record`` (re)writes ``expected.json`` beside this file; the test
(``tests/evaluator/test_golden.py``) runs the same evaluation and compares. What is compared:

- every episode record of ``episodes.jsonl`` without its wall-clock fields (``episode_id``,
  ``wall_s``, ``loop_s``, ``latency``) and its count of camera renders (``renders``: evaluator
  work, which on-demand rendering changes without changing any outcome), keyed by (instance id,
  episode index);
- every observation the policy received (digests of images and instruction, proprioception
  rounded to 1e-7 and compared within a tolerance),
  in order, per episode (joined on the episode id);
- the fixed manifest's content hash.

The manifest (``manifest.jsonl``, committed) holds 3 tasks of 3 suites under nominal, S01, S14,
S19, D01, D10 and D18; its runtime shifts carry fallback steps inside the short horizon (6, 6
and 10: validity bounds allow them, the published ranges are only for sampling) so that each of
them acts within the 24 steps each episode runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MANIFEST = HERE / "manifest.jsonl"
EXPECTED = HERE / "expected.json"
EPISODES = 2
MAX_STEPS = 24
RENDER_SIZE = 64
#: Record fields that measure wall-clock time or evaluator work, or are random per run.
VOLATILE = ("episode_id", "wall_s", "loop_s", "latency", "renders")


def run_golden(out_dir: Path) -> dict:
    """Evaluate the golden manifest with the recording policy into ``out_dir``; the reduced run.

    Raises ``RuntimeError`` with the command's output when ``liberopro evaluate`` fails."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    obs_log = out_dir / "observations.jsonl"
    obs_log.unlink(missing_ok=True)
    env = {**os.environ, "GOLDEN_OBS_LOG": str(obs_log), "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "liberopro.cli",
        "evaluate",
        "--policy-cmd",
        f"{sys.executable} -m tests.golden.policy",
        "--manifest",
        str(MANIFEST),
        "--episodes",
        str(EPISODES),
        "--max-steps",
        str(MAX_STEPS),
        "--render-size",
        str(RENDER_SIZE),
        "--out",
        str(out_dir / "run"),
    ]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"liberopro evaluate failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}")
    return reduce_run(out_dir / "run" / "episodes.jsonl", obs_log)


def reduce_run(episodes_path: Path, obs_log: Path) -> dict:
    """Records without volatile fields and per-episode observation digests, keyed by
    ``instance_id/episode_index``."""
    records, by_episode = {}, {}
    for line in Path(episodes_path).read_text().splitlines():
        rec = json.loads(line)
        key = f"{rec['instance_id']}/{rec['episode_index']}"
        by_episode[rec["episode_id"]] = key
        records[key] = {k: v for k, v in rec.items() if k not in VOLATILE}
    observations: dict[str, list] = {k: [] for k in records}
    for line in Path(obs_log).read_text().splitlines():
        digest = json.loads(line)
        observations[by_episode[digest.pop("episode_id")]].append(digest)
    from liberopro.schema.manifest import read_manifest

    return {
        "manifest_content_hash": read_manifest(MANIFEST).header.content_hash,
        "records": dict(sorted(records.items())),
        "observations": dict(sorted(observations.items())),
    }


def main(record: bool = typer.Option(False, "--record", help="rewrite expected.json from a fresh run")) -> None:
    """The golden run: compare a fresh run with expected.json (exit 1 if it differs), or --record it."""
    with tempfile.TemporaryDirectory() as tmp:
        got = run_golden(Path(tmp))
    if record:
        EXPECTED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(
            f"wrote {EXPECTED}: {len(got['records'])} episodes, "
            f"{sum(map(len, got['observations'].values()))} observations"
        )
    else:
        same = got == json.loads(EXPECTED.read_text())
        print("identical to expected.json" if same else "DIFFERS from expected.json")
        raise typer.Exit(0 if same else 1)


if __name__ == "__main__":
    typer.run(main)
