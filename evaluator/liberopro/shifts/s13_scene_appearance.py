"""S13 scene appearance (Environment, static): the floor and wall textures changed
(``docs/definition.md``, "Static shifts").

Surfaces: the room around the task. ``floor``: the arena's floor geom. ``walls``: every other
drawn geom that belongs to neither the support (the table), a BDDL object or fixture, nor the
robot: the arena's walls (``wall_*``) and the room backdrops LIBERO-10 puts in front of them
(the kitchen cabinets of the kitchen scenes, the living-room backdrop, the study's painting,
shelf and plant), which are what the third-person camera sees of the walls there. Each of the
two takes its own :class:`Look` (:mod:`liberopro.shifts._appearance`): another arena texture
tinted with a colour, or a flat colour. Where the floor is the support of the task
(LIBERO-Object: the objects stand on it), the floor belongs to S11 and this shift changes the
walls only, so S11 and S13 never edit the same surface.

Defaults: for each of floor and walls, texture order a random permutation of (none, planks, wood,
plaster), the first one that is not already the surface's texture applies; tint with uniform hue,
saturation 0.35-0.75, value 0.6-1.0.

Applicability: every task.
"""

from __future__ import annotations

import mujoco

from liberopro.catalog import SPECS
from liberopro.catalog.environment import MIN_SCENE_CHANGE, MIN_SCENE_SHARE, SceneAppearanceParams
from liberopro.shifts._appearance import (
    Renders,
    apply_look,
    change_problem,
    ground_below,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

#: Least mean change of the floor-and-wall pixels in the third-person view (grey levels).
#: Least share of the third-person view the changed surfaces must cover.


def scene_surfaces(scene, target: str) -> dict[str, list[int]]:
    """Drawn geoms of the floor and of the walls and backdrops (module docstring), without the
    support under ``target``."""
    m = scene.model
    support = ground_below(scene, target)
    excluded = set(scene.inner.obj_body_id.values()) | {scene.robot_root(), support}
    out: dict[str, list[int]] = {"floor": [], "walls": []}
    for g in range(m.ngeom):
        if m.geom_group[g] == 0 or m.geom_rgba[g][3] == 0 or scene.entity_of_geom(g) in excluded:
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        out["floor" if name == "floor" else "walls"].append(g)
    return out


class SceneAppearance(Shift[SceneAppearanceParams]):
    spec = SPECS["S13"]

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        surfaces = scene_surfaces(scene, ctx.sem.target)
        renders = Renders(scene)
        edits = {}
        try:
            for name, look in (("floor", p.floor), ("walls", p.walls)):
                if surfaces[name]:
                    edits[name] = apply_look(scene, surfaces[name], look)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        measured = renders.measure({"scene": surfaces["floor"] + surfaces["walls"]})
        self.applied = {"surfaces": edits, "post_condition": measured}
        why = change_problem(measured, "scene", MIN_SCENE_CHANGE, MIN_SCENE_SHARE)
        if why:
            raise ShiftInvalid(self.id, why)
