"""Props in the scene: the shared geometry of the shifts that add bodies (S04, S05, S07-S09,
D04-D06, D09).

A prop is a static body of the scene variant (:class:`liberopro.sim.scene.PropSpec`), parked far below
the floor until a shift moves it in through ``model.body_pos``/``body_quat``. MuJoCo never
reports contacts between two static bodies, so whether a spot is free is decided here by ray
casts (``mujoco.mj_ray`` against every geom, visual and collision): a spot is free when
vertical rays over the prop's footprint (inflated by a clearance) meet nothing but the support
surface between that surface and the prop's top. Contacts with the robot and with movable
objects are simulated; the shifts also check them after re-settling.

Units: metres, degrees; world frame (z up; the robot stands at -x facing +x).
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import mujoco
import numpy as np

from liberopro.shifts._placement import entity_pose, is_ground, quat_conj, quat_mul, yaw_quat

#: Ray grid spacing over a footprint (m).
RAY_STEP_M = 0.012
#: A prop's bottom is put this far above the surface it stands on (m).
LIFT_M = 0.001
#: A surface hit this much above the expected support height counts as something in the way (m).
SURFACE_TOL_M = 0.006


def prop_body(scene, name: str) -> int:
    try:
        return scene.props[name]
    except KeyError:
        raise KeyError(f"no prop {name!r} in this scene variant (props: {sorted(scene.props)})") from None


def body_geoms(scene, root: int) -> list[int]:
    """Geom ids of every body under root body ``root``."""
    return [g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) == root]


def visual_geoms(scene, root: int) -> list[int]:
    """Rendered geoms (group 1) under ``root``: what a camera sees of it."""
    return [g for g in body_geoms(scene, root) if scene.model.geom_group[g] == 1]


def geoms_aabb(scene, geoms: list[int], frame_body: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned bounding box (min (3,), max (3,)) of ``geoms`` in their current pose, from
    each geom's local box (``model.geom_aabb``): in the world frame, or in the frame of body
    ``frame_body`` when given (an object's own extents, whatever its orientation)."""
    m, d = scene.model, scene.data
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    for g in geoms:
        centre, half = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        corners = (centre + signs * half) @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
        if frame_body is not None:
            corners = (corners - d.xpos[frame_body]) @ d.xmat[frame_body].reshape(3, 3)
        lo, hi = np.minimum(lo, corners.min(axis=0)), np.maximum(hi, corners.max(axis=0))
    return lo, hi


def entity_aabb(scene, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """World bounding box of the geoms of objects / fixtures / props named ``names``."""
    geoms = []
    for n in names:
        root = scene.props[n] if n in scene.props else scene.root_body(n)
        geoms += body_geoms(scene, root)
    return geoms_aabb(scene, geoms)


# --------------------------------------------------------------------------- resizing
def resize_primitive(scene, name: str, size: tuple[float, ...]) -> None:
    """Give a box / cylinder prop its size for this episode (geom ``size``, bounding sphere and
    box), through :meth:`LiberoScene.model_field` so the next episode starts from the variant's
    own size."""
    sizes, rbound, aabb = (scene.model_field(f) for f in ("geom_size", "geom_rbound", "geom_aabb"))
    for g in body_geoms(scene, prop_body(scene, name)):
        gtype = scene.model.geom_type[g]
        if gtype == mujoco.mjtGeom.mjGEOM_BOX:
            half = np.asarray(size[:3], dtype=float)
            sizes[g] = half
            rbound[g] = float(np.linalg.norm(half))
            aabb[g] = [0, 0, 0, *half]
        elif gtype == mujoco.mjtGeom.mjGEOM_CYLINDER:
            r, h = float(size[0]), float(size[1])
            sizes[g] = [r, h, 0]
            rbound[g] = math.hypot(r, h)
            aabb[g] = [0, 0, 0, r, r, h]
        else:
            raise ValueError(f"prop {name} is not a box or cylinder")


# --------------------------------------------------------------------------- rays
def ray(scene, start: np.ndarray, direction: np.ndarray, exclude: int = -1) -> tuple[float, int]:
    """(distance, geom id) of the first geom hit from ``start`` along ``direction`` (any geom
    group, static included), or (-1, -1)."""
    gid = np.array([-1], dtype=np.int32)
    dist = mujoco.mj_ray(
        scene.model,
        scene.data,
        np.asarray(start, dtype=float),
        np.asarray(direction, dtype=float),
        None,
        1,
        exclude,
        gid,
    )
    return float(dist), int(gid[0])


def surface_below(
    scene, xy: np.ndarray, top_z: float = 3.0, ignore: AbstractSet[int] = frozenset()
) -> tuple[float, int]:
    """(height, root body) of the first surface straight below ``xy`` from ``top_z``, ignoring
    geoms of the root bodies in ``ignore``. (nan, -1) when nothing is below."""
    skip = set(ignore)
    start = np.array([xy[0], xy[1], top_z], dtype=float)
    for _ in range(40):
        dist, gid = ray(scene, start, np.array([0, 0, -1.0]))
        if gid < 0:
            return math.nan, -1
        root = scene.entity_of_geom(gid)
        z = start[2] - dist
        if root not in skip:
            return z, root
        start = np.array([xy[0], xy[1], z - 1e-4])
    return math.nan, -1


def is_support(scene, root: int) -> bool:
    """The arena's table or floor (the world body's floor plane, or a root body that is not an
    object, fixture, robot or prop)."""
    return root == 0 or (is_ground(scene, root) and root not in scene.props.values())


def footprint_points(
    centre_xy: np.ndarray, half_xy: tuple[float, float], yaw_deg: float, step: float = RAY_STEP_M
) -> np.ndarray:
    """Grid of world xy points over a rectangle of half-extents ``half_xy`` centred at
    ``centre_xy`` and turned ``yaw_deg`` (edges included)."""
    nx, ny = (max(2, int(math.ceil(2 * h / step)) + 1) for h in half_xy)
    u, v = np.meshgrid(np.linspace(-half_xy[0], half_xy[0], nx), np.linspace(-half_xy[1], half_xy[1], ny))
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    pts = np.stack([u.ravel(), v.ravel()], axis=1) @ np.array([[c, s], [-s, c]])
    return pts + np.asarray(centre_xy)[:2]


@dataclass
class SpotCheck:
    """Result of :func:`check_spot`: the support height, and what is in the way (entity names)."""

    surface_z: float
    support: int
    blockers: list[str]
    uneven_mm: float

    @property
    def free(self) -> bool:
        return not self.blockers


def check_spot(
    scene,
    centre_xy: np.ndarray,
    half_xy: tuple[float, float],
    yaw_deg: float,
    height: float,
    level_z: float,
    clearance: float = 0.01,
    support: int | None = None,
    ignore: AbstractSet[int] = frozenset(),
    exhaustive: bool = False,
    below_tol: float = SURFACE_TOL_M,
) -> SpotCheck:
    """Whether a prop of footprint ``half_xy`` (turned ``yaw_deg``) and ``height`` can stand at
    ``centre_xy`` on a surface at height ``level_z``: rays from ``clearance`` above the prop's
    top straight down over its footprint inflated by ``clearance`` must meet only the support
    (the table / floor when ``support`` is None, else that root body) at ``level_z``
    (+:data:`SURFACE_TOL_M`, -``below_tol``: a prop may rest on the high points of an uneven
    surface). The roots in ``ignore`` are transparent; props already placed are
    in the way like everything else (a prop still parked is far below). Stops at the first
    blocker unless ``exhaustive``."""
    pts = footprint_points(centre_xy, (half_xy[0] + clearance, half_xy[1] + clearance), yaw_deg)
    top = level_z + height + clearance
    z0, root0 = surface_below(scene, centre_xy, top_z=top, ignore=ignore)
    if root0 < 0:
        return SpotCheck(math.nan, -1, ["nothing below"], 0.0)
    blockers: set[str] = set()

    def ok_support(r: int) -> bool:
        return r == support if support is not None else is_support(scene, r)

    zs = []
    for p in [np.asarray(centre_xy)[:2], *pts]:
        if blockers and not exhaustive:
            break
        z, root = surface_below(scene, p, top_z=top, ignore=ignore)
        if root < 0 or z < level_z - 0.05:
            blockers.add("edge of the support")
            continue
        if not ok_support(root):
            blockers.add(scene.entity_name(root))
        elif z > level_z + SURFACE_TOL_M or z < level_z - below_tol:
            blockers.add(f"support surface at {z:.3f} m, not {level_z:.3f} m")
        else:
            zs.append(z)
    uneven = (max(zs) - min(zs)) * 1000 if zs else 0.0
    return SpotCheck(float(z0), int(root0), sorted(blockers), round(float(uneven), 2))


def ground_level(scene) -> tuple[float, int]:
    """(height, root body) of the arena's table top or floor, below the robot's workspace
    (cast down at the middle of the objects, seeing through every object, fixture and robot)."""
    named = set(scene.inner.obj_body_id.values()) | {scene.robot_root()} | set(scene.props.values())
    xy = np.mean([entity_pose(scene, n)[0][:2] for n in scene.object_names()], axis=0)
    return surface_below(scene, xy, ignore=named)


# --------------------------------------------------------------------------- placing
@dataclass
class PropShape:
    """A prop's extent in its own frame: horizontal half-extents about its origin's xy (may be
    off-centre for an object copy, hence the offset) and the height of its bottom below the
    origin."""

    half_xy: tuple[float, float]
    offset_xy: tuple[float, float]
    bottom: float
    height: float


def prop_type(scene, name: str) -> str | None:
    """The LIBERO object type a prop copies (None for a box or cylinder)."""
    spec = next(p for p in scene.variant.props if p.name == name)
    kind, _, arg = spec.kind.partition(":")
    if kind == "object":
        return arg
    if kind == "clone":
        return scene.inner.objects_dict[arg].category_name
    return None


def prop_base_quat(scene, name: str) -> np.ndarray:
    """A prop's upright orientation (w, x, y, z): LIBERO's for an object copy
    (:func:`liberopro.shifts._objects.natural_quat`), identity for a box or cylinder."""
    from liberopro.shifts._objects import natural_quat

    typ = prop_type(scene, name)
    return natural_quat(typ) if typ else np.array([1.0, 0.0, 0.0, 0.0])


def prop_shape(scene, name: str) -> PropShape:
    """Measure a prop's shape standing upright (:func:`prop_base_quat`); the prop's pose is
    restored."""
    bid = prop_body(scene, name)
    pos0, quat0 = scene.model.body_pos[bid].copy(), scene.model.body_quat[bid].copy()
    scene.model.body_quat[bid] = prop_base_quat(scene, name)
    mujoco.mj_kinematics(scene.model, scene.data)
    lo, hi = geoms_aabb(scene, body_geoms(scene, bid))
    origin = scene.data.xpos[bid].copy()
    scene.model.body_pos[bid], scene.model.body_quat[bid] = pos0, quat0
    mujoco.mj_kinematics(scene.model, scene.data)
    centre = (lo + hi) / 2 - origin
    return PropShape(
        half_xy=(float((hi - lo)[0] / 2), float((hi - lo)[1] / 2)),
        offset_xy=(float(centre[0]), float(centre[1])),
        bottom=float(origin[2] - lo[2]),
        height=float(hi[2] - lo[2]),
    )


def place_prop(
    scene,
    name: str,
    centre_xy: np.ndarray,
    yaw_deg: float,
    surface_z: float,
    shape: PropShape | None = None,
    base_quat: np.ndarray | None = None,
) -> np.ndarray:
    """Stand prop ``name`` with its footprint centred at ``centre_xy``, turned ``yaw_deg`` about
    z from ``base_quat`` (default: its upright pose, :func:`prop_base_quat`), its bottom
    :data:`LIFT_M` above ``surface_z``. Returns the body position. Call ``scene.refresh()``
    after a batch."""
    shape = shape or prop_shape(scene, name)
    base_quat = prop_base_quat(scene, name) if base_quat is None else base_quat
    bid = prop_body(scene, name)
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    off = np.array([c * shape.offset_xy[0] - s * shape.offset_xy[1], s * shape.offset_xy[0] + c * shape.offset_xy[1]])
    pos = np.array([centre_xy[0] - off[0], centre_xy[1] - off[1], surface_z + LIFT_M + shape.bottom])
    quat = quat_mul(yaw_quat(yaw_deg), base_quat)
    scene.model.body_pos[bid] = pos
    scene.model.body_quat[bid] = quat
    mujoco.mj_kinematics(scene.model, scene.data)
    return pos


def prop_record(scene, name: str) -> dict:
    """Where a prop is (body position, yaw) and its measured world bounding box."""
    bid = prop_body(scene, name)
    lo, hi = geoms_aabb(scene, body_geoms(scene, bid))
    return {
        "prop": name,
        "pos": np.round(scene.data.xpos[bid], 4).tolist(),
        "yaw_deg": round(prop_yaw(scene, name), 2),
        "aabb_min": np.round(lo, 4).tolist(),
        "aabb_max": np.round(hi, 4).tolist(),
    }


def prop_yaw(scene, name: str) -> float:
    """A prop's turn about z from its upright pose (deg), from its simulated orientation."""
    bid = prop_body(scene, name)
    q = quat_mul(scene.model.body_quat[bid], quat_conj(prop_base_quat(scene, name)))
    return math.degrees(2 * math.atan2(q[3], q[0]))


def prop_contacts(scene, names: list[str]) -> list[str]:
    """Entities in simulated contact with the props ``names`` (movable objects, drawers,
    the robot: static bodies never report contacts)."""
    bodies = {prop_body(scene, n) for n in names}
    out = set()
    for a, b, _dist, _pos in scene.contacts():
        if a in bodies and b not in bodies:
            out.add(scene.entity_name(b))
        elif b in bodies and a not in bodies:
            out.add(scene.entity_name(a))
    return sorted(out)


def object_positions(scene) -> dict[str, np.ndarray]:
    return {n: scene.object_pose(n)[0] for n in scene.object_names()}


def moved_objects(scene, before: dict[str, np.ndarray], tol: float = 0.003) -> dict[str, float]:
    """Objects that moved more than ``tol`` since ``before`` (name -> metres)."""
    now = object_positions(scene)
    return {
        n: round(float(np.linalg.norm(now[n] - before[n])), 4)
        for n in before
        if np.linalg.norm(now[n] - before[n]) > tol
    }


# --------------------------------------------------------------------------- task geometry
def goal_xy(scene, sem) -> np.ndarray | None:
    """Horizontal position of the goal region: its site when the BDDL names one, else the
    receiver's root body; None without a receiver (articulated goals)."""
    region = sem.receiver_region
    if region and region in scene.inner.object_sites_dict:
        sid = scene.inner.sim.model.site_name2id(region)
        return np.array(scene.data.site_xpos[sid][:2])
    if sem.receiver and sem.receiver in scene.inner.obj_body_id:
        return entity_pose(scene, sem.receiver)[0][:2]
    return None


def target_xy(scene, sem) -> np.ndarray:
    return scene.body_pos(scene.root_body(sem.target))[:2]


def segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Distance from point ``p`` to segment ``ab`` (xy)."""
    ab = b - a
    t = 0.0 if not np.any(ab) else float(np.clip(np.dot(p - a, ab) / np.dot(ab, ab), 0.0, 1.0))
    return float(np.linalg.norm(p - (a + t * ab)))


def task_path(scene, sem) -> list[tuple[np.ndarray, np.ndarray]]:
    """The task's straight path as xy segments: gripper -> target (-> goal region)."""
    eef = scene.eef_pos()[:2]
    tgt = target_xy(scene, sem)
    segs = [(eef, tgt)]
    goal = goal_xy(scene, sem)
    if goal is not None:
        segs.append((tgt, goal))
    return segs


def distance_to_path(p: np.ndarray, path: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return min(segment_distance(np.asarray(p)[:2], a, b) for a, b in path)


# --------------------------------------------------------------------------- occlusion
def target_pixels(scene, sem, camera: str, size: int) -> np.ndarray:
    """Boolean mask (as rendered, upside down) of the target's visual geoms in ``camera``."""
    geoms = visual_geoms(scene, scene.root_body(sem.target)) or body_geoms(scene, scene.root_body(sem.target))
    seg = scene.render(camera, size=size, segmentation=True)
    return np.isin(seg, geoms)


def hidden_fraction(visible_before: np.ndarray, visible_after: np.ndarray) -> float:
    """Fraction of the target's pixels (before) that are no longer its pixels (after)."""
    n = int(visible_before.sum())
    if n == 0:
        return 0.0
    return float((visible_before & ~visible_after).sum()) / n


# --------------------------------------------------------------------------- around the target
@dataclass
class Stack:
    """The target and the movable objects it rests on (a bowl on a ramekin), with the root body
    they stand on (the table, the floor or a fixture) and that surface's height."""

    names: list[str]
    base_support: int
    base_z: float
    lo: np.ndarray
    hi: np.ndarray

    @property
    def centre_xy(self) -> np.ndarray:
        return (self.lo[:2] + self.hi[:2]) / 2


def target_stack(scene, sem) -> Stack:
    """The target's stack (see :class:`Stack`); for a fixture target, the fixture alone."""
    objects = scene.object_names()
    names = [sem.target]
    below = scene.support_below(sem.target) if sem.target in objects else -1
    while below > 0 and scene.entity_name(below) in objects and scene.entity_name(below) not in names:
        names.append(scene.entity_name(below))
        below = scene.support_below(names[-1])
    lo, hi = entity_aabb(scene, names)
    roots = {scene.root_body(n) for n in names}
    z, root = surface_below(scene, (lo[:2] + hi[:2]) / 2, top_z=float(lo[2]) + 0.01, ignore=roots)
    if root < 0 or abs(z - lo[2]) > 0.03:  # the centre overhangs: take the support the target reports
        root, z = (below if below > 0 else 0), float(lo[2])
    return Stack(names, int(root), float(z), lo, hi)


def half_extent_along(lo: np.ndarray, hi: np.ndarray, centre_xy: np.ndarray, u: np.ndarray) -> float:
    """How far the horizontal box [lo, hi] reaches from ``centre_xy`` along unit vector ``u``."""
    corners = np.array([[x, y] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])])
    return float(np.max((corners - centre_xy) @ u))


def rect_gap(a_lo, a_hi, b_lo, b_hi) -> float:
    """Horizontal distance between two axis-aligned boxes (0 when they overlap)."""
    dx = max(0.0, float(max(a_lo[0], b_lo[0]) - min(a_hi[0], b_hi[0])))
    dy = max(0.0, float(max(a_lo[1], b_lo[1]) - min(a_hi[1], b_hi[1])))
    return math.hypot(dx, dy)


def unit(deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(deg)), math.sin(math.radians(deg))])


def fixture_joint_configs(scene) -> list[dict[int, float]]:
    """Joint configurations of the scene's fixtures (drawers, doors, knobs) to test a spot
    against: each joint at its lower limit, its middle and its upper limit (qpos address ->
    value), so that a prop never stands in a drawer's or a door's travel."""
    m = scene.model
    fixture_roots = {scene.root_body(n) for n in scene.fixture_names()}
    joints = [
        j
        for j in range(m.njnt)
        if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        and m.body_rootid[m.jnt_bodyid[j]] in fixture_roots
        and m.jnt_limited[j]
    ]
    if not joints:
        return []
    return [
        {int(m.jnt_qposadr[j]): float(m.jnt_range[j][0] + f * (m.jnt_range[j][1] - m.jnt_range[j][0])) for j in joints}
        for f in (0.0, 0.5, 1.0)
    ]


def check_spot_swept(
    scene, centre_xy, half_xy, yaw_deg, height, level_z, clearance=0.01, support=None, ignore=frozenset()
) -> SpotCheck:
    """:func:`check_spot` in the current state and with every fixture joint at its limits and
    middle (:func:`fixture_joint_configs`); the state is restored. Blockers are merged."""
    first = check_spot(scene, centre_xy, half_xy, yaw_deg, height, level_z, clearance, support, ignore)
    configs = fixture_joint_configs(scene)
    if not first.free or not configs:
        return first
    qpos = scene.data.qpos.copy()
    blockers = set()
    try:
        for cfg in configs:
            for adr, v in cfg.items():
                scene.data.qpos[adr] = v
            mujoco.mj_kinematics(scene.model, scene.data)
            c = check_spot(scene, centre_xy, half_xy, yaw_deg, height, level_z, clearance, support, ignore)
            blockers |= {f"{b} (when opened)" for b in c.blockers if b not in ("edge of the support",)}
    finally:
        scene.data.qpos[:] = qpos
        mujoco.mj_kinematics(scene.model, scene.data)
    return SpotCheck(first.surface_z, first.support, sorted(blockers), first.uneven_mm)


def robot_clearance(scene, names: list[str]) -> float:
    """Smallest distance between the props ``names`` (world boxes) and the robot's geoms (their
    world boxes), metres (0 when they overlap)."""
    robot = scene.robot_root()
    rgeoms = [g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) == robot]
    plo, phi = entity_aabb(scene, names)
    best = math.inf
    for g in rgeoms:
        lo, hi = geoms_aabb(scene, [g])
        d = np.maximum(0, np.maximum(lo - phi, plo - hi))
        best = min(best, float(np.linalg.norm(d)))
    return best


#: Directions tried around the target: the drawn one first, then +-30, +-60, ... degrees.
DIRECTION_STEPS_DEG = (0, 30, -30, 60, -60, 90, -90, 120, -120, 150, -150, 180)


def footprint_reach(shape: PropShape, yaw_deg: float, u: np.ndarray) -> float:
    """How far a prop's footprint (turned ``yaw_deg``) reaches from its footprint centre along
    unit vector ``u``."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    ax, ay = np.array([c, s]), np.array([-s, c])
    return abs(float(ax @ u)) * shape.half_xy[0] + abs(float(ay @ u)) * shape.half_xy[1]


def footprint_gap(scene, name: str, shape: PropShape, stack: Stack, u: np.ndarray) -> float:
    """Measured edge-to-edge distance along ``u`` from the target stack's box to prop ``name``'s
    footprint (its body pose and yaw in the simulator, its own extents)."""
    bid = prop_body(scene, name)
    yaw = prop_yaw(scene, name)
    c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
    off = np.array([c * shape.offset_xy[0] - s * shape.offset_xy[1], s * shape.offset_xy[0] + c * shape.offset_xy[1]])
    centre = scene.data.xpos[bid][:2] + off
    near = float((centre - stack.centre_xy) @ u) - footprint_reach(shape, yaw, u)
    return near - half_extent_along(stack.lo, stack.hi, stack.centre_xy, u)


def place_beside(
    scene,
    name: str,
    stack: Stack,
    gaps: list[float],
    direction_deg: float,
    yaw_deg: float,
    clearance: float,
    min_robot_m: float | None = None,
) -> dict:
    """Stand prop ``name`` on the stack's support, the first of ``gaps`` that fits from the
    stack's box (edge to edge), in world direction ``direction_deg`` (then its neighbours,
    :data:`DIRECTION_STEPS_DEG`),
    turned ``yaw_deg``, wholly inside the third-person view. With ``min_robot_m`` a spot must
    also keep that far from the robot's geoms. Returns what was placed; raises ``ValueError`` with
    every refused direction's reason: :class:`~liberopro.shifts._placement.Blocked` when at least
    one spot was refused only because of the robot (in its column, or within ``min_robot_m``)."""
    from liberopro.shifts._placement import Blocked

    shape = prop_shape(scene, name)
    reasons = []
    tried = 0
    robot = scene.entity_name(scene.robot_root())
    blocked_by_robot = False
    for gap in gaps:
        for step in DIRECTION_STEPS_DEG:
            tried += 1
            direction = (direction_deg + step) % 360
            u = unit(direction)
            dist = half_extent_along(stack.lo, stack.hi, stack.centre_xy, u) + gap + footprint_reach(shape, yaw_deg, u)
            xy = stack.centre_xy + u * dist
            spot = check_spot_swept(
                scene,
                xy,
                shape.half_xy,
                yaw_deg,
                shape.height,
                stack.base_z,
                clearance=clearance,
                support=stack.base_support,
            )
            where = f"{direction:.0f} deg at {gap:.3f} m"
            if not spot.free:
                reasons.append(f"{where}: {', '.join(spot.blockers)}")
                blocked_by_robot |= all(b.removesuffix(" (when opened)") == robot for b in spot.blockers)
                continue
            place_prop(scene, name, xy, yaw_deg, spot.surface_z, shape)
            if not in_view(scene, name):
                reasons.append(f"{where}: outside the third-person view")
                park_one(scene, name)
                continue
            if min_robot_m is not None and robot_clearance(scene, [name]) < min_robot_m:
                reasons.append(f"{where}: within {min_robot_m} m of the robot")
                blocked_by_robot = True
                park_one(scene, name)
                continue
            scene.refresh()
            return {
                "direction_deg": round(direction, 1),
                "gap_m": round(gap, 4),
                "candidates_tried": tried,
                "shape": shape,
                "u": u,
            }
    raise (Blocked if blocked_by_robot else ValueError)("no free spot beside the target: " + "; ".join(reasons))


def park_one(scene, name: str) -> None:
    """Send one prop back to its parking spot."""
    from liberopro.sim.variants import parked_pos

    names = list(scene.props)
    bid = prop_body(scene, name)
    scene.model.body_pos[bid] = parked_pos(names.index(name))
    scene.model.body_quat[bid] = (1.0, 0.0, 0.0, 0.0)
    mujoco.mj_kinematics(scene.model, scene.data)


def mean_colour(image: np.ndarray, mask: np.ndarray) -> list[float]:
    """Mean RGB (0-255) of ``image`` over ``mask``."""
    if not mask.any():
        return [math.nan] * 3
    return [round(float(v), 1) for v in image[mask].reshape(-1, 3).mean(axis=0)]


def project(scene, camera: str, points: np.ndarray) -> np.ndarray:
    """Image coordinates of world ``points`` (N, 3) in ``camera``: (N, 2) as fractions of the
    image, (0, 0) top left to (1, 1) bottom right of the picture as seen (not as rendered);
    NaN for points behind the camera."""
    m, d = scene.model, scene.data
    cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    rot = d.cam_xmat[cid].reshape(3, 3)
    v = (np.asarray(points, dtype=float) - d.cam_xpos[cid]) @ rot  # camera frame: x right, y up, looks along -z
    f = 0.5 / math.tan(math.radians(m.cam_fovy[cid]) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = 0.5 + f * v[:, 0] / -v[:, 2]
        y = 0.5 - f * v[:, 1] / -v[:, 2]
    out = np.stack([x, y], axis=1)
    out[v[:, 2] >= 0] = np.nan
    return out


def in_view(scene, name: str, camera: str = "agentview", margin: float = 0.02) -> bool:
    """Whether prop ``name``'s bounding box lies wholly inside ``camera``'s picture (with a
    ``margin`` as a fraction of the image)."""
    lo, hi = geoms_aabb(scene, body_geoms(scene, prop_body(scene, name)))
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    uv = project(scene, camera, corners)
    return bool(np.all(np.isfinite(uv)) and np.all((uv >= margin) & (uv <= 1 - margin)))
