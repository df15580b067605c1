"""S08 distractor (Environment, static): a look-alike of the target (same category, another
attribute) 5-15 cm from it; the instruction stays unambiguous (``docs/definition.md``, "Static
shifts").

Realisation: a static copy (no joint) of a LIBERO object of the target's category and another
type (:func:`liberopro.shifts._objects.lookalikes`: a white, yellow or red bowl beside the black
bowl; a tomato sauce can beside the alphabet soup; a butter or chocolate pudding box beside the
cream cheese; ...), standing upright on the target stack's support (table, floor or fixture top)
turned ``yaw_deg``, with an edge-to-edge gap ``gap_m`` between its footprint and the target
stack's bounding box, in world direction ``direction_deg`` (then the neighbouring directions in
30 deg steps; where no direction is free, the other gaps of :data:`GAPS_M`; the record says
which), clear of everything by 1.5 cm (fixtures in any position of their drawers and doors
included) and wholly inside the third-person view.

Instruction (decided here, documented in :mod:`liberopro.shifts._objects`): a look-alike never
fits any noun phrase of the instruction. Where the target's phrase would also fit it ("put the
bowl on the plate" with a white bowl beside the black one), the phrase becomes the target's full
name ("put the black bowl on the plate": the same meaning in the task's scene); look-alikes that
would still fit are never drawn.

Defaults: gap 5-15 cm; direction uniform; yaw -45..45 deg; the look-alike type uniform over the
candidates absent from the scene (those present only when no other is left).

Applicability: a movable target with at least one look-alike that keeps the instruction
unambiguous; not a target inside a drawer (no surface beside it at its level) nor one named in
the plural ("put both moka pots": a third moka pot makes "both" ambiguous).
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import LookalikeParams
from liberopro.shifts._objects import CATALOGUE, lookalike_instruction, lookalikes, scene_types
from liberopro.shifts._props import (
    footprint_gap,
    in_view,
    moved_objects,
    object_positions,
    place_beside,
    prop_contacts,
    prop_record,
    rect_gap,
    surface_below,
    target_stack,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant
from liberopro.sim.tasks import task_info

PROP = "liberopro_prop_s08_lookalike"
CLEARANCE_M = 0.015


#: Gaps tried after the stated one where it leaves no free spot (m): the range of the benchmark.
GAPS_M = (0.05, 0.08, 0.11, 0.14)


def gap_candidates(gap: float) -> list[float]:
    """The stated gap, then the others of :data:`GAPS_M` nearest first."""
    return [gap] + sorted((g for g in GAPS_M if abs(g - gap) > 1e-6), key=lambda g: abs(g - gap))


def lookalike_applicable(ref, sem) -> str | None:
    if not sem.target_is_movable:
        return "the target is an articulated fixture: LIBERO has no look-alike of it to stand beside it"
    if sem.referring.relation == "in":
        return "the target starts inside a drawer: there is no surface beside it at its level"
    ttype = scene_types(ref).get(sem.target)
    if ttype not in CATALOGUE:
        return f"no catalogued look-alikes for the target's type {ttype!r}"
    if not lookalikes(ref, sem.target, task_info(ref).instruction):
        return (
            "no look-alike keeps the instruction unambiguous (the target is named in the plural, or every "
            "other instance of its category fits a phrase of the instruction)"
        )
    return None


def lookalike_post(scene, prop: str, stack, placed: dict, before: dict) -> dict:
    """Measurements of a placed look-alike (shared by S08 and D06)."""
    rec = prop_record(scene, prop)
    lo, hi = np.array(rec["aabb_min"]), np.array(rec["aabb_max"])
    surface, _ = surface_below(scene, (lo[:2] + hi[:2]) / 2, top_z=float(lo[2]) + 0.005, ignore={scene.props[prop]})
    return {
        "gap_m": round(footprint_gap(scene, prop, placed["shape"], stack, placed["u"]), 4),
        "box_gap_m": round(rect_gap(lo, hi, stack.lo, stack.hi), 4),
        "bottom_above_surface_m": round(float(lo[2] - surface), 4),
        "in_view": in_view(scene, prop),
        "touching": prop_contacts(scene, [prop]),
        "objects_moved_m": moved_objects(scene, before),
    }


def check_lookalike_post(shift_id: str, post: dict, gap: float) -> None:
    if abs(post["gap_m"] - gap) > 0.005 or not 0.045 <= post["gap_m"] <= 0.155:
        raise ShiftInvalid(
            shift_id, f"look-alike stands {post['gap_m']} m from the target, placed at {gap} m (5-15 cm)"
        )
    if not post["in_view"]:
        raise ShiftInvalid(shift_id, "look-alike is not wholly inside the third-person view")
    if abs(post["bottom_above_surface_m"]) > 0.003:
        raise ShiftInvalid(shift_id, f"look-alike bottom is {post['bottom_above_surface_m']} m off its support")
    if post["touching"] or post["objects_moved_m"]:
        raise ShiftInvalid(shift_id, f"look-alike touches {post['touching']} / moved {post['objects_moved_m']}")


class Distractor(Shift[LookalikeParams]):
    spec = SPECS["S08"]

    @classmethod
    def applicable(cls, ref, sem):
        return lookalike_applicable(ref, sem)

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(props=(PropSpec(PROP, f"object:{params.lookalike}"),))

    def instruction(self, text: str, step: int) -> str:
        new = lookalike_instruction(text, self.params.target_type, self.params.lookalike)
        return text if new is None else new

    def on_settled(self, ctx: EpisodeContext) -> bool:
        scene, p = ctx.scene, self.params
        if lookalike_instruction(scene.task.instruction, p.target_type, p.lookalike) is None:
            raise ShiftInvalid(self.id, f"a {p.lookalike} would make the instruction ambiguous")
        self._stack = target_stack(scene, ctx.sem)
        try:
            self._placed = place_beside(
                scene, PROP, self._stack, gap_candidates(p.gap_m), p.direction_deg, p.yaw_deg, CLEARANCE_M
            )
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self._before = object_positions(scene)
        self.applied = {
            "lookalike": p.lookalike,
            "instruction": self.instruction(scene.task.instruction, 0),
            "direction_deg": self._placed["direction_deg"],
            "gap_m": self._placed["gap_m"],
            "candidates_tried": self._placed["candidates_tried"],
            **prop_record(scene, PROP),
        }
        return True

    def verify(self, ctx: EpisodeContext) -> None:
        post = lookalike_post(ctx.scene, PROP, self._stack, self._placed, self._before)
        self.applied["post_condition"] = post
        check_lookalike_post(self.id, post, self._placed["gap_m"])
