"""D01 object pose (Condition, runtime, trigger approach): the target moves 5-12 cm and turns
while the gripper approaches it, before contact (``benchmark.md``, runtime table)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts._placement import entity_pose, relocate
from liberopro.shifts.base import EpisodeContext, RuntimeParams, RuntimeShift, ShiftInvalid, uniform


class RuntimeObjectPoseParams(RuntimeParams):
    trigger: Literal["approach"] = "approach"
    fallback_step: int = Field(default=40, ge=0)
    distance_m: float = Field(ge=0.0, le=0.5)
    direction_deg: float = Field(ge=0.0, lt=360.0)
    yaw_deg: float = Field(ge=-180.0, le=180.0)


@register
class RuntimeObjectPose(RuntimeShift):
    id = "D01"
    name = "object pose"
    category = "Condition"
    triggers = ("approach",)
    summary = "target moved 5-12 cm and turned, before contact"
    post_condition = ("target displaced by the stated distance (measured), resting at its height, "
                      "touching neither the robot nor other objects at the moment of the move")
    Params = RuntimeObjectPoseParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        return RuntimeObjectPoseParams(distance_m=uniform(rng, 0.05, 0.12), direction_deg=uniform(rng, 0, 360, 1),
                                       yaw_deg=uniform(rng, -30, 30, 1))

    @classmethod
    def default_params(cls):
        return {"trigger": "approach", "fallback_step": 40, "distance_m": [0.05, 0.12],
                "direction_deg": [0, 360], "yaw_deg": [-30, 30]}

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        eef_before = ctx.scene.eef_pos()
        target_before = entity_pose(ctx.scene, ctx.sem.target)[0]
        try:
            reloc = relocate(ctx.scene, ctx.sem, p.distance_m, p.direction_deg, p.yaw_deg)
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
