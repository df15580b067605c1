"""D06 distractor appears (Environment, runtime, trigger approach): a look-alike of the target
appears near it while the gripper approaches (``docs/definition.md``, "Runtime shifts"; "not
applicable where no free space exists").

Realisation: the look-alike of S08 (:mod:`liberopro.shifts.s08_distractor`: same category,
another type, 5-15 cm edge to edge from the target's stack, on its support, wholly in the
third-person view), moved in from its parking spot at the firing step; a spot must also keep
2 cm from the robot's geoms. It stays for the rest of the episode. The instruction rule is
S08's and holds from the first step (the policy's instruction never changes mid-episode): where
the target's phrase would also fit the look-alike it becomes the target's full name.

Free space is measured when the shift fires: if no spot beside the target is free because of
the layout, the episode is invalid with that reason; if some spot is refused only because of
the robot, the look-alike waits for the arm to move on (:class:`liberopro.shifts.base.ShiftDeferred`,
at most ``MAX_DELAY_STEPS`` steps, then invalid). Statically not applicable: S08's rules
(articulated targets, a target inside a drawer, a target named in the plural, e.g. LIBERO-10
task 8 "put both moka pots on the stove", the one pair the reference study found not
applicable).

Defaults: trigger approach; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`); gap 5-15 cm; direction uniform; yaw -45..45 deg.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.environment import RuntimeLookalikeParams
from liberopro.shifts._objects import lookalike_instruction
from liberopro.shifts._placement import Blocked
from liberopro.shifts._props import object_positions, place_beside, prop_record, robot_clearance, target_stack
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid
from liberopro.shifts.s08_distractor import (
    CLEARANCE_M,
    check_lookalike_post,
    gap_candidates,
    lookalike_applicable,
    lookalike_post,
)
from liberopro.sim.scene import PropSpec, SceneVariant

PROP = "liberopro_prop_d06_lookalike"
#: Least distance between the look-alike and the robot's geoms when it appears (m).
ROBOT_CLEARANCE_M = 0.02


class DistractorAppears(RuntimeShift[RuntimeLookalikeParams]):
    spec = SPECS["D06"]

    @classmethod
    def applicable(cls, ref, sem):
        return lookalike_applicable(ref, sem)

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(props=(PropSpec(PROP, f"object:{params.lookalike}"),))

    def instruction(self, text: str, step: int) -> str:
        new = lookalike_instruction(text, self.params.target_type, self.params.lookalike)
        return text if new is None else new

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene, p = ctx.scene, self.params
        stack = target_stack(scene, ctx.sem)
        try:
            placed = place_beside(
                scene,
                PROP,
                stack,
                gap_candidates(p.gap_m),
                p.direction_deg,
                p.yaw_deg,
                CLEARANCE_M,
                min_robot_m=ROBOT_CLEARANCE_M,
            )
        except Blocked as exc:  # only the arm in the way: it moves on (bounded delay)
            raise ShiftDeferred(self.id, f"no free space for a look-alike when it should appear: {exc}") from exc
        except ValueError as exc:
            raise ShiftInvalid(self.id, f"no free space for a look-alike when it should appear: {exc}") from exc
        post = lookalike_post(scene, PROP, stack, placed, object_positions(scene))
        post["robot_clearance_m"] = round(robot_clearance(scene, [PROP]), 4)
        post["eef_to_target_m"] = round(
            float(((scene.eef_pos() - scene.body_pos(scene.root_body(ctx.sem.target))) ** 2).sum() ** 0.5), 4
        )
        self.applied = {
            "lookalike": p.lookalike,
            "instruction": self.instruction(scene.task.instruction, 0),
            "gap_m": placed["gap_m"],
            "direction_deg": placed["direction_deg"],
            "candidates_tried": placed["candidates_tried"],
            **prop_record(scene, PROP),
            "post_condition": post,
        }
        check_lookalike_post(self.id, post, placed["gap_m"])
        if post["robot_clearance_m"] < ROBOT_CLEARANCE_M:
            raise ShiftInvalid(self.id, f"look-alike appeared {post['robot_clearance_m']} m from the robot")
