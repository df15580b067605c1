"""S03 relative layout (Condition, static): the target swaps places with a non-target object
(``docs/definition.md``, "Static shifts").

Realisation (:mod:`liberopro.shifts._swap`): the target's unit (the target, the movable objects
under it, the objects on it) and a partner's unit exchange their horizontal positions; heights
and orientations stay each object's own. The partner rests on the same support as the target's
unit, has a comparable footprint (ratio <= 2), is no look-alike of the target and not the
receiver; LIBERO-Spatial's referring expression must still single the target out. Partners are
tried in the order of ``partners`` (a random order of the task's candidates); the first that fits
without interpenetration is used.

Post-condition after 10 more settle steps: each unit's bottom object lies within 2 cm of the
other's former place, within 1 cm of its own former height, on the same support, nothing
interpenetrates either unit (> 3 mm), and no other object moved more than 1 cm. At the new
places nothing may even touch (penetration 0) when the swap is made.

Not applicable where the target is a fixture (open a drawer, turn on the stove) or no object
qualifies as a partner (the bowl alone in the drawer, on the stove or on the cabinet of
LIBERO-Spatial tasks 4, 7 and 9; the second moka pot of LIBERO-10 task 8 is a look-alike), or
none of those has a comparable footprint (LIBERO-10 task 2: only the frypan, task 3: only the
wine bottle for the bowl; :data:`~liberopro.shifts._swap.FOOTPRINT_M`).
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.condition import RelativeLayoutParams
from liberopro.shifts._swap import MAX_FOOTPRINT_RATIO, check_swapped, swap, swap_candidates
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid


def no_partner_reason(ref, sem) -> str | None:
    if not sem.target_is_movable:
        return "the target is a fixture"
    partners, rejected = swap_candidates(ref, sem)
    if partners:
        return None
    if rejected:
        return "no partner of comparable footprint (ratio <= {}): {}".format(
            MAX_FOOTPRINT_RATIO, "; ".join(f"{o}: {r}" for o, r in rejected.items())
        )
    return (
        "no object rests on the target's support that is not the receiver or a look-alike of the target "
        "(BDDL initial state)"
    )


class RelativeLayout(Shift[RelativeLayoutParams]):
    spec = SPECS["S03"]

    @classmethod
    def applicable(cls, ref, sem):
        return no_partner_reason(ref, sem)

    def on_settled(self, ctx: EpisodeContext) -> bool:
        try:
            self._swap = swap(ctx.scene, ctx.sem, self.params.partners)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self.applied = {"object": ctx.sem.target, **self._swap.as_record()}
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        try:
            self.applied["post_condition"] = check_swapped(ctx.scene, self._swap)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
