"""The shifts that act on the policy's signals, the robot state and the language (S14, S16-S21,
D11-D17, D20) are realised as stated, on real LIBERO scenes of two suites: libero_goal:8 ("put
the bowl on the plate", kitchen table) and libero_object:0 (floor scene).

What is checked comes from outside the shift: the requests the policy received (a recording
policy served over real HTTP), the actions the simulator executed (a spy on ``LiberoScene.step``
that records every action and calls the real step), and the scene's state. The reference is a
nominal episode of the same task, init state, seed and policy: the test policy's actions depend
only on the step index, and LIBERO runs are bit-identical on one stack, so a shifted episode's
clean frames, true proprioception and commands equal the nominal ones wherever the shift does not
change what is executed. Runtime shifts fire through small fallback steps here (phase-driven
firing is tested with scripted controllers elsewhere).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import cv2
import numpy as np
import pytest
from liberopro.catalog.paraphrases import paraphrases_for
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry
from liberopro.sim.tasks import TaskRef, task_info

from submission_spec import CameraSpec, PolicyClient, PolicyMetadata, create_app

from .policies import Recorder

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

GOAL8 = TaskRef("libero_goal", 8)
OBJECT0 = TaskRef("libero_object", 0)
REFS = [GOAL8, OBJECT0]
CAMS = ("agentview", "wrist")
NOMINAL_STEPS = 10


def meta(name: str) -> PolicyMetadata:
    return PolicyMetadata(
        policy_name=name,
        cameras=[CameraSpec(name=c, height=64, width=64) for c in CAMS],
        chunk_length=1,
        replan_steps=1,
        state_fields=["eef_pos", "eef_quat", "eef_axis_angle", "gripper_qpos", "joint_pos"],
    )


def command(t: int) -> np.ndarray:
    """The test policy's action at step t (LIBERO convention; a function of the step only), as the
    evaluator receives it: the SDK sends actions as float32."""
    a = np.zeros(7)
    a[:3] = 0.4 * np.cos(0.5 * t + np.array([0.0, 2.1, 4.2]))
    a[3:6] = 0.1 * np.sin(0.7 * t + np.array([0.0, 1.0, 2.0]))
    a[6] = -1.0
    return a.astype(np.float32).astype(np.float64)


def pattern(obs) -> np.ndarray:
    return command(obs.step)[None]


def quat_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit (x, y, z, w) quaternion, float64 (robosuite's quat2mat works in
    float32)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def axis_angle_mat(v: np.ndarray) -> np.ndarray:
    """Rotation matrix of an axis-angle vector (Rodrigues), float64."""
    angle = float(np.linalg.norm(v))
    k = np.asarray(v, dtype=np.float64) / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def hold(obs) -> np.ndarray:
    return np.array([[0, 0, 0, 0, 0, 0, -1.0]])


@dataclass
class Run:
    rec: object
    policy: Recorder
    executed: list[np.ndarray]  # actions given to the simulator in the policy loop, in order
    scene: object

    def images(self, cam: str) -> list[np.ndarray]:
        return [o.images[cam] for o in self.policy.observations]

    def proprio(self, name: str) -> list[np.ndarray]:
        return [np.asarray(o.proprio[name]) for o in self.policy.observations]


def run(serve_app, scenes, ref: TaskRef, shifts: list[tuple[str, dict]], max_steps: int, fn=pattern) -> Run:
    policy = Recorder(meta("signal-test"), fn)
    url = serve_app(create_app(policy))
    instance = Instance(
        instance_id="test-signal",
        suite=ref.suite,
        task_index=ref.index,
        shifts=[ShiftEntry(id=i, params=p) for i, p in shifts],
    )
    with PolicyClient(url) as client:
        runner = EpisodeRunner(client, policy.metadata, RunSettings(render_size=64, max_steps=max_steps), scenes=scenes)
        scene = runner.scene_for(ref)
        calls: list[np.ndarray] = []
        real_step = scene.step

        def spy(action):
            calls.append(np.array(action, dtype=np.float64))
            return real_step(action)

        scene.step = spy
        try:
            rec = runner.run_episode(EpisodePlan(instance=instance, episode_index=0, init_state_index=0, seed=0))
        finally:
            del scene.step
    executed = calls[len(calls) - rec.steps :] if rec.steps else []
    return Run(rec, policy, executed, scene)


_NOMINAL: dict[TaskRef, Run] = {}


def nominal(serve_app, scenes, ref: TaskRef) -> Run:
    if ref not in _NOMINAL:
        _NOMINAL[ref] = run(serve_app, scenes, ref, [], NOMINAL_STEPS)
        assert _NOMINAL[ref].rec.steps == NOMINAL_STEPS
    return _NOMINAL[ref]


def valid(r: Run) -> dict:
    assert r.rec.valid, r.rec.detail
    json.dumps(r.rec.model_dump(mode="json")["shifts"])  # the record goes to episodes.jsonl as it is
    return r.rec.shifts[0]


def as_rendered(img: np.ndarray) -> np.ndarray:
    """The policy asked for rotate_180: undo it (the shifts act on the rendered buffer)."""
    return np.ascontiguousarray(img[::-1, ::-1])


def noise_sigma(noisy: np.ndarray, clean: np.ndarray, stated: float) -> float:
    c = clean.astype(float)
    sel = (c >= 3 * stated) & (c <= 255 - 3 * stated)
    assert sel.sum() > 500
    return math.sqrt(np.mean((noisy.astype(float)[sel] - c[sel]) ** 2) - 1 / 12)


def hf(img: np.ndarray) -> float:
    g = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(float)
    lap = g[1:-1, 1:-1] * 4 - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:]
    return float(np.mean(lap**2))


def mad(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(float) - b.astype(float)).mean())


# --------------------------------------------------------------------------- static: observation
@pytest.mark.parametrize("ref", REFS)
def test_s14_noise_of_the_stated_sigma_on_both_cameras(serve_app, scenes, ref):
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S14", {"sigma": 12.0})], max_steps=3)
    s14 = valid(r)
    for cam in CAMS:
        for t, (noisy, clean) in enumerate(zip(r.images(cam), nom.images(cam), strict=False)):
            assert noise_sigma(noisy, clean, 12.0) == pytest.approx(12.0, rel=0.05), (cam, t)
        assert s14["applied"]["post_condition"][cam]["median_sigma"] == pytest.approx(12.0, rel=0.05)
    # the noise is fresh at every step
    assert not np.array_equal(
        r.images("agentview")[1].astype(int) - nom.images("agentview")[1],
        r.images("agentview")[0].astype(int) - nom.images("agentview")[0],
    )
    np.testing.assert_array_equal(r.proprio("eef_pos")[2], nom.proprio("eef_pos")[2])  # images only


@pytest.mark.parametrize(
    "ref,params",
    [
        (GOAL8, {"mode": "jpeg", "jpeg_quality": 15}),
        (OBJECT0, {"mode": "jpeg", "jpeg_quality": 28}),
        (GOAL8, {"mode": "downsample", "downsample_factor": 3}),
        (OBJECT0, {"mode": "downsample", "downsample_factor": 2}),
        (GOAL8, {"mode": "blur", "blur_sigma_px": 3.0}),
        (OBJECT0, {"mode": "blur", "blur_sigma_px": 2.0}),
    ],
)
def test_s16_degrades_both_cameras_in_the_stated_mode(serve_app, scenes, ref, params):
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S16", params)], max_steps=2)
    s16 = valid(r)
    assert set(s16["applied"]["post_condition"]) == set(CAMS)
    for cam in CAMS:
        for got, clean in zip(r.images(cam), nom.images(cam), strict=False):
            got, clean = as_rendered(got), as_rendered(clean)
            if params["mode"] == "jpeg":
                ok, buf = cv2.imencode(".jpg", got[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, params["jpeg_quality"]])
                again = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
                assert mad(got, clean) > 1.0
                assert mad(again, got) < 0.2 * mad(got, clean)  # a JPEG fixed point at that quality
            elif params["mode"] == "downsample":
                f = params["downsample_factor"]

                def down_up(img, f=f):
                    small = cv2.resize(img, (64 // f, 64 // f), interpolation=cv2.INTER_AREA)
                    return cv2.resize(small, (64, 64), interpolation=cv2.INTER_LINEAR)

                # the delivered image has lost the detail: losing resolution again barely changes it
                assert mad(down_up(got), got) < 0.5 * mad(down_up(clean), clean)
                assert hf(got) < 0.5 * hf(clean)
            else:
                assert hf(got) < 0.9 * hf(clean)
                assert abs(float(got.mean()) - float(clean.mean())) < 1.5  # blurred, not darkened


# --------------------------------------------------------------------------- static: robot
@pytest.mark.parametrize(
    "ref,joints,offsets",
    [
        (GOAL8, [0, 3], [0.25, -0.15]),
        (OBJECT0, [1, 5], [-0.2, 0.15]),
    ],
)
def test_s17_starts_the_arm_offset_by_the_stated_joint_angles(serve_app, scenes, ref, joints, offsets):
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S17", {"joints": joints, "offsets_rad": offsets})], max_steps=2, fn=hold)
    valid(r)
    stored = task_info(ref).init_states()[0][1:8]  # [time, qpos...]: the arm's 7 joints come first
    want = np.zeros(7)
    want[joints] = offsets
    np.testing.assert_allclose(r.proprio("joint_pos")[0] - stored, want, atol=0.03)  # what the policy got
    np.testing.assert_allclose(r.scene.data.qpos[:7] - stored, want, atol=0.03)  # held after 2 more steps
    robot = r.scene.robot_root()
    assert not [c for c in r.scene.contacts() if robot in c[:2] and c[2] < 0]
    eef = r.scene.eef_pos()
    assert np.linalg.norm(eef - nom.proprio("eef_pos")[0]) > 0.03  # the arm really starts elsewhere
    assert eef[2] > r.scene.inner.workspace_offset[2] + 0.05


def test_s17_refuses_a_configuration_at_a_joint_limit(serve_app, scenes):
    # joint 4 (the elbow, index 3) starts near -2.44 rad; its limit is -3.07 rad
    r = run(serve_app, scenes, GOAL8, [("S17", {"joints": [3], "offsets_rad": [-0.6]})], max_steps=2, fn=hold)
    assert not r.rec.valid and r.rec.termination_reason == "shift_invalid" and r.rec.steps == 0
    assert "limits" in r.rec.detail


@pytest.mark.parametrize("ref", REFS)
def test_s18_biases_the_reported_end_effector_pose_consistently(serve_app, scenes, ref):
    params = {
        "pos_offset_m": 0.04,
        "pos_azimuth_deg": 30.0,
        "pos_elevation_deg": -20.0,
        "rot_deg": 8.0,
        "axis_azimuth_deg": 120.0,
        "axis_elevation_deg": 40.0,
    }
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S18", params)], max_steps=4)
    valid(r)
    el, az = math.radians(-20.0), math.radians(30.0)
    d = 0.04 * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    ael, aaz = math.radians(40.0), math.radians(120.0)
    axis = np.array([math.cos(ael) * math.cos(aaz), math.cos(ael) * math.sin(aaz), math.sin(ael)])
    for t in range(4):
        np.testing.assert_allclose(r.proprio("eef_pos")[t] - nom.proprio("eef_pos")[t], d, atol=1e-9)
        q_true, q_rep = nom.proprio("eef_quat")[t], r.proprio("eef_quat")[t]
        r_true, r_rep = quat_mat(q_true), quat_mat(q_rep)
        rot = r_rep @ r_true.T  # world-frame rotation from the true to the reported orientation
        angle = math.degrees(math.acos(np.clip((np.trace(rot) - 1) / 2, -1, 1)))
        assert angle == pytest.approx(8.0, abs=1e-6)
        turned_axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
        np.testing.assert_allclose(turned_axis / np.linalg.norm(turned_axis), axis, atol=1e-6)
        aa = r.proprio("eef_axis_angle")[t]
        np.testing.assert_allclose(axis_angle_mat(aa), r_rep, atol=1e-9)  # the same orientation
        np.testing.assert_array_equal(r.proprio("joint_pos")[t], nom.proprio("joint_pos")[t])  # joints unbiased
    assert np.linalg.norm(nom.proprio("eef_pos")[3] - nom.proprio("eef_pos")[0]) > 0.01  # along a moving arm


# --------------------------------------------------------------------------- static: execution
@pytest.mark.parametrize("ref,delay", [(GOAL8, 2), (OBJECT0, 3)])
def test_s19_every_action_executes_the_stated_steps_late(serve_app, scenes, ref, delay):
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S19", {"delay_steps": delay})], max_steps=8)
    valid(r)
    for t, a in enumerate(r.executed):
        if t < delay:
            np.testing.assert_array_equal(a, [0, 0, 0, 0, 0, 0, -1.0])  # hold until the line fills
        else:
            np.testing.assert_array_equal(a, command(t - delay))
    # the robot state agrees: it held still while the nominal arm moved
    eef = r.proprio("eef_pos")
    assert np.linalg.norm(eef[delay] - eef[0]) < 0.003
    assert np.linalg.norm(nom.proprio("eef_pos")[delay] - nom.proprio("eef_pos")[0]) > 0.005


@pytest.mark.parametrize("ref", REFS)
def test_s20_gaussian_noise_of_the_stated_sigma_on_the_arm_only(serve_app, scenes, ref):
    r = run(serve_app, scenes, ref, [("S20", {"sigma_frac": 0.1})], max_steps=12)
    s20 = valid(r)
    ex = np.array(r.executed)
    cmd = np.array([command(t) for t in range(len(ex))])
    resid = ex[:, :6] - cmd[:, :6]
    assert np.all(np.abs(ex[:, :6]) < 1)  # no clipping at this magnitude: the residual is the noise
    assert resid.std() == pytest.approx(0.2, rel=0.25)  # sigma_frac 0.1 of the range 2
    assert abs(resid.mean()) < 0.1
    np.testing.assert_array_equal(ex[:, 6], cmd[:, 6])
    assert s20["applied"]["post_condition"]["sigma_measured"] == pytest.approx(resid.std(), rel=0.15)


@pytest.mark.parametrize("ref,gain", [(GOAL8, 1.4), (OBJECT0, 0.6)])
def test_s21_executed_arm_delta_is_the_command_times_the_gain(serve_app, scenes, ref, gain):
    nom = nominal(serve_app, scenes, ref)
    r = run(serve_app, scenes, ref, [("S21", {"gain": gain})], max_steps=8)
    valid(r)
    for t, a in enumerate(r.executed):
        np.testing.assert_allclose(a[:6], gain * command(t)[:6], atol=1e-12)
        assert a[6] == -1.0
    # the end effector travels about gain times as far as in the nominal episode
    path = np.linalg.norm(np.diff(np.array(r.proprio("eef_pos")), axis=0), axis=1).sum()
    nominal_path = np.linalg.norm(np.diff(np.array(nom.proprio("eef_pos")[:8]), axis=0), axis=1).sum()
    assert path / nominal_path == pytest.approx(gain, rel=0.25)


# --------------------------------------------------------------------------- runtime: observation
@pytest.mark.parametrize("ref,camera", [(GOAL8, "wrist"), (OBJECT0, "agentview")])
def test_d11_blanks_one_camera_for_the_window(serve_app, scenes, ref, camera):
    nom = nominal(serve_app, scenes, ref)
    params = {"trigger": "grasp", "fallback_step": 2, "camera": camera, "duration_steps": 4}
    r = run(serve_app, scenes, ref, [("D11", params)], max_steps=8)
    d11 = valid(r)
    assert d11["fired_by"] == "fallback" and d11["fired_at_step"] == 2
    assert d11["applied"]["active_steps"] == [2, 3, 4, 5]
    other = "agentview" if camera == "wrist" else "wrist"
    for t in range(8):
        got = r.images(camera)[t]
        if 2 <= t < 6:
            assert not got.any()
        else:
            np.testing.assert_array_equal(got, nom.images(camera)[t])
            assert got.any()
        np.testing.assert_array_equal(r.images(other)[t], nom.images(other)[t])


@pytest.mark.parametrize("ref,delay,fallback", [(GOAL8, 2, 3), (OBJECT0, 3, 4)])
def test_d12_delivers_observations_the_stated_steps_late_in_the_window(serve_app, scenes, ref, delay, fallback):
    nom = nominal(serve_app, scenes, ref)
    params = {"trigger": "approach", "fallback_step": fallback, "delay_steps": delay, "duration_steps": 4}
    r = run(serve_app, scenes, ref, [("D12", params)], max_steps=fallback + 6)
    d12 = valid(r)
    assert d12["applied"]["active_steps"] == list(range(fallback, fallback + 4))
    for t in range(fallback + 6):
        src = t - delay if fallback <= t < fallback + 4 else t
        for cam in CAMS:
            np.testing.assert_array_equal(r.images(cam)[t], nom.images(cam)[src])
        np.testing.assert_array_equal(r.proprio("eef_pos")[t], nom.proprio("eef_pos")[src])
        np.testing.assert_array_equal(r.proprio("joint_pos")[t], nom.proprio("joint_pos")[src])
    assert [o.step for o in r.policy.observations] == list(range(fallback + 6))  # step index stays current
    assert d12["applied"]["post_condition"]["delivered_lags"] == {str(delay): 4}


@pytest.mark.parametrize("ref", REFS)
def test_d13_noise_burst_only_inside_the_window(serve_app, scenes, ref):
    nom = nominal(serve_app, scenes, ref)
    params = {"trigger": "transport", "fallback_step": 2, "sigma": 15.0, "duration_steps": 3}
    r = run(serve_app, scenes, ref, [("D13", params)], max_steps=6)
    d13 = valid(r)
    assert d13["applied"]["active_steps"] == [2, 3, 4]
    for cam in CAMS:
        for t in range(6):
            if 2 <= t < 5:
                assert noise_sigma(r.images(cam)[t], nom.images(cam)[t], 15.0) == pytest.approx(15.0, rel=0.05)
            else:
                np.testing.assert_array_equal(r.images(cam)[t], nom.images(cam)[t])


# --------------------------------------------------------------------------- runtime: execution
@pytest.mark.parametrize("ref,delay", [(GOAL8, 2), (OBJECT0, 3)])
def test_d14_actions_execute_late_inside_the_window_only(serve_app, scenes, ref, delay):
    params = {"trigger": "approach", "fallback_step": 2, "delay_steps": delay, "duration_steps": 6}
    r = run(serve_app, scenes, ref, [("D14", params)], max_steps=10)
    d14 = valid(r)
    assert d14["applied"]["active_steps"] == list(range(2, 8))
    for t, a in enumerate(r.executed):
        if t < 2 or t >= 8:
            np.testing.assert_array_equal(a, command(t))  # before the window, and restored after it
        elif t < 2 + delay:
            np.testing.assert_array_equal(a, [0, 0, 0, 0, 0, 0, -1.0])  # nothing due yet: hold
        else:
            np.testing.assert_array_equal(a, command(t - delay))
    assert d14["applied"]["post_condition"]["dropped_at_release"] == delay


@pytest.mark.parametrize("ref,fraction", [(GOAL8, 0.5), (OBJECT0, 0.34)])
def test_d15_drops_the_stated_fraction_of_commands_to_hold(serve_app, scenes, ref, fraction):
    params = {"trigger": "grasp", "fallback_step": 2, "drop_fraction": fraction, "duration_steps": 6}
    r = run(serve_app, scenes, ref, [("D15", params)], max_steps=10)
    d15 = valid(r)
    dropped = d15["applied"]["drop_steps"]
    held = [t for t, a in enumerate(r.executed) if not np.array_equal(a, command(t))]
    assert held == dropped and len(held) == round(fraction * 6)
    assert all(2 <= t < 8 for t in held)
    for t in held:
        np.testing.assert_array_equal(r.executed[t][:6], np.zeros(6))
        assert r.executed[t][6] == r.executed[t - 1][6]  # gripper unchanged
    assert d15["applied"]["post_condition"]["realised_fraction"] == pytest.approx(round(fraction * 6) / 6, abs=1e-4)


@pytest.mark.parametrize("ref", REFS)
def test_d16_action_noise_only_inside_the_window(serve_app, scenes, ref):
    params = {"trigger": "transport", "fallback_step": 2, "sigma_frac": 0.1, "duration_steps": 8}
    r = run(serve_app, scenes, ref, [("D16", params)], max_steps=12)
    d16 = valid(r)
    assert d16["applied"]["active_steps"] == list(range(2, 10))
    ex = np.array(r.executed)
    resid = ex - np.array([command(t) for t in range(len(ex))])
    assert not resid[:2].any() and not resid[10:].any()
    assert not resid[:, 6].any()
    assert resid[2:10, :6].std() == pytest.approx(0.2, rel=0.3)


@pytest.mark.parametrize("ref,periods", [(GOAL8, 3), (OBJECT0, 2)])
def test_d17_each_action_is_held_for_the_stated_periods_in_the_window(serve_app, scenes, ref, periods):
    params = {"trigger": "approach", "fallback_step": 2, "hold_periods": periods, "duration_steps": 7}
    r = run(serve_app, scenes, ref, [("D17", params)], max_steps=11)
    valid(r)
    for t, a in enumerate(r.executed):
        src = 2 + (t - 2) // periods * periods if 2 <= t < 9 else t
        np.testing.assert_array_equal(a, command(src))
    # the arm moved with the held command: the commands in between were not executed
    assert not any(np.array_equal(a, command(3)) for a in r.executed)


# --------------------------------------------------------------------------- runtime: language
@pytest.mark.parametrize("ref", REFS)
def test_d20_restates_the_instruction_from_the_trigger_on(serve_app, scenes, ref):
    original = task_info(ref).instruction
    text = paraphrases_for(original)[1]
    params = {"trigger": "approach", "fallback_step": 3, "index": 1, "text": text}
    r = run(serve_app, scenes, ref, [("D20", params)], max_steps=6, fn=hold)
    d20 = valid(r)
    assert r.policy.resets[-1][1] == original
    assert [o.instruction for o in r.policy.observations] == [original] * 3 + [text] * 3
    assert d20["applied"]["post_condition"]["delivered_at_steps"] == [3, 4, 5]


def test_d20_after_s22_picks_a_paraphrase_the_policy_has_not_seen(serve_app, scenes):
    options = paraphrases_for(task_info(GOAL8).instruction)
    same = {"index": 0, "text": options[0]}
    r = run(
        serve_app,
        scenes,
        GOAL8,
        [("S22", same), ("D20", {"trigger": "approach", "fallback_step": 2, **same})],
        max_steps=4,
        fn=hold,
    )
    assert r.rec.valid, r.rec.detail
    got = [o.instruction for o in r.policy.observations]
    assert got[:2] == [options[0]] * 2
    assert got[2:] == [options[1]] * 2 and options[1] != options[0]


def test_a_window_shift_that_never_fired_leaves_the_episode_valid_and_says_so(serve_app, scenes):
    # The episode ends before the trigger and the fallback step: the policy never met the shift.
    # Such episodes stay valid (dropping them would drop the fastest successes) and are counted.
    params = {"trigger": "transport", "fallback_step": 50, "sigma": 15.0, "duration_steps": 3}
    r = run(serve_app, scenes, GOAL8, [("D13", params)], max_steps=3, fn=hold)
    assert r.rec.valid and r.rec.termination_reason == "horizon"
    d13 = r.rec.shifts[0]
    assert d13["fired_at_step"] is None and d13["applied"]["realised_steps"] == 0
    from liberopro.runs.summary import summarize

    assert summarize([r.rec], {}).cases[0].runtime_not_fired == 1
