"""S10 object appearance (Environment, static): the target's colour and texture changed
(``docs/definition.md``, "Static shifts").

Realisation (:mod:`liberopro.shifts._appearance`): every drawn geom of the target (an object, or
the fixture of an articulated task: the cabinet, the stove) takes a :class:`Look`: a flat colour
(material removed) or an arena texture (planks, light wood, plaster) tinted with a colour. Shape,
mass and friction are untouched.

Look-alikes: objects of the target's category (the second black bowl of LIBERO-Spatial, the
second moka pot) take the same look. Otherwise a recoloured target would be the one bowl that is
no longer black, and "the black bowl next to the plate" would name the other one; with both
recoloured, the instruction tells them apart by position only, as in the original scene. The
instruction's colour words ("black bowl", "white mug") are LIBERO's fixed wording: what the shift
measures is whether a policy still finds the object when its colour and texture differ.

Defaults: the texture order is a random permutation of (none, planks, wood, plaster); the colour
has a uniform hue, saturation 0.45-0.85, value 0.55-1.0.

Applicability: every task.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.environment import MIN_TARGET_CHANGE, ObjectAppearanceParams
from liberopro.shifts._appearance import (
    Renders,
    apply_look,
    change_problem,
    visual_geoms,
)
from liberopro.shifts._placement import category
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

#: Least mean change of the target's pixels in the third-person view (grey levels, 0-255).


class ObjectAppearance(Shift[ObjectAppearanceParams]):
    spec = SPECS["S10"]

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene = ctx.scene
        target = ctx.sem.target
        alikes = [o for o in scene.object_names() if o != target and category(o) == category(target)]
        geoms = visual_geoms(scene, {scene.root_body(n) for n in [target, *alikes]})
        renders = Renders(scene)
        try:
            edit = apply_look(scene, geoms, self.params.look)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        measured = renders.measure({"target": geoms})
        self.applied = {"object": target, "lookalikes": alikes, **edit, "post_condition": measured}
        why = change_problem(measured, "target", MIN_TARGET_CHANGE)
        if why:
            raise ShiftInvalid(self.id, why)
