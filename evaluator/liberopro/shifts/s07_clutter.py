"""S07 clutter (Environment, static): 2-4 unrelated objects in free table space, clear of the task
path (``docs/definition.md``, "Static shifts").

Realisation: static copies (no joint) of LIBERO objects (``libero.libero.envs.objects``) from
categories absent from the scene and not named by the instruction
(:func:`liberopro.shifts._objects.clutter_pool`: mugs, books, ramekins, cans,
sauce bottles, boxes, cartons), each standing upright on the table / floor at a spot
drawn with the episode's generator inside the scene's workspace box (the objects' and fixtures'
box widened by 10 cm, within the robot's reach), turned at random about z, 1.5 cm clear of
everything (fixtures in any position of their drawers and doors included) and at least
``path_clearance_m`` (plus its own half-size) from the task path (gripper -> target -> goal),
and wholly inside the third-person view.

Defaults: 2-4 objects; path clearance 6 cm. Parameters fix the objects; their spots depend on
the episode's layout and are drawn from the episode's generator (recorded).

Applicability: every task (the pool always holds at least two categories absent from a scene).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import ClutterParams
from liberopro.shifts._objects import clutter_pool
from liberopro.shifts._placement import REACH_M, workspace_box
from liberopro.shifts._props import (
    check_spot_swept,
    distance_to_path,
    ground_level,
    in_view,
    moved_objects,
    object_positions,
    park_one,
    place_prop,
    prop_contacts,
    prop_record,
    prop_shape,
    task_path,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant

#: Spots drawn per object before giving up.
TRIES = 400
#: Clearance from every other body (m).
CLEARANCE_M = 0.015


def prop_name(i: int) -> str:
    return f"liberopro_prop_s07_clutter{i}"


class Clutter(Shift[ClutterParams]):
    spec = SPECS["S07"]

    @classmethod
    def applicable(cls, ref, sem):
        if len(clutter_pool(ref)) < 2:
            return "fewer than two object categories absent from the scene"
        return None

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(props=tuple(PropSpec(prop_name(i), f"object:{t}") for i, t in enumerate(params.objects)))

    def on_settled(self, ctx: EpisodeContext) -> bool:
        scene, p = ctx.scene, self.params
        level, _ = ground_level(scene)
        lo, hi = workspace_box(scene, {})
        base = scene.body_pos(scene.robot_root())[:2]
        path = task_path(scene, ctx.sem)
        placed = []
        self._shapes = {}
        for i, typ in enumerate(p.objects):
            name = prop_name(i)
            shape = self._shapes[name] = prop_shape(scene, name)
            radius = math.hypot(*shape.half_xy)
            for k in range(TRIES):
                xy = ctx.rng.uniform(lo, hi)
                yaw = float(ctx.rng.uniform(-180, 180))
                if np.linalg.norm(xy - base) > REACH_M or distance_to_path(xy, path) < p.path_clearance_m + radius:
                    continue
                spot = check_spot_swept(scene, xy, shape.half_xy, yaw, shape.height, level, clearance=CLEARANCE_M)
                if spot.free:
                    place_prop(scene, name, xy, yaw, spot.surface_z, shape)
                    if not in_view(scene, name):
                        park_one(scene, name)
                        continue
                    placed.append({"type": typ, "draws": k + 1, **prop_record(scene, name)})
                    break
            else:
                raise ShiftInvalid(
                    self.id,
                    f"no free table space for {typ} ({len(placed)} of {len(p.objects)} "
                    f"placed after {TRIES} draws each)",
                )
        scene.refresh()
        self._before = object_positions(scene)
        self._path = path
        self.applied = {"objects": placed}
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        level, _ = ground_level(scene)
        names = [prop_name(i) for i in range(len(p.objects))]
        per: list[dict[str, Any]] = []
        for name in names:
            rec = prop_record(scene, name)
            shape = self._shapes[name]
            centre = (np.array(rec["aabb_min"])[:2] + np.array(rec["aabb_max"])[:2]) / 2
            per.append(
                {
                    "prop": name,
                    "bottom_above_surface_m": round(float(rec["aabb_min"][2] - level), 4),
                    # footprint distance, conservatively: centre distance minus circumradius
                    "path_distance_m": round(distance_to_path(centre, self._path) - math.hypot(*shape.half_xy), 4),
                }
            )
        post: dict[str, Any] = {
            "objects": per,
            "touching": prop_contacts(scene, names),
            "objects_moved_m": moved_objects(scene, self._before),
        }
        self.applied["post_condition"] = post
        for o in per:
            if o["path_distance_m"] < p.path_clearance_m - 0.01:
                raise ShiftInvalid(self.id, f"{o['prop']} is {o['path_distance_m']} m from the task path")
            if abs(o["bottom_above_surface_m"]) > 0.003:
                raise ShiftInvalid(self.id, f"{o['prop']} bottom is {o['bottom_above_surface_m']} m off the table")
        if post["touching"] or post["objects_moved_m"]:
            raise ShiftInvalid(self.id, f"clutter touches {post['touching']} / moved {post['objects_moved_m']}")
