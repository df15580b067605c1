"""D02 receiver pose (Condition, runtime, trigger transport): the receiver moves 5-12 cm (and turns
up to 20 deg) while the target is carried (``docs/definition.md``, "Runtime shifts").

The receiver, its group, the goal region of libero_goal task 5 and the applicability rule are
S02's (:mod:`liberopro.shifts.s02_receiver_pose`). At run time the move is a teleport of a
resting receiver while the arm carries the target, so on top of S02's checks every geom of the
receiver's group must stay :data:`CLEARANCE_M` away from the robot and from the carried target
(measured with MuJoCo's collision detection with widened margins, see
:func:`liberopro.shifts._placement.clearance_problem`); directions that would not are skipped.

Post-condition, measured at the moment of the move: the receiver moved by the realised distance
(the drawn one, or shorter down to ``min_distance_m`` = 5 cm where it does not fit, as S02;
teleport, so exactly; re-measured from the simulator), the target did not move, and the
clearance held.

Defaults: distance 5-12 cm (minimum 5 cm), direction uniform, yaw uniform in [-20, 20] deg;
the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import RECEIVER_ROBOT_CLEARANCE_M as CLEARANCE_M
from liberopro.catalog.condition import RuntimeReceiverPoseParams
from liberopro.shifts._placement import entity_pose
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid
from liberopro.shifts.s02_receiver_pose import move_receiver, receiver_entity, site_positions

#: Least distance (m) kept between the moved receiver and the robot or the carried target.


class RuntimeReceiverPose(RuntimeShift[RuntimeReceiverPoseParams]):
    spec = SPECS["D02"]

    @classmethod
    def applicable(cls, ref, sem):
        found = receiver_entity(sem)
        return found if isinstance(found, str) else None

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p, scene, sem = self.params, ctx.scene, ctx.sem
        target_before = entity_pose(scene, sem.target)[0]
        sites_before = site_positions(ctx)
        reloc = move_receiver(
            ctx, self.id, p.distance_m, p.direction_deg, p.yaw_deg, p.min_distance_m, clearance_m=CLEARANCE_M
        )
        before = np.array(reloc.start[reloc.entity])
        after = entity_pose(scene, reloc.entity)[0]
        target_after = entity_pose(scene, sem.target)[0]
        measured: dict[str, Any] = {
            "moved_m": round(float(np.linalg.norm(after[:2] - before[:2])), 4),
            "height_change_m": round(float(after[2] - before[2]), 4),
            "target_moved_m": round(float(np.linalg.norm(target_after - target_before)), 5),
            "phases_reached": sorted(ctx.phases.reached) if ctx.phases is not None else [],
            "eef_to_receiver_m": round(float(np.linalg.norm(scene.eef_pos()[:2] - after[:2])), 4),
            "clearance_m": CLEARANCE_M,
        }
        for name, pos in site_positions(ctx).items():
            measured[f"{name}_moved_m"] = round(float(np.linalg.norm(pos[:2] - sites_before[name][:2])), 4)
        self.applied = {"receiver": reloc.entity, **reloc.as_record(), "post_condition": measured}
        if abs(measured["moved_m"] - reloc.distance_m) > 1e-3 or measured["target_moved_m"] > 1e-6:
            raise ShiftInvalid(
                self.id,
                f"receiver moved {measured['moved_m']} m (stated {reloc.distance_m:.3f} m), "
                f"target moved {measured['target_moved_m']} m",
            )
