"""D09 occluder appears (Environment, runtime, trigger grasp): an occluder enters the
third-person line of sight when the gripper first touches the target (``docs/definition.md``,
"Runtime shifts").

Realisation: S09's board (:mod:`liberopro.shifts.s09_occlusion`: a thin static box without
collisions, facing the agentview camera at ``depth_ratio`` of the target's depth, far outside
the robot's reach), moved in at the firing step so that it hides ``fraction`` of the target's
pixels as they are then, measured with the robot out of the picture
(:func:`liberopro.shifts.s09_occlusion.robot_out_of_view`): the arm may stand anywhere, in front
of the target included, without changing where the board goes or what it is measured to hide,
so the realisation does not depend on the policy (issue 22, item 5). It stays for the rest of
the episode. When the target is inside the picture but hardly visible even without the robot
(hidden by what the gripper carries), the board waits for it to show
(:class:`liberopro.shifts.base.ShiftDeferred`, at most ``MAX_DELAY_STEPS`` steps).

Post-condition, measured at the firing step: hidden fraction within 0.05 of the stated one and
in 0.2-0.5 (segmentation renders, the robot out of the picture); board > 0.9 m from the robot base, without collisions.

Defaults: trigger grasp; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`); fraction 0.2-0.5; depth ratio 0.2-0.35; side uniform.
Applies to every task.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.environment import RuntimeOcclusionParams
from liberopro.shifts._placement import Blocked
from liberopro.shifts._props import prop_record
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid
from liberopro.shifts.s09_occlusion import (
    check_occluder_post,
    occluder_post,
    occluder_variant,
    place_occluder,
)

PROP = "liberopro_prop_d09_occluder"


class OccluderAppears(RuntimeShift[RuntimeOcclusionParams]):
    spec = SPECS["D09"]

    @classmethod
    def scene_variant(cls, params):
        return occluder_variant(PROP)

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        p = self.params
        try:
            placed = place_occluder(ctx.scene, PROP, ctx.sem, p.fraction, p.depth_ratio, p.side_deg, without_robot=True)
        except Blocked as exc:  # the target inside the picture but hidden (by the arm): wait for it
            raise ShiftDeferred(self.id, str(exc)) from exc
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        post = occluder_post(ctx.scene, PROP, ctx.sem, without_robot=True)
        self.applied = {**placed, **prop_record(ctx.scene, PROP), "post_condition": post}
        check_occluder_post(self.id, post, p.fraction)
