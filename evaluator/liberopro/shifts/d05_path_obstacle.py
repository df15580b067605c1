"""D05 path obstacle (Condition, runtime, trigger transport): an obstacle appears on the path
ahead of the carried target (``docs/definition.md``, "Runtime shifts"; matched with S05).

Realisation: S05's box (:mod:`liberopro.shifts.s05_path_obstacle`), moved in at the firing step
onto the straight horizontal segment from the target's position *then* to the goal region, at
``fraction`` of it (then the neighbouring fractions 0.25-0.8, then thinner), clear by 1 cm of
every object and fixture (drawers and doors in any position), at least 3 cm (horizontally) from
the gripper when it is less than 10 cm above the obstacle's top and from the target's footprint
when it is carried above the obstacle's top, and 2 cm from every robot geom: it appears ahead,
never under or against the carried object or the arm. It stays for the rest of the episode.
When no fraction fits and at least one was refused only for the gripper, the carried target or
the robot, the obstacle waits for them to move on (:class:`liberopro.shifts.base.ShiftDeferred`,
at most ``MAX_DELAY_STEPS`` steps); a path with no room among the fixtures is invalid at once.

Post-condition, measured at the firing step: the obstacle stands on the table / floor across
the remaining path (the segment passes within 1 mm of its centre), at most 12 cm high with 35 cm
free above it (going over stays possible), a 10 cm lane beside it recorded (going around), no
simulated contact.

Defaults: trigger transport; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`); fraction 0.4-0.6; height 6-12 cm; width 8-14 cm;
thickness 3-5 cm. Applicability: as S05 (tasks with a goal region).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import RuntimePathObstacleParams
from liberopro.episode.phases import PhaseTracker
from liberopro.shifts._placement import Blocked
from liberopro.shifts._props import (
    entity_aabb,
    goal_xy,
    ground_level,
    park_one,
    prop_contacts,
    prop_record,
    rect_gap,
    robot_clearance,
    segment_distance,
    target_xy,
)
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid
from liberopro.shifts.s05_path_obstacle import (
    CLEARANCE_M,
    PathObstacle,
    lanes_free,
    obstacle_variant,
    over_free,
    place_on_path,
)

PROP = "liberopro_prop_d05_obstacle"
#: Horizontal clearance from the carried target and the gripper (m).
AHEAD_M = 0.03
#: A gripper lower than this above the obstacle's top must not hang over it (m).
LOW_GRIPPER_M = 0.10
#: Clearance from every robot geom (m).
ROBOT_CLEARANCE_M = 0.02
FRACTIONS = (0.0, 0.1, -0.1, 0.2, -0.2, 0.3, -0.3, 0.4)


def carried(ctx: EpisodeContext) -> set[str]:
    """The task's actors a gripper finger touches now (:meth:`liberopro.episode.phases.PhaseTracker.touched_now`;
    empty before the policy loop)."""
    return ctx.phases.touched_now() if isinstance(ctx.phases, PhaseTracker) else set()


class RuntimePathObstacle(RuntimeShift[RuntimePathObstacleParams]):
    spec = SPECS["D05"]

    @classmethod
    def applicable(cls, ref, sem):
        return PathObstacle.applicable(ref, sem)

    @classmethod
    def scene_variant(cls, params):
        return obstacle_variant(PROP)

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene, p = ctx.scene, self.params
        a, b = target_xy(scene, ctx.sem), goal_xy(scene, ctx.sem)
        if b is None:  # applicable() refuses tasks without a receiver
            raise ShiftInvalid(self.id, "the task has no goal region")
        half = (p.thickness_m / 2, p.width_m / 2, p.height_m / 2)
        t_lo, t_hi = entity_aabb(scene, [ctx.sem.target])
        eef = scene.eef_pos()
        reasons = []
        placed = None
        blocked_by_moving = False  # a spot refused only for the gripper, the carried target, the robot
        moving = frozenset({scene.entity_name(scene.robot_root())} | (carried(ctx) & {ctx.sem.target}))
        for d in FRACTIONS:
            f = p.fraction + d
            if not 0.25 <= f <= 0.8:
                continue
            try:
                xy, f, used, why = place_on_path(scene, PROP, a, b, [f], half, clearance=CLEARANCE_M, moving=moving)
            except Blocked as exc:
                reasons.append(str(exc))
                blocked_by_moving = True
                continue
            except ValueError as exc:
                reasons.append(str(exc))
                continue
            o_lo, o_hi = entity_aabb(scene, [PROP])
            # a target resting on the table is kept clear by the spot's rays; one carried above the
            # obstacle's top must not hang over it
            ahead = math.inf
            if eef[2] < o_hi[2] + LOW_GRIPPER_M:
                ahead = rect_gap(o_lo, o_hi, eef - 0.04, eef + 0.04)
            if t_lo[2] > o_hi[2]:
                ahead = min(ahead, rect_gap(o_lo, o_hi, t_lo, t_hi))
            clear = robot_clearance(scene, [PROP])
            if ahead < AHEAD_M or clear < ROBOT_CLEARANCE_M:
                reasons.append(f"{f:.2f}: {ahead:.3f} m from the target/gripper, {clear:.3f} m from the robot")
                blocked_by_moving = True
                park_one(scene, PROP)
                continue
            placed = (xy, f, used, ahead, clear)
            break
        if placed is None:
            scene.refresh()
            # only the arm or the carried target in the way somewhere: wait for them (bounded delay)
            raise (ShiftDeferred if blocked_by_moving else ShiftInvalid)(
                self.id, "no room on the path ahead: " + "; ".join(reasons)
            )
        xy, f, used, ahead, clear = placed
        pos = scene.data.xpos[scene.props[PROP]].copy()
        level, _ = ground_level(scene)
        along = (b - a) / max(np.linalg.norm(b - a), 1e-9)
        top = float(pos[2] + used[2])
        post: dict[str, Any] = {
            "off_path_m": round(segment_distance(pos[:2], a, b), 4),
            "bottom_above_surface_m": round(float(pos[2] - used[2] - level), 4),
            "height_m": round(top - level, 4),
            "ahead_of_target_m": None if math.isinf(ahead) else round(ahead, 4),
            "robot_clearance_m": round(clear, 4),
            "over_free": over_free(scene, pos[:2], top),
            "around_free_sides": lanes_free(scene, pos[:2], along, used, level),
            "touching": prop_contacts(scene, [PROP]),
        }
        self.applied = {
            "fraction": round(f, 3),
            "path_from": np.round(a, 4).tolist(),
            "path_to": np.round(b, 4).tolist(),
            "remaining_path_m": round(float(np.linalg.norm(b - a)), 4),
            "size_m": [round(2 * h, 4) for h in used],
            "yaw_deg_path": round(math.degrees(math.atan2(along[1], along[0])), 2),
            **prop_record(scene, PROP),
            "post_condition": post,
        }
        if post["off_path_m"] > 0.001 or abs(post["bottom_above_surface_m"]) > 0.003:
            raise ShiftInvalid(self.id, f"obstacle off the path or off the table: {post}")
        if post["height_m"] > 0.125 or not post["over_free"]:
            raise ShiftInvalid(self.id, "the obstacle cannot be passed over")
        if post["touching"]:
            raise ShiftInvalid(self.id, f"the obstacle appeared touching {post['touching']}")
