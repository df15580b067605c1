"""D07 camera motion (Environment, runtime, trigger approach or transport): the third-person camera
is bumped 3-8 cm and turned 5-10 deg, and stays there (``benchmark.md``, runtime table).

Realisation: :func:`liberopro.shifts.s15_camera_calibration.move_camera` (shared with S15) on
``agentview`` at the trigger step; the observations are re-rendered at once, so the frame of the
trigger step already shows the moved view. The camera pose is a registered model field, restored
at the next episode. When the drawn bump would take the target out of view (a bowl at the edge
of the picture), the same bump mirrored is tried: turn axis reversed, then shift reversed, then
both (same magnitudes; ``applied["mirrored"]`` says which was used).

Post-condition, measured at the moment of the bump from ``cam_xpos``/``cam_xmat``: the camera
moved by the stated distance (0.1 mm) and turned by the stated angle (0.05 deg); the target keeps
at least 20% of its pixels in the moved view.

Defaults: shift 3-8 cm along a direction of uniform azimuth and elevation in [-30, 30] deg; turn
5-10 deg about an axis of uniform azimuth and elevation in [-60, 60] deg (camera frame); trigger
approach or transport (even odds); fallback step 40 (approach) or 100 (transport).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts.base import EpisodeContext, RuntimeParams, RuntimeShift, ShiftInvalid, uniform
from liberopro.shifts.s15_camera_calibration import CAMERA, move_camera, unit

FALLBACK = {"approach": 40, "transport": 100}


class CameraMotionParams(RuntimeParams):
    """As S15's :class:`~liberopro.shifts.s15_camera_calibration.CameraParams`, plus the trigger."""

    trigger: Literal["approach", "transport"] = "approach"
    fallback_step: int = Field(default=40, ge=0)
    shift_m: float = Field(ge=0, le=0.3)
    shift_azimuth_deg: float
    shift_elevation_deg: float = Field(ge=-90, le=90)
    turn_deg: float = Field(ge=0, le=45)
    axis_azimuth_deg: float
    axis_elevation_deg: float = Field(ge=-90, le=90)


@register
class CameraMotion(RuntimeShift):
    id = "D07"
    name = "camera motion"
    category = "Environment"
    triggers = ("approach", "transport")
    summary = "third-person camera bumped 3-8 cm, 5-10 deg; stays"
    post_condition = ("at the bump, the camera's world pose moved by the stated distance and angle (measured from "
                      "cam_xpos/cam_xmat); the target keeps >= 20% of its pixels in view")
    Params = CameraMotionParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        trigger = "approach" if rng.random() < 0.5 else "transport"
        return CameraMotionParams(
            trigger=trigger, fallback_step=FALLBACK[trigger],
            shift_m=uniform(rng, 0.03, 0.08), shift_azimuth_deg=uniform(rng, -180, 180, 1),
            shift_elevation_deg=uniform(rng, -30, 30, 1), turn_deg=uniform(rng, 5, 10, 2),
            axis_azimuth_deg=uniform(rng, -180, 180, 1), axis_elevation_deg=uniform(rng, -60, 60, 1),
        )

    @classmethod
    def default_params(cls):
        return {"trigger": "approach | transport", "fallback_step": FALLBACK, "shift_m": [0.03, 0.08],
                "turn_deg": [5, 10], "directions": "uniform azimuth, elevation [-30, 30] (shift), [-60, 60] (axis)"}

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        shift = unit(p.shift_azimuth_deg, p.shift_elevation_deg) * p.shift_m
        axis = unit(p.axis_azimuth_deg, p.axis_elevation_deg)
        cid = ctx.scene.inner.sim.model.camera_name2id(CAMERA)
        cam_pos, cam_quat = ctx.scene.model_field("cam_pos"), ctx.scene.model_field("cam_quat")
        pos0, quat0 = cam_pos[cid].copy(), cam_quat[cid].copy()
        reasons = []
        for mirrored, (sgn_shift, sgn_axis) in (("none", (1, 1)), ("turn", (1, -1)), ("shift", (-1, 1)),
                                                 ("both", (-1, -1))):
            try:
                measured = move_camera(ctx, CAMERA, sgn_shift * shift, p.turn_deg, sgn_axis * axis)
                break
            except ValueError as exc:
                reasons.append(f"mirrored {mirrored}: {exc}")
                cam_pos[cid], cam_quat[cid] = pos0, quat0
                ctx.scene.refresh()
        else:
            raise ShiftInvalid(self.id, "; ".join(reasons))
        self.applied = {"mirrored": mirrored, "post_condition": measured}
        if abs(measured["moved_m"] - p.shift_m) > 1e-4 or abs(measured["turned_deg"] - p.turn_deg) > 0.05:
            raise ShiftInvalid(self.id, f"camera moved {measured['moved_m']} m / {measured['turned_deg']} deg, "
                                        f"stated {p.shift_m} m / {p.turn_deg} deg")
