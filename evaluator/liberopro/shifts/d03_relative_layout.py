"""D03 relative layout (Condition, runtime, trigger approach): while the gripper approaches the
target, before contact, the target swaps places with a non-target object (``docs/definition.md``,
"Runtime shifts").

Partners, units and the acceptance rules are S03's (:mod:`liberopro.shifts._swap`,
:mod:`liberopro.shifts.s03_relative_layout`); at run time the two units must also stay
:data:`CLEARANCE_M` away from the robot (the gripper hovers near the target's old place, where
the partner lands). When every partner is refused and at least one only because of the robot,
the swap waits for the arm (:class:`liberopro.shifts.base.ShiftDeferred`, at most
``MAX_DELAY_STEPS`` steps).

Post-condition, measured at the moment of the swap: each unit's bottom object is at the other's
former place (teleport: within 1 mm, re-measured from the simulator), nothing interpenetrates,
and neither touches the robot.

Defaults: partners in random order; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`).
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import SWAP_ROBOT_CLEARANCE_M as CLEARANCE_M
from liberopro.catalog.condition import RuntimeRelativeLayoutParams
from liberopro.shifts._placement import Blocked
from liberopro.shifts._swap import swap
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid
from liberopro.shifts.s03_relative_layout import no_partner_reason

#: Least distance (m) kept between the swapped objects and the robot.


class RuntimeRelativeLayout(RuntimeShift[RuntimeRelativeLayoutParams]):
    spec = SPECS["D03"]

    @classmethod
    def applicable(cls, ref, sem):
        return no_partner_reason(ref, sem)

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene, sem = ctx.scene, ctx.sem
        eef = scene.eef_pos()
        try:
            sw = swap(scene, sem, self.params.partners, clearance_m=CLEARANCE_M)
        except Blocked as exc:  # the gripper near a unit's new place: it moves on (bounded delay)
            raise ShiftDeferred(self.id, str(exc)) from exc
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        t_bottom, p_bottom = sw.target_unit[0], sw.partner_unit[0]
        off = {}
        for me, other in ((t_bottom, p_bottom), (p_bottom, t_bottom)):
            now = scene.object_pose(me)[0]
            off[me] = round(float(np.linalg.norm(now[:2] - np.array(sw.start[other][:2]))), 5)
        target_now = scene.object_pose(sem.target)[0]
        measured = {
            "off_place_m": off,
            "swap_distance_m": round(
                float(np.linalg.norm(np.array(sw.start[t_bottom][:2]) - sw.start[p_bottom][:2])), 4
            ),
            "eef_to_target_before_m": round(float(np.linalg.norm(eef - np.array(sw.start[sem.target]))), 4),
            "eef_to_target_after_m": round(float(np.linalg.norm(eef - target_now)), 4),
        }
        self.applied = {"object": sem.target, **sw.as_record(), "post_condition": measured}
        if max(off.values()) > 1e-3:
            raise ShiftInvalid(self.id, f"swapped objects are off their new places by {off}")
