"""S01 object pose (Condition, static): the target object starts 8-15 cm away from its stored
position, turned up to 45 deg about z (``benchmark.md``, static table).

Applies to every task: a movable target moves with what it rests on (see
:mod:`liberopro.shifts._placement`); the fixture target of an articulated task (the cabinet
whose drawer is to be opened, the stove to be turned on) moves as a fixture."""

from __future__ import annotations

from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts._placement import check_rests, relocate
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid, ShiftParams, uniform


class ObjectPoseParams(ShiftParams):
    """``distance_m``: horizontal move (m); ``direction_deg``: preferred direction in the world
    xy plane (the realisation tries it first, then its neighbours in 30 deg steps);
    ``yaw_deg``: turn about world z."""

    distance_m: float = Field(ge=0.0, le=0.5)
    direction_deg: float = Field(ge=0.0, lt=360.0)
    yaw_deg: float = Field(ge=-180.0, le=180.0)


@register
class ObjectPose(Shift):
    id = "S01"
    name = "object pose"
    category = "Condition"
    kind = "static"
    summary = "target object moved 8-15 cm and turned up to 45 deg about z"
    post_condition = ("target moved >= the stated distance - 1 cm, rests at its height (+-1 cm) on its "
                      "support after settling, interpenetrates nothing (> 3 mm)")
    Params = ObjectPoseParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        return ObjectPoseParams(
            distance_m=uniform(rng, 0.08, 0.15), direction_deg=uniform(rng, 0, 360, 1), yaw_deg=uniform(rng, -45, 45, 1)
        )

    @classmethod
    def default_params(cls):
        return {"distance_m": [0.08, 0.15], "direction_deg": [0, 360], "yaw_deg": [-45, 45]}

    def on_settled(self, ctx: EpisodeContext) -> bool:
        p = self.params
        try:
            self._reloc = relocate(ctx.scene, ctx.sem, p.distance_m, p.direction_deg, p.yaw_deg)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self.applied = {"object": ctx.sem.target, **self._reloc.as_record()}
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        try:
            self.applied["post_condition"] = check_rests(ctx.scene, ctx.sem, self._reloc, self.params.distance_m - 0.01)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
