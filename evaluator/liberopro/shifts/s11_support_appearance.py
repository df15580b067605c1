"""S11 support appearance (Environment, static): the texture and colour of the surface the task
happens on changed (``docs/definition.md``, "Static shifts").

The support is the ground body under the target (:func:`ground_below`): the table (its top and
legs) in LIBERO-Goal, -Spatial and -10, the floor in LIBERO-Object, whose objects stand on it.
Every drawn geom of it takes a :class:`Look` (:mod:`liberopro.shifts._appearance`): another
arena texture tinted with a colour, or a flat colour. Only appearance fields change; the table's
geometry, friction and every physical property stay LIBERO's.

S13 changes the floor and the walls; where the floor is the support (LIBERO-Object), S13 leaves
it to this shift, so the two never edit the same surface.

Defaults: texture order a random permutation of (none, planks, wood, plaster), the first one
that is not already the support's texture applies; tint with uniform hue, saturation 0.35-0.75,
value 0.6-1.0.

Applicability: every task.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.environment import MIN_SUPPORT_CHANGE, MIN_SUPPORT_SHARE, SupportAppearanceParams
from liberopro.shifts._appearance import (
    Renders,
    apply_look,
    change_problem,
    ground_below,
    visual_geoms,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

#: Least mean change of the support's pixels in the third-person view (grey levels, 0-255).
#: Least share of the third-person view the support must cover for the change to be measured.


def support_geoms(scene, target: str) -> tuple[int, list[int]]:
    """(root body, drawn geoms) of the support under ``target``; raises ``ValueError``."""
    root = ground_below(scene, target)
    if root < 0:
        raise ValueError(f"no table or floor found under {target}")
    return root, visual_geoms(scene, {root})


class SupportAppearance(Shift[SupportAppearanceParams]):
    spec = SPECS["S11"]

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene = ctx.scene
        try:
            root, geoms = support_geoms(scene, ctx.sem.target)
            renders = Renders(scene)
            edit = apply_look(scene, geoms, self.params.look)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        measured = renders.measure({"support": geoms})
        self.applied = {"support": scene.entity_name(root), **edit, "post_condition": measured}
        why = change_problem(measured, "support", MIN_SUPPORT_CHANGE, MIN_SUPPORT_SHARE)
        if why:
            raise ShiftInvalid(self.id, why)
