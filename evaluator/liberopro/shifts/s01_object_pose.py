"""S01 object pose (Condition, static): the target object starts 8-15 cm away from its stored
position, turned up to 45 deg about z (``docs/definition.md``, "Static shifts").

Applies to every task: a movable target moves with what it rests on (see
:mod:`liberopro.shifts._placement`); the fixture target of an articulated task (the cabinet
whose drawer is to be opened, the stove to be turned on) moves as a fixture."""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.condition import ObjectPoseParams
from liberopro.shifts._placement import check_rests, relocate
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid


class ObjectPose(Shift[ObjectPoseParams]):
    spec = SPECS["S01"]

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
