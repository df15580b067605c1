"""S02 receiver pose (Condition, static): the receiver (the object or fixture the target goes to)
starts 8-15 cm away from its stored position, turned up to 30 deg about z (``docs/definition.md``,
"Static shifts").

Receiver (:func:`receiver_entity`): ``TaskSemantics.receiver``, the owner of the goal region:
the plate, the basket, the bowl of "put the cream cheese in the bowl" (objects); the stove, the
cabinet, the wine rack, the desk caddy, the microwave (fixtures, moved as fixtures: their root
body pose). Objects resting on the receiver move with it; the target never does (it is excluded
from the receiver's group). Look-alikes keep their order (the left plate of LIBERO-10 task 4
stays left of the right one), and LIBERO-Spatial's referring relations, which may use the plate
as an anchor ("the bowl next to the plate"), must still single the target out.

Goal region on the table: in libero_goal task 5, "push the plate to the front of the stove", the
goal region ``main_table_stove_front_region`` is a site of the table, placed in front of the
stove. Moving the table is not a layout change, and moving the stove alone would leave "the front
of the stove" behind, making the instruction false. The receiver there is the stove together with
its front region: the region's site moves rigidly with the stove (a registered model-field edit,
restored at the next episode), so the instruction stays true and LIBERO's unchanged ``On`` check
is evaluated where the front of the stove now is (:data:`TABLE_REGION_ANCHORS`).

Not applicable where the task has no receiver (open a drawer, turn on the stove), or where the
goal region belongs to the table and is not named after a fixture.

Realisation and post-condition: :func:`liberopro.shifts._placement.relocate` on the receiver
(drawn direction first, then its neighbours; where no direction fits at the drawn distance,
shorter ones in 1 cm steps down to ``min_distance_m``, 8 cm, the low end of the benchmark's
range: the cabinet of LIBERO-Goal stands between the wine rack, the plate and the table's edge
and often fits only near 8 cm), 10 more settle steps, then
:func:`~liberopro.shifts._placement.check_rests` on the receiver against the realised distance
(recorded as ``distance_m`` in ``applied``); the target and every other object outside the
receiver's group must not have been disturbed (moved < 1 cm). At the new place the receiver may
not even touch anything but the table (a fixture teleported 1 mm into a bowl kicks it away).

Defaults: distance 8-15 cm (minimum 8 cm), direction uniform, yaw uniform in [-30, 30] deg.
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import ReceiverPoseParams
from liberopro.semantics import TaskSemantics
from liberopro.shifts._placement import Blocked, check_rests, displaced, is_table, relocate, site_world
from liberopro.shifts.base import EpisodeContext, Shift, ShiftDeferred, ShiftInvalid

#: Goal regions that belong to the table but are named after a fixture: region -> the fixture
#: that moves, carrying the region's site with it.
TABLE_REGION_ANCHORS: dict[str, str] = {"main_table_stove_front_region": "flat_stove_1"}
#: The target and every other object outside the receiver's group may move this much (m) while
#: the receiver is moved and the scene re-settles.
UNDISTURBED_M = 0.01


def receiver_entity(sem: TaskSemantics) -> tuple[str, tuple[str, ...]] | str:
    """(entity to move, sites moving with it), or the reason there is no receiver to move."""
    if sem.receiver is None:
        return "the task has no receiver (its goal is an articulation: open, close, turn on)"
    if is_table(sem.receiver):
        region = sem.receiver_region
        anchor = TABLE_REGION_ANCHORS.get(region or "")
        if anchor is None or region is None:
            return f"the goal region {region} belongs to the table and names no fixture"
        return anchor, (region,)
    return sem.receiver, ()


def move_receiver(
    ctx: EpisodeContext,
    shift_id: str,
    distance_m: float,
    direction_deg: float,
    yaw_deg: float,
    min_distance_m: float,
    clearance_m: float = 0.0,
):
    """Relocate the receiver (shared by S02 and D02); raises :class:`ShiftInvalid`, or
    :class:`ShiftDeferred` when no candidate is free only because of the robot or the carried
    target (D02 then retries at the next step; for S02, at the robot's start pose, it is as
    invalid as any other failure)."""
    found = receiver_entity(ctx.sem)
    if isinstance(found, str):
        raise ShiftInvalid(shift_id, found)
    entity, sites = found
    try:
        return relocate(
            ctx.scene,
            ctx.sem,
            distance_m,
            direction_deg,
            yaw_deg,
            entity=entity,
            exclude=(ctx.sem.target,),
            keep_lookalike_order=True,
            sites=sites,
            clearance_m=clearance_m,
            min_distance_m=min(min_distance_m, distance_m),
            contact_tol_m=0.0,
        )
    except Blocked as exc:  # only the arm or the carried target in the way: a runtime move waits
        raise ShiftDeferred(shift_id, str(exc)) from exc
    except ValueError as exc:
        raise ShiftInvalid(shift_id, str(exc)) from exc


def site_positions(ctx: EpisodeContext) -> dict[str, np.ndarray]:
    """World positions of the goal-region sites that move with the receiver."""
    found = receiver_entity(ctx.sem)
    if isinstance(found, str):
        return {}
    model = ctx.scene.inner.sim.model
    return {n: site_world(ctx.scene, model.site_name2id(n))[0] for n in found[1]}


class ReceiverPose(Shift[ReceiverPoseParams]):
    spec = SPECS["S02"]

    @classmethod
    def applicable(cls, ref, sem):
        found = receiver_entity(sem)
        return found if isinstance(found, str) else None

    def on_settled(self, ctx: EpisodeContext) -> bool:
        p = self.params
        self._before = {n: ctx.scene.object_pose(n)[0] for n in ctx.scene.object_names()}
        self._sites_start = site_positions(ctx)
        self._reloc = move_receiver(ctx, self.id, p.distance_m, p.direction_deg, p.yaw_deg, p.min_distance_m)
        self.applied = {"receiver": self._reloc.entity, **self._reloc.as_record()}
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        try:
            measured = check_rests(ctx.scene, ctx.sem, self._reloc, self._reloc.distance_m - 0.01)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        others = {n: p for n, p in self._before.items() if n not in self._reloc.group}
        moved, pushed = displaced(ctx.scene, others, UNDISTURBED_M)
        measured["target_moved_m"] = moved[ctx.sem.target]
        measured["others_moved_max_m"] = max(moved.values(), default=0.0)
        for name, pos in site_positions(ctx).items():
            measured[f"{name}_moved_m"] = round(float(np.linalg.norm(pos[:2] - self._sites_start[name][:2])), 4)
        self.applied["post_condition"] = measured
        if pushed:
            raise ShiftInvalid(
                self.id, "moving the receiver displaced " + ", ".join(f"{n} by {moved[n]:.3f} m" for n in pushed)
            )
