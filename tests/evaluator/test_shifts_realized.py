"""Each of the seven shifts of the main-job issue is really realised, checked from simulator
state (not from the shift's own record alone), on real LIBERO scenes.

Scenes: libero_goal:8 ("put the bowl on the plate") and libero_spatial:5 (the bowl on the
ramekin: a stacked target that must move with its support).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from liberopro.episode.phases import APPROACH_RADIUS_M
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry, make_instance, semantics_of
from liberopro.sim.tasks import TaskRef

from submission_spec import PolicyClient, create_app

from .policies import Recorder, metadata, sweep, toward

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

GOAL8 = TaskRef("libero_goal", 8)
SPATIAL5 = TaskRef("libero_spatial", 5)


def run(serve_app, scenes, policy, instance: Instance, max_steps: int, episode: int = 0):
    url = serve_app(create_app(policy))
    with PolicyClient(url) as client:
        runner = EpisodeRunner(client, policy.metadata, RunSettings(render_size=64, max_steps=max_steps), scenes=scenes)
        plan = EpisodePlan(instance=instance, episode_index=episode, init_state_index=episode, seed=episode)
        return runner.run_episode(plan), runner.scene_for(instance.task)


def inst(ref: TaskRef, shift_id: str, params: dict) -> Instance:
    return Instance(
        instance_id=f"test-{shift_id}",
        suite=ref.suite,
        task_index=ref.index,
        shifts=[ShiftEntry(id=shift_id, params=params)],
    )


def nominal(ref: TaskRef) -> Instance:
    return Instance(instance_id="test-nominal", suite=ref.suite, task_index=ref.index)


def penetrations(scene, names: list[str], tol: float = 0.003) -> list:
    bodies = {scene.root_body(n) for n in names}
    from liberopro.shifts._placement import is_ground

    return [
        (a, b, d)
        for a, b, d, _ in scene.contacts()
        if (a in bodies) != (b in bodies) and d < -tol and not is_ground(scene, b if a in bodies else a)
    ]


@pytest.mark.parametrize(
    "ref,params",
    [
        (GOAL8, {"distance_m": 0.10, "direction_deg": 300.0, "yaw_deg": 30.0}),
        (SPATIAL5, {"distance_m": 0.10, "direction_deg": 90.0, "yaw_deg": -20.0}),
    ],
)
def test_s01_moves_the_target_which_settles_on_its_support(serve_app, scenes, ref, params):
    sem = semantics_of(ref)
    policy = Recorder(metadata("hold"))
    base, scene = run(serve_app, scenes, policy, nominal(ref), max_steps=1)
    base_pos = scene.object_pose(sem.target)[0]
    rec, scene = run(serve_app, scenes, policy, inst(ref, "S01", params), max_steps=1)
    assert rec.valid, rec.detail
    now = scene.object_pose(sem.target)[0]
    moved = np.linalg.norm(now[:2] - base_pos[:2])
    assert abs(moved - params["distance_m"]) < 0.01, moved
    assert abs(now[2] - base_pos[2]) < 0.005  # resting at the same height: on its support
    applied = rec.shifts[0]["applied"]
    assert not penetrations(scene, applied["group"])
    if ref == SPATIAL5:  # the ramekin carries the bowl: the instruction's "on the ramekin" stays true
        assert applied["group"] == ["akita_black_bowl_1", "glazed_rim_porcelain_ramekin_1"]
        assert scene.entity_name(scene.support_below("akita_black_bowl_1")) == "glazed_rim_porcelain_ramekin_1"


def test_s01_refuses_a_placement_it_cannot_realise_instead_of_running_unshifted(serve_app, scenes):
    # 0.5 m from the bowl of libero_goal:8 is off the table, out of reach or inside a fixture in every direction.
    rec, _ = run(
        serve_app,
        scenes,
        Recorder(metadata("hold")),
        inst(GOAL8, "S01", {"distance_m": 0.5, "direction_deg": 0.0, "yaw_deg": 0.0}),
        max_steps=1,
    )
    assert not rec.valid and rec.termination_reason == "shift_invalid" and rec.steps == 0
    assert "no valid placement" in rec.detail


def test_s12_lighting_changes_the_lights_and_the_image(serve_app, scenes):
    params = {"intensity_scale": 0.4, "azimuth_deg": 30.0, "tilt_deg": 10.0, "colour": [1.1, 0.9, 0.9]}
    policy = Recorder(metadata("hold"))
    run(serve_app, scenes, policy, nominal(GOAL8), max_steps=1)
    nominal_img = policy.observations[-1].images["agentview"].astype(float)
    rec, scene = run(serve_app, scenes, policy, inst(GOAL8, "S12", params), max_steps=1)
    shifted_img = policy.observations[-1].images["agentview"].astype(float)
    assert rec.valid, rec.detail
    diffuse = np.asarray(rec.shifts[0]["applied"]["light_diffuse"])
    np.testing.assert_allclose(scene.model.light_diffuse, diffuse, atol=1e-4)
    assert diffuse[0, 0] == pytest.approx(0.8 * 0.4 * 1.1, abs=1e-3)  # LIBERO lights are 0.8 grey
    assert shifted_img.mean() < 0.8 * nominal_img.mean()  # dimmed to x0.4: visibly darker


def test_s15_moves_and_turns_the_third_person_camera_by_the_stated_amount(serve_app, scenes):
    params = {
        "shift_m": 0.07,
        "shift_azimuth_deg": 45.0,
        "shift_elevation_deg": 10.0,
        "turn_deg": 9.0,
        "axis_azimuth_deg": 0.0,
        "axis_elevation_deg": 30.0,
    }
    policy = Recorder(metadata("hold", cameras=("agentview", "wrist")))
    _, scene = run(serve_app, scenes, policy, nominal(GOAL8), max_steps=1)
    cid = scene.inner.sim.model.camera_name2id("agentview")
    pos0, mat0 = scene.data.cam_xpos[cid].copy(), scene.data.cam_xmat[cid].reshape(3, 3).copy()
    before = policy.observations[-1]
    rec, scene = run(serve_app, scenes, policy, inst(GOAL8, "S15", params), max_steps=1)
    after = policy.observations[-1]
    assert rec.valid, rec.detail
    pos1, mat1 = scene.data.cam_xpos[cid], scene.data.cam_xmat[cid].reshape(3, 3)
    assert np.linalg.norm(pos1 - pos0) == pytest.approx(0.07, abs=1e-4)
    angle = math.degrees(math.acos((np.trace(mat0.T @ mat1) - 1) / 2))
    assert angle == pytest.approx(9.0, abs=0.05)
    agent_change = np.abs(after.images["agentview"].astype(int) - before.images["agentview"]).mean()
    wrist_change = np.abs(after.images["wrist"].astype(int) - before.images["wrist"]).mean()
    assert agent_change > 5
    # Only the third-person camera moved. The wrist image is not bit-identical: MuJoCo's OpenGL
    # renderer carries state from the agentview render that precedes it in the same step
    # (measured: ~2% of wrist pixels differ, mean change < 1 grey level).
    assert wrist_change < 1.0 < agent_change / 5


def test_s22_the_policy_receives_the_paraphrase(serve_app, scenes):
    instance = make_instance(GOAL8, ["S22"], seed=3)
    text = instance.shifts[0].params["text"]
    policy = Recorder(metadata("hold"))
    rec, _ = run(serve_app, scenes, policy, instance, max_steps=3)
    assert text != "put the bowl on the plate"
    assert policy.resets[-1][1] == text
    assert [o.instruction for o in policy.observations] == [text] * 3
    assert rec.instruction == text


def test_d01_fires_in_the_approach_phase_and_moves_the_target(serve_app, scenes):
    sem = semantics_of(GOAL8)
    holder = {}

    def target():
        return holder["scene"].object_pose(sem.target)[0]

    policy = Recorder(metadata("toward-target"), toward(target))
    # warm the scene so the closure can read it
    _, holder["scene"] = run(serve_app, scenes, Recorder(metadata("toward-target")), nominal(GOAL8), max_steps=1)
    params = {"trigger": "approach", "fallback_step": 200, "distance_m": 0.08, "direction_deg": 200.0, "yaw_deg": 10.0}
    rec, scene = run(serve_app, scenes, policy, inst(GOAL8, "D01", params), max_steps=60)
    assert rec.valid, rec.detail
    d01 = rec.shifts[0]
    assert d01["fired_by"] == "phase" and d01["fired_at_step"] is not None
    assert rec.phases["approach"] < d01["fired_at_step"] + 1
    assert "grasp" not in rec.phases or rec.phases["grasp"] > d01["fired_at_step"]  # before contact
    post = d01["applied"]["post_condition"]
    assert post["moved_m"] == pytest.approx(0.08, abs=0.005)
    # Approach: the end effector within APPROACH_RADIUS_M (10 cm) of the target's bounding box
    # (phases.py); the record measures to the bowl's centre, up to its half-diagonal (~6.5 cm)
    # farther. (0.15 was tighter than the phase: 0.1501 was measured once observations were
    # sampled at the end of the step.)
    assert post["eef_to_target_before_m"] <= APPROACH_RADIUS_M + 0.07


def test_d10_freezes_what_the_policy_sees_for_the_window(serve_app, scenes):
    policy = Recorder(metadata("sweep"), sweep())
    params = {"trigger": "approach", "fallback_step": 4, "duration_steps": 6}
    rec, _ = run(serve_app, scenes, policy, inst(GOAL8, "D10", params), max_steps=14)
    assert rec.valid and rec.shifts[0]["fired_by"] == "fallback" and rec.shifts[0]["fired_at_step"] == 4
    imgs = [o.images["agentview"] for o in policy.observations[-14:]]
    states = [o.proprio["eef_pos"] for o in policy.observations[-14:]]
    for t in range(5, 10):  # inside the window: the frame of step 4
        np.testing.assert_array_equal(imgs[t], imgs[4])
        np.testing.assert_array_equal(states[t], states[4])
    assert not np.array_equal(imgs[10], imgs[4])  # released
    assert not np.array_equal(states[3], states[4])  # the arm was moving all along
    assert [o.step for o in policy.observations[-14:]] == list(range(14))  # step index stays current
    assert rec.shifts[0]["applied"]["frozen_steps"] == 6


def test_d19_pushes_the_end_effector_by_the_stated_distance(serve_app, scenes):
    """Measured on what the policy receives, not on the shift's record alone: a policy that holds
    still sees its end effector 6 cm further along +y after the push than before it, and is not
    asked during the push (the steps it was not asked at are exactly the push's, right after the
    firing step); then control returns to it and the arm stays where the push left it."""
    policy = Recorder(metadata("hold"))
    params = {"trigger": "approach", "fallback_step": 2, "distance_m": 0.06, "direction_deg": 90.0, "max_steps": 15}
    rec, _ = run(serve_app, scenes, policy, inst(GOAL8, "D19", params), max_steps=25)
    assert rec.valid, rec.detail
    d19 = rec.shifts[0]
    assert (d19["fired_by"], d19["fired_at_step"]) == ("fallback", 2)
    pushed = d19["applied"]["push_steps"]
    assert 1 <= pushed <= 15
    asked = [o.step for o in policy.observations]
    not_asked = sorted(set(range(rec.steps)) - set(asked))
    assert not_asked == list(range(2, 2 + pushed)), (asked, pushed)
    eef = {o.step: np.asarray(o.proprio["eef_pos"]) for o in policy.observations}
    before, after = eef[1], eef[2 + pushed]
    assert after[1] - before[1] >= 0.8 * 0.06  # +y, as stated, seen by the policy
    assert abs(after[0] - before[0]) < 0.02
    assert np.linalg.norm(eef[rec.steps - 1] - after) < 0.01  # control returned: nothing pushes on
    assert d19["applied"]["direction_used_deg"] == 90.0 and "directions_refused" not in d19["applied"]


def test_a_runtime_shift_unrealised_after_the_policy_acted_is_its_failure_in_the_denominator(serve_app, scenes):
    """Issue 22, item 5, in a real episode: a D19 push asked to cover 20 cm in one step falls short
    (its post-condition fails after the policy acted): the episode ends ``shift_blocked``, valid,
    not a success, and the summary counts it in the case's denominator and as blocked."""
    from liberopro.runs.summary import summarize

    params = {"trigger": "approach", "fallback_step": 2, "distance_m": 0.2, "direction_deg": 90.0, "max_steps": 1}
    rec, _ = run(serve_app, scenes, Recorder(metadata("hold")), inst(GOAL8, "D19", params), max_steps=25)
    assert (rec.termination_reason, rec.valid, rec.success) == ("shift_blocked", True, False), rec.detail
    assert "of the stated 0.200 m in 1 steps (blocked)" in (rec.detail or "")
    case = summarize([rec], {}).case("D19")
    assert (case.episodes, case.successes, case.invalid_episodes, case.shift_blocked) == (1, 0, 0, 1)


D19_BASE = {"trigger": "approach", "fallback_step": 2, "distance_m": 0.03, "max_steps": 15}


def test_d19_checks_each_push_direction_against_the_scene_at_the_firing_step(serve_app, scenes):
    """Issue 22, item 5: D19 re-checks its push direction at the firing step
    (:func:`_sweep_problem`; the first free of the drawn direction and its neighbours is pushed).
    In the task's real scene: a sweep from 10 cm before the target straight at it is refused
    naming the target; the opposite sweep is free; a push that would carry the grip site beyond
    the arm's reach is refused; the robot's own geoms never block (rays start inside the gripper)."""
    from liberopro.shifts.d19_robot_displacement import _sweep_problem

    _, scene = run(
        serve_app, scenes, Recorder(metadata("hold")), Instance(instance_id="n", suite="libero_goal", task_index=8), 2
    )
    sem = semantics_of(GOAL8)
    from liberopro.shifts._props import entity_aabb

    lo, hi = entity_aabb(scene, [sem.target])
    eef, target = scene.eef_pos(), (lo + hi) / 2  # the centre of the target's box
    at = math.atan2(target[1] - eef[1], target[0] - eef[0])
    d = np.array([math.cos(at), math.sin(at)])
    start = target - 0.1 * np.array([d[0], d[1], 0.0])
    moving = {scene.robot_root()}
    assert scene.entity_name(scene.root_body(sem.target)) in (_sweep_problem(scene, start, d, 0.08, moving) or "")
    assert _sweep_problem(scene, start, -d, 0.05, moving) is None
    assert "from the robot base" in (_sweep_problem(scene, eef, np.array([1.0, 0.0]), 0.5, moving) or "")
    assert _sweep_problem(scene, eef, np.array([0.0, 1.0]), 0.03, moving) is None  # from inside the gripper
    # fire() itself, with the phase tracker naming what the gripper touches (an object and a region:
    # regions are sites, with no body, and must not break the check)
    from types import SimpleNamespace

    from liberopro.shifts.base import EpisodeContext
    from liberopro.shifts.d19_robot_displacement import RobotDisplacement

    touched = SimpleNamespace(touched_now=lambda: {sem.target, "wooden_cabinet_1_top_region"})
    shift = RobotDisplacement({**D19_BASE, "direction_deg": 90.0})
    shift.fire(EpisodeContext(scene, sem, np.random.default_rng(0), phases=touched), 0)
    assert shift.applied["direction_used_deg"] == 90.0 and "directions_refused" not in shift.applied
