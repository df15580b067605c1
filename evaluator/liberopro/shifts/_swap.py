"""Swapping the target with a non-target object: the shared realisation of the relative-layout
shifts (S03 at reset, D03 at run time).

Units. What moves is a *unit*: an object, the movable objects it rests on (the ramekin under
"the bowl on the ramekin", the cookie box under "the bowl on the cookie box") and every object
resting on those, so referring relations of the "on" kind stay true. Fixtures never move here.

Partners (:func:`swap_partners`, from the task's BDDL, no simulator): objects whose unit rests
directly on the same support as the target's unit (the table, the floor, or the same fixture
region: the drawer, the cabinet top, the stove's cook region), that are not look-alikes of the
target (same category: swapping two identical bowls changes nothing a camera sees), not the
receiver (S02/D02 own its pose), and whose unit holds neither the receiver nor the target.

Realisation (:func:`swap`): the two units exchange their positions horizontally: every member
of the target's unit is translated by (partner bottom xy - target bottom xy) and every member of
the partner's unit by the opposite vector; heights and orientations stay each object's own
(planar moves only). A partner is accepted when its unit's footprint is comparable with the
target unit's (:data:`MAX_FOOTPRINT_RATIO`), nothing interpenetrates (:data:`PENETRATION_TOL_M`,
including the two units with each other), no member touches the robot (or comes within the
clearance at run time), and a LIBERO-Spatial instruction still singles the target out
(:func:`referring_ok`). Each unit lands where the other stood in LIBERO's own layout, on the
same support, so no workspace or reach check applies; that it rests there is checked after
settling (:func:`check_swapped`). Partners are tried in the order
the parameters give; the first accepted one is used and recorded with every rejection's reason.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from liberopro.semantics import TaskSemantics, owner_of
from liberopro.shifts._placement import (
    PENETRATION_TOL_M,
    Blocked,
    _bad_contacts,
    category,
    clearance_problem,
    displaced,
    is_table,
    referring_ok,
    set_entity_pose,
)
from liberopro.sim.tasks import TaskRef, task_info

#: Largest ratio between the two units' footprints (square root of the area of the horizontal
#: bounding box of their collision geoms) for them to count as comparable. A bowl (about
#: 0.13 m across) swaps with a cookie box or a ramekin, not with a 4 cm salt shaker.
MAX_FOOTPRINT_RATIO = 2.0
#: Footprints (m, :func:`footprint`) of the LIBERO object categories of the 40 tasks, measured
#: on the settled scenes of init state 0. Applicability uses them to drop partners that are not
#: comparable (the frypan of LIBERO-10 task 2, the wine bottle for the bowl of task 3) without
#: a simulator; the realisation measures the scene itself.
FOOTPRINT_M: dict[str, float] = {
    "akita_black_bowl": 0.095,
    "alphabet_soup": 0.056,
    "basket": 0.163,
    "bbq_sauce": 0.037,
    "black_book": 0.056,
    "butter": 0.055,
    "chefmate_8_frypan": 0.22,
    "chocolate_pudding": 0.061,
    "cookies": 0.072,
    "cream_cheese": 0.059,
    "glazed_rim_porcelain_ramekin": 0.079,
    "ketchup": 0.045,
    "milk": 0.053,
    "moka_pot": 0.085,
    "orange_juice": 0.053,
    "plate": 0.123,
    "porcelain_mug": 0.091,
    "red_coffee_mug": 0.089,
    "salad_dressing": 0.043,
    "tomato_sauce": 0.056,
    "white_yellow_mug": 0.101,
    "wine_bottle": 0.039,
}
#: Post-condition after settling: each unit's bottom ends within this horizontal distance of
#: the other's former place (m) ...
PLACE_TOL_M = 0.02
#: ... and within this height of its own former height (m): it rests on the same support.
HEIGHT_TOL_M = 0.01


@functools.cache
def _bddl(ref: TaskRef) -> tuple[list[str], list[str], dict[str, str]]:
    """(objects, fixtures, object -> the region/object it starts on or in) from the BDDL."""
    from libero.libero.envs import bddl_utils

    parsed = bddl_utils.robosuite_parse_problem(task_info(ref).bddl_path)
    objects = [n for names in parsed["objects"].values() for n in names]
    fixtures = [n for names in parsed["fixtures"].values() for n in names]
    rests = {}
    for pred in parsed["initial_state"]:
        if pred[0].lower() in ("on", "in") and pred[1] in objects and pred[1] not in rests:
            rests[pred[1]] = pred[2]
    return objects, fixtures, rests


def unit_footprint(members: Iterable[str]) -> float | None:
    """Footprint of a unit from :data:`FOOTPRINT_M` (its widest member); None if a member's
    category is not in the table."""
    sizes = [FOOTPRINT_M.get(category(m)) for m in members]
    known = [v for v in sizes if v is not None]
    return max(known) if len(known) == len(sizes) else None


def swap_partners(ref: TaskRef, sem: TaskSemantics) -> list[str]:
    """The objects the target may swap places with, from the BDDL initial state (see the module
    docstring), in BDDL order. Empty when the target is a fixture or has no such partner."""
    return swap_candidates(ref, sem)[0]


@dataclass(frozen=True)
class _Stacks:
    """What rests on what in a task's BDDL initial state (:func:`_bddl`): ``objects`` and
    ``fixtures`` by name, ``rests`` object -> the region it starts on."""

    objects: list[str]
    fixtures: list[str]
    rests: dict[str, str]

    def below(self, o: str) -> str | None:
        """The object or fixture ``o`` starts on (None: not stated, or no known owner)."""
        region = self.rests.get(o)
        return owner_of(region, self.objects + self.fixtures) if region else None

    def chain(self, o: str) -> list[str]:
        """``o`` and the movable objects under it, top to bottom."""
        out = [o]
        while (b := self.below(out[-1])) is not None and b in self.objects and b not in out:
            out.append(b)
        return out

    def base(self, o: str) -> str | None:
        """The table, or the region of another fixture, the bottom of ``o``'s chain starts on."""
        bottom = self.chain(o)[-1]
        owner = self.below(bottom)
        if owner is None:
            return None
        return owner if is_table(owner) else self.rests[bottom]

    def unit(self, o: str) -> set[str]:
        """``o``'s chain and every object resting (transitively) on a member."""
        members = set(self.chain(o))
        changed = True
        while changed:
            changed = False
            for x in self.objects:
                if x not in members and self.below(x) in members:
                    members.add(x)
                    changed = True
        return members


def swap_candidates(ref: TaskRef, sem: TaskSemantics) -> tuple[list[str], dict[str, str]]:
    """(partners, rejected object -> reason) from the BDDL initial state and the footprint
    table (module docstring). The realisation re-checks everything in the simulator."""
    if not sem.target_is_movable:
        return [], {}
    stacks = _Stacks(*_bddl(ref))
    target_unit = stacks.unit(sem.target)
    target_base = stacks.base(sem.target)
    if target_base is None:
        return [], {}
    t_size = unit_footprint(target_unit)
    out: list[str] = []
    rejected: dict[str, str] = {}
    for o in stacks.objects:
        if o in target_unit or stacks.below(o) in stacks.objects or stacks.base(o) != target_base:
            continue
        if category(o) == category(sem.target) or o == sem.receiver:
            continue
        if sem.receiver in stacks.unit(o) or sem.target in stacks.unit(o):
            continue
        p_size = unit_footprint(stacks.unit(o))
        if t_size and p_size and max(t_size, p_size) / min(t_size, p_size) > MAX_FOOTPRINT_RATIO:
            rejected[o] = f"footprint {p_size:.3f} m vs the target's {t_size:.3f} m"
            continue
        out.append(o)
    return out, rejected


# ----------------------------------------------------------------------------- simulator side
def _collision_geoms(scene, roots: set[int]) -> list[int]:
    m = scene.model
    return [
        g for g in range(m.ngeom) if scene.entity_of_geom(g) in roots and (m.geom_contype[g] or m.geom_conaffinity[g])
    ]


def _world_aabb(scene, geoms: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(low corner, high corner) of the world axis-aligned box around ``geoms``."""
    model, data = scene.model, scene.data
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in geoms:
        mat = np.asarray(data.geom_xmat[g]).reshape(3, 3)
        centre = data.geom_xpos[g] + mat @ model.geom_aabb[g][:3]
        half = np.abs(mat) @ model.geom_aabb[g][3:]
        lo, hi = np.minimum(lo, centre - half), np.maximum(hi, centre + half)
    return lo, hi


def resting_on(scene, name: str) -> int:
    """Root body right under a movable object: a ray cast straight down from 5 mm above the
    bottom of its collision geoms, at its origin, through its own geoms. (Casting from above
    its origin, as :meth:`LiberoScene.support_below` does, can start inside an object resting
    on a flat one, the bowl on LIBERO-Spatial's cookie box.) -1 when nothing is below."""
    import mujoco

    own = scene.root_body(name)
    pos = scene.object_pose(name)[0]
    bottom = _world_aabb(scene, _collision_geoms(scene, {own}))[0][2]
    start = np.array([pos[0], pos[1], bottom + 0.005])
    geomid = np.array([-1], dtype=np.int32)
    for _ in range(20):
        dist = mujoco.mj_ray(scene.model, scene.data, start, np.array([0, 0, -1.0]), None, 1, -1, geomid)
        if dist < 0 or geomid[0] < 0:
            return -1
        root = scene.entity_of_geom(int(geomid[0]))
        if root != own:
            return root
        start = start - np.array([0, 0, dist + 1e-4])
    return -1


def movable_unit(scene, name: str) -> list[str]:
    """The unit of ``name``: the movable objects below it down to a fixture or the ground, itself,
    and every object resting (transitively) on a member. The bottom member comes first."""
    objects = scene.object_names()
    below = {o: resting_on(scene, o) for o in objects}
    chain = [name]
    while True:
        other = scene.entity_name(below[chain[-1]]) if below[chain[-1]] > 0 else None
        if other is not None and other in objects and other not in chain:
            chain.append(other)
        else:
            break
    unit = [chain[-1], *chain[:-1]]
    bodies = {scene.root_body(n) for n in unit}
    changed = True
    while changed:
        changed = False
        for o in objects:
            if o not in unit and below[o] in bodies:
                unit.append(o)
                bodies.add(scene.root_body(o))
                changed = True
    return unit


def _hull_area(points: np.ndarray) -> float:
    """Area of the convex hull of 2-D points (Andrew's monotone chain)."""
    pts = sorted({(round(float(x), 6), round(float(y), 6)) for x, y in points})
    if len(pts) < 3:
        return 0.0

    def half(seq):
        out: list = []
        for p in seq:
            while (
                len(out) >= 2
                and ((out[-1][0] - out[-2][0]) * (p[1] - out[-2][1]) - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0]))
                <= 0
            ):
                out.pop()
            out.append(p)
        return out

    hull = np.array(half(pts)[:-1] + half(pts[::-1])[:-1])
    x, y = hull[:, 0], hull[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def footprint(scene, names: Sequence[str]) -> float:
    """Size (m) of the horizontal footprint of the collision geoms of ``names``: the square root
    of the area of the convex hull of their bounding boxes' corners seen from above (does not
    change when the unit turns about z)."""
    model, data = scene.model, scene.data
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    points = []
    for g in _collision_geoms(scene, {scene.root_body(n) for n in names}):
        gmat = np.asarray(data.geom_xmat[g]).reshape(3, 3)
        corners = model.geom_aabb[g][:3] + signs * model.geom_aabb[g][3:]
        points.append((data.geom_xpos[g] + corners @ gmat.T)[:, :2])
    return float(np.sqrt(_hull_area(np.concatenate(points)))) if points else 0.0


@dataclass
class Swap:
    """A realised swap: the two units, where their bottoms were and went, and every partner tried."""

    partner: str
    target_unit: list[str]
    partner_unit: list[str]
    start: dict[str, list[float]]
    end: dict[str, list[float]]
    footprint_m: dict[str, float]
    base: str
    rejected: dict[str, str] = field(default_factory=dict)
    others: dict[str, list[float]] = field(default_factory=dict)

    def as_record(self) -> dict:
        return {
            "partner": self.partner,
            "target_unit": self.target_unit,
            "partner_unit": self.partner_unit,
            "from": self.start,
            "to": self.end,
            "footprint_m": self.footprint_m,
            "support": self.base,
            "rejected": self.rejected,
        }


def _cross_penetration(scene, a: set[int], b: set[int], tol: float = PENETRATION_TOL_M) -> list[str]:
    out = []
    for x, y, dist, _ in scene.contacts():
        if ((x in a and y in b) or (x in b and y in a)) and dist < -tol:
            out.append(f"{scene.entity_name(x)}/{scene.entity_name(y)} ({dist * 1000:.1f} mm)")
    return out


def _pose(scene, name: str) -> tuple[np.ndarray, np.ndarray]:
    return scene.object_pose(name)


def swap(scene, sem: TaskSemantics, partners: Sequence[str], clearance_m: float = 0.0) -> Swap:
    """Swap the target's unit with the first acceptable partner's (module docstring). The scene
    is changed only by an accepted partner. Raises ``ValueError`` with every partner's reason
    when none is acceptable: :class:`~liberopro.shifts._placement.Blocked` when at least one
    partner was refused only because of the robot (touching it, or within ``clearance_m``)."""
    objects = scene.object_names()
    t_unit = movable_unit(scene, sem.target)
    t_bottom = t_unit[0]
    base_body = resting_on(scene, t_bottom)
    t_size = footprint(scene, t_unit)
    rejected: dict[str, str] = {}
    blocked_by_robot = False  # some partner was refused only because of the robot
    for partner in partners:
        if partner not in objects:
            rejected[partner] = "not in the scene"
            continue
        p_unit = movable_unit(scene, partner)
        if p_unit[0] != partner:
            rejected[partner] = f"rests on {p_unit[0]}, not on the target's support"
            continue
        if set(p_unit) & set(t_unit):
            rejected[partner] = "shares a unit with the target"
            continue
        if resting_on(scene, partner) != base_body:
            rejected[partner] = (
                f"rests on {scene.entity_name(resting_on(scene, partner))}, the target on "
                f"{scene.entity_name(base_body)}"
            )
            continue
        p_size = footprint(scene, p_unit)
        ratio = max(t_size, p_size) / max(min(t_size, p_size), 1e-6)
        if ratio > MAX_FOOTPRINT_RATIO:
            rejected[partner] = f"footprint {p_size:.3f} m vs the target's {t_size:.3f} m (ratio {ratio:.2f})"
            continue
        members = t_unit + p_unit
        start = {n: _pose(scene, n) for n in members}
        offset = start[partner][0][:2] - start[t_bottom][0][:2]
        for n in members:
            pos, quat = start[n]
            d = offset if n in t_unit else -offset
            set_entity_pose(scene, n, np.array([pos[0] + d[0], pos[1] + d[1], pos[2]]), quat)
        scene.inner.sim.forward()
        t_bodies = {scene.root_body(n) for n in t_unit}
        p_bodies = {scene.root_body(n) for n in p_unit}
        # At the new places nothing may even touch (a teleported object 1 mm into another kicks it away).
        bad = _bad_contacts(scene, t_bodies | p_bodies, allow_robot=False, tol=0.0) + _cross_penetration(
            scene, t_bodies, p_bodies, tol=0.0
        )
        why = (f"collides with {', '.join(bad)}" if bad else None) or referring_ok(scene, sem)
        if why is None and clearance_m > 0:
            why = clearance_problem(scene, t_bodies | p_bodies, {scene.robot_root()}, clearance_m)
        if why is not None and not blocked_by_robot:
            blocked_by_robot = not (
                _bad_contacts(scene, t_bodies | p_bodies, allow_robot=True, tol=0.0)
                or _cross_penetration(scene, t_bodies, p_bodies, tol=0.0)
                or referring_ok(scene, sem)
            )
        if why is None:
            scene.refresh()
            return Swap(
                partner=partner,
                target_unit=t_unit,
                partner_unit=p_unit,
                start={n: [round(float(v), 5) for v in p[0]] for n, p in start.items()},
                end={n: [round(float(v), 5) for v in _pose(scene, n)[0]] for n in members},
                footprint_m={"target": round(t_size, 4), "partner": round(p_size, 4)},
                base=scene.entity_name(base_body),
                rejected=rejected,
                others={n: [round(float(v), 5) for v in _pose(scene, n)[0]] for n in objects if n not in members},
            )
        rejected[partner] = why
        for n in members:
            set_entity_pose(scene, n, *start[n])
        scene.inner.sim.forward()
    scene.refresh()
    raise (Blocked if blocked_by_robot else ValueError)(
        "no partner to swap with: " + "; ".join(f"{p}: {r}" for p, r in rejected.items())
        if rejected
        else "no partner to swap with"
    )


def check_swapped(scene, sw: Swap) -> dict:
    """Post-condition after settling: each unit's bottom lies within :data:`PLACE_TOL_M` of the
    other's former place, within :data:`HEIGHT_TOL_M` of its own former height, still on the
    same support, nothing interpenetrates either unit, and no other object moved more than
    1 cm. Returns the measurements; raises
    ``ValueError``."""
    t_bottom, p_bottom = sw.target_unit[0], sw.partner_unit[0]
    measured: dict = {}
    for me, other in ((t_bottom, p_bottom), (p_bottom, t_bottom)):
        now = _pose(scene, me)[0]
        off = float(np.linalg.norm(now[:2] - np.array(sw.start[other][:2])))
        dz = float(now[2] - sw.start[me][2])
        support = resting_on(scene, me)
        measured[me] = {
            "off_place_m": round(off, 4),
            "height_change_m": round(dz, 4),
            "moved_m": round(float(np.linalg.norm(now[:2] - np.array(sw.start[me][:2]))), 4),
            "support": scene.entity_name(support) if support > 0 else None,
        }
        if off > PLACE_TOL_M:
            raise ValueError(f"{me} ended {off:.3f} m from {other}'s former place (tolerance {PLACE_TOL_M} m)")
        if abs(dz) > HEIGHT_TOL_M:
            raise ValueError(f"{me} height changed by {dz:.3f} m: it is not resting on its support")
        if measured[me]["support"] != sw.base:
            raise ValueError(f"{me} rests on {measured[me]['support']}, not on {sw.base}")
    t_bodies = {scene.root_body(n) for n in sw.target_unit}
    p_bodies = {scene.root_body(n) for n in sw.partner_unit}
    bad = _bad_contacts(scene, t_bodies | p_bodies, allow_robot=True) + _cross_penetration(scene, t_bodies, p_bodies)
    measured["penetrations"] = bad
    if bad:
        raise ValueError(f"the swapped objects interpenetrate {', '.join(bad)} after settling")
    moved, pushed = displaced(scene, {n: np.array(p) for n, p in sw.others.items()}, PLACE_TOL_M / 2)
    measured["others_moved_max_m"] = max(moved.values(), default=0.0)
    if pushed:
        raise ValueError("the swap displaced " + ", ".join(f"{n} by {moved[n]:.3f} m" for n in pushed))
    return measured
