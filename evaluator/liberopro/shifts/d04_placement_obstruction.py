"""D04 placement obstruction (Condition, runtime, trigger transport): a small object lands on part
of the goal region while the target is carried to it (``docs/definition.md``, "Runtime shifts").

A documented deviation (``docs/shifts.md``, D04): the definition fires it at placement, when the
carried target comes near the region. There the target (and the hand) hang over the region and
its free area is mostly gone; with the >= 1 cm gap to the target and 2 cm to the robot that
the block needs, no spot was free on most tasks, the episode became invalid, and a competent
policy's D04 rate was measured only on its slow or failing episodes. At transport the target is
lifted and on its way: the region is free, and the block is there before the policy places.

Realisation: a small static block (a box prop, no joint) appears resting on the goal region's
surface at the firing step: the region is the BDDL goal region (its site's box, e.g. the
basket's inside, the stove's cook region, the cabinet top, the microwave's inside) or, when the
goal names an object (the plate), that object's footprint. The block covers ``cover`` of the
region's area (side clamped to 3-7 cm), ``height_m`` high, wholly inside the region, at the
spot farthest from the target (grid of 1 cm), resting on the surface the region's owner
presents there (on its highest point under the block: a basket's weave, a plate's dish are
uneven by up to 4 cm), touching neither the robot nor the carried target (horizontal gap >= 1 cm from
the target's footprint; every ray over its column meets only that surface).

Post-condition: where the target's footprint (its horizontal bounding box at rest, measured at
reset by :meth:`PlacementObstruction.check_at_reset`, so a policy cannot void the draw by tilting
the target) fits on the region, the region's area left free by the block
holds it (issue 22: a block that left 0.022 m2 of a plate free for a 0.025 m2 bowl made the bowl
rest on the block, an unsolvable instance; a target larger than the region, the bowl on the
stove's 0.0225 m2 cook region, overhangs it anyway and rests on the owner around the block, and
the oracle solves it; checked at reset, before the policy acts: a failure is ``shift_invalid``,
the draw is redrawn at generation, and the check does not depend on where the robot is); measured
at the firing step, the block stands on the region's owner (+-3 mm)
inside the region, covers 10-50% of the region's area (the uncovered area and the target's
footprint are recorded: LIBERO's ``On`` holds for a target resting partly on the block and
partly on the receiver), no simulated contact, >= 2 cm from the robot.

When no spot is free and at least one was refused only by the robot or the carried target
(in its column, too close), the block waits for them to move on
(:class:`liberopro.shifts.base.ShiftDeferred`, at most ``MAX_DELAY_STEPS`` steps); a region too
small for the block, or covered by fixtures, makes the episode invalid at once.

Defaults: trigger transport; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`); cover 0.15-0.3; height 2-3 cm. Not applicable
where the goal region moves with a drawer (a static block cannot ride in it: libero_goal 3,
libero_10 3) or to a push (the pushed plate is larger than its goal region: any block on it
blocks the push: libero_goal 5), nor to articulated goals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.condition import ObstructionParams
from liberopro.shifts._props import (
    RAY_STEP_M,
    PropShape,
    check_spot,
    entity_aabb,
    footprint_points,
    park_one,
    place_prop,
    prop_contacts,
    prop_record,
    rect_gap,
    resize_primitive,
    robot_clearance,
    surface_below,
)
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftDeferred, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant

PROP = "liberopro_prop_d04_block"
#: Side of the block (m): clamped.
SIDE_M = (0.03, 0.07)
#: Horizontal gap kept from the carried target (m).
TARGET_GAP_M = 0.01
ROBOT_CLEARANCE_M = 0.02
#: Clearance of the block's column from anything but the region's owner (m).
CLEARANCE_M = 0.005
#: How uneven the surface under the block may be (m): a basket's weave, a plate's dish.
UNEVEN_M = 0.04
_DRAWER_REGIONS = ("_top_region", "_middle_region", "_bottom_region")


def region_rect(scene, sem) -> tuple[np.ndarray, np.ndarray, float, float, int]:
    """The goal region as (centre xy, half extents (2,), yaw deg, top z, owner root body)."""
    region = sem.receiver_region
    if region in scene.inner.object_sites_dict:
        sid = scene.inner.sim.model.site_name2id(region)
        mat = scene.data.site_xmat[sid].reshape(3, 3)
        half = np.array(scene.model.site_size[sid][:2])
        top = float(scene.data.site_xpos[sid][2] + scene.model.site_size[sid][2])
        yaw = math.degrees(math.atan2(mat[1, 0], mat[0, 0]))
        owner = int(scene.model.body_rootid[scene.model.site_bodyid[sid]])
        return np.array(scene.data.site_xpos[sid][:2]), half, yaw, top, owner
    lo, hi = entity_aabb(scene, [sem.receiver])
    return (lo[:2] + hi[:2]) / 2, (hi[:2] - lo[:2]) / 2, 0.0, float(hi[2]), scene.root_body(sem.receiver)


class PlacementObstruction(RuntimeShift[ObstructionParams]):
    spec = SPECS["D04"]
    #: The target's footprint at rest (m2), measured by :meth:`check_at_reset`.
    _reset_footprint_m2: float | None = None

    @classmethod
    def applicable(cls, ref, sem):
        if sem.receiver is None:
            return "the goal is an articulation: no goal region to obstruct"
        if sem.kind == "push":
            return "the pushed plate is larger than its goal region: any block on the region blocks the push"
        if any(sem.receiver_region.endswith(s) for s in _DRAWER_REGIONS) and "cabinet" in sem.receiver:
            return "the goal region moves with a drawer: a static block cannot ride in it"
        return None

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(props=(PropSpec(PROP, "box", (0.02, 0.02, 0.01), (0.75, 0.55, 0.15, 1.0)),))

    def _block_side(self, area: float) -> float:
        """The block's side (m) for a goal region of ``area`` m2: ``sqrt(cover * area)``, clamped."""
        return float(np.clip(math.sqrt(self.params.cover * area), *SIDE_M))

    def check_at_reset(self, ctx: EpisodeContext) -> None:
        """The footprint rule (issue 22, item 2), on the settled scene before the policy acts: where
        the target at rest (its horizontal bounding box, m2) fits on the goal region, the region's
        area the block leaves free must hold it. A target larger than the region (the bowl on the
        stove's cook region) overhangs it anyway and rests on the owner around the block: exempt.
        Region and target are measured at reset, so the verdict is the draw's, never the policy's."""
        _, rhalf, _, _, _ = region_rect(ctx.scene, ctx.sem)
        area = 4 * float(rhalf[0] * rhalf[1])
        side = self._block_side(area)
        t_lo, t_hi = entity_aabb(ctx.scene, [ctx.sem.target])
        target_area = float((t_hi[0] - t_lo[0]) * (t_hi[1] - t_lo[1]))
        self._reset_footprint_m2 = target_area
        if target_area <= area and area - side * side < target_area:
            raise ShiftInvalid(
                self.id,
                f"a {side:.3f} m block leaves {area - side * side:.4f} m2 of the {area:.4f} m2 goal region free, "
                f"less than the target's footprint ({target_area:.4f} m2): the target could not be placed beside it",
            )

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene, p = ctx.scene, self.params
        centre, rhalf, ryaw, rtop, owner = region_rect(scene, ctx.sem)
        area = 4 * float(rhalf[0] * rhalf[1])
        side = self._block_side(area)
        half = (side / 2, side / 2, p.height_m / 2)
        t_lo, t_hi = entity_aabb(scene, [ctx.sem.target])
        target_area = self._reset_footprint_m2
        if target_area is None:  # fired without a reset check (a scene prepared by hand)
            target_area = float((t_hi[0] - t_lo[0]) * (t_hi[1] - t_lo[1]))
        c, s = math.cos(math.radians(ryaw)), math.sin(math.radians(ryaw))
        ax, ay = np.array([c, s]), np.array([-s, c])
        # candidate centres on a 1 cm grid inside the region (inset by the block's half-diagonal)
        inset = math.hypot(half[0], half[1])
        us = np.arange(-rhalf[0] + inset, rhalf[0] - inset + 1e-9, 0.01)
        vs = np.arange(-rhalf[1] + inset, rhalf[1] - inset + 1e-9, 0.01)
        if len(us) == 0 or len(vs) == 0:
            raise ShiftInvalid(
                self.id,
                f"the goal region ({2 * rhalf[0]:.3f} x {2 * rhalf[1]:.3f} m) is too small for a {side:.3f} m block",
            )
        cands = [centre + u * ax + v * ay for u in us for v in vs]
        tgt = (t_lo[:2] + t_hi[:2]) / 2
        cands.sort(key=lambda xy: -float(np.linalg.norm(xy - tgt)))
        reasons: dict[str, int] = {}
        # things that move: a spot refused only by them may be free a few steps later
        moving = {scene.entity_name(scene.robot_root()), ctx.sem.target}
        blocked_by_moving = False
        for xy in cands:
            # the block rests on the highest point of the owner's surface under its footprint
            hits = [
                surface_below(scene, q, top_z=rtop + 0.15)
                for q in footprint_points(xy, (half[0] + CLEARANCE_M, half[1] + CLEARANCE_M), ryaw, RAY_STEP_M)
            ]
            roots = {r for _, r in hits}
            if roots != {owner}:
                key = "surface of " + ", ".join(sorted(scene.entity_name(r) if r >= 0 else "nothing" for r in roots))
                reasons[key] = reasons.get(key, 0) + 1
                continue
            level = max(z for z, _ in hits)
            spot = check_spot(
                scene, xy, half[:2], ryaw, p.height_m, level, clearance=CLEARANCE_M, support=owner, below_tol=UNEVEN_M
            )
            if not spot.free:
                for b in spot.blockers:
                    reasons[b] = reasons.get(b, 0) + 1
                blocked_by_moving |= set(spot.blockers) <= moving
                continue
            resize_primitive(scene, PROP, half)
            place_prop(scene, PROP, xy, ryaw, level, PropShape(half[:2], (0.0, 0.0), half[2], 2 * half[2]))
            o_lo, o_hi = entity_aabb(scene, [PROP])
            gap, clear = rect_gap(o_lo, o_hi, t_lo, t_hi), robot_clearance(scene, [PROP])
            if gap < TARGET_GAP_M or clear < ROBOT_CLEARANCE_M:
                key = "too close to the target or the robot"
                reasons[key] = reasons.get(key, 0) + 1
                blocked_by_moving = True
                park_one(scene, PROP)  # a rejected block leaves: later candidates must not meet it
                continue
            scene.refresh()
            covered = side * side / area
            post: dict[str, Any] = {
                "covered_fraction": round(covered, 4),
                "free_area_m2": round(area - side * side, 5),
                "target_footprint_m2": round(target_area, 5),
                "target_gap_m": round(gap, 4),
                "robot_clearance_m": round(clear, 4),
                "region_owner": scene.entity_name(owner),
                "bottom_above_surface_m": round(float(o_lo[2] - level), 4),
                "touching": prop_contacts(scene, [PROP]),
            }
            self.applied = {
                "region": ctx.sem.receiver_region,
                "region_size_m": np.round(2 * rhalf, 4).tolist(),
                "block_m": [round(side, 4), round(side, 4), p.height_m],
                **prop_record(scene, PROP),
                "post_condition": post,
            }
            if not 0.1 <= covered <= 0.5:
                raise ShiftInvalid(self.id, f"the block covers {covered:.2f} of the region, not 10-50%")
            if abs(post["bottom_above_surface_m"]) > 0.003 or post["touching"]:
                raise ShiftInvalid(self.id, f"the block does not rest freely on the region: {post}")
            return
        scene.refresh()
        raise (ShiftDeferred if blocked_by_moving else ShiftInvalid)(
            self.id, f"no free spot on the goal region: {reasons}"
        )
