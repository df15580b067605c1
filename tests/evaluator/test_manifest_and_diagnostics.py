"""Instance manifests (deterministic, validated, hash-checked), what reaches a policy, and the
diagnostic conditions (frozen observations, replan override, recovery protocols), on real scenes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from liberopro.catalog import SPECS
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import Diagnostic, EpisodePlan, Instance, ShiftEntry, make_instance, parse_cases
from liberopro.instances.generation import check_manifest, default_cases, generate
from liberopro.schema.manifest import ManifestError, make_header, read_manifest, seed_commitment, write_manifest
from liberopro.sim.tasks import TaskRef

from submission_spec import PolicyClient, create_app

from .policies import Recorder, metadata, sweep

TASK = TaskRef("libero_goal", 8)
OBJECT0 = TaskRef("libero_object", 0)


@pytest.mark.sim  # generation builds real scenes
def test_manifest_generation_is_deterministic_validated_and_tamper_evident(tmp_path):
    cases = [[], ["S12"], ["S22"], ["D10"], ["S22", "D10"], ["S01", "S01"]]
    runs = [generate("train", 7, tasks=[OBJECT0], cases=cases, episodes=3) for _ in range(2)]
    (h1, i1, d1), (h2, i2, d2) = runs
    assert h1.content_hash == h2.content_hash and [i.model_dump() for i in i1] == [i.model_dump() for i in i2]
    assert h1.instances == 5 and h1.per_shift == {"D10": 1, "S12": 1, "S22": 1, "S22+D10": 1, "nominal": 1}
    assert i1[0].shifts == [] and i1[0].case == "nominal"  # nominal is an instance like any other
    assert [(d.case, d.stage) for d in d1] == [("S01+S01", "applicability")] and "twice" in d1[0].reason
    assert h1.seed_sha256 == seed_commitment(7)  # a commitment to the seed, never the seed itself
    assert [k for k in h1.model_dump() if "seed" in k] == ["seed_sha256"]
    path = tmp_path / "m.jsonl"
    write_manifest(path, h1, i1)
    manifest = read_manifest(path)
    assert manifest.header == h1 and manifest.instances == i1
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"task_index":0', '"task_index":1')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestError, match="content hash mismatch"):
        read_manifest(path)


def test_nominal_leads_the_default_cases_and_is_kept_when_named():
    assert default_cases() == [[]] + [[sid] for sid in SPECS]
    assert parse_cases("nominal,S12,S01+D10") == [[], ["S12"], ["S01", "D10"]]


def test_a_manifest_is_checked_whole_against_the_shift_catalog_with_each_bad_line_named(tmp_path):
    s12, d01 = (make_instance(OBJECT0, [sid], seed=7) for sid in ("S12", "D01"))
    p12, p01 = s12.shifts[0].params, d01.shifts[0].params

    def inst(iid: str, *entries: tuple[str, dict]) -> Instance:
        return Instance(
            instance_id=iid,
            suite=OBJECT0.suite,
            task_index=OBJECT0.index,
            shifts=[ShiftEntry(id=i, params=p) for i, p in entries],
        )

    instances = [
        inst("nominal"),
        s12,
        d01,  # lines 2-4: fine
        inst("x5", ("S99", {})),  # unknown shift
        inst("x6", ("s12", p12)),  # not written as the catalog does
        inst("x7", ("S12", {**p12, "gamma": 2})),  # a field S12 does not have
        inst("x8", ("D01", {**p01, "trigger": "lift"})),  # a trigger D01 does not take
        inst("x9", ("S12", p12), ("S12", p12)),
    ]  # a composition that may not be
    path = tmp_path / "m.jsonl"
    write_manifest(path, make_header("train", 7, instances, episodes=1), instances)  # header and hash are right
    with pytest.raises(ManifestError) as err:
        check_manifest(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{path}: 5 problem(s):"
    assert [ln.removeprefix(f"{path}:") for ln in lines[1:]] == [
        "5: unknown shift 'S99'; known: " + ", ".join(sorted(SPECS)),
        "6: shift id 's12' is written 'S12'",
        "7: S12 parameters: gamma: Extra inputs are not permitted",
        "8: D01 parameters: trigger: Input should be 'approach'",
        "9: S12+S12 is not a valid composition: a shift appears twice in S12+S12",
    ]
    write_manifest(path, make_header("train", 7, instances[:3], episodes=1), instances[:3])
    assert check_manifest(path).instances == instances[:3]


def test_eval_manifest_seed_is_never_taken_from_the_command_line(tmp_path):
    bin_ = Path(sys.executable).parent / "liberopro"
    proc = subprocess.run(
        [str(bin_), "instances", "generate", "--split", "eval", "--seed", "3", "--out", str(tmp_path / "e.jsonl")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "secret" in proc.stderr


class Tap:
    """ASGI middleware keeping every request body and header the policy server receives."""

    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[tuple[str, dict, bytes]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks = []

        async def tapped():
            msg = await receive()
            chunks.append(msg.get("body", b""))
            return msg

        try:
            return await self.app(scope, tapped, send)
        finally:
            self.requests.append(
                (scope["path"], {k.decode(): v.decode() for k, v in scope["headers"]}, b"".join(chunks))
            )


def test_nothing_about_an_instance_reaches_the_policy_but_instruction_and_observations(serve_app, scenes):
    instance = make_instance(TASK, ["S22", "D19"], seed=11)
    assert isinstance(instance, Instance)
    policy = Recorder(metadata("tapped", cameras=("agentview", "wrist")))
    tap = Tap(create_app(policy))
    url = serve_app(tap)
    with PolicyClient(url, encoding="json") as client:
        runner = EpisodeRunner(client, policy.metadata, RunSettings(render_size=64, max_steps=60), scenes=scenes)
        records = [runner.run_episode(EpisodePlan(instance, e, e, 11 + e)) for e in range(2)]
    assert all(r.valid for r in records)
    forbidden = {
        instance.instance_id,
        TASK.suite,
        "libero",
        records[0].task_name,
        "S22",
        "D19",
        "init_state",
        "seed",
        "shift",
        "trigger",
        "fallback",
        str(instance.shifts[1].params["distance_m"]),
    }
    bodies = [(path, json.loads(body)) for path, _, body in tap.requests if body]
    assert {p for p, _ in bodies} == {"/reset", "/act"}
    for path, body in bodies:
        expected = (
            {"episode_id", "instruction"}
            if path == "/reset"
            else {"episode_id", "step", "instruction", "images", "proprio"}
        )
        assert set(body) == expected
        if path == "/act":
            assert set(body["images"]) == {"agentview", "wrist"}
            assert set(body["proprio"]) == {"eef_pos", "eef_axis_angle", "gripper_qpos", "joint_pos"}
        text = json.dumps({k: v for k, v in body.items() if k != "images"})
        assert not [f for f in forbidden if f in text], (path, text[:300])
    for _, headers, _ in tap.requests:
        assert not [f for f in forbidden if f in json.dumps(headers)]
    ids = {b["episode_id"] for _, b in bodies}
    assert len(ids) == 2 and all(len(i) == 32 for i in ids)  # random per episode, not derived from the instance


def _run(serve_app, scenes, policy, instance, diag: Diagnostic, max_steps: int, replan: int | None = None):
    url = serve_app(create_app(policy))
    with PolicyClient(url) as client:
        runner = EpisodeRunner(
            client,
            policy.metadata,
            RunSettings(
                render_size=64, max_steps=max_steps, replan_steps=replan, recovery_hold_steps=6, recovery_extra_steps=5
            ),
            scenes=scenes,
        )
        return runner.run_episode(EpisodePlan(instance, 0, 0, 0, diag)), runner.scene_for(instance.task)


def nominal(ref=TASK) -> Instance:
    return Instance(instance_id="diag-nominal", suite=ref.suite, task_index=ref.index)


def test_frozen_observations_repeat_the_first_frame(serve_app, scenes):
    policy = Recorder(metadata("sweep"), sweep())
    rec, _ = _run(serve_app, scenes, policy, nominal(), Diagnostic(observations="frozen"), max_steps=6)
    obs = policy.observations[-6:]
    assert rec.observations == "frozen" and rec.row_key == "nominal [frozen]"
    for o in obs[1:]:
        np.testing.assert_array_equal(o.images["agentview"], obs[0].images["agentview"])
        np.testing.assert_array_equal(o.proprio["eef_pos"], obs[0].proprio["eef_pos"])
    assert [o.step for o in obs] == list(range(6))


def test_replan_override_sets_how_many_actions_of_a_chunk_run(serve_app, scenes):
    policy = Recorder(metadata("chunky", chunk=8, replan=8), lambda o: np.tile([0, 0, 0, 0, 0, 0, -1.0], (8, 1)))
    rec, _ = _run(serve_app, scenes, policy, nominal(), Diagnostic(), max_steps=12, replan=3)
    assert rec.replan_steps == 3 and rec.latency.requests == 4  # steps 0, 3, 6, 9


D19 = {"trigger": "approach", "fallback_step": 2, "distance_m": 0.05, "direction_deg": 90.0, "max_steps": 15}


def _d19() -> Instance:
    return Instance(
        instance_id="diag-d19", suite=TASK.suite, task_index=TASK.index, shifts=[ShiftEntry(id="D19", params=D19)]
    )


@pytest.fixture
def eef_track(monkeypatch):
    """The end effector's position after every control step the scene executes (metres, world
    frame), the settle steps included: measured on the real robot, not counted by the loop."""
    from liberopro.sim.scene import LiberoScene

    track: list[np.ndarray] = []
    step = LiberoScene.step

    def recording_step(self, action):
        done = step(self, action)
        track.append(self.eef_pos().copy())
        return done

    monkeypatch.setattr(LiberoScene, "step", recording_step)
    return track


def test_hold_recovery_keeps_the_robot_still_then_the_policy_resumes(serve_app, scenes, eef_track):
    policy = Recorder(metadata("sweep"), sweep(speed=0.3))
    rec, _ = _run(serve_app, scenes, policy, _d19(), Diagnostic(recovery="hold"), max_steps=30)
    assert rec.valid and rec.recovery["protocol"] == "hold" and rec.recovery["hold_steps"] == 6
    pushed = rec.shifts[0]["applied"]["push_steps"]
    at = rec.recovery["at_step"]
    assert at == 2 + pushed
    asked = [o.step for o in policy.observations[-rec.latency.requests :]]
    held = range(at, at + 6)
    assert not set(asked) & set(held) and asked[-1] == 29
    # Measured on the robot: still while held, moving again (the sweep) once the policy resumes.
    loop = eef_track[-30:]  # the policy loop's 30 steps (the settle steps come before)
    held_motion = np.linalg.norm(loop[at + 5] - loop[at - 1])
    resumed_motion = np.linalg.norm(loop[at + 11] - loop[at + 5])
    assert held_motion < 0.004, (held_motion, resumed_motion)
    assert resumed_motion > 0.012, resumed_motion


def test_restore_recovery_returns_the_robot_to_its_start_pose(serve_app, scenes):
    policy = Recorder(metadata("hold"))
    base, scene = _run(serve_app, scenes, policy, nominal(), Diagnostic(), max_steps=1)
    start = policy.observations[-1].proprio["eef_pos"]
    rec, _ = _run(serve_app, scenes, policy, _d19(), Diagnostic(recovery="restore"), max_steps=40)
    assert rec.valid and rec.shifts[0]["applied"]["post_condition"]["displaced_m"] >= 0.04
    assert np.linalg.norm(np.array(rec.recovery["restored_eef_m"]) - start) < 0.01


def test_retry_recovery_gives_extra_steps(serve_app, scenes, eef_track):
    policy = Recorder(metadata("sweep", chunk=8, replan=8), lambda o: np.tile([0, 0.3, 0, 0, 0, 0, -1.0], (8, 1)))
    rec, _ = _run(serve_app, scenes, policy, _d19(), Diagnostic(recovery="retry"), max_steps=25)
    assert rec.recovery["extra_steps"] == 5 and rec.steps == 30
    assert len(eef_track) >= 30 and np.linalg.norm(eef_track[-1] - eef_track[-6]) > 0.012  # the extra steps ran
    # The chunk in progress is dropped: the policy is asked afresh at the step the recovery acts.
    asked = [o.step for o in policy.observations[-rec.latency.requests :]]
    assert rec.recovery["at_step"] in asked and asked[0] == 0, asked
