"""Relocating objects on their support: the shared realisation of the pose shifts (S01, D01 move
the target; S02, D02 move the receiver; S03, D03 reuse the contact and workspace checks).

Constraints (``docs/definition.md``, "Constraints on a shifted task"): planar moves only (horizontal
translation plus yaw), objects stay inside the workspace, on their support, free of interpenetration
after settling; the task stays executable. A move carries the target's *group*: the target, what it
rests on down to the table (the ramekin under a bowl, the cabinet whose drawer holds it) and the
objects resting on any of them, so stacked layouts and the instruction's spatial relations move as
one. A fixture target (the cabinet of "open the drawer", the stove of "turn on the stove") moves as
a fixture: its root body pose in the model.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from liberopro.semantics import TaskSemantics

#: How far beyond the box spanned by the scene's objects and fixtures a moved entity may land (m):
#: LIBERO lays every task out inside such a box; beyond it lie table edges and empty space the
#: policies never saw used.
WORKSPACE_MARGIN_M = 0.10
#: Largest horizontal distance from the robot base at which a moved entity may land, unless it
#: already stood further away (Panda reach is about 0.855 m).
REACH_M = 0.80
#: Penetration tolerated between a moved object and anything but its support (m).
PENETRATION_TOL_M = 0.003
#: Direction candidates: the drawn direction first, then +-15, +-30, ... degrees.
DIRECTION_STEPS_DEG = (0,) + tuple(x for k in range(15, 180, 15) for x in (k, -k)) + (180,)


def yaw_quat(deg: float) -> np.ndarray:
    """Quaternion (w, x, y, z), shape (4,) float64, of a rotation by ``deg`` (degrees) about
    world z: ``(cos(h), 0, 0, sin(h))`` with ``h`` half the angle in radians, w >= 0 for
    ``deg`` in [-180, 180].

    scipy's ``Rotation.from_euler`` (imported here, not at module load: the catalog reaches this
    module at call time and stays light). It is bit-identical to the hand formula it replaced
    (same libm cos/sin of the same half angle; 1.1 M random and all integer angles checked, and
    every call of the golden manifest's S01/D01); ``tests/evaluator/test_rotations.py`` pins that,
    since placements reach MuJoCo's state and so the golden fixture.
    """
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("z", deg, degrees=True).as_quat(scalar_first=True)


# quat_mul and quat_conj stay hand-written: scipy's composition (Rotation.__mul__) sums the same
# products in another order and from_quat renormalises its input, so its result differs in the
# last bits from quat_mul on ~90% of random unit quaternions (up to 12288 ulp of a near-zero
# component, 5.6e-16 absolute) and on the golden run's own placements; those quaternions are
# set into MuJoCo (object, fixture, site, prop and camera poses) and so reach every later step
# and the golden fixture. tests/evaluator/test_rotations.py checks both against scipy within
# 1e-15 and pins the difference.
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of (w, x, y, z) quaternions (MuJoCo's order), shape (4,)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (inverse of a unit quaternion), (w, x, y, z), shape (4,). Exact (a sign flip);
    scipy's ``Rotation.from_quat(q).inv()`` renormalises first and differs by up to 3 ulp."""
    return np.array([q[0], -q[1], -q[2], -q[3]])


def category(name: str) -> str:
    """An object's category: its BDDL name without the instance number
    (``akita_black_bowl_2`` -> ``akita_black_bowl``). Objects of one category look alike."""
    return re.sub(r"_\d+$", "", name)


def is_table(name: str) -> bool:
    """Whether a BDDL fixture name is a scene's ground: ``main_table``, ``kitchen_table``,
    ``living_room_table``, ``study_table``, or LIBERO-Object's ``floor``."""
    return name == "floor" or name.endswith("table")


def is_ground(scene, root_body: int) -> bool:
    """True for the arena's own support (table or floor): a root body that is neither a BDDL
    object, a fixture, the robot, nor a prop of the scene variant."""
    if root_body <= 0:
        return False
    named = set(scene.inner.obj_body_id.values()) | set(getattr(scene, "props", {}).values())
    return root_body not in named and root_body != scene.robot_root()


def entity_pose(scene, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(position, quaternion w x y z), world frame, of an object (free joint) or a fixture (its
    root body, a child of the world)."""
    if name in scene.inner.objects_dict:
        return scene.object_pose(name)
    bid = scene.root_body(name)
    return np.array(scene.model.body_pos[bid]), np.array(scene.model.body_quat[bid])


def set_entity_pose(scene, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
    """Teleport an object (qpos, zero velocity) or a fixture (model body pose). Fixture poses
    are re-drawn by every LIBERO reset, so a moved fixture never leaks into the next episode."""
    if name in scene.inner.objects_dict:
        scene.set_object_pose(name, pos, quat)
        return
    bid = scene.root_body(name)
    scene.model.body_pos[bid] = pos
    scene.model.body_quat[bid] = quat


def entity_group(scene, entity: str, exclude: Iterable[str] = ()) -> list[str]:
    """The entities that move with ``entity``: itself, whatever it rests on down to the ground
    (a ramekin under a bowl, the cabinet whose drawer holds it), and every object resting on a
    member, except those named in ``exclude`` (the carried target when a receiver moves).
    Stacked layouts and referring relations ("the bowl on the ramekin") move as one.
    """
    objects = scene.object_names()
    skip = set(exclude)
    group = [entity]
    below = scene.support_below(entity) if entity in objects else -1
    while below > 0 and not is_ground(scene, below):
        name = scene.entity_name(below)
        if name in group or name in skip:
            break
        group.append(name)
        below = scene.support_below(name) if name in objects else -1
    bodies = {scene.root_body(n) for n in group}
    changed = True
    while changed:
        changed = False
        for name in objects:
            if name not in group and name not in skip and scene.support_below(name) in bodies:
                group.append(name)
                bodies.add(scene.root_body(name))
                changed = True
    return group


def target_group(scene, target: str) -> list[str]:
    """:func:`entity_group` of the target."""
    return entity_group(scene, target)


def _footprint_points(scene, name: str) -> list[np.ndarray]:
    """Horizontal points that must stay over the ground: the entity's centre and, for a
    fixture, the corners of its geoms' bounding square."""
    pos = entity_pose(scene, name)[0]
    pts = [pos[:2]]
    if name not in scene.inner.objects_dict:
        root = scene.root_body(name)
        geoms = [g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) == root]
        xy = np.array([scene.data.geom_xpos[g][:2] for g in geoms])
        r = np.array([scene.model.geom_rbound[g] for g in geoms])
        lo, hi = (xy - r[:, None] * 0.5).min(axis=0), (xy + r[:, None] * 0.5).max(axis=0)
        pts += [np.array([lo[0], lo[1]]), np.array([lo[0], hi[1]]), np.array([hi[0], lo[1]]), np.array([hi[0], hi[1]])]
    return pts


def _over_ground(scene, xy: np.ndarray, group_bodies: set[int]) -> bool:
    """Whether a ray straight down at ``xy`` meets the ground before anything outside the group."""
    import mujoco

    start = np.array([xy[0], xy[1], 3.0])
    geomid = np.array([-1], dtype=np.int32)
    for _ in range(30):
        dist = mujoco.mj_ray(scene.model, scene.data, start, np.array([0, 0, -1.0]), None, 1, -1, geomid)
        if dist < 0 or geomid[0] < 0:
            return False
        root = scene.entity_of_geom(int(geomid[0]))
        if root not in group_bodies:
            return is_ground(scene, root)
        start = start - np.array([0, 0, dist + 1e-4])
    return False


def workspace_box(scene, start_xy: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(min xy, max xy) of the objects' and fixtures' positions before the move, widened by
    :data:`WORKSPACE_MARGIN_M`."""
    names = scene.object_names() + scene.fixture_names()
    xy = np.array([start_xy.get(n, entity_pose(scene, n)[0][:2]) for n in names])
    return xy.min(axis=0) - WORKSPACE_MARGIN_M, xy.max(axis=0) + WORKSPACE_MARGIN_M


def workspace_problem(scene, group: list[str], start_xy: dict[str, np.ndarray]) -> str | None:
    """None when every member stays inside the scene's workspace box, stands over the ground
    (table or floor) and within reach of the robot (:data:`REACH_M`, or no further than
    before), else why not."""
    bodies = {scene.root_body(n) for n in group}
    base = scene.body_pos(scene.robot_root())[:2]
    lo, hi = workspace_box(scene, start_xy)
    for name in group:
        now = entity_pose(scene, name)[0][:2]
        if np.any(now < lo) or np.any(now > hi):
            return f"{name} would leave the workspace"
        for pt in _footprint_points(scene, name):
            if not _over_ground(scene, pt, bodies):
                return f"{name} would not stand on the table"
        if np.linalg.norm(now - base) > max(REACH_M, np.linalg.norm(start_xy[name] - base) + 1e-6):
            return f"{name} would be out of the robot's reach"
    return None


def referring_ok(scene, sem: TaskSemantics) -> str | None:
    """None when the instruction still singles the target out among its look-alikes, else why
    not (see :class:`liberopro.semantics.Referring`)."""
    ref = sem.referring
    if ref.relation in ("unique", "on", "in") or not ref.rivals:
        return None
    tpos = entity_pose(scene, sem.target)[0][:2]

    def anchor_xy(name: str) -> np.ndarray:
        if name in scene.inner.obj_body_id:
            return scene.body_pos(scene.root_body(name))[:2]
        sid = scene.inner.sim.model.site_name2id(name)
        return np.array(scene.data.site_xpos[sid][:2])

    if ref.relation == "between":
        point = (anchor_xy(ref.anchors[0]) + anchor_xy(ref.anchors[1])) / 2
    else:
        point = anchor_xy(ref.anchors[0])
    mine = np.linalg.norm(tpos - point)
    for rival in ref.rivals:
        theirs = np.linalg.norm(scene.object_pose(rival)[0][:2] - point)
        if theirs <= mine + 0.02:
            return (
                f"after the move the instruction's '{ref.relation} {' and '.join(ref.anchors)}' would "
                f"fit {rival} ({theirs:.3f} m) as well as the target ({mine:.3f} m)"
            )
    return None


def lookalike_order_problem(scene, group: Sequence[str], start_xy: dict[str, np.ndarray]) -> str | None:
    """None when every moved object keeps its order with each unmoved look-alike (same
    :func:`category`) along the axis on which they were furthest apart, else why not. Keeps
    instructions such as "the left plate" / "the right plate" true."""
    objects = scene.object_names()
    for name in group:
        if name not in objects:
            continue
        for other in objects:
            if other in group or other == name or category(other) != category(name):
                continue
            other_xy = scene.object_pose(other)[0][:2]
            before = start_xy[name] - other_xy
            axis = int(np.argmax(np.abs(before)))
            after = scene.object_pose(name)[0][:2] - other_xy
            if np.sign(after[axis]) != np.sign(before[axis]):
                return f"{name} would swap sides with its look-alike {other} along {'xy'[axis]}"
    return None


def clearance_problem(scene, group_bodies: set[int], others: Iterable[int], clearance_m: float) -> str | None:
    """None when no geom of the group comes within ``clearance_m`` of the given root bodies
    (the robot, a carried object), else why not. Measured with MuJoCo's own collision
    detection: the group's geom margins are widened by ``clearance_m`` for one
    ``mj_forward``, then put back."""
    import mujoco

    others = set(others)
    if clearance_m <= 0 or not others:
        return None
    model, data = scene.model, scene.data
    geoms = [g for g in range(model.ngeom) if scene.entity_of_geom(g) in group_bodies]
    saved = model.geom_margin[geoms].copy()
    try:
        model.geom_margin[geoms] = saved + clearance_m
        mujoco.mj_forward(model, data)
        close: dict[str, float] = {}
        for a, b, dist, _ in scene.contacts():
            if (a in group_bodies) == (b in group_bodies):
                continue
            other = b if a in group_bodies else a
            if other in others and dist < clearance_m:
                name = scene.entity_name(other)
                close[name] = min(dist, close.get(name, clearance_m))
    finally:
        model.geom_margin[geoms] = saved
        mujoco.mj_forward(model, data)
    if close:
        return "within {:.0f} mm of {}".format(
            clearance_m * 1000, ", ".join(f"{n} ({d * 1000:.1f} mm)" for n, d in sorted(close.items()))
        )
    return None


def site_world(scene, sid: int) -> tuple[np.ndarray, np.ndarray]:
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.asarray(scene.data.site_xmat[sid], dtype=np.float64))
    return np.array(scene.data.site_xpos[sid]), quat


def set_site_world(scene, sid: int, pos: np.ndarray, quat: np.ndarray) -> None:
    """Put a site at a world pose by editing its local pose (registered model fields, so the
    edit is undone at the next episode start)."""
    body = int(scene.model.site_bodyid[sid])
    bpos = np.array(scene.data.xpos[body])
    bmat = np.array(scene.data.xmat[body]).reshape(3, 3)
    bquat = np.array(scene.data.xquat[body])
    scene.model_field("site_pos")[sid] = bmat.T @ (pos - bpos)
    scene.model_field("site_quat")[sid] = quat_mul(quat_conj(bquat), quat)


@dataclass
class Relocation:
    """A realised move: who moved, from where to where, and how it was chosen."""

    group: list[str]
    start: dict[str, list[float]]
    end: dict[str, list[float]]
    distance_m: float
    direction_deg: float
    yaw_deg: float
    candidates_tried: int
    entity: str = ""
    sites: dict[str, list[float]] = field(default_factory=dict)

    def as_record(self) -> dict:
        rec = {
            "group": self.group,
            "from": self.start,
            "to": self.end,
            "distance_m": round(self.distance_m, 4),
            "direction_deg": round(self.direction_deg, 2),
            "yaw_deg": round(self.yaw_deg, 2),
            "candidates_tried": self.candidates_tried,
        }
        if self.sites:
            rec["sites_to"] = self.sites
        return rec


class Blocked(ValueError):
    """No candidate placement is free *now*, but at least one was refused only because of the
    robot or a carried object (touching, too close): things that move, so the same candidates
    may be free a few steps later. A runtime shift defers on it
    (:class:`liberopro.shifts.base.ShiftDeferred`); a static shift treats it as any
    ``ValueError``. The message lists every candidate's reason, as ``ValueError``'s does."""


def _bad_contacts(
    scene,
    group_bodies: set[int],
    allow_robot: bool,
    tol: float = PENETRATION_TOL_M,
    ignore: Iterable[int] = (),
) -> list[str]:
    """Contacts of the group with anything but the ground (and, if allowed, the robot) that
    penetrate deeper than ``tol`` (default :data:`PENETRATION_TOL_M`); any contact with the robot
    when not allowed. Contacts with the root bodies in ``ignore`` are left out."""
    worst: dict[str, float] = {}
    robot = scene.robot_root()
    ignore = set(ignore)
    for a, b, dist, _ in scene.contacts():
        if (a in group_bodies) == (b in group_bodies):
            continue  # not involving the group, or inside the group
        other = b if a in group_bodies else a
        if is_ground(scene, other) or other in ignore:
            continue
        if other == robot and allow_robot:
            continue
        if dist < -tol or other == robot:
            name = scene.entity_name(other)
            worst[name] = min(dist, worst.get(name, 0.0))
    return [f"{n} ({d * 1000:.1f} mm)" for n, d in sorted(worst.items())]


def _distances(distance_m: float, min_distance_m: float | None) -> list[float]:
    """``distance_m``, then 1 cm shorter each down to ``min_distance_m`` (which ends the list;
    None: ``distance_m`` only), in m."""
    distances = [distance_m]
    if min_distance_m is not None:
        while distances[-1] - 0.01 >= min_distance_m - 1e-9:
            distances.append(round(distances[-1] - 0.01, 6))
        if distances[-1] > min_distance_m + 1e-9:
            distances.append(min_distance_m)
    return distances


def _placement_problem(
    scene,
    sem: TaskSemantics,
    group: list[str],
    bodies: set[int],
    start_xy: dict[str, np.ndarray],
    avoid: set[int],
    keep_lookalike_order: bool,
    contact_tol_m: float,
    moving_ok: bool = False,
) -> str | None:
    """What is wrong with the group's current placement (None: nothing): a collision, the
    workspace, the task's referring expressions, the look-alike order when kept. ``moving_ok``:
    touching the robot or the ``avoid`` bodies is allowed (were they the only problem?)."""
    if moving_ok:
        bad = _bad_contacts(scene, bodies, allow_robot=True, tol=contact_tol_m, ignore=avoid)
    else:
        bad = _bad_contacts(scene, bodies, allow_robot=False, tol=contact_tol_m)
    why = (
        (f"collides with {', '.join(bad)}" if bad else None)
        or workspace_problem(scene, group, start_xy)
        or referring_ok(scene, sem)
    )
    if why is None and keep_lookalike_order:
        why = lookalike_order_problem(scene, group, start_xy)
    return why


def _pose_group(
    scene,
    start: dict[str, tuple[np.ndarray, np.ndarray]],
    site_start: dict[int, tuple[np.ndarray, np.ndarray]],
    move_xy: Callable[[np.ndarray], np.ndarray],
    qyaw: np.ndarray,
) -> None:
    """Pose every entity of ``start`` (name -> its start (pos, quat)) and every site of
    ``site_start`` at its start moved horizontally by ``move_xy`` and turned by ``qyaw``."""
    for n, (pos, quat) in start.items():
        set_entity_pose(scene, n, np.array([*move_xy(pos[:2]), pos[2]]), quat_mul(qyaw, quat))
    scene.inner.sim.forward()
    if site_start:
        for sid, (pos, quat) in site_start.items():
            set_site_world(scene, sid, np.array([*move_xy(pos[:2]), pos[2]]), quat_mul(qyaw, quat))
        scene.inner.sim.forward()


def relocate(
    scene,
    sem: TaskSemantics,
    distance_m: float,
    direction_deg: float,
    yaw_deg: float,
    *,
    entity: str | None = None,
    exclude: Sequence[str] = (),
    keep_lookalike_order: bool = False,
    sites: Sequence[str] = (),
    clearance_m: float = 0.0,
    min_distance_m: float | None = None,
    contact_tol_m: float = PENETRATION_TOL_M,
) -> Relocation:
    """Move ``entity``'s group (default: the target's) by ``distance_m`` horizontally, turned by
    ``yaw_deg`` about the entity's vertical axis, trying the drawn direction first and then its
    neighbours (:data:`DIRECTION_STEPS_DEG`).

    Args:
        entity: the object or fixture to move (its :func:`entity_group` moves with it).
        exclude: objects that never join the group (the carried target when the receiver moves).
        keep_lookalike_order: reject placements that swap a moved object's side with an unmoved
            look-alike (:func:`lookalike_order_problem`).
        sites: sites (of the table) that move rigidly with the group: a goal region named after
            the moved fixture ("the front of the stove").
        clearance_m: keep every group geom this far from the robot and the ``exclude`` objects
            (run time: the arm and the carried target); 0 only forbids touching the robot.
        min_distance_m: when no direction works at ``distance_m``, try shorter distances in
            1 cm steps down to this one (every direction at each); None: ``distance_m`` only.
            A big fixture boxed in by the layout (the cabinet of LIBERO-Goal) may fit at 8 cm
            and nowhere at 14.
        contact_tol_m: penetration tolerated at the new place between the group and anything
            but the ground. The receiver shifts pass 0: a fixture teleported 1 mm into a bowl
            (LIBERO-10 task 3's open drawer) kicks it 5 cm away on the next step.

    The scene state is changed only by an accepted candidate. Raises ``ValueError`` (with every
    candidate's reason) when no direction gives a valid placement: :class:`Blocked` when at
    least one candidate was refused only because of the robot or the ``exclude`` objects
    (touching them, or within ``clearance_m``), which may have moved away a step later.
    """
    entity = entity or sem.target
    group = entity_group(scene, entity, exclude)
    bodies = {scene.root_body(n) for n in group}
    start = {n: entity_pose(scene, n) for n in group}
    start_xy = {n: p[0][:2] for n, p in start.items()}
    site_ids = [scene.inner.sim.model.site_name2id(n) for n in sites]
    site_start = {sid: site_world(scene, sid) for sid in site_ids}
    avoid = {scene.robot_root()} | {scene.root_body(n) for n in exclude}
    centre = start[entity][0][:2].copy()
    qyaw = yaw_quat(yaw_deg)
    cos, sin = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))

    def moved(xy: np.ndarray, new_centre: np.ndarray) -> np.ndarray:
        rel = xy - centre
        return new_centre + np.array([cos * rel[0] - sin * rel[1], sin * rel[0] + cos * rel[1]])

    distances = _distances(distance_m, min_distance_m)
    candidates = [(dist, step) for dist in distances for step in DIRECTION_STEPS_DEG]
    reasons = []
    blocked_by_moving = False  # some candidate was refused only by the robot / excluded objects
    for i, (dist, step) in enumerate(candidates, start=1):
        direction = (direction_deg + step) % 360
        d = np.array([math.cos(math.radians(direction)), math.sin(math.radians(direction))]) * dist
        new_centre = centre + d
        _pose_group(scene, start, site_start, functools.partial(moved, new_centre=new_centre), qyaw)
        why = _placement_problem(scene, sem, group, bodies, start_xy, avoid, keep_lookalike_order, contact_tol_m)
        if why is None and clearance_m > 0:
            why = clearance_problem(scene, bodies, avoid, clearance_m)
        if why is not None and not blocked_by_moving:
            blocked_by_moving = not _placement_problem(
                scene, sem, group, bodies, start_xy, avoid, keep_lookalike_order, contact_tol_m, moving_ok=True
            )
        if why is None:
            scene.refresh()
            end = {n: [round(float(v), 5) for v in entity_pose(scene, n)[0]] for n in group}
            return Relocation(
                group=group,
                start={n: [round(float(v), 5) for v in p[0]] for n, p in start.items()},
                end=end,
                distance_m=float(np.linalg.norm(new_centre - centre)),
                direction_deg=direction,
                yaw_deg=yaw_deg,
                candidates_tried=i,
                entity=entity,
                sites={
                    n: [round(float(v), 5) for v in site_world(scene, sid)[0]]
                    for n, sid in zip(sites, site_ids, strict=True)
                },
            )
        reasons.append(f"{direction:.0f} deg{f' at {dist:.2f} m' if len(distances) > 1 else ''}: {why}")
        for n in group:  # put it back before the next candidate
            set_entity_pose(scene, n, *start[n])
        for sid, (pos, quat) in site_start.items():
            set_site_world(scene, sid, pos, quat)
        scene.inner.sim.forward()
    scene.refresh()
    raise (Blocked if blocked_by_moving else ValueError)("no valid placement: " + "; ".join(reasons))


def displaced(scene, before: dict[str, np.ndarray], limit_m: float) -> tuple[dict[str, float], list[str]]:
    """Horizontal displacement of each object since ``before`` (name -> position), and the names
    of those that moved more than ``limit_m``: the post-conditions' check that a shift moved
    only what it states."""
    moved = {n: round(float(np.linalg.norm(scene.object_pose(n)[0][:2] - p[:2])), 4) for n, p in before.items()}
    return moved, [n for n, d in moved.items() if d > limit_m]


def check_rests(scene, sem: TaskSemantics, reloc: Relocation, min_distance_m: float) -> dict:
    """Post-condition after settling: the moved entity (the target unless the relocation names
    another) moved at least ``min_distance_m`` from where it started, stayed at its height (still
    on its support, within 1 cm), and nothing penetrates its group by more than
    :data:`PENETRATION_TOL_M`. Returns the measurements; raises ``ValueError``."""
    entity = reloc.entity or sem.target
    what = "target" if entity == sem.target else entity
    start = np.array(reloc.start[entity])
    now = entity_pose(scene, entity)[0]
    moved = float(np.linalg.norm(now[:2] - start[:2]))
    dz = float(now[2] - start[2])
    group_bodies = {scene.root_body(n) for n in reloc.group}
    bad = _bad_contacts(scene, group_bodies, allow_robot=True)
    measured = {"moved_m": round(moved, 4), "height_change_m": round(dz, 4), "penetrations": bad}
    if moved < min_distance_m:
        raise ValueError(f"{what} moved {moved:.3f} m, less than the stated {min_distance_m:.3f} m")
    if abs(dz) > 0.01:
        raise ValueError(f"{what} height changed by {dz:.3f} m after settling: it is not resting on its support")
    if bad:
        raise ValueError(f"{what} interpenetrates {', '.join(bad)} after settling")
    return measured
