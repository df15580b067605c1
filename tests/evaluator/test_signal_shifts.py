"""The signal shifts on fakes (no simulator, no LIBERO scene: milliseconds each): the shifts that
change only what the policy sees or what the robot is told, not the scene. S14 sensor noise, S16
image degradation, S18 proprioception bias, S19 action latency, S20 action noise, S21 actuation
gain, D10-D17 (observation freeze, camera dropout, observation latency, sensor noise burst,
action delay burst, action drop, action noise burst, control rate) and D20 instruction
restatement.

Each shift is built through the catalog (:func:`liberopro.catalog.make_shift`) with explicit
parameters and driven as :meth:`liberopro.episode.runner.EpisodeRunner._policy_loop` drives it, through
its :class:`liberopro.shifts.adapter.ShiftLayer`: per step, triggers (``maybe_fire``), the
intervention (which stores the last executed action in ``ctx.last_action``), the observation
layer, the action layer; ``on_episode_start`` before the loop (static shifts) and
``on_episode_end`` after it. The expected effect is the one each module's docstring states,
computed here independently (noise replayed from a generator of the same seed, images through
OpenCV directly, poses through rotation matrices). Image shifts transform an image when it is read
(issue 12: on-demand rendering): the fake episode reads every delivered image at its step, as a
policy replanning at every step does, unless ``read`` says otherwise. The same shifts on real scenes:
``tests/evaluator/test_shifts_signal.py`` (tier ``sim``).

Fakes: a frame is :class:`Frame` (the fields of :class:`liberopro.sim.scene.RawFrame`, which imports
MuJoCo): ``agentview`` and ``wrist`` (H, W, 3) uint8 images and the proprioception fields of
``submission_spec.models.PROPRIO_FIELDS``, each different at every step; an action is a (7,)
float64 LIBERO action, different at every step. No test here imports robosuite or MuJoCo: S18
calls robosuite's ``quat2axisangle`` inside ``observe``, so its test puts a stand-in module with
robosuite's formulas (``robosuite/utils/transform_utils.py``) in ``sys.modules`` for the call.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from liberopro.catalog import make_shift
from liberopro.catalog.paraphrases import PARAPHRASES
from liberopro.episode.loop import start_action
from liberopro.shifts.adapter import ShiftLayer
from liberopro.shifts.base import EpisodeContext, stable_seed
from submission_spec.models import PROPRIO_FIELDS

CAMS = ("agentview", "wrist")
SEED = 1234


# --------------------------------------------------------------------------- fakes
@dataclass
class Frame:
    """Stands for :class:`liberopro.sim.scene.RawFrame`: camera -> (H, W, 3) uint8, field -> float64."""

    images: dict[str, np.ndarray]
    proprio: dict[str, np.ndarray]

    def copy(self) -> Frame:
        return Frame({k: v.copy() for k, v in self.images.items()}, {k: v.copy() for k, v in self.proprio.items()})


def frame(t: int, size: int = 32, cams: tuple[str, ...] = CAMS) -> Frame:
    """The frame of step ``t``: textured images (values 40-215, away from the clipping limits) and
    proprioception of the right sizes, all drawn from ``t``, so every step's frame differs."""
    r = np.random.default_rng(1000 + t)
    images = {c: r.integers(40, 216, (size, size, 3), dtype=np.uint8) for c in cams}
    proprio = {name: r.normal(size=n) for name, (n, *_) in PROPRIO_FIELDS.items()}
    q = proprio["eef_quat"] / np.linalg.norm(proprio["eef_quat"])
    proprio["eef_quat"] = q if q[3] >= 0 else -q
    return Frame(images, proprio)


def action(t: int, gripper: float = 1.0) -> np.ndarray:
    """The policy's (LIBERO) action at step ``t``: a distinct arm delta in [-1, 1], ``gripper``."""
    return np.array([0.01 * t, -0.02, 0.3, -0.4, 0.05, -0.06 + 0.001 * t, gripper])


def context(seed: int = SEED, scene: object = None, received=None) -> EpisodeContext:
    return EpisodeContext(scene=scene, sem=None, rng=np.random.default_rng(seed), received=received, seed=seed)  # type: ignore[arg-type]


def frame_rng(t: int, cam: str, seed: int = SEED) -> np.random.Generator:
    """The generator of step ``t``'s ``cam`` image (``EpisodeContext.frame_rng``, replayed)."""
    return np.random.default_rng(stable_seed(seed, "frame", t, cam))


@dataclass
class Run:
    delivered: list[Frame]
    executed: list[np.ndarray]
    ctx: EpisodeContext


def episode(
    shift,
    steps: int,
    frames: Callable[[int], Frame] = frame,
    actions: Callable[[int], np.ndarray] = action,
    ctx: EpisodeContext | None = None,
    reached: Callable[[int], dict] = lambda t: {},
    overridden: tuple[int, ...] = (),
    end: bool = True,
    read: Callable[[int], tuple[str, ...]] = lambda t: CAMS,
) -> Run:
    """One fake episode of ``steps`` policy-loop steps, in the runner's order. At the steps of
    ``overridden`` an evaluator override holds control: the action layer is not called and the
    override executes a hold (the shift's observation layer still runs). At step ``t`` the
    delivered images of the cameras ``read(t)`` are read during the step (the policy's request);
    the others are not (a step between two replans)."""
    ctx = ctx or context()
    layer = ShiftLayer(shift, ctx)
    shift.on_episode_start(ctx)
    last, delivered, executed = start_action(), [], []
    for t in range(steps):
        layer.maybe_fire(t, reached(t))
        assert layer.intervene(t, last) is None, "no signal shift overrides the policy"
        out = layer.observe(frames(t), t)
        for cam in read(t):
            if cam in out.images:
                out.images[cam]
        delivered.append(out)
        a = np.array([0, 0, 0, 0, 0, 0, last[6]]) if t in overridden else layer.execute(actions(t), t)
        executed.append(a)
        last = a
    if end:
        shift.on_episode_end(ctx)
    return Run(delivered, executed, ctx)


def hold(gripper: float) -> list[float]:
    return [0, 0, 0, 0, 0, 0, gripper]


def same_frame(a: Frame, b: Frame) -> bool:
    return (
        a.images.keys() == b.images.keys()
        and a.proprio.keys() == b.proprio.keys()
        and all(np.array_equal(a.images[k], b.images[k]) for k in a.images)
        and all(np.array_equal(a.proprio[k], b.proprio[k]) for k in a.proprio)
    )


def pixel_noise(img: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """S14's stated noise: standard normal float32 draws x sigma, rounded, clipped to [0, 255]."""
    noise = rng.standard_normal(img.shape, dtype=np.float32) * np.float32(sigma)
    return np.clip(np.rint(img.astype(np.float32) + noise), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------- S14
def test_s14_adds_zero_mean_noise_of_sigma_to_both_cameras_keyed_on_step_and_camera():
    sigma = 12.0
    shift = make_shift("S14", {"sigma": sigma})
    run = episode(shift, 4, frames=lambda t: frame(t, size=64))
    residuals = []
    for t, out in enumerate(run.delivered):
        clean = frame(t, size=64)
        assert list(out.images) == list(CAMS)
        for cam in CAMS:  # drawn afresh at every step, per camera, from (seed, step, camera)
            assert out.images[cam].dtype == np.uint8 and out.images[cam].shape == (64, 64, 3)
            assert np.array_equal(out.images[cam], pixel_noise(clean.images[cam], sigma, frame_rng(t, cam)))
            residuals.append(out.images[cam].astype(float) - clean.images[cam])
        assert not np.array_equal(
            out.images["agentview"] - clean.images["agentview"], out.images["wrist"] - clean.images["wrist"]
        ), "independent per camera"
        assert all(np.array_equal(out.proprio[k], clean.proprio[k]) for k in clean.proprio), "proprio untouched"
    r = np.concatenate([x.ravel() for x in residuals])  # 4 steps x 2 cameras x 12288 values
    assert abs(r.mean()) < 0.2 and abs(r.std() - math.sqrt(sigma**2 + 1 / 12)) < 0.2
    # deterministic for the episode's seed: a second shift on a context of the same seed
    again = episode(make_shift("S14", {"sigma": sigma}), 4, frames=lambda t: frame(t, size=64))
    assert all(same_frame(a, b) for a, b in zip(run.delivered, again.delivered, strict=True))
    other = episode(make_shift("S14", {"sigma": sigma}), 1, frames=lambda t: frame(t, size=64), ctx=context(SEED + 1))
    assert not same_frame(other.delivered[0], run.delivered[0])
    post = shift.applied["post_condition"]
    assert shift.applied["cameras"] == list(CAMS)
    assert all(abs(post[c]["median_sigma"] - sigma) < 0.5 and post[c]["measured_steps"] == 4 for c in CAMS)


@pytest.mark.parametrize("shift_id", ["S14", "D13"])
def test_noise_of_an_image_does_not_depend_on_which_other_images_were_read(shift_id):
    """Issue 12: on-demand rendering reads only the frames the policy asks for. Read every 3rd
    step (agentview only at steps 3 and 9), the images read are the bytes an every-step reader
    gets, images never read are never noised, and only the images read are measured."""
    params = {"sigma": 15.0} if shift_id == "S14" else {"sigma": 15.0, "duration_steps": 12, "fallback_step": 0}
    every = episode(make_shift(shift_id, params), 12)
    sparse_shift = make_shift(shift_id, params)
    reads = {t: (("agentview",) if t in (3, 9) else CAMS) if t % 3 == 0 else () for t in range(12)}
    sparse = episode(sparse_shift, 12, read=lambda t: reads[t])
    for t in range(12):
        assert sparse.delivered[t].images.made() == reads[t], t
        for cam in reads[t]:
            assert np.array_equal(sparse.delivered[t].images[cam], every.delivered[t].images[cam]), (t, cam)
    post = sparse_shift.applied["post_condition"]
    assert post["agentview"]["measured_steps"] == 4 and post["wrist"]["measured_steps"] == 2
    # a different seed, a different noise
    other = episode(make_shift(shift_id, params), 1, ctx=context(SEED + 1), end=False)
    assert not np.array_equal(other.delivered[0].images["wrist"], every.delivered[0].images["wrist"])


def test_s14_records_the_noise_as_the_policy_receives_it_without_changing_what_it_receives():
    """Issue 11 item 9: sigma 7.5 added at 256 px reaches a policy asking for 224 px at about
    4.7 grey levels (area averaging of independent noise) and one asking for 128 px at about 3.75
    (sigma / 2). The record gives both (``median_sigma`` as added, ``received_median_sigma`` as
    received); the images delivered are the same bytes with or without that measurement."""
    from liberopro.sim.observation import resize

    sizes = {"agentview": 224, "wrist": 128}

    def received(cam, img):
        return resize(img, sizes[cam], sizes[cam], "stretch")

    measured = make_shift("S14", {"sigma": 7.5})
    ctx = context(received=received)
    run = episode(measured, 3, frames=lambda t: frame(t, size=256), ctx=ctx)
    unmeasured = make_shift("S14", {"sigma": 7.5})
    plain = episode(unmeasured, 3, frames=lambda t: frame(t, size=256))
    assert all(same_frame(a, b) for a, b in zip(run.delivered, plain.delivered, strict=True))
    post = measured.applied["post_condition"]
    assert post["agentview"]["median_sigma"] == pytest.approx(7.5, abs=0.2)
    assert post["agentview"]["received_median_sigma"] == pytest.approx(4.7, abs=0.2)
    assert post["agentview"]["received_size"] == [224, 224]
    assert post["wrist"]["received_median_sigma"] == pytest.approx(3.75, abs=0.2)
    assert "received_median_sigma" not in unmeasured.applied["post_condition"]["agentview"]  # no policy known


def test_s14_leaves_the_input_frame_unchanged():
    clean = frame(0)
    episode(make_shift("S14", {"sigma": 20.0}), 1, frames=lambda t: clean)
    assert same_frame(clean, frame(0))


# --------------------------------------------------------------------------- S16
def _smooth(t: int, size: int = 64) -> Frame:
    """A frame with structure at several scales (gradients, edges, fine texture)."""
    f = frame(t, size)
    y, x = np.mgrid[0:size, 0:size]
    base = 128 + 60 * np.sin(x / 5.0 + t) * np.cos(y / 7.0) + 30 * ((x // 8 + y // 8) % 2)
    for c in CAMS:
        f.images[c] = np.clip(base[..., None] + f.images[c].astype(float) / 8 - 16, 0, 255).astype(np.uint8)
    return f


@pytest.mark.parametrize(
    ("params", "expect"),
    [
        (
            {"mode": "jpeg", "jpeg_quality": 20},
            lambda img: cv2.cvtColor(
                cv2.imdecode(
                    cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 20])[1],
                    cv2.IMREAD_COLOR,
                ),
                cv2.COLOR_BGR2RGB,
            ),
        ),
        (
            {"mode": "downsample", "downsample_factor": 4},
            lambda img: cv2.resize(
                cv2.resize(img, (16, 16), interpolation=cv2.INTER_AREA), (64, 64), interpolation=cv2.INTER_LINEAR
            ),
        ),
        # 2.0 px at the 256 px reference render is 0.5 px at 64 px
        (
            {"mode": "blur", "blur_sigma_px": 2.0},
            lambda img: cv2.GaussianBlur(img, (0, 0), 0.5, borderType=cv2.BORDER_REFLECT_101),
        ),
    ],
    ids=["jpeg", "downsample", "blur"],
)
def test_s16_degrades_both_cameras_as_its_mode_says(params, expect):
    shift = make_shift("S16", params)
    run = episode(shift, 3, frames=_smooth)
    for t, out in enumerate(run.delivered):
        clean = _smooth(t)
        for cam in CAMS:
            assert out.images[cam].dtype == np.uint8 and out.images[cam].shape == clean.images[cam].shape
            assert np.array_equal(out.images[cam], expect(clean.images[cam])), (params["mode"], t, cam)
            assert not np.array_equal(out.images[cam], clean.images[cam])
        assert all(np.array_equal(out.proprio[k], clean.proprio[k]) for k in clean.proprio)
    assert shift.applied["mode"] == params["mode"]
    assert sorted(shift.applied["post_condition"]) == list(CAMS), "measured and passed on both cameras"


# --------------------------------------------------------------------------- S18
def _quat2axisangle(quat):  # robosuite/utils/transform_utils.py, quat2axisangle
    if quat[3] > 1.0:
        quat[3] = 1.0
    elif quat[3] < -1.0:
        quat[3] = -1.0
    den = np.sqrt(1.0 - quat[3] * quat[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (quat[:3] * 2.0 * math.acos(quat[3])) / den


def _axisangle2quat(vec):  # robosuite/utils/transform_utils.py, axisangle2quat
    angle = np.linalg.norm(vec)
    if math.isclose(angle, 0.0):
        return np.array([0.0, 0.0, 0.0, 1.0])
    q = np.zeros(4)
    q[3] = np.cos(angle / 2.0)
    q[:3] = vec / angle * np.sin(angle / 2.0)
    return q


@pytest.fixture
def robosuite_transforms(monkeypatch):
    """robosuite's two quaternion functions without importing robosuite (whose package imports
    MuJoCo): a stand-in ``robosuite.utils.transform_utils`` in ``sys.modules`` for the test."""
    tu = types.ModuleType("robosuite.utils.transform_utils")
    tu.quat2axisangle, tu.axisangle2quat = _quat2axisangle, _axisangle2quat  # type: ignore[attr-defined]
    utils = types.ModuleType("robosuite.utils")
    utils.transform_utils = tu  # type: ignore[attr-defined]
    pkg = types.ModuleType("robosuite")
    pkg.utils = utils  # type: ignore[attr-defined]
    for name, mod in (("robosuite", pkg), ("robosuite.utils", utils), ("robosuite.utils.transform_utils", tu)):
        monkeypatch.setitem(sys.modules, name, mod)


def _matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit (x, y, z, w) quaternion."""
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _rodrigues(axis: np.ndarray, deg: float) -> np.ndarray:
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    a = math.radians(deg)
    return np.eye(3) + math.sin(a) * k + (1 - math.cos(a)) * k @ k


def test_s18_offsets_the_reported_end_effector_pose_by_the_bias_only(robosuite_transforms):
    p = {
        "pos_offset_m": 0.04,
        "pos_azimuth_deg": 30.0,
        "pos_elevation_deg": 45.0,
        "rot_deg": 8.0,
        "axis_azimuth_deg": -60.0,
        "axis_elevation_deg": 20.0,
    }
    shift = make_shift("S18", p)
    run = episode(shift, 4)
    d = 0.04 * np.array(
        [
            math.cos(math.radians(45)) * math.cos(math.radians(30)),
            math.cos(math.radians(45)) * math.sin(math.radians(30)),
            math.sin(math.radians(45)),
        ]
    )
    ax = np.array(
        [
            math.cos(math.radians(20)) * math.cos(math.radians(-60)),
            math.cos(math.radians(20)) * math.sin(math.radians(-60)),
            math.sin(math.radians(20)),
        ]
    )
    r_off = _rodrigues(ax, 8.0)  # a world-frame rotation, left-multiplied
    for t, out in enumerate(run.delivered):
        true = frame(t)
        assert np.allclose(out.proprio["eef_pos"] - true.proprio["eef_pos"], d, atol=1e-12, rtol=0)
        q = out.proprio["eef_quat"]
        assert abs(np.linalg.norm(q) - 1) < 1e-12
        assert np.allclose(_matrix(q), r_off @ _matrix(true.proprio["eef_quat"]), atol=1e-12)
        s = np.linalg.norm(q[:3])  # axis-angle of the delivered quaternion, not of the true one
        assert np.allclose(out.proprio["eef_axis_angle"], q[:3] / s * 2 * math.atan2(s, q[3]), atol=1e-12)
        for k in ("gripper_qpos", "joint_pos", "joint_vel"):
            assert np.array_equal(out.proprio[k], true.proprio[k]), k
        assert all(np.array_equal(out.images[c], true.images[c]) for c in CAMS)
    assert shift.applied["pos_offset_m"] == np.round(d, 6).tolist()
    post = shift.applied["post_condition"]
    assert post["steps"] == 4 and all(
        post[f"max_error_{k}"] <= 1e-6 for k in ("pos_m", "rot_deg", "axis", "axis_angle")
    )


def test_s18_leaves_the_input_frame_unchanged(robosuite_transforms):
    clean = frame(0)
    episode(
        make_shift(
            "S18",
            {
                "pos_offset_m": 0.05,
                "pos_azimuth_deg": 0,
                "pos_elevation_deg": 0,
                "rot_deg": 10,
                "axis_azimuth_deg": 0,
                "axis_elevation_deg": 90,
            },
        ),
        1,
        frames=lambda t: clean,
    )
    assert same_frame(clean, frame(0))


# --------------------------------------------------------------------------- S19
@pytest.mark.parametrize("k", [1, 3])
def test_s19_executes_every_action_k_steps_late_holding_first(k):
    shift = make_shift("S19", {"delay_steps": k})
    run = episode(shift, 10)
    # the first k steps hold: zero arm delta, gripper of the last executed action (open: -1 at start)
    assert [a.tolist() for a in run.executed[:k]] == [hold(-1.0)] * k
    for t in range(k, 10):
        assert np.array_equal(run.executed[t], action(t - k)), t
    assert shift.applied["never_executed_commands"] == k
    post = shift.applied["post_condition"]
    assert (post["hold_steps"], post["delayed_steps"], post["step_lags"]) == (k, 10 - k, {str(k): 10 - k})


def test_s19_hold_keeps_the_last_executed_gripper_and_overrides_do_not_advance_the_line():
    shift = make_shift("S19", {"delay_steps": 2})
    ctx = context()
    ctx.last_action = np.array([0, 0, 0, 0, 0, 0, 1.0])
    shift.on_episode_start(ctx)
    assert shift.execute(action(0), 0, ctx).tolist() == hold(1.0)
    # an override at steps 2-3 (no execute), the policy again from step 3
    run = episode(make_shift("S19", {"delay_steps": 2}), 8, overridden=(2, 3))
    assert [a.tolist() for a in run.executed[:2]] == [hold(-1.0)] * 2
    assert np.array_equal(run.executed[4], action(0)) and np.array_equal(run.executed[5], action(1))
    assert np.array_equal(run.executed[6], action(4)) and np.array_equal(run.executed[7], action(5))


# --------------------------------------------------------------------------- S20
def test_s20_adds_noise_of_sigma_frac_x_2_to_the_arm_only_clipped():
    shift = make_shift("S20", {"sigma_frac": 0.1})  # 0.2 action units
    cmd = lambda t: np.array([0.0, 0.0, 0.0, 0.95, -0.95, 0.0, 1.0])  # noqa: E731
    run = episode(shift, 400, actions=cmd)
    replay = np.random.default_rng(SEED)
    for a in run.executed:
        expected = cmd(0).copy()
        expected[:6] = np.clip(expected[:6] + replay.normal(0.0, 0.2, 6), -1, 1)
        assert np.array_equal(a, expected)
    e = np.array(run.executed)
    assert np.all(e[:, 6] == 1.0), "gripper untouched"
    assert np.all(np.abs(e[:, :6]) <= 1.0) and np.any(e[:, 3] == 1.0) and np.any(e[:, 4] == -1.0), "clipped"
    free = e[:, :3].ravel()  # commanded 0: never near the limits at 0.2 sigma
    assert abs(free.mean()) < 0.03 and abs(free.std() - 0.2) < 0.02
    post = shift.applied["post_condition"]
    assert post["gripper_changed_steps"] == 0 and abs(post["sigma_measured"] - 0.2) < 0.02


# --------------------------------------------------------------------------- S21
@pytest.mark.parametrize(
    ("gain", "expected"),
    [
        (1.5, [0.3, -0.75, 1.0, -1.0, 0.0, 0.15, -1.0]),
        (0.5, [0.1, -0.25, 0.4, -0.45, 0.0, 0.05, -1.0]),
    ],
)
def test_s21_scales_the_arm_by_the_gain_and_clips_to_the_action_limits(gain, expected):
    shift = make_shift("S21", {"gain": gain})
    cmd = np.array([0.2, -0.5, 0.8, -0.9, 0.0, 0.1, -1.0])
    run = episode(shift, 3, actions=lambda t: cmd)
    assert all(np.allclose(a, expected, atol=1e-15, rtol=0) and a[6] == -1.0 for a in run.executed)
    post = shift.applied["post_condition"]
    assert post["max_error"] == 0 and post["gripper_changed_steps"] == 0
    assert post["clipped_fraction"] == (round(2 / 6, 4) if gain > 1 else 0.0)
    assert post["realised_gain_unclipped"] == gain


# --------------------------------------------------------------------------- D10
def test_d10_delivers_the_firing_steps_frame_for_its_window():
    shift = make_shift("D10", {"duration_steps": 4, "fallback_step": 3})
    run = episode(shift, 9)
    assert (shift.fired_at, shift.fired_by) == (3, "fallback")
    for t, out in enumerate(run.delivered):
        src = 3 if 3 <= t < 7 else t
        assert same_frame(out, frame(src)), t
    frozen = run.delivered[3:7]
    assert len({id(f) for f in frozen}) == 4, "a fresh copy every step: the policy cannot alter the stale frame"
    assert shift.applied == {"window_steps": [3, 7], "frozen_steps": 4}


def test_d10_fires_at_its_trigger_phase():
    shift = make_shift("D10", {"duration_steps": 2, "fallback_step": 40})
    run = episode(shift, 5, reached=lambda t: {"approach": 1} if t >= 2 else {})
    assert (shift.fired_at, shift.fired_by) == (2, "phase")
    assert [i for i, out in enumerate(run.delivered) if same_frame(out, frame(2))] == [2, 3]


# --------------------------------------------------------------------------- D11
@pytest.mark.parametrize("camera", CAMS)
def test_d11_blanks_the_named_camera_for_its_window(camera):
    shift = make_shift("D11", {"camera": camera, "duration_steps": 3, "fallback_step": 2})
    run = episode(shift, 7)
    other = next(c for c in CAMS if c != camera)
    for t, out in enumerate(run.delivered):
        clean = frame(t)
        if 2 <= t < 5:
            assert out.images[camera].shape == (32, 32, 3) and out.images[camera].dtype == np.uint8
            assert not out.images[camera].any(), t
            assert np.array_equal(out.images[other], clean.images[other])
            assert all(np.array_equal(out.proprio[k], clean.proprio[k]) for k in clean.proprio)
        else:
            assert same_frame(out, clean), t
    a = shift.applied
    assert (a["camera"], a["substituted"], a["active_steps"], a["truncated"]) == (camera, False, [2, 3, 4], False)
    assert a["post_condition"] == {"blank_frames": 3, "window_frames": 3, "other_camera_frames_changed": 0}


def test_d11_blanks_the_only_camera_a_policy_receives_and_records_a_truncated_window():
    shift = make_shift("D11", {"camera": "wrist", "duration_steps": 10, "fallback_step": 1})
    run = episode(shift, 4, frames=lambda t: frame(t, cams=("agentview",)))
    assert [bool(out.images["agentview"].any()) for out in run.delivered] == [True, False, False, False]
    a = shift.applied
    assert (a["camera"], a["substituted"], a["realised_steps"], a["truncated"]) == ("agentview", True, 3, True)


# --------------------------------------------------------------------------- D12
def test_d12_serves_the_whole_observation_k_steps_late_in_its_window():
    shift = make_shift("D12", {"delay_steps": 3, "duration_steps": 4, "fallback_step": 5})
    run = episode(shift, 11)
    for t, out in enumerate(run.delivered):
        src = t - 3 if 5 <= t < 9 else t  # after the window the current frame again
        assert same_frame(out, frame(src)), t
    a = shift.applied
    assert a["active_steps"] == [5, 6, 7, 8] and a["post_condition"] == {"delivered_lags": {"3": 4}, "wrong_steps": []}


def test_d12_early_in_the_episode_serves_the_oldest_frame_kept():
    shift = make_shift("D12", {"delay_steps": 3, "duration_steps": 4, "fallback_step": 1})
    run = episode(shift, 6)
    assert [next(s for s in range(6) if same_frame(out, frame(s))) for out in run.delivered] == [0, 0, 0, 0, 1, 5]
    assert shift.applied["post_condition"]["delivered_lags"] == {"1": 1, "2": 1, "3": 2}


# --------------------------------------------------------------------------- D13
def test_d13_noise_of_sigma_on_both_cameras_only_in_its_window():
    sigma = 15.0
    shift = make_shift("D13", {"sigma": sigma, "duration_steps": 3, "fallback_step": 2})
    run = episode(shift, 7)
    for t, out in enumerate(run.delivered):
        clean = frame(t)
        if 2 <= t < 5:
            for cam in CAMS:
                assert np.array_equal(out.images[cam], pixel_noise(clean.images[cam], sigma, frame_rng(t, cam))), (
                    t,
                    cam,
                )
            assert all(np.array_equal(out.proprio[k], clean.proprio[k]) for k in clean.proprio)
        else:
            assert same_frame(out, clean), t
    post = shift.applied["post_condition"]
    assert all(abs(post[c]["median_sigma"] - sigma) < 1.0 and post[c]["measured_steps"] == 3 for c in CAMS)


# --------------------------------------------------------------------------- D14
def test_d14_delays_actions_k_steps_in_its_window_then_drops_the_queue():
    shift = make_shift("D14", {"delay_steps": 2, "duration_steps": 6, "fallback_step": 3})
    run = episode(shift, 11)
    ex = run.executed
    for t in (0, 1, 2, 9, 10):  # before the window, and after it: the current command at once
        assert np.array_equal(ex[t], action(t)), t
    assert [ex[3].tolist(), ex[4].tolist()] == [hold(1.0)] * 2, "holds, with the last executed gripper"
    for t in range(5, 9):
        assert np.array_equal(ex[t], action(t - 2)), t
    post = shift.applied["post_condition"]
    assert (post["hold_steps"], post["delayed_steps"], post["dropped_at_release"]) == (2, 4, 2)
    assert shift.applied["active_steps"] == list(range(3, 9))


# --------------------------------------------------------------------------- D15
def test_d15_replaces_exactly_the_drawn_fraction_of_window_commands_by_holds():
    shift = make_shift("D15", {"drop_fraction": 0.5, "duration_steps": 10, "fallback_step": 2})
    grip = lambda t: action(t, gripper=1.0 if t % 3 else -1.0)  # noqa: E731
    run = episode(shift, 14, actions=grip)
    drops = {2 + int(i) for i in np.random.default_rng(SEED).choice(10, size=5, replace=False)}
    assert shift.applied["drop_steps"] == sorted(drops) and len(drops) == 5
    for t, a in enumerate(run.executed):
        if t in drops:
            assert a.tolist() == hold(float(run.executed[t - 1][6])), t
        else:
            assert np.array_equal(a, grip(t)), t
    post = shift.applied["post_condition"]
    assert (post["dropped_steps"], post["realised_fraction"], post["complete_window"]) == (5, 0.5, True)


# --------------------------------------------------------------------------- D16
def test_d16_action_noise_burst_in_its_window_only():
    shift = make_shift("D16", {"sigma_frac": 0.05, "duration_steps": 30, "fallback_step": 3})
    run = episode(shift, 36)
    replay = np.random.default_rng(SEED)
    for t, a in enumerate(run.executed):
        expected = action(t).copy()
        if 3 <= t < 33:
            expected[:6] = np.clip(expected[:6] + replay.normal(0.0, 0.1, 6), -1, 1)
            assert not np.array_equal(a[:6], action(t)[:6])
        assert np.array_equal(a, expected), t
    post = shift.applied["post_condition"]
    assert post["steps"] == 30 and post["gripper_changed_steps"] == 0
    assert abs(post["sigma_measured"] - 0.1) <= post["relative_tolerance"] * 0.1


# --------------------------------------------------------------------------- D17
def test_d17_repeats_each_latched_command_for_hold_periods_steps_in_its_window():
    shift = make_shift("D17", {"hold_periods": 3, "duration_steps": 7, "fallback_step": 2})
    run = episode(shift, 11)
    src = [0, 1, 2, 2, 2, 5, 5, 5, 8, 9, 10]  # blocks start at 2, 5, 8; the window ends at 9
    for t, a in enumerate(run.executed):
        assert np.array_equal(a, action(src[t])), t
    post = shift.applied["post_condition"]
    assert (post["block_starts"], post["block_sizes"], post["interrupted_blocks"]) == ([2, 5, 8], [3, 3, 1], [])


def test_d17_a_block_whose_first_step_was_overridden_latches_its_first_policy_command():
    shift = make_shift("D17", {"hold_periods": 3, "duration_steps": 9, "fallback_step": 0})
    run = episode(shift, 9, overridden=(3,))
    assert [a.tolist() for a in run.executed[3:6]] == [hold(1.0), action(4).tolist(), action(4).tolist()]
    post = shift.applied["post_condition"]
    assert (post["block_starts"], post["block_sizes"], post["interrupted_blocks"]) == ([0, 3, 6], [3, 2, 3], [3])


# --------------------------------------------------------------------------- D20
INSTRUCTION, OPTIONS = next(iter(PARAPHRASES.items()))


def _d20(index: int, fallback_step: int = 3):
    return make_shift("D20", {"index": index, "text": OPTIONS[index], "fallback_step": fallback_step})


def _ask(shift, steps: int, asked: tuple[int, ...], incoming: str = INSTRUCTION) -> dict[int, str]:
    """The instruction the policy receives at each step it is asked (a chunk of 2: every 2nd
    step), in the runner's order (trigger first)."""
    ctx = context(scene=SimpleNamespace(task=SimpleNamespace(instruction=INSTRUCTION)))
    got = {}
    for t in range(steps):
        shift.maybe_fire(ctx, t, {})
        shift.observe(frame(t), t, ctx)
        if t in asked:
            got[t] = shift.instruction(incoming, t)
    shift.on_episode_end(ctx)
    return got


def test_d20_restates_the_instruction_from_the_firing_step_on():
    shift = _d20(1)
    got = _ask(shift, 8, asked=(0, 2, 4, 6))
    assert got == {0: INSTRUCTION, 2: INSTRUCTION, 4: OPTIONS[1], 6: OPTIONS[1]}
    a = shift.applied
    assert (a["instruction_before"], a["restated_as"], a["changed_from_drawn"]) == (INSTRUCTION, OPTIONS[1], False)
    assert a["post_condition"] == {"delivered_at_steps": [4, 6], "deliveries": 2, "differs_from_before": True}


def test_d20_after_a_paraphrase_equal_to_its_own_takes_the_next_one():
    shift = _d20(0)
    got = _ask(shift, 6, asked=(0, 3, 5), incoming=OPTIONS[0])  # S22 delivered the same paraphrase
    assert got == {0: OPTIONS[0], 3: OPTIONS[1], 5: OPTIONS[1]}
    assert shift.applied["changed_from_drawn"] is True


def test_d20_that_never_reached_the_policy_stays_valid_as_any_unfired_runtime_shift():
    """One rule for every runtime shift (issue 11, item 4): an episode that ended before D20 fired,
    or before the policy was asked again after it fired, ended before the shift could act; it is
    valid and counts with its outcome, as for D01-D19 (version 1 of the results made it invalid)."""
    fired = _d20(1)
    _ask(fired, 6, asked=(0, 2))  # fired at step 3, never asked again
    assert fired.fired_at == 3 and fired.applied["post_condition"]["deliveries"] == 0
    unfired = _d20(1, fallback_step=40)
    _ask(unfired, 6, asked=(0, 2))  # the episode ended before the fallback step
    assert unfired.fired_at is None and "post_condition" not in unfired.applied
