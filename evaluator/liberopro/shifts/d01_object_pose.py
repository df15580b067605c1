"""D01 object pose (Condition, runtime, trigger approach): the target moves 5-12 cm and turns
while the gripper approaches it, before contact (``docs/definition.md``, "Runtime shifts").

When every candidate placement (the drawn direction, then its neighbours,
:func:`liberopro.shifts._placement.relocate`) is refused and at least one only because it would
touch the robot, the move waits for the arm (:class:`liberopro.shifts.base.ShiftDeferred`,
at most ``MAX_DELAY_STEPS`` steps)."""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import RuntimeObjectPoseParams
from liberopro.shifts._placement import Blocked, entity_pose, relocate
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid


class RuntimeObjectPose(RuntimeShift[RuntimeObjectPoseParams]):
    spec = SPECS["D01"]

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        eef_before = ctx.scene.eef_pos()
        target_before = entity_pose(ctx.scene, ctx.sem.target)[0]
        try:
            reloc = relocate(ctx.scene, ctx.sem, p.distance_m, p.direction_deg, p.yaw_deg)
        except Blocked as exc:  # the gripper over the spots: it moves on (bounded delay)
            raise ShiftDeferred(self.id, str(exc)) from exc
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        after = entity_pose(ctx.scene, ctx.sem.target)[0]
        self.applied = {
            "object": ctx.sem.target,
            **reloc.as_record(),
            "post_condition": {
                "moved_m": round(float(np.linalg.norm(after[:2] - target_before[:2])), 4),
                "eef_to_target_before_m": round(float(np.linalg.norm(eef_before - target_before)), 4),
            },
        }
