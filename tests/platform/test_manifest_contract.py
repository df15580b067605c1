"""The manifest contract between the evaluator and the platform: the file `liberopro instances
generate` writes is the file the platform's loader reads (one typed model, header included), the
loader rejects what is wrong with the line that is wrong, and the models load without the
simulator (the platform image has none). No database or Docker needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from liberopro.schema.manifest import Instance, ManifestError, ShiftEntry, make_header, write_manifest
from liberopro_platform.planning import load_manifest, plan_shards

BIN = Path(sys.executable).parent
SIMULATOR = ("robosuite", "mujoco", "libero", "cv2")


def test_the_manifest_models_and_the_platform_loader_import_no_simulator():
    code = (
        "import sys, json\n"
        "import liberopro.schema.manifest, liberopro.schema.shard, liberopro_platform.planning\n"
        "import liberopro_platform.pipeline, liberopro_platform.sandbox.docker_backend\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {SIMULATOR!r}\n"
        "                         or m in ('liberopro.sim.scene', 'liberopro.shifts', 'liberopro.instances.build'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []


@pytest.mark.sim  # instances generate builds real scenes
def test_a_real_eval_manifest_loads_in_the_platform_and_plans_shards(tmp_path):
    """`liberopro instances generate --split eval` on one held-out task, nominal and S12 (each
    realised on init state 0 in the simulator: one scene build, two one-step episodes; then the
    solvability proof: the scripted oracle on the nominal task from each of the 3 episodes' init
    states, which also proves S12, a lighting shift)."""
    from liberopro.runs.summary import EpisodeRecord, summarize
    from liberopro.schema.public import metrics_of
    from liberopro.schema.shard import ShardSpec

    out = tmp_path / "hidden.jsonl"
    env = {**os.environ, "LIBEROPRO_EVAL_SEED": "90210", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [
            str(BIN / "liberopro"),
            "instances",
            "generate",
            "--split",
            "eval",
            "--tasks",
            "libero_goal:9",
            "--shifts",
            "nominal,S12",
            "--episodes",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text().splitlines()[0])["kind"] == "liberopro-instance-manifest"  # the header line

    manifest = load_manifest(out)
    assert manifest.header.split == "eval" and manifest.header.per_shift == {"S12": 1, "nominal": 1}
    assert [i.case for i in manifest.instances] == ["nominal", "S12"]  # nominal is kept, as an instance
    proofs = [i.oracle for i in manifest.instances]  # an evaluation manifest is proved on all its episodes
    assert [(p.basis, p.init_states, p.verdict) for p in proofs if p] == [
        ("shifted", [0, 1, 2], "proved"),
        ("nominal", [0, 1, 2], "proved"),
    ]
    assert "90210" not in out.read_text()  # the seed is committed to, never written
    shards = plan_shards(manifest, episodes_per_instance=3, episodes_per_shard=4)
    assert [len(s) for s in shards] == [4, 2]
    ids = [i.instance_id for i in manifest.instances]
    assert [p for s in shards for p in s] == [
        [ids[0], 0],
        [ids[0], 1],
        [ids[0], 2],
        [ids[1], 0],
        [ids[1], 1],
        [ids[1], 2],
    ]
    spec = ShardSpec(
        submission_id="s1", shard_index=0, instances=manifest.instances, episodes=[(p[0], p[1]) for p in shards[0]]
    )
    assert ShardSpec.model_validate_json(spec.model_dump_json()).instances == manifest.instances

    # The leaderboard's Nominal column reads the summary's nominal case: fed by this instance.
    records = [
        EpisodeRecord(
            instance_id=i.instance_id,
            case=i.case,
            suite=i.suite,
            task_index=i.task_index,
            task_name="t",
            episode_index=e,
            init_state_id=e,
            seed=e,
            success=e == 0,
            steps=1,
            horizon=1,
            termination_reason="success" if e == 0 else "horizon",
            instruction="x",
            episode_id=f"{k}{e}",
            wall_s=0.0,
            shifts=[{"id": s.id, "name": "lighting", "kind": "static", "category": "Environment"} for s in i.shifts],
        )
        for k, i in enumerate(manifest.instances)
        for e in range(2)
    ]
    nominal = metrics_of(summarize(records, {}))["nominal"]
    assert nominal.value == 0.5 and nominal.episodes == 2


def _write(path: Path, instances: list[Instance]) -> list[str]:
    write_manifest(path, make_header("eval", 1, instances, episodes=2), instances)
    return path.read_text().splitlines()


INSTANCES = [
    Instance(instance_id="a", suite="libero_goal", task_index=0),
    Instance(
        instance_id="b",
        suite="libero_10",
        task_index=3,
        shifts=[
            ShiftEntry(
                id="S12",
                params={"intensity_scale": 0.5, "colour": [1.0, 0.9, 1.1], "azimuth_deg": 10.0, "tilt_deg": -5.0},
            )
        ],
    ),
]


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda lines: lines[1:],
            r"m\.jsonl:1: an instance where the manifest header belongs: this file has no header",
        ),
        (
            lambda lines: [lines[0].replace('"liberopro-instance-manifest"', '"other"')] + lines[1:],
            r"m\.jsonl:1: not a LIBERO-Pro2\.0 instance manifest \(kind 'other'",
        ),
        (
            lambda lines: [lines[0].replace('"schema_version":1', '"schema_version":9')] + lines[1:],
            r"m\.jsonl:1: manifest schema version 9; this reader reads version 1",
        ),
        (lambda lines: lines[:2] + ["{not json"] + lines[2:], r"m\.jsonl:3: Invalid JSON"),
        (
            lambda lines: lines[:2] + [lines[2].replace('"task_index":3', '"task_index":12')],
            r"m\.jsonl:3: task index 12 out of range 0-9 for libero_10",
        ),
        (
            lambda lines: lines[:2] + [lines[2].replace('"suite":"libero_10"', '"suite":"libero_90"')],
            r"m\.jsonl:3: unknown suite 'libero_90'",
        ),
        (
            lambda lines: lines[:2] + [lines[2].replace('"intensity_scale":0.5', '"intensity_scale":0.6')],
            r"m\.jsonl: content hash mismatch: the instances were altered after generation",
        ),
        (lambda lines: lines[:2], r"m\.jsonl: the header says 2 instances, the file has 1"),
    ],
)
def test_the_loader_names_the_file_the_line_and_what_is_wrong(tmp_path, edit, message):
    path = tmp_path / "m.jsonl"
    lines = _write(path, INSTANCES)
    assert load_manifest(path).instances == INSTANCES
    path.write_text("\n".join(edit(lines)) + "\n")
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


@pytest.mark.parametrize(
    "shifts, message",
    [
        (
            [
                ShiftEntry(
                    id="S12", params={"intensity_scale": 7.0, "colour": [1, 1, 1], "azimuth_deg": 0, "tilt_deg": 0}
                )
            ],
            r"m\.jsonl:3: S12 parameters: intensity_scale: Input should be less than or equal to 3",
        ),
        ([ShiftEntry(id="S99", params={})], r"m\.jsonl:3: unknown shift 'S99'"),
        (
            [ShiftEntry(id="D10", params={"trigger": "grasp", "duration_steps": 10})],
            r"m\.jsonl:3: D10 parameters: trigger: Input should be 'approach'",
        ),
    ],
)
def test_the_loader_checks_every_instance_against_the_catalog(tmp_path, shifts, message):
    """Shift ids and parameters are checked in the platform (the catalog needs no simulator), so a
    bad hidden manifest fails at planning, not in a shard."""
    path = tmp_path / "m.jsonl"
    _write(path, [INSTANCES[0], Instance(instance_id="c", suite="libero_10", task_index=3, shifts=shifts)])
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


def test_the_writer_refuses_a_header_that_does_not_match(tmp_path):
    header = make_header("eval", 1, INSTANCES[:1], episodes=2)
    with pytest.raises(ManifestError, match="not written: the header says 1 instances, the file has 2"):
        write_manifest(tmp_path / "m.jsonl", header, INSTANCES)
    assert not (tmp_path / "m.jsonl").exists()
