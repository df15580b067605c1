"""D07 camera motion (Environment, runtime, trigger approach or transport): the third-person camera
is bumped 3-8 cm and turned 5-10 deg, and stays there (``docs/definition.md``, "Runtime shifts").

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
approach or transport (even odds); the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`) for the drawn trigger.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.environment import CameraMotionParams
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid
from liberopro.shifts.s15_camera_calibration import CAMERA, move_camera, unit


class CameraMotion(RuntimeShift[CameraMotionParams]):
    spec = SPECS["D07"]

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        shift = unit(p.shift_azimuth_deg, p.shift_elevation_deg) * p.shift_m
        axis = unit(p.axis_azimuth_deg, p.axis_elevation_deg)
        cid = ctx.scene.inner.sim.model.camera_name2id(CAMERA)
        cam_pos, cam_quat = ctx.scene.model_field("cam_pos"), ctx.scene.model_field("cam_quat")
        pos0, quat0 = cam_pos[cid].copy(), cam_quat[cid].copy()
        reasons = []
        for mirrored, (sgn_shift, sgn_axis) in (
            ("none", (1, 1)),
            ("turn", (1, -1)),
            ("shift", (-1, 1)),
            ("both", (-1, -1)),
        ):
            try:
                measured = move_camera(ctx, CAMERA, sgn_shift * shift, p.turn_deg, sgn_axis * axis)
                break
            except ValueError as exc:
                reasons.append(f"mirrored {mirrored}: {exc}")
                cam_pos[cid], cam_quat[cid] = pos0, quat0
                ctx.scene.refresh_view()
        else:
            raise ShiftInvalid(self.id, "; ".join(reasons))
        self.applied = {"mirrored": mirrored, "post_condition": measured}
        if abs(measured["moved_m"] - p.shift_m) > 1e-4 or abs(measured["turned_deg"] - p.turn_deg) > 0.05:
            raise ShiftInvalid(
                self.id,
                f"camera moved {measured['moved_m']} m / {measured['turned_deg']} deg, "
                f"stated {p.shift_m} m / {p.turn_deg} deg",
            )
