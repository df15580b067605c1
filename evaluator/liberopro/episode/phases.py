"""Task phases computed from simulator state, never told to the policy.

Definitions (``docs/definition.md``, "Task phases"), made concrete for every kind of LIBERO task.
A task has *actors*, the things the robot acts on:

* every movable object the goal places (``sem.placements``: one for most tasks, two in some
  LIBERO-10 tasks), and
* every articulated *part* the goal sets (``sem.articulations``: the middle drawer of "open the
  middle drawer", the stove knob of "turn on the stove", the microwave door of "... and close
  it"), plus the drawer a placement goes into (libero_goal 3 "open the top drawer and put the
  bowl inside": the BDDL only says ``In(bowl, top_region)``, but the drawer has to be opened
  first).

Parts the robot acts on only after the placements (closing the microwave door or the drawer the
bowl went into, turning the stove on at the end of LIBERO-10 task 8: ``before_placement`` False)
are not phase actors by default: the phases describe the start of the task, and the microwave
door's handle lies within 8 cm of the gripper's start pose in LIBERO-10 task 9, so counting it
would report "approach" for a hand that is on its way to the mug. A tool may follow any part
explicitly (``PhaseTracker(scene, sem, actors=["microwave_1"])``).

A phase is reached at the first step at which it holds for *any* actor, whichever the policy
acts on first (``reached_by`` names it):

* ``approach``: the end effector (grip site, between the finger pads) within
  :data:`APPROACH_RADIUS_M` of the actor's reference box, with no gripper contact with that
  actor so far, having closed in on it by at least :data:`APPROACH_PROGRESS_M` since the policy
  loop began (a gripper that merely starts near it has not approached it). The reference box is
  the object's bounding box (collision geoms, in its body frame: a distance to the box, not to
  the body origin, which sits at the bottom of LIBERO objects; a wine bottle is grasped 15 cm
  above its origin) or, for a part, the box of its handle/knob geoms (:func:`handle_geoms`).
* ``grasp``: first contact of a gripper (finger) geom with an object, or with any geom of a
  part's moving body (its handle or knob, or the drawer front / door panel a policy pushes).
* ``transport``: an object lifted :data:`LIFT_M` above its height at the start of the policy
  loop while the gripper touches it (a tipped-over bottle's origin may rise too; a carried
  object is always touched), or moved :data:`PUSH_M` horizontally while touched (push tasks),
  or a part's joint moved by :data:`PRISMATIC_DELTA_M` (drawer) / :data:`HINGE_DELTA_RAD`
  (door, knob) from its start once the gripper has touched the part (a door nudged by a carried
  mug does not count).
* ``placement``: an object within :data:`PLACEMENT_RADIUS_M` (horizontal) of its goal region and
  not more than :data:`PLACEMENT_BELOW_M` below it, after its own transport; for a task whose
  goal is only articulations (open a drawer, turn on the stove) there is no goal region, and
  placement is the part's goal state reached (LIBERO's own open/close/turn-on ranges) after its
  transport.

The goal region of an object is the BDDL region's site when it has one (``flat_stove_1_cook_region``,
``basket_1_contain_region``, a drawer's region, which moves with the drawer), else the receiver
object's body (``plate_1``). Phases are not required to occur in order (a policy may bump the
target before "approaching" it by this definition); the tracker records the first step of each.

Cost: one vectorised pass over the active contacts and a few small vector operations per actor:
0.1-0.5 ms per update on our CPU machines, about 1% of a camera-less control step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import mujoco
import numpy as np

from liberopro.semantics import ArticulationGoal, TaskSemantics
from liberopro.sim.scene import LiberoScene

Phase = Literal["approach", "grasp", "transport", "placement"]
PHASES: tuple[Phase, ...] = ("approach", "grasp", "transport", "placement")

#: Approach radius (m), from the end effector to the actor's reference box: about a hand's length
#: (the Panda hand with fingers is ~11 cm), so the hand is committed to the object rather than
#: passing by, yet still clear of it (the scripted controller reaches it 10-30 steps before its
#: first contact).
APPROACH_RADIUS_M = 0.10
#: The end effector must have closed in by this much since the loop began (m).
APPROACH_PROGRESS_M = 0.02
#: Lift that counts as "off its support" (m): above contact jitter and settling (< 5 mm), well
#: below a carrying height.
LIFT_M = 0.03
#: Horizontal displacement of a pushed target that counts as transport (m).
PUSH_M = 0.02
#: Joint displacement that counts as the articulation moving: drawers (m) and doors/knobs (rad).
#: 1 cm of a drawer's 16 cm travel; 0.05 rad is 12 mm at the microwave door's handle and 3
#: degrees of the stove knob (whose "on" range starts at 0.5 rad): deliberate motion, far above
#: solver jitter (< 1e-4).
PRISMATIC_DELTA_M = 0.01
HINGE_DELTA_RAD = 0.05
#: Placement radius (m, horizontal) around the goal region: the object is over its goal, about
#: to be put down (LIBERO's own ``On`` needs 3 cm for an object receiver; regions are a few cm).
PLACEMENT_RADIUS_M = 0.08
#: How far below the goal region's reference point the object may be and still count (m): an
#: object inside an open drawer rests ~3 cm below the drawer's region site; one on the table
#: under the cabinet top is not "at" the cabinet top.
PLACEMENT_BELOW_M = 0.05

#: A hinge whose moving geoms all lie within this distance of the axis is a knob, else a door (m).
KNOB_MAX_RADIUS_M = 0.08


# ----------------------------------------------------------------------------- geometry
def geom_local_points(model: mujoco.MjModel, g: int) -> np.ndarray:
    """Points (n, 3) spanning geom ``g``'s shape in its own frame (metres): box corners, mesh
    vertices, points on cylinder/capsule rims, sphere/ellipsoid extremes. Empty for planes."""
    t = int(model.geom_type[g])
    s = np.asarray(model.geom_size[g], dtype=np.float64)
    if t == mujoco.mjtGeom.mjGEOM_BOX:
        return np.array([[x, y, z] for x in (-s[0], s[0]) for y in (-s[1], s[1]) for z in (-s[2], s[2])])
    if t == mujoco.mjtGeom.mjGEOM_MESH:
        mid = int(model.geom_dataid[g])
        a, n = int(model.mesh_vertadr[mid]), int(model.mesh_vertnum[mid])
        return np.asarray(model.mesh_vert[a : a + n], dtype=np.float64)
    if t in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
        ang = np.linspace(0, 2 * np.pi, 12, endpoint=False)
        r = s[0]
        h = s[1] + (r if t == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)
        ring = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1)
        return np.concatenate([np.c_[ring, np.full(12, h)], np.c_[ring, np.full(12, -h)]])
    if t in (mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_ELLIPSOID):
        e = s if t == mujoco.mjtGeom.mjGEOM_ELLIPSOID else np.full(3, s[0])
        return np.concatenate([np.diag(e), -np.diag(e)])
    return np.zeros((0, 3))


def is_collision_geom(model: mujoco.MjModel, g: int) -> bool:
    return bool(model.geom_contype[g] or model.geom_conaffinity[g])


def geom_world_points(scene: LiberoScene, geoms) -> np.ndarray:
    """World points (n, 3) spanning ``geoms`` in the current state."""
    d = scene.data
    pts = [d.geom_xpos[g] + geom_local_points(scene.model, g) @ d.geom_xmat[g].reshape(3, 3).T for g in geoms]
    return np.concatenate(pts) if pts else np.zeros((0, 3))


def subtree_bodies(model: mujoco.MjModel, body: int) -> set[int]:
    """``body`` and all its descendants."""
    out = {body}
    for b in range(body + 1, model.nbody):
        if int(model.body_parentid[b]) in out:
            out.add(b)
    return out


def entity_geoms(scene: LiberoScene, name: str, collision_only: bool = True) -> list[int]:
    """Geoms of an object or fixture (all bodies under its root)."""
    root = scene.root_body(name)
    m = scene.model
    return [
        g for g in range(m.ngeom) if scene.entity_of_geom(g) == root and (not collision_only or is_collision_geom(m, g))
    ]


def _body_frame(scene: LiberoScene, body: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array(scene.data.xpos[body]), np.array(scene.data.xmat[body]).reshape(3, 3)


def _local_box(scene: LiberoScene, body: int, geoms) -> tuple[np.ndarray, np.ndarray]:
    """Bounding box (lo, hi) of ``geoms`` in ``body``'s frame."""
    pos, rot = _body_frame(scene, body)
    local = (geom_world_points(scene, geoms) - pos) @ rot
    return local.min(axis=0), local.max(axis=0)


# ----------------------------------------------------------------------------- articulated parts
@dataclass
class Part:
    """An articulated part of a fixture, resolved in a scene.

    Attributes:
        name: BDDL name (a fixture or one of its regions).
        fixture: owning fixture.
        predicate: the goal's predicate on it (``open`` for the drawer a placement goes into).
        before_placement: acted on before the task's placements (see ``ArticulationGoal``).
        joint: MuJoCo joint name; ``qpos_adr`` its qpos address; ``hinge`` True for a revolute
            joint (door, knob), False for a slide (drawer).
        body: the joint's (moving) body id; ``geoms`` every collision geom it carries.
        handle: the geoms a hand acts through (:func:`handle_geoms`); ``knob`` True for a knob.
        pull_dir: for a drawer, the world direction (unit) in which it opens.
    """

    name: str
    fixture: str
    predicate: str
    joint: str
    qpos_adr: int
    jnt_id: int
    hinge: bool
    body: int
    geoms: list[int]
    handle: list[int] = field(default_factory=list)
    knob: bool = False
    pull_dir: np.ndarray | None = None
    before_placement: bool = True

    def q(self, scene: LiberoScene) -> float:
        return float(scene.data.qpos[self.qpos_adr])

    def ranges(self, scene: LiberoScene) -> dict[str, list[float]]:
        return scene.inner.get_object(self.fixture).object_properties["articulation"]

    def goal_holds(self, scene: LiberoScene, q: float | None = None) -> bool:
        """LIBERO's own test of the predicate on this joint (``is_open``/``is_close`` of the
        fixture class; the turn-on/off ranges read the same way as ``FlatStove.turn_on``)."""
        q = self.q(scene) if q is None else q
        obj = scene.inner.get_object(self.fixture)
        rng = self.ranges(scene)
        if self.predicate == "open":
            return bool(obj.is_open(q))
        if self.predicate == "close":
            return bool(obj.is_close(q))
        if self.predicate == "turnon":
            return q >= min(rng["default_turnon_ranges"])
        return q < max(rng["default_turnoff_ranges"])

    def goal_q(self, scene: LiberoScene) -> float:
        """A joint value inside the goal state: the middle of LIBERO's range for the predicate."""
        rng = self.ranges(scene)
        key = {
            "open": "default_open_ranges",
            "close": "default_close_ranges",
            "turnon": "default_turnon_ranges",
            "turnoff": "default_turnoff_ranges",
        }[self.predicate]
        lo, hi = min(rng[key]), max(rng[key])
        return 0.5 * (lo + hi)

    def axis(self, scene: LiberoScene) -> np.ndarray:
        return np.array(scene.data.xaxis[self.jnt_id])

    def anchor(self, scene: LiberoScene) -> np.ndarray:
        return np.array(scene.data.xanchor[self.jnt_id])

    def handle_pos(self, scene: LiberoScene) -> np.ndarray:
        """Centre of the handle/knob geoms' bounding box (m, world)."""
        pts = geom_world_points(scene, self.handle)
        return 0.5 * (pts.min(axis=0) + pts.max(axis=0))


def resolve_part(scene: LiberoScene, goal: ArticulationGoal) -> Part | None:
    """The joint, moving body and handle of an articulated goal in ``scene`` (None when the part
    has no joint in this scene)."""
    site = scene.inner.object_sites_dict.get(goal.part)
    joints = list(getattr(site, "joints", None) or [])
    if not joints:
        fixture = scene.inner.get_object(goal.fixture)
        joints = [j for j in (getattr(fixture, "joints", None) or [])]
    m = scene.model
    for j in joints:
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        if jid < 0 or m.jnt_type[jid] not in (mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE):
            continue
        body = int(m.jnt_bodyid[jid])
        bodies = subtree_bodies(m, body)
        geoms = [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in bodies and is_collision_geom(m, g)]
        if not geoms:
            continue
        part = Part(
            name=goal.part,
            fixture=goal.fixture,
            predicate=goal.predicate,
            joint=j,
            qpos_adr=int(m.jnt_qposadr[jid]),
            jnt_id=jid,
            hinge=int(m.jnt_type[jid]) == mujoco.mjtJoint.mjJNT_HINGE,
            body=body,
            geoms=geoms,
            before_placement=goal.before_placement,
        )
        part.handle, part.knob, part.pull_dir = handle_geoms(scene, part)
        return part
    return None


def handle_geoms(scene: LiberoScene, part: Part) -> tuple[list[int], bool, np.ndarray | None]:
    """The geoms of a part a hand acts through, read from its geometry (LIBERO names none):

    * drawer (slide joint): the collision geoms standing out furthest in the opening direction
      (within 1 cm of the front-most): the handle bar of LIBERO's cabinets;
    * door (hinge, geoms beyond :data:`KNOB_MAX_RADIUS_M` from the axis): the geoms furthest from
      the hinge (within 1.5 cm): the microwave's handle;
    * knob (hinge, all geoms near the axis): the upper geoms (centres within 1 cm of the highest):
      the stove knob's grip and pointer, not the dial's tick marks.

    Returns (handle geoms, is a knob, opening direction (unit, world) for a drawer else None).
    """
    d = scene.data
    centres = np.array([d.geom_xpos[g] for g in part.geoms])
    if not part.hinge:
        ranges = part.ranges(scene)
        sign = 1.0
        if ranges.get("default_open_ranges") and ranges.get("default_close_ranges"):
            sign = float(np.sign(np.mean(ranges["default_open_ranges"]) - np.mean(ranges["default_close_ranges"])))
        pull = part.axis(scene) * sign
        proj = centres @ pull
        return [g for g, p in zip(part.geoms, proj, strict=True) if p >= proj.max() - 0.01], False, pull
    axis, anchor = part.axis(scene), part.anchor(scene)
    rel = centres - anchor
    radial = np.linalg.norm(rel - np.outer(rel @ axis, axis), axis=1)
    if radial.max() >= KNOB_MAX_RADIUS_M:
        return [g for g, r in zip(part.geoms, radial, strict=True) if r >= radial.max() - 0.015], False, None
    z = centres[:, 2]
    return [g for g, h in zip(part.geoms, z, strict=True) if h >= z.max() - 0.01], True, None


def task_parts(scene: LiberoScene, sem: TaskSemantics) -> list[Part]:
    """The articulated parts of a task: the goal's articulations, then the drawers that
    placements go into (as ``open``), each once."""
    goals = list(sem.articulations)
    named = {g.part for g in goals}
    for _, region in sem.placements:
        site = scene.inner.object_sites_dict.get(region)
        if getattr(site, "joints", None) and region not in named:
            goals.append(
                ArticulationGoal(
                    part=region, fixture=getattr(site, "parent_name", region), predicate="open", before_placement=True
                )
            )
    parts = [resolve_part(scene, g) for g in goals]
    return [p for p in parts if p is not None]


def region_pos(scene: LiberoScene, region: str) -> np.ndarray | None:
    """Reference point (m, world) of a goal region: its site, else the receiver object's or
    fixture's root body."""
    inner = scene.inner
    if region in inner.object_sites_dict:
        sid = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_SITE, region)
        if sid >= 0:
            return np.array(scene.data.site_xpos[sid])
    if region in inner.obj_body_id:
        return scene.body_pos(scene.root_body(region))
    return None


# ----------------------------------------------------------------------------- the tracker
@dataclass
class Actor:
    """Something the robot acts on: a movable object (``part`` None) or an articulated part."""

    name: str
    body: int  # reference body: the object's root, the part's moving body
    box_lo: np.ndarray  # reference box in the body frame
    box_hi: np.ndarray
    part: Part | None = None
    region: str | None = None  # goal region of an object
    start_pos: np.ndarray | None = None
    start_q: float = 0.0
    start_dist: float = 0.0
    contact_seen: bool = False
    transported: bool = False


class PhaseTracker:
    """Follows one episode and reports the step at which each phase was first reached.

    Build it on the settled scene just before the policy loop (the start heights, joint values
    and distances are taken then); call :meth:`update` after every step.

    Args:
        actors: names of the actors to follow (objects of ``sem.placements`` and parts of
            :func:`task_parts`); default: every placed object and every part acted on before
            the placements (see the module docstring).

    Attributes:
        reached: phase -> first step. reached_by: phase -> name of the actor it was reached on.
        actors: the task's actors (objects first, in goal order, then parts).
        touching: names of the actors the gripper touched at the last update.
    """

    def __init__(
        self, scene: LiberoScene, sem: TaskSemantics, actors: list[str] | tuple[str, ...] | None = None
    ) -> None:
        self.scene = scene
        self.sem = sem
        self.reached: dict[Phase, int] = {}
        self.reached_by: dict[Phase, str] = {}
        self.touching: set[str] = set()
        m = scene.model
        self._gripper = np.zeros(m.ngeom, dtype=bool)
        self._gripper[list(scene.gripper_geoms())] = True
        self._owner = np.full(m.ngeom, -1, dtype=np.int64)
        self.actors: list[Actor] = []
        objects = set(scene.object_names())
        placements = [(o, r) for o, r in sem.placements if o in objects]
        if not placements and sem.target_is_movable and sem.target in objects:
            placements = [(sem.target, sem.receiver_region or "")]
        self.parts = task_parts(scene, sem)
        if actors is None:
            wanted = {o for o, _ in placements} | {p.name for p in self.parts if p.before_placement}
        else:
            wanted = set(actors)
            known = {o for o, _ in placements} | {p.name for p in self.parts}
            if wanted - known:
                raise ValueError(f"unknown actors {sorted(wanted - known)}; this task has {sorted(known)}")
        for obj, region in placements:
            if obj not in wanted or any(a.name == obj for a in self.actors):
                continue
            root = scene.root_body(obj)
            geoms = entity_geoms(scene, obj) or entity_geoms(scene, obj, collision_only=False)
            lo, hi = _local_box(scene, root, geoms)
            self._add(
                Actor(obj, root, lo, hi, region=region or None),
                [g for g in range(m.ngeom) if scene.entity_of_geom(g) == root],
            )
        for part in self.parts:
            if part.name not in wanted:
                continue
            lo, hi = _local_box(scene, part.body, part.handle)
            self._add(Actor(part.name, part.body, lo, hi, part=part), part.geoms)
        self._articulation_only = not any(a.part is None for a in self.actors)
        eef = scene.eef_pos()
        for a in self.actors:
            a.start_pos = scene.body_pos(a.body)
            a.start_q = a.part.q(scene) if a.part else 0.0
            a.start_dist = self.distance(a, eef)

    def _add(self, actor: Actor, geoms) -> None:
        idx = len(self.actors)
        self.actors.append(actor)
        for g in geoms:
            if self._owner[g] < 0:
                self._owner[g] = idx

    # ------------------------------------------------------------------ queries
    def actor(self, name: str) -> Actor:
        return next(a for a in self.actors if a.name == name)

    def distance(self, actor: Actor, point: np.ndarray) -> float:
        """Distance (m) from ``point`` (world) to the actor's reference box."""
        pos, rot = _body_frame(self.scene, actor.body)
        local = (np.asarray(point) - pos) @ rot
        return float(np.linalg.norm(local - np.clip(local, actor.box_lo, actor.box_hi)))

    def target_pos(self) -> np.ndarray:
        """Target position (metres, world): the first actor's reference body."""
        return self.scene.body_pos(self.actors[0].body) if self.actors else np.zeros(3)

    def goal_pos(self, name: str | None = None) -> np.ndarray | None:
        """Goal region reference point (m, world) of an object actor (default: the first)."""
        actor = self.actor(name) if name else (self.actors[0] if self.actors else None)
        if actor is None or actor.region is None:
            return None
        return region_pos(self.scene, actor.region)

    def touched_now(self) -> set[str]:
        """Names of the actors a gripper geom touches in the current state."""
        d = self.scene.data
        n = d.ncon
        if n == 0:
            return set()
        con = d.contact
        g1 = np.asarray(con.geom1[:n])
        g2 = np.asarray(con.geom2[:n])
        own = np.where(self._gripper[g1], self._owner[g2], np.where(self._gripper[g2], self._owner[g1], -1))
        return {self.actors[i].name for i in np.unique(own[own >= 0])}

    # ------------------------------------------------------------------ update
    def _transported(self, a: Actor, touched: bool) -> bool:
        """Whether ``a`` is transported now: a part moved past its threshold after contact, an
        object pushed (a push task) or lifted while a gripper touches it."""
        scene = self.scene
        if a.part is not None:
            delta = PRISMATIC_DELTA_M if not a.part.hinge else HINGE_DELTA_RAD
            return a.contact_seen and abs(a.part.q(scene) - a.start_q) >= delta
        start = a.start_pos
        if not touched or start is None:  # start_pos is set when the tracker starts
            return False
        pos = scene.body_pos(a.body)
        if self.sem.kind == "push":
            return bool(np.linalg.norm(pos[:2] - start[:2]) >= PUSH_M)
        return bool(pos[2] - start[2] >= LIFT_M)

    def _placed(self, a: Actor) -> bool:
        """Whether transported ``a`` is placed now: a part whose goal holds (articulation-only
        tasks), an object within the placement radius of its goal region and not below it."""
        scene = self.scene
        if a.part is not None:
            return self._articulation_only and a.part.goal_holds(scene)
        if a.region is None:
            return False
        goal = region_pos(scene, a.region)
        pos = scene.body_pos(a.body)
        return bool(
            goal is not None
            and np.linalg.norm(pos[:2] - goal[:2]) <= PLACEMENT_RADIUS_M
            and pos[2] >= goal[2] - PLACEMENT_BELOW_M
        )

    def update(self, step: int) -> list[Phase]:
        """Evaluate the state after ``step``; returns the phases newly reached at this step."""
        new: dict[Phase, str] = {}
        scene = self.scene
        self.touching = touching = self.touched_now()
        eef = scene.eef_pos()
        for a in self.actors:
            touched = a.name in touching
            if "approach" not in self.reached and "approach" not in new and not a.contact_seen and not touched:
                dist = self.distance(a, eef)
                if dist <= APPROACH_RADIUS_M and dist <= a.start_dist - APPROACH_PROGRESS_M:
                    new["approach"] = a.name
            if touched:
                a.contact_seen = True
                if "grasp" not in self.reached and "grasp" not in new:
                    new["grasp"] = a.name
            if not a.transported:
                a.transported = self._transported(a, touched)
                if a.transported and "transport" not in self.reached and "transport" not in new:
                    new["transport"] = a.name
            if a.transported and "placement" not in self.reached and "placement" not in new and self._placed(a):
                new["placement"] = a.name
        for p, name in new.items():
            self.reached[p] = step
            self.reached_by[p] = name
        return [p for p in PHASES if p in new]
