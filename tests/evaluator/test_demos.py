"""``liberopro demos collect`` (:mod:`liberopro.runs.demonstrations`): a LeRobot dataset written from a real,
short oracle rollout, checked with pyarrow against the committed schema
(``evaluator/liberopro/data/lerobot_demos_schema.json``), in both layouts (v3.0 and v2.1).

The rollout is cut at :data:`STEPS` policy steps, so the oracle never succeeds: the success filter
is bypassed with ``keep_failures`` (its documented debugging option). Two instances of one task
(nominal and S19 action latency, whose executed actions lag the commanded ones), one episode
each, 64 px cameras. The v2.1 layout is assembled from the same progress entries, which also
checks that a rerun runs nothing again. The refusals run without the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from liberopro.runs.demonstrations import SCHEMA_PATH, DemosError, collect, demo_plans
from liberopro.schema.manifest import Instance, make_header, write_manifest
from liberopro.sim.tasks import TaskRef

STEPS = 6
SIZE = 64
TASK = TaskRef("libero_spatial", 0)  # a training task
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def _manifest(path: Path, split: str = "train") -> Path:
    from liberopro.instances.build import make_instance

    instances = [make_instance(TASK, [], 0), make_instance(TASK, ["S19"], 0)]
    assert all(isinstance(i, Instance) for i in instances), instances
    write_manifest(path, make_header(split, 0, instances, episodes=1), instances)  # type: ignore[arg-type]
    return path


def _frame_count(path: Path) -> int:
    import imageio.v2 as imageio

    with imageio.get_reader(path) as r:
        return r.count_frames()


def _check_common(root: Path, fmt: str, data_tables: list) -> dict:
    import pyarrow as pa

    spec = SCHEMA[fmt]
    for rel in spec["files"]:
        assert (root / rel).is_file(), rel
    info = json.loads((root / "meta/info.json").read_text())
    assert sorted(info) == sorted(spec["info_keys"])
    assert info["codebase_version"] == fmt
    assert info["fps"] == SCHEMA["fps"]
    assert (info["data_path"], info["video_path"]) == (spec["data_path"], spec["video_path"])
    assert info["total_episodes"] == 2 and info["splits"] == {"train": "0:2"}
    for name, ft in SCHEMA["features"].items():
        got = info["features"][name]
        assert got["dtype"] == ft["dtype"], name
        assert got["shape"] == [SIZE if d == "image_size" else d for d in ft["shape"]], name
    for key in SCHEMA["video_keys"]:
        vi = info["features"][key]["info"]
        assert {k: vi[k] for k in SCHEMA["video_info"]} == SCHEMA["video_info"]
        assert (vi["video.height"], vi["video.width"]) == (SIZE, SIZE)
    data = pa.concat_tables(data_tables)
    assert {f.name: str(f.type) for f in data.schema} == SCHEMA["data_columns"]
    assert data.num_rows == info["total_frames"] == 2 * STEPS
    d = data.to_pydict()
    assert d["index"] == list(range(2 * STEPS))
    assert d["frame_index"] == list(range(STEPS)) * 2 and d["policy_step"] == list(range(STEPS)) * 2
    assert d["episode_index"] == [0] * STEPS + [1] * STEPS
    assert np.allclose(d["timestamp"], np.arange(2 * STEPS) % STEPS / SCHEMA["fps"])
    commanded, executed = np.array(d["actions"]), np.array(d["executed_actions"])
    # nominal: the simulator executes what the oracle commanded; S19 (latency >= 1 step): it lags
    assert np.allclose(commanded[:STEPS], executed[:STEPS])
    assert not np.allclose(commanded[STEPS:], executed[STEPS:])
    state = np.array(d["state"])
    assert np.all(np.abs(state[:, :3]) < 2) and np.all(np.abs(state[:, 6:]) < 0.1)  # metres: eef, fingers
    stats = json.loads((root / "meta/stats.json").read_text())
    assert stats["state"]["count"] == [2 * STEPS] and len(stats["state"]["mean"]) == 8
    assert np.array(stats["image"]["mean"]).shape == (3, 1, 1)
    return info


@pytest.mark.sim
def test_collect_writes_both_layouts_that_match_the_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    manifest, out = _manifest(tmp_path / "train.jsonl"), tmp_path / "ds"
    first = collect(manifest, out, 1, image_size=SIZE, max_steps=STEPS, keep_failures=True)
    assert first.ran == 2 and [r["frames"] for r in first.kept] == [STEPS, STEPS]
    assert not any(r["success"] for r in first.records)  # cut at STEPS: kept only for keep_failures

    _check_common(out, "v3.0", [pq.read_table(out / "data/chunk-000/file-000.parquet")])
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet")
    assert {f.name: str(f.type) for f in eps.schema} == SCHEMA["v3.0"]["episode_columns"]
    e = eps.to_pydict()
    assert e["length"] == [STEPS, STEPS] and e["dataset_from_index"] == [0, STEPS]
    assert e["case"] == ["nominal", "S19"] and e["shift_ids"] == [[], ["S19"]]
    assert json.loads(e["shifts"][1])[0]["id"] == "S19" and e["init_state_id"] == [0, 0]
    assert e["videos/image/to_timestamp"] == [STEPS / 20, 2 * STEPS / 20]
    tasks = pq.read_table(out / "meta/tasks.parquet")
    assert {f.name: str(f.type) for f in tasks.schema} == SCHEMA["v3.0"]["tasks_columns"]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]
    assert e["tasks"] == [tasks.column("task").to_pylist()] * 2  # no language shift: one instruction
    for key in SCHEMA["video_keys"]:
        assert _frame_count(out / f"videos/{key}/chunk-000/file-000.mp4") == 2 * STEPS

    again = collect(manifest, out, 1, fmt="v2.1", image_size=SIZE, max_steps=STEPS, keep_failures=True)
    assert again.ran == 0 and again.records == first.records  # resumed from .progress: nothing run
    assert not (out / "meta/episodes").exists() and not (out / "meta/tasks.parquet").exists()
    info = _check_common(
        out, "v2.1", [pq.read_table(out / f"data/chunk-000/episode_{i:06d}.parquet") for i in range(2)]
    )
    assert info["total_videos"] == 4 and info["total_chunks"] == 1
    lines = [json.loads(x) for x in (out / "meta/episodes.jsonl").read_text().splitlines()]
    assert [sorted(x) for x in lines] == [sorted(SCHEMA["v2.1"]["episode_fields"])] * 2
    tasks21 = [json.loads(x) for x in (out / "meta/tasks.jsonl").read_text().splitlines()]
    assert [sorted(t) for t in tasks21] == [sorted(SCHEMA["v2.1"]["task_fields"])]
    stats21 = [json.loads(x) for x in (out / "meta/episodes_stats.jsonl").read_text().splitlines()]
    assert [s["stats"]["actions"]["count"] for s in stats21] == [[STEPS], [STEPS]]
    for i in range(2):
        for key in SCHEMA["video_keys"]:
            assert _frame_count(out / f"videos/chunk-000/{key}/episode_{i:06d}.mp4") == STEPS


def test_collect_refuses_an_evaluation_manifest(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path / "eval.jsonl", split="eval")
    with pytest.raises(DemosError, match="training instances only"):
        collect(manifest, tmp_path / "ds", 1)
    assert not (tmp_path / "ds").exists()


def test_collect_refuses_an_output_collected_with_other_settings(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path / "train.jsonl")
    progress = tmp_path / "ds" / ".progress"
    progress.mkdir(parents=True)
    (progress / "settings.json").write_text(json.dumps({"image_size": 128}))
    with pytest.raises(DemosError, match="other settings"):
        collect(manifest, tmp_path / "ds", 1, image_size=256)


def test_collect_refuses_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DemosError, match="v3.0, v2.1"):
        collect(tmp_path / "none.jsonl", tmp_path / "ds", 1, fmt="v4")


def test_init_states_hold_out_the_evaluated_ones_and_bad_ones_are_refused(tmp_path: Path) -> None:
    """``--init-states 10-49`` (issue 24: train on 10-49, evaluate on 0-9): the episode on init state
    k is the evaluator's episode k, env seed seed + k; neither/both options and states past 49 are
    refused before the manifest is read."""
    inst = Instance(instance_id="i", suite="libero_spatial", task_index=0, shifts=[])
    plans = demo_plans([inst], None, [12, 10, 12, 49], seed=7)
    assert [(p.episode_index, p.init_state_index, p.seed) for p in plans] == [(10, 10, 17), (12, 12, 19), (49, 49, 56)]
    assert [p.init_state_index for p in demo_plans([inst], 3, None, 0)] == [0, 1, 2]
    for episodes, states, match in (
        (None, None, "either"),
        (2, [1], "either"),
        (None, [50], r"0\.\.49 \(got \[50\]\)"),
    ):
        with pytest.raises(DemosError, match=match):
            collect(tmp_path / "none.jsonl", tmp_path / "ds", episodes, init_states=states)
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["demos", "collect", "--manifest", "m.jsonl", "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "--init-states" in result.output


def test_the_schema_file_names_openpi_s_features() -> None:
    assert {"image", "wrist_image", "state", "actions"} <= set(SCHEMA["features"])
    assert SCHEMA["features"]["state"]["shape"] == [8] and SCHEMA["features"]["actions"]["shape"] == [7]


def test_the_command_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    eval_manifest = _manifest(tmp_path / "eval.jsonl", split="eval")
    base = ["demos", "collect", "--episodes", "1", "--out", str(tmp_path / "ds")]
    result = CliRunner().invoke(app, [*base, "--manifest", str(eval_manifest)])
    assert result.exit_code == 2 and "training instances only" in result.output
    result = CliRunner().invoke(app, [*base, "--manifest", str(eval_manifest), "--format", "v4"])
    assert result.exit_code == 2 and "unknown format 'v4'" in result.output
    result = CliRunner().invoke(app, [*base, "--manifest", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "missing.jsonl" in result.output
