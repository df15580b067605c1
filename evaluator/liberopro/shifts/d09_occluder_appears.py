"""D09 occluder appears (Environment, runtime, trigger grasp): an occluder enters the
third-person line of sight when the gripper first touches the target (``benchmark.md``,
runtime table).

Realisation: S09's board (:mod:`liberopro.shifts.s09_occlusion`: a thin static box without
collisions, facing the agentview camera at ``depth_ratio`` of the target's depth, far outside
the robot's reach), moved in at the firing step so that it hides ``fraction`` of the target's
pixels as they are then (the gripper may already hide some: the fraction is of what is visible
just before the board appears). It stays for the rest of the episode.

Post-condition, measured at the firing step: hidden fraction within 0.05 of the stated one and
in 0.2-0.5 (segmentation renders); board > 0.9 m from the robot base, without collisions.

Defaults: trigger grasp; fallback step 60; fraction 0.2-0.5; depth ratio 0.2-0.35; side uniform.
Applies to every task.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts._props import prop_record
from liberopro.shifts.base import EpisodeContext, RuntimeParams, RuntimeShift, ShiftInvalid, uniform
from liberopro.shifts.s09_occlusion import (
    check_occluder_post,
    occluder_post,
    occluder_variant,
    place_occluder,
)

PROP = "liberopro_prop_d09_occluder"


class RuntimeOcclusionParams(RuntimeParams):
    trigger: Literal["grasp"] = "grasp"
    fallback_step: int = Field(default=60, ge=0)
    fraction: float = Field(ge=0.05, le=0.95)
    depth_ratio: float = Field(ge=0.1, le=0.8)
    side_deg: float = Field(ge=0.0, lt=360.0)


@register
class OccluderAppears(RuntimeShift):
    id = "D09"
    name = "occluder appears"
    category = "Environment"
    triggers = ("grasp",)
    summary = "an occluder enters the third-person line of sight"
    post_condition = ("at the firing step the board hides the stated fraction (+-0.05, within 0.2-0.5) of the "
                      "target's then visible pixels (segmentation renders, agentview); > 0.9 m from the robot base, "
                      "without collisions")
    Params = RuntimeOcclusionParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        return RuntimeOcclusionParams(fraction=uniform(rng, 0.2, 0.5, 3), depth_ratio=uniform(rng, 0.2, 0.35, 3),
                                      side_deg=uniform(rng, 0, 360, 1))

    @classmethod
    def default_params(cls):
        return {"trigger": "grasp", "fallback_step": 60, "fraction": [0.2, 0.5], "depth_ratio": [0.2, 0.35],
                "side_deg": [0, 360]}

    @classmethod
    def scene_variant(cls, params):
        return occluder_variant(PROP)

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        try:
            placed = place_occluder(ctx.scene, PROP, ctx.sem, p.fraction, p.depth_ratio, p.side_deg)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        post = occluder_post(ctx.scene, PROP, ctx.sem)
        self.applied = {**placed, **prop_record(ctx.scene, PROP), "post_condition": post}
        check_occluder_post(self.id, post, p.fraction)
