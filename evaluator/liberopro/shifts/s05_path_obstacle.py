"""S05 path obstacle (Condition, static): an obstacle on the straight path between the target and
the goal; going over or around it stays possible (``docs/definition.md``, "Static shifts").

Realisation: a static box (no joint) on the table / floor, ``thickness_m`` along the path and
``width_m`` across it, ``height_m`` high, centred on the straight horizontal segment from the
target's stack to the goal region at ``fraction`` of its length (the drawn fraction first,
then others from 0.25 to 0.75; where no fraction leaves room, thinner: 2 cm, then 1.5 cm, then
narrower: 8 cm, then 6 cm; the record gives the size used). It
keeps 1 cm clear of every object, of the fixtures in any position of their drawers and doors,
and of the target and the receiver.

* Over: the obstacle is at most 12 cm high and nothing stands above it for 35 cm.
* Around: a lane 10 cm wide beside the obstacle is free on at least one side (measured, with
  the side recorded).

Defaults: fraction 0.4-0.6; height 6-12 cm; width 8-14 cm; thickness 3-5 cm.

Applicability: tasks with a goal region (pick and place, push); not articulated goals (no path
between a target and a goal).
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import PathObstacleParams
from liberopro.shifts._props import (
    PropShape,
    check_spot,
    check_spot_swept,
    goal_xy,
    ground_level,
    moved_objects,
    object_positions,
    place_prop,
    prop_contacts,
    prop_record,
    ray,
    resize_primitive,
    segment_distance,
    target_stack,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant

PROP = "liberopro_prop_s05_obstacle"
#: Lane that must stay free beside the obstacle for going around (m).
LANE_M = 0.10
#: Free height above the obstacle for going over (m).
OVER_CLEARANCE_M = 0.35
FRACTIONS = (0.0, 0.1, -0.1, 0.2, -0.2, 0.3, -0.3)
#: Thinner obstacles tried where the stated one does not fit between target and goal (m).
THIN_M = (0.02, 0.015)
#: Narrower obstacles tried after that (m).
NARROW_M = (0.08, 0.06)
#: Clearance kept from every object and fixture (m).
CLEARANCE_M = 0.01


def obstacle_variant(prop: str) -> SceneVariant:
    return SceneVariant(props=(PropSpec(prop, "box", (0.02, 0.05, 0.04), (0.3, 0.45, 0.6, 1.0)),))


def lanes_free(scene, xy: np.ndarray, along: np.ndarray, half: tuple[float, float, float], level_z: float) -> list[str]:
    """Sides ("left"/"right" of the path direction ``along``) with a free lane of
    :data:`LANE_M` beside an obstacle of half-extents ``half`` at ``xy``."""
    across = np.array([-along[1], along[0]])
    yaw = math.degrees(math.atan2(along[1], along[0]))
    free = []
    for name, sign in (("left", 1.0), ("right", -1.0)):
        centre = xy + sign * across * (half[1] + 0.005 + LANE_M / 2)
        spot = check_spot(scene, centre, (half[0] + 0.02, LANE_M / 2), yaw, 0.15, level_z, clearance=0.0)
        if spot.free:
            free.append(name)
    return free


def over_free(scene, xy: np.ndarray, top_z: float) -> bool:
    """Nothing but the robot above the obstacle's top for :data:`OVER_CLEARANCE_M`."""
    for dx in (-0.02, 0.0, 0.02):
        for dy in (-0.02, 0.0, 0.02):
            dist, gid = ray(scene, np.array([xy[0] + dx, xy[1] + dy, top_z + 0.002]), np.array([0, 0, 1.0]))
            if (
                gid >= 0
                and dist < OVER_CLEARANCE_M
                and scene.entity_of_geom(gid) not in (scene.robot_root(), *scene.props.values())
            ):
                return False
    return True


def place_on_path(
    scene,
    prop: str,
    a: np.ndarray,
    b: np.ndarray,
    fractions: list[float],
    half: tuple[float, float, float],
    clearance: float,
    ignore: AbstractSet[int] = frozenset(),
    moving: frozenset[str] = frozenset(),
) -> tuple[np.ndarray, float, tuple, list[str]]:
    """Stand the obstacle ``prop`` on segment ``a`` -> ``b`` at the first free fraction, with the
    stated size first, then thinner (:data:`THIN_M`), then narrower (:data:`NARROW_M`). Returns (xy, fraction, half
    extents used, reasons of the refused candidates); raises ``ValueError`` with them when none
    is free: :class:`~liberopro.shifts._placement.Blocked` when some spot was refused only by
    entities named in ``moving`` (at run time: the robot, the carried target)."""
    from liberopro.shifts._placement import Blocked

    along = (b - a) / max(np.linalg.norm(b - a), 1e-9)
    yaw = math.degrees(math.atan2(along[1], along[0]))
    level, _ = ground_level(scene)
    reasons: list[str] = []
    blocked_by_moving = False
    sizes = [
        (t / 2, w / 2)
        for w in [2 * half[1]] + [w for w in NARROW_M if w < 2 * half[1]]
        for t in [2 * half[0]] + [t for t in THIN_M if t < 2 * half[0]]
    ]
    for hx, hy in sizes:
        size = (hx, hy, half[2])
        thickness = 2 * hx
        for f in fractions:
            xy = a + f * (b - a)
            spot = check_spot_swept(scene, xy, size[:2], yaw, 2 * size[2], level, clearance=clearance, ignore=ignore)
            if spot.free:
                resize_primitive(scene, prop, size)
                place_prop(scene, prop, xy, yaw, spot.surface_z, PropShape(size[:2], (0.0, 0.0), size[2], 2 * size[2]))
                scene.refresh()
                return xy, f, size, reasons
            reasons.append(f"{f:.2f}, {thickness:.3f} x {2 * hy:.3f} m: {', '.join(spot.blockers)}")
            blocked_by_moving |= {b.removesuffix(" (when opened)") for b in spot.blockers} <= moving
    raise (Blocked if blocked_by_moving else ValueError)("no free spot on the path: " + "; ".join(reasons))


class PathObstacle(Shift[PathObstacleParams]):
    spec = SPECS["S05"]

    @classmethod
    def applicable(cls, ref, sem):
        if sem.receiver is None:
            return "the goal is an articulation: no path from a target to a goal region"
        return None

    @classmethod
    def scene_variant(cls, params):
        return obstacle_variant(PROP)

    def on_settled(self, ctx: EpisodeContext) -> bool:
        scene, p = ctx.scene, self.params
        a = target_stack(scene, ctx.sem).centre_xy
        b = goal_xy(scene, ctx.sem)
        if b is None:  # applicable() refuses tasks without a receiver
            raise ShiftInvalid(self.id, "the task has no goal region")
        half = (p.thickness_m / 2, p.width_m / 2, p.height_m / 2)
        fractions = [f for f in (p.fraction + d for d in FRACTIONS) if 0.25 <= f <= 0.75]
        try:
            xy, f, half, reasons = place_on_path(scene, PROP, a, b, fractions, half, clearance=CLEARANCE_M)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self._a, self._b, self._half = a, b, half
        self._before = object_positions(scene)
        self.applied = {
            "fraction": round(f, 3),
            "fractions_tried": len(reasons) + 1,
            "path_from": np.round(a, 4).tolist(),
            "path_to": np.round(b, 4).tolist(),
            "size_m": [round(2 * h, 4) for h in half],
            **prop_record(scene, PROP),
        }
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        scene = ctx.scene
        pos = scene.data.xpos[scene.props[PROP]].copy()
        along = (self._b - self._a) / np.linalg.norm(self._b - self._a)
        level, _ = ground_level(scene)
        bottom = pos[2] - self._half[2]
        top = pos[2] + self._half[2]
        post: dict[str, Any] = {
            "off_path_m": round(segment_distance(pos[:2], self._a, self._b), 4),
            "bottom_above_surface_m": round(float(bottom - level), 4),
            "height_m": round(float(top - level), 4),
            "over_free": over_free(scene, pos[:2], float(top)),
            "around_free_sides": lanes_free(scene, pos[:2], along, self._half, level),
            "touching": prop_contacts(scene, [PROP]),
            "objects_moved_m": moved_objects(scene, self._before),
        }
        self.applied["post_condition"] = post
        if post["off_path_m"] > 0.001:
            raise ShiftInvalid(self.id, f"obstacle is {post['off_path_m']} m off the path")
        if abs(post["bottom_above_surface_m"]) > 0.003:
            raise ShiftInvalid(self.id, f"obstacle bottom is {post['bottom_above_surface_m']} m off the table")
        if post["height_m"] > 0.125 or not post["over_free"]:
            raise ShiftInvalid(self.id, "the obstacle cannot be passed over")
        if post["touching"] or post["objects_moved_m"]:
            raise ShiftInvalid(self.id, f"obstacle touches {post['touching']} / moved {post['objects_moved_m']}")
