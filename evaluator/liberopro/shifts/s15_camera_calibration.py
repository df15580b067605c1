"""S15 camera calibration (Observation, static): the third-person camera moved 3-10 cm and turned
5-15 deg (``docs/definition.md``, "Static shifts")."""

from __future__ import annotations

import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.observation import CameraParams
from liberopro.shifts._placement import quat_mul
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

CAMERA = "agentview"
#: The target must keep at least this fraction of its nominal pixels in the moved view.
MIN_TARGET_VISIBLE = 0.2


def unit(azimuth_deg: float, elevation_deg: float) -> np.ndarray:
    a, e = math.radians(azimuth_deg), math.radians(elevation_deg)
    return np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])


def rotation_angle_deg(m1: np.ndarray, m2: np.ndarray) -> float:
    """Angle of the rotation taking 3x3 matrix ``m1`` to ``m2``, degrees.

    Hand-written (acos of the trace) and kept: scipy's ``Rotation.magnitude`` is more accurate
    for small turns but differs from it by up to ~3e-11 deg at S15's 5-15 deg, and the value is
    recorded (``turned_deg``, rounded to 1e-3) and checked against the stated turn. Like the turn
    quaternion in :func:`move_camera` (scipy's ``from_rotvec`` differs there by <= 2 ulp on ~67% of
    inputs, and it sets the camera's pose, so every image), it stays as it is;
    ``tests/evaluator/test_rotations.py`` checks both against scipy."""
    r = m1.T @ m2
    return math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2))))


def move_camera(ctx: EpisodeContext, camera: str, shift: np.ndarray, turn_deg: float, axis: np.ndarray) -> dict:
    """Move ``camera`` by ``shift`` (m, parent frame) and turn it ``turn_deg`` about ``axis``
    (camera frame). Returns the measured pose change and the target's visibility; raises
    :class:`ValueError` when the target leaves the view. Shared by S15 and D07."""
    scene = ctx.scene
    cid = scene.inner.sim.model.camera_name2id(camera)
    target_body = scene.root_body(ctx.sem.target)
    target_geoms = [g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) == target_body]
    seg_before = scene.render(camera, segmentation=True)
    pos0 = np.array(scene.data.cam_xpos[cid])
    mat0 = np.array(scene.data.cam_xmat[cid]).reshape(3, 3)
    cam_pos = scene.model_field("cam_pos")
    cam_quat = scene.model_field("cam_quat")
    cam_pos[cid] = cam_pos[cid] + shift
    h = math.radians(turn_deg) / 2
    q_turn = np.array([math.cos(h), *(math.sin(h) * axis / np.linalg.norm(axis))])
    cam_quat[cid] = quat_mul(np.asarray(cam_quat[cid]), q_turn)
    scene.refresh_view()  # the camera's world pose only: no mj_forward, the physics stays nominal
    pos1 = np.array(scene.data.cam_xpos[cid])
    mat1 = np.array(scene.data.cam_xmat[cid]).reshape(3, 3)
    seg_after = scene.render(camera, segmentation=True)
    px_before = int(np.isin(seg_before, target_geoms).sum())
    px_after = int(np.isin(seg_after, target_geoms).sum())
    measured = {
        "camera": camera,
        "moved_m": round(float(np.linalg.norm(pos1 - pos0)), 5),
        "turned_deg": round(rotation_angle_deg(mat0, mat1), 3),
        "target_pixels_before": px_before,
        "target_pixels_after": px_after,
    }
    if px_before and px_after < MIN_TARGET_VISIBLE * px_before:
        raise ValueError(f"the target keeps only {px_after}/{px_before} of its pixels in the moved {camera} view")
    return measured


class CameraCalibration(Shift[CameraParams]):
    spec = SPECS["S15"]

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        p = self.params
        shift = unit(p.shift_azimuth_deg, p.shift_elevation_deg) * p.shift_m
        try:
            measured = move_camera(ctx, CAMERA, shift, p.turn_deg, unit(p.axis_azimuth_deg, p.axis_elevation_deg))
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self.applied = {"post_condition": measured}
        if abs(measured["moved_m"] - p.shift_m) > 1e-4 or abs(measured["turned_deg"] - p.turn_deg) > 0.05:
            raise ShiftInvalid(
                self.id,
                f"camera moved {measured['moved_m']} m / {measured['turned_deg']} deg, "
                f"stated {p.shift_m} m / {p.turn_deg} deg",
            )
