"""S04 approach constraint (Condition, static): a low blocker beside the target closes one
approach side; a top grasp stays possible (``docs/definition.md``, "Static shifts").

Realisation: a static box (no joint: LIBERO's init states still fit), ``thickness_m`` thick and
``height_m`` high, stands on the surface the target's stack stands on (the table, the floor or
a fixture top), parallel to the stack's side ``side`` at ``gap_m`` from its bounding box, and
reaches ``overhang_m`` beyond the stack at both ends; where the scene leaves no room for that, a
shorter blocker (at least 60% of the side) or one slid along the side (:data:`LAYOUTS`). Sides are named from the robot: ``near``
faces the robot base, ``far`` the other way, ``left``/``right`` are the robot's left and
right. The drawn side is tried first, then the others (the record says which one).

Defaults: side uniform over the four; gap 1-3 cm; height 3-5 cm; thickness 2 cm; overhang
0-2 cm.

Applicability: a movable target (pick and place or push); not a target inside a drawer
(LIBERO-Spatial task 4: no surface beside it at its level) and not an articulated fixture.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import SIDES, ApproachParams
from liberopro.shifts._props import (
    PropShape,
    check_spot_swept,
    half_extent_along,
    moved_objects,
    object_positions,
    place_prop,
    prop_contacts,
    prop_record,
    ray,
    resize_primitive,
    surface_below,
    target_stack,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant

PROP = "liberopro_prop_s04_blocker"
#: Blocker layouts tried on a side, in order: (fraction of the stack's side it spans, slide along
#: the side as a fraction of the stack's half-width). It always spans at least 60% of the side.
LAYOUTS = (
    (1.0, 0.0),
    (1.0, 0.25),
    (1.0, -0.25),
    (0.8, 0.0),
    (0.8, 0.4),
    (0.8, -0.4),
    (0.6, 0.0),
    (0.6, 0.5),
    (0.6, -0.5),
)
#: A top grasp needs this much free space above the target (m).
TOP_CLEARANCE_M = 0.15


def side_direction(scene, centre_xy: np.ndarray, side: str) -> np.ndarray:
    """Unit horizontal vector from the target toward its ``side`` (named from the robot)."""
    to_robot = scene.body_pos(scene.robot_root())[:2] - centre_xy
    near = to_robot / max(np.linalg.norm(to_robot), 1e-9)
    left = np.array([near[1], -near[0]])  # the robot faces -near; its left is -near turned +90 deg
    return {"near": near, "far": -near, "left": left, "right": -left}[side]


class ApproachConstraint(Shift[ApproachParams]):
    spec = SPECS["S04"]

    @classmethod
    def applicable(cls, ref, sem):
        if not sem.target_is_movable:
            return "the target is an articulated fixture: there is no object to grasp from the top"
        if sem.referring.relation == "in":
            return "the target starts inside a drawer: there is no surface beside it at its level"
        return None

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(props=(PropSpec(PROP, "box", (0.01, 0.05, 0.02), (0.55, 0.42, 0.3, 1.0)),))

    def on_settled(self, ctx: EpisodeContext) -> bool:
        scene, p = ctx.scene, self.params
        stack = target_stack(scene, ctx.sem)
        centre = stack.centre_xy
        roots = {scene.root_body(n) for n in stack.names}
        order = [p.side] + [s for s in SIDES if s != p.side]
        reasons: list[str] = []
        for side in order:
            u = side_direction(scene, centre, side)
            perp = np.array([-u[1], u[0]])
            ext_u = half_extent_along(stack.lo, stack.hi, centre, u)
            ext_perp = max(
                half_extent_along(stack.lo, stack.hi, centre, perp),
                half_extent_along(stack.lo, stack.hi, centre, -perp),
            )
            yaw = math.degrees(math.atan2(u[1], u[0]))
            blockers: set[str] = set()
            for cover, slide in LAYOUTS:
                half = (p.thickness_m / 2, cover * ext_perp + p.overhang_m, p.height_m / 2)
                xy = centre + u * (ext_u + p.gap_m + p.thickness_m / 2) + perp * slide * ext_perp
                spot = check_spot_swept(
                    scene,
                    xy,
                    half[:2],
                    yaw,
                    p.height_m,
                    stack.base_z,
                    clearance=min(0.008, 0.8 * p.gap_m),
                    support=stack.base_support,
                )
                if not spot.free:
                    blockers |= set(spot.blockers)
                    continue
                resize_primitive(scene, PROP, half)
                place_prop(scene, PROP, xy, yaw, spot.surface_z, PropShape(half[:2], (0.0, 0.0), half[2], 2 * half[2]))
                scene.refresh()
                self._stack, self._u, self._roots = stack, u, roots
                self._before = object_positions(scene)
                self.applied = {
                    "side": side,
                    "sides_tried": len(reasons) + 1,
                    "stack": stack.names,
                    "covers_side": round(cover, 2),
                    "slid_m": round(slide * ext_perp, 4),
                    "size_m": [round(2 * h, 4) for h in half],
                    **prop_record(scene, PROP),
                }
                return True
            reasons.append(f"{side}: {', '.join(sorted(blockers))}")
        raise ShiftInvalid(self.id, "no free side beside the target: " + "; ".join(reasons))

    def verify(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        stack = target_stack(scene, ctx.sem)
        rec = prop_record(scene, PROP)
        lo, hi = np.array(rec["aabb_min"]), np.array(rec["aabb_max"])
        centre = stack.centre_xy
        body = scene.data.xpos[scene.props[PROP]]
        # near face of the blocker (its centre along u minus half its thickness) to the stack's box
        near_face = float(np.dot(body[:2] - centre, self._u)) - float(
            scene.model.geom_size[
                [g for g in range(scene.model.ngeom) if scene.model.geom_bodyid[g] == scene.props[PROP]][0]
            ][0]
        )
        gap = near_face - half_extent_along(stack.lo, stack.hi, centre, self._u)
        surface, _ = surface_below(scene, body[:2], top_z=float(lo[2]) + 0.005, ignore={scene.props[PROP]})
        # free space above the target: rays up from just above its top
        blocked_above = []
        for dx in (-0.02, 0.0, 0.02):
            for dy in (-0.02, 0.0, 0.02):
                start = np.array([centre[0] + dx, centre[1] + dy, stack.hi[2] + 0.005])
                dist, gid = ray(scene, start, np.array([0, 0, 1.0]))
                if gid >= 0 and dist < TOP_CLEARANCE_M and scene.entity_of_geom(gid) != scene.robot_root():
                    blocked_above.append(scene.entity_name(scene.entity_of_geom(gid)))
        touching = prop_contacts(scene, [PROP])
        moved = moved_objects(scene, self._before)
        post: dict[str, Any] = {
            "gap_m": round(gap, 4),
            "bottom_above_surface_m": round(float(lo[2] - surface), 4),
            "top_minus_target_top_m": round(float(hi[2] - stack.hi[2]), 4),
            "blocked_above": sorted(set(blocked_above)),
            "touching": touching,
            "objects_moved_m": moved,
        }
        self.applied["post_condition"] = post
        if abs(gap - p.gap_m) > 0.005:
            raise ShiftInvalid(self.id, f"blocker stands {gap:.3f} m from the target, stated {p.gap_m:.3f} m")
        if abs(post["bottom_above_surface_m"]) > 0.003:
            raise ShiftInvalid(self.id, f"blocker bottom is {post['bottom_above_surface_m']} m off its support")
        if blocked_above:
            raise ShiftInvalid(self.id, f"no top grasp: {blocked_above} above the target")
        if touching or moved:
            raise ShiftInvalid(self.id, f"blocker touches {touching} / moved objects {moved}")
