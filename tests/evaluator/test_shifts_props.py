"""Shifts that add bodies to the scene or swap an object (S04-S09, D04-D06, D09) and the scene
variants behind them, realised on real LIBERO scenes and checked from simulator state, ray casts
and segmentation renders computed here, and from what the policy received; not from the shifts'
own records alone.

Scenes: libero_goal:1 ("put the bowl on the stove": a table with fixtures) and libero_object:5
("pick up the tomato sauce and place it in the basket": objects on the floor). Building a scene
costs seconds, so every prop shift of a task runs in one *union* scene holding all their props
(registered in the shared cache under each shift's own variant): parked props are shown here to
leave the task's scene bit-identical, images and physics. S06 has its own scene (a rewritten
BDDL). Runtime shifts fire through their fallback step (2) under a policy that holds still.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from liberopro.catalog import shift_class
from liberopro.episode.runner import CurrentScene, EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry, semantics_of
from liberopro.shifts._objects import SIZE_M
from liberopro.sim.scene import LiberoScene, SceneVariant
from liberopro.sim.tasks import TaskRef, task_info

from submission_spec import PolicyClient, create_app

from .policies import Recorder, metadata

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

GOAL1 = TaskRef("libero_goal", 1)
OBJECT5 = TaskRef("libero_object", 5)
TASKS = [GOAL1, OBJECT5]
PX = 64
CAMS = ("agentview",)
FIRE = 2  # fallback step of the runtime shifts under test

PARAMS: dict[TaskRef, dict[str, dict]] = {
    GOAL1: {
        "S04": {"side": "near", "gap_m": 0.02, "height_m": 0.04, "overhang_m": 0.01},
        "S05": {"fraction": 0.5, "height_m": 0.08, "width_m": 0.08, "thickness_m": 0.03},
        "S07": {"objects": ["red_coffee_mug", "alphabet_soup", "black_book"]},
        "S08": {
            "lookalike": "white_bowl",
            "target_type": "akita_black_bowl",
            "gap_m": 0.08,
            "direction_deg": 90.0,
            "yaw_deg": 0.0,
        },
        "S09": {"fraction": 0.35, "depth_ratio": 0.3, "side_deg": 30.0},
        "D04": {"fallback_step": FIRE, "cover": 0.2, "height_m": 0.025},
        "D05": {"fallback_step": FIRE, "fraction": 0.5, "height_m": 0.08, "width_m": 0.08, "thickness_m": 0.03},
        "D06": {
            "fallback_step": FIRE,
            "lookalike": "yellow_bowl",
            "target_type": "akita_black_bowl",
            "gap_m": 0.1,
            "direction_deg": 200.0,
            "yaw_deg": 10.0,
        },
        "D09": {"fallback_step": FIRE, "fraction": 0.3, "depth_ratio": 0.25, "side_deg": 200.0},
    },
    OBJECT5: {
        "S04": {"side": "left", "gap_m": 0.015, "height_m": 0.035, "overhang_m": 0.0},
        "S05": {"fraction": 0.45, "height_m": 0.1, "width_m": 0.1, "thickness_m": 0.04},
        "S07": {"objects": ["red_coffee_mug", "red_ramekin"]},
        "S08": {
            "lookalike": "alphabet_soup",
            "target_type": "tomato_sauce",
            "gap_m": 0.06,
            "direction_deg": 0.0,
            "yaw_deg": 20.0,
        },
        "S09": {"fraction": 0.25, "depth_ratio": 0.3, "side_deg": 100.0},
        "D04": {"fallback_step": FIRE, "cover": 0.25, "height_m": 0.02},
        "D05": {"fallback_step": FIRE, "fraction": 0.5, "height_m": 0.08, "width_m": 0.08, "thickness_m": 0.03},
        "D06": {
            "fallback_step": FIRE,
            "lookalike": "red_alphabet_soup",
            "target_type": "tomato_sauce",
            "gap_m": 0.07,
            "direction_deg": 180.0,
            "yaw_deg": 0.0,
        },
        "D09": {"fallback_step": FIRE, "fraction": 0.45, "depth_ratio": 0.3, "side_deg": 300.0},
    },
}
SWAPS = {  # S06: (params, instruction the policy must receive)
    GOAL1: (
        {"object": "akita_black_bowl_1", "from_type": "akita_black_bowl", "to_type": "white_bowl"},
        "put the bowl on the stove",
    ),
    OBJECT5: (
        {"object": "tomato_sauce_1", "from_type": "tomato_sauce", "to_type": "alphabet_soup"},
        "pick up the alphabet soup and place it in the basket",
    ),
}

_union: dict[TaskRef, LiberoScene] = {}
_nominal: dict[TaskRef, dict] = {}


def variant_of(sid: str, params: dict) -> SceneVariant:
    cls = shift_class(sid)
    return cls.scene_variant(cls.Params.model_validate(params))


def union_scene(scenes, ref: TaskRef) -> LiberoScene:
    """One scene with the props of every prop shift of ``ref``, registered in the shared cache
    under each shift's own variant (the runner then uses it for those shifts)."""
    if ref not in _union:
        variant = SceneVariant()
        for sid, params in PARAMS[ref].items():
            variant = variant.merged(variant_of(sid, params))
        scene = LiberoScene(task_info(ref), cameras=CAMS, render_size=PX, variant=variant)
        for sid, params in PARAMS[ref].items():
            scenes[(ref, CAMS, PX, variant_of(sid, params))] = scene
        _union[ref] = scene
    return _union[ref]


def inst(ref: TaskRef, sid: str, params: dict) -> Instance:
    return Instance(
        instance_id=f"test-{sid}", suite=ref.suite, task_index=ref.index, shifts=[ShiftEntry(id=sid, params=params)]
    )


def run(serve_app, scenes, ref: TaskRef, sid: str | None, max_steps: int = 3, policy=None):
    """Run one episode (init state 0, seed 0) of ``ref`` under ``sid`` with the table's
    parameters; returns (record, scene, policy)."""
    policy = policy or Recorder(metadata("hold"))
    if sid is None:
        instance = Instance(instance_id="nominal", suite=ref.suite, task_index=ref.index)
    elif sid == "S06":
        instance = inst(ref, sid, SWAPS[ref][0])
    else:
        union_scene(scenes, ref)
        instance = inst(ref, sid, PARAMS[ref][sid])
    url = serve_app(create_app(policy))
    with PolicyClient(url) as client:
        runner = EpisodeRunner(client, policy.metadata, RunSettings(render_size=PX, max_steps=max_steps), scenes=scenes)
        rec = runner.run_episode(EpisodePlan(instance=instance, episode_index=0, init_state_index=0, seed=0))
        shifts = [shift_class(s.id)(s.params) for s in instance.shifts]
        return rec, runner.scene_for(ref, runner.variant_of(shifts)), policy


def nominal(serve_app, scenes, ref: TaskRef) -> dict:
    """The nominal episode (hold still, 3 steps): frames the policy received, object positions."""
    if ref not in _nominal:
        rec, scene, policy = run(serve_app, scenes, ref, None)
        assert rec.valid and not scene.props
        _nominal[ref] = {
            "frames": [o.images["agentview"].copy() for o in policy.observations],
            "objects": {n: scene.object_pose(n)[0] for n in scene.object_names()},
            "instruction": policy.resets[-1][1],
        }
    return _nominal[ref]


# --------------------------------------------------------------------------- measurements here
def geoms_of(scene, root: int) -> list[int]:
    return [g for g in range(scene.model.ngeom) if scene.model.body_rootid[scene.model.geom_bodyid[g]] == root]


def world_box(scene, root: int, frame: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bounding box of a root body's geoms (world frame, or body ``frame``'s)."""
    m, d = scene.model, scene.data
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in geoms_of(scene, root):
        c, h = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        for sx in (-1, 1):
            for sy in (-1, 1):
                for sz in (-1, 1):
                    p = d.geom_xmat[g].reshape(3, 3) @ (c + h * np.array([sx, sy, sz])) + d.geom_xpos[g]
                    if frame is not None:
                        p = d.xmat[frame].reshape(3, 3).T @ (p - d.xpos[frame])
                    lo, hi = np.minimum(lo, p), np.maximum(hi, p)
    return lo, hi


def ray_down(scene, xy, top: float, skip: set[int]) -> tuple[float, int]:
    """(height, root body) of the first surface below ``xy`` from ``top``, skipping roots."""
    start = np.array([xy[0], xy[1], top])
    gid = np.array([-1], dtype=np.int32)
    for _ in range(30):
        dist = mujoco.mj_ray(scene.model, scene.data, start, np.array([0, 0, -1.0]), None, 1, -1, gid)
        if gid[0] < 0:
            return math.nan, -1
        root = int(scene.model.body_rootid[scene.model.geom_bodyid[gid[0]]])
        if root not in skip:
            return float(start[2] - dist), root
        start = start - np.array([0, 0, dist + 1e-4])
    return math.nan, -1


def floor_height(scene) -> float:
    """Height of the arena's table top / floor under the objects."""
    named = set(scene.inner.obj_body_id.values()) | {scene.body_id(scene.inner.robots[0].robot_model.root_body)}
    xy = np.mean([scene.object_pose(n)[0][:2] for n in scene.object_names()], axis=0)
    return ray_down(scene, xy, 3.0, named | set(scene.props.values()))[0]


def box_gap(a_lo, a_hi, b_lo, b_hi) -> float:
    d = np.maximum(0, np.maximum(a_lo[:2] - b_hi[:2], b_lo[:2] - a_hi[:2]))
    return float(np.linalg.norm(d))


def footprint(scene, root: int) -> np.ndarray:
    """Convex hull (counter-clockwise, world xy) of a root body's geom boxes: its oriented
    footprint, tighter than a world-axis box for a turned object."""
    m, d = scene.model, scene.data
    pts = []
    for g in geoms_of(scene, root):
        c, h = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
            pts.append((d.geom_xmat[g].reshape(3, 3) @ (c + h * corner) + d.geom_xpos[g])[:2])
    pts = sorted(map(tuple, np.round(pts, 6)))

    def half(points):
        out = []
        for q in points:
            while len(out) >= 2 and np.cross(np.subtract(out[-1], out[-2]), np.subtract(q, out[-2])) <= 0:
                out.pop()
            out.append(q)
        return out[:-1]

    return np.array(half(pts) + half(pts[::-1]))


def footprints_separated(a: np.ndarray, b: np.ndarray) -> bool:
    """Separating-axis test of two convex polygons (world xy)."""
    for poly in (a, b):
        for i in range(len(poly)):
            edge = poly[(i + 1) % len(poly)] - poly[i]
            axis = np.array([-edge[1], edge[0]])
            pa, pb = a @ axis, b @ axis
            if pa.max() < pb.min() or pb.max() < pa.min():
                return True
    return False


def prop_contacts(scene, root: int) -> list[int]:
    d = scene.data
    out = []
    for i in range(d.ncon):
        a, b = (
            int(scene.model.body_rootid[scene.model.geom_bodyid[g]]) for g in (d.contact[i].geom1, d.contact[i].geom2)
        )
        if root in (a, b) and a != b:
            out.append(b if a == root else a)
    return out


def target_mask(scene, ref: TaskRef, size: int = 256) -> np.ndarray:
    root = scene.root_body(semantics_of(ref).target)
    geoms = [g for g in geoms_of(scene, root) if scene.model.geom_group[g] == 1]
    return np.isin(scene.render("agentview", size=size, segmentation=True), geoms)


def goal_xy(scene, ref: TaskRef) -> np.ndarray:
    sem = semantics_of(ref)
    sid = scene.inner.sim.model.site_name2id(sem.receiver_region)
    return np.array(scene.data.site_xpos[sid][:2])


def seg_distance(p, a, b) -> float:
    t = float(np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1))
    return float(np.linalg.norm(p - (a + t * (b - a))))


# --------------------------------------------------------------------------- the variants
def test_parked_props_leave_the_task_scene_bit_identical_and_are_parked_again_at_every_episode(serve_app, scenes):
    ref = GOAL1
    plain = EpisodeRunner(None, metadata("hold"), RunSettings(render_size=PX), scenes=scenes).scene_for(ref)
    union = union_scene(scenes, ref)
    # props come after every body of the task's model: ids and joint layout unchanged
    assert (union.model.nq, union.model.nv) == (plain.model.nq, plain.model.nv)
    assert min(union.props.values()) == plain.model.nbody
    assert {int(r) for r in union.model.body_rootid[plain.model.nbody :]} == set(union.props.values())
    assert [union.body_name(b) for b in range(plain.model.nbody)] == [
        plain.body_name(b) for b in range(plain.model.nbody)
    ]
    assert union.model.stat.extent == plain.model.stat.extent

    def episode(scene):
        scene.start_episode(task_info(ref).init_states()[1], 7)
        scene.settle()
        frames = []
        for _ in range(4):
            scene.step(np.array([0.4, -0.3, -0.2, 0, 0, 0, -1.0]))
            frames.append(scene.frame().images["agentview"].copy())
        return frames, scene.data.qpos.copy()

    f0, q0 = episode(plain)
    # move every prop into the middle of the table first: start_episode must park them again
    for bid in union.props.values():
        union.model.body_pos[bid] = (-0.1, 0.0, 0.95)
    f1, q1 = episode(union)
    np.testing.assert_array_equal(q0, q1)
    for a, b in zip(f0, f1, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(union.data.xpos[b][2] < -15 for b in union.props.values())


# --------------------------------------------------------------------------- static shifts
@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s04_a_low_blocker_closes_the_stated_side_and_leaves_a_top_grasp(serve_app, scenes, ref):
    p = PARAMS[ref]["S04"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, _ = run(serve_app, scenes, ref, "S04")
    assert rec.valid, rec.detail
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_s04_blocker"]
    target = scene.root_body(sem.target)
    t_lo, t_hi = world_box(scene, target)
    b_lo, b_hi = world_box(scene, bid)
    floor = floor_height(scene)
    assert abs(b_lo[2] - floor) < 0.003 and b_hi[2] - b_lo[2] == pytest.approx(p["height_m"], abs=1e-4)
    # on the stated side: from the target toward the robot base ("near") / the robot's left (+y-ish)
    centre = (t_lo[:2] + t_hi[:2]) / 2
    to_robot = scene.body_pos(scene.robot_root())[:2] - centre
    to_robot /= np.linalg.norm(to_robot)
    side = {"near": to_robot, "left": np.array([to_robot[1], -to_robot[0]])}[p["side"]]
    offset = scene.data.xpos[bid][:2] - centre
    assert np.dot(offset, side) / np.linalg.norm(offset) > 0.9
    # thickness face to the target's box: the stated gap
    half_thick = scene.model.geom_size[geoms_of(scene, bid)[0]][0]
    reach = max(np.dot(np.array([x, y]) - centre, side) for x in (t_lo[0], t_hi[0]) for y in (t_lo[1], t_hi[1]))
    assert np.dot(offset, side) - half_thick - reach == pytest.approx(p["gap_m"], abs=0.003)
    # a top grasp stays possible: nothing above the target for 15 cm
    gid = np.array([-1], dtype=np.int32)
    dist = mujoco.mj_ray(
        scene.model, scene.data, np.array([*centre, t_hi[2] + 0.005]), np.array([0, 0, 1.0]), None, 1, -1, gid
    )
    assert gid[0] < 0 or dist > 0.15 or scene.model.body_rootid[scene.model.geom_bodyid[gid[0]]] == scene.robot_root()
    # it touches nothing and moved nothing
    assert prop_contacts(scene, bid) == []
    for n, pos in nom["objects"].items():
        assert np.linalg.norm(scene.object_pose(n)[0] - pos) < 0.004, n


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s05_an_obstacle_stands_on_the_straight_path_from_target_to_goal(serve_app, scenes, ref):
    p = PARAMS[ref]["S05"]
    rec, scene, _ = run(serve_app, scenes, ref, "S05")
    assert rec.valid, rec.detail
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_s05_obstacle"]
    a = np.array(rec.shifts[0]["applied"]["path_from"])
    t_lo, t_hi = world_box(scene, scene.root_body(sem.target))
    assert np.linalg.norm(a - (t_lo[:2] + t_hi[:2]) / 2) < 0.01  # the path starts at the target
    b = goal_xy(scene, ref)
    pos = scene.data.xpos[bid]
    assert seg_distance(pos[:2], a, b) < 0.001
    assert 0.25 <= np.linalg.norm(pos[:2] - a) / np.linalg.norm(b - a) <= 0.75
    lo, hi = world_box(scene, bid)
    floor = floor_height(scene)
    assert abs(lo[2] - floor) < 0.003 and hi[2] - floor <= p["height_m"] + 0.002
    # over stays possible: nothing above it for 35 cm
    assert rec.shifts[0]["applied"]["post_condition"]["over_free"]
    gid = np.array([-1], dtype=np.int32)
    dist = mujoco.mj_ray(
        scene.model, scene.data, np.array([pos[0], pos[1], hi[2] + 0.002]), np.array([0, 0, 1.0]), None, 1, -1, gid
    )
    assert gid[0] < 0 or dist > 0.35 or scene.model.body_rootid[scene.model.geom_bodyid[gid[0]]] == scene.robot_root()
    assert prop_contacts(scene, bid) == []


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s06_the_target_is_another_instance_under_its_bddl_name_and_the_state_still_fits(serve_app, scenes, ref):
    params, text = SWAPS[ref]
    nom = nominal(serve_app, scenes, ref)
    policy = Recorder(metadata("hold"))
    rec, scene, policy = run(serve_app, scenes, ref, "S06", policy=policy)
    assert rec.valid, rec.detail
    plain = EpisodeRunner(None, metadata("hold"), RunSettings(render_size=PX), scenes=scenes).scene_for(ref)
    # the free joint replaced a free joint: the model's state vector and the object order are the task's
    assert (scene.model.nq, scene.model.nv) == (plain.model.nq, plain.model.nv)
    assert scene.object_names() == plain.object_names()
    assert scene.inner.objects_dict[params["object"]].category_name == params["to_type"]
    # the simulated body is the new type: its extents in its own frame are the new type's
    root = scene.root_body(params["object"])
    lo, hi = world_box(scene, root, frame=root)
    np.testing.assert_allclose(hi - lo, SIZE_M[params["to_type"]], atol=0.004)

    # and its meshes are not the old type's (cans of the same size differ only in their meshes;
    # mesh names follow the BDDL object name, so compare the vertices)
    def meshes(sc):
        m, r = sc.model, sc.root_body(params["object"])
        out = set()
        for g in geoms_of(sc, r):
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
                mid = int(m.geom_dataid[g])
                verts = m.mesh_vert[m.mesh_vertadr[mid] : m.mesh_vertadr[mid] + m.mesh_vertnum[mid]]
                out.add((int(m.mesh_vertnum[mid]), round(float(np.abs(verts).sum()), 4)))
        return out

    assert meshes(scene) and meshes(plain) and meshes(scene).isdisjoint(meshes(plain))
    # it rests where the old one was (same stored init state), on the same support
    assert np.linalg.norm(scene.object_pose(params["object"])[0][:2] - nom["objects"][params["object"]][:2]) < 0.01
    assert scene.entity_name(scene.support_below(params["object"])) in ("table", "main_table", "floor", "world")
    # LIBERO's goal check names it: the goal predicate reads the swapped object
    assert params["object"] in str(scene.inner.parsed_problem["goal_state"])
    # the instruction: kept where still true ("bowl"), renamed where false ("tomato sauce")
    assert policy.resets[-1][1] == text == rec.instruction
    assert (text == nom["instruction"]) == (ref == GOAL1)


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s07_clutter_stands_in_free_table_space_clear_of_the_task_path(serve_app, scenes, ref):
    p = PARAMS[ref]["S07"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "S07")
    assert rec.valid, rec.detail
    sem = semantics_of(ref)
    floor = floor_height(scene)
    feet = []
    target = scene.object_pose(sem.target)[0][:2]
    goal = goal_xy(scene, ref)
    for i, _ in enumerate(p["objects"]):
        bid = scene.props[f"liberopro_prop_s07_clutter{i}"]
        lo, hi = world_box(scene, bid)
        assert abs(lo[2] - floor) < 0.003
        assert prop_contacts(scene, bid) == []
        centre = (lo[:2] + hi[:2]) / 2
        assert seg_distance(centre, target, goal) > 0.06  # clear of the target-goal path
        feet.append(footprint(scene, bid))
    # Props are static bodies, which MuJoCo never collides with each other: check that their
    # oriented footprints do not overlap (world-axis boxes of turned objects may).
    for i in range(len(feet)):
        for j in range(i + 1, len(feet)):
            assert footprints_separated(feet[i], feet[j]), (i, j)
    seg = scene.render("agentview", size=128, segmentation=True)
    for i, _ in enumerate(p["objects"]):  # each is in view
        bid = scene.props[f"liberopro_prop_s07_clutter{i}"]
        assert np.isin(seg, geoms_of(scene, bid)).sum() > 10
    for n, pos in nom["objects"].items():
        assert np.linalg.norm(scene.object_pose(n)[0] - pos) < 0.004, n
    assert np.abs(policy.observations[0].images["agentview"].astype(int) - nom["frames"][0]).sum() > 0


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s08_a_lookalike_stands_5_to_15_cm_from_the_target_and_the_instruction_names_the_target(serve_app, scenes, ref):
    p = PARAMS[ref]["S08"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "S08")
    assert rec.valid, rec.detail
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_s08_lookalike"]
    t_lo, t_hi = world_box(scene, scene.root_body(sem.target))
    lo, hi = world_box(scene, bid)
    assert 0.04 <= box_gap(lo, hi, t_lo, t_hi) <= 0.16
    own_lo, own_hi = world_box(scene, bid, frame=bid)  # a copy of the stated type
    np.testing.assert_allclose(own_hi - own_lo, SIZE_M[p["lookalike"]], atol=0.004)
    z, root = ray_down(scene, (lo[:2] + hi[:2]) / 2, lo[2] + 0.01, {bid})
    assert abs(lo[2] - z) < 0.004 and root not in scene.inner.obj_body_id.values()
    assert prop_contacts(scene, bid) == []
    seg = scene.render("agentview", size=128, segmentation=True)
    assert np.isin(seg, [g for g in geoms_of(scene, bid) if scene.model.geom_group[g] == 1]).sum() > 10
    # goal:1 "put the bowl on the stove" would fit the white bowl: the policy hears "black bowl"
    expected = {GOAL1: "put the black bowl on the stove", OBJECT5: nom["instruction"]}[ref]
    assert policy.resets[-1][1] == expected


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_s09_an_occluder_near_the_camera_hides_the_stated_share_of_the_target(serve_app, scenes, ref):
    p = PARAMS[ref]["S09"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "S09", max_steps=1)
    assert rec.valid, rec.detail
    bid = scene.props["liberopro_prop_s09_occluder"]
    with_board = target_mask(scene, ref, 512)
    pos = scene.model.body_pos[bid].copy()
    scene.model.body_pos[bid] = pos + np.array([0, 0, -30.0])
    mujoco.mj_kinematics(scene.model, scene.data)
    without = target_mask(scene, ref, 512)
    scene.model.body_pos[bid] = pos
    mujoco.mj_kinematics(scene.model, scene.data)
    hidden = (without & ~with_board).sum() / without.sum()
    assert 0.2 - 0.05 <= hidden <= 0.5 + 0.05 and hidden == pytest.approx(p["fraction"], abs=0.06)
    # out of the robot's reach and without collisions
    assert np.linalg.norm(scene.data.xpos[bid] - scene.body_pos(scene.robot_root())) > 0.9
    assert all(scene.model.geom_contype[g] == 0 and scene.model.geom_conaffinity[g] == 0 for g in geoms_of(scene, bid))
    # the policy's picture shows it
    assert np.abs(policy.observations[0].images["agentview"].astype(int) - nom["frames"][0]).max() > 30


# --------------------------------------------------------------------------- runtime shifts
def fired_at_fallback(rec, policy, nom) -> None:
    """Fired by the fallback at step FIRE; the frames before it are the nominal ones."""
    assert rec.valid, rec.detail
    assert rec.shifts[0]["fired_by"] == "fallback" and rec.shifts[0]["fired_at_step"] == FIRE
    for t in range(FIRE):
        np.testing.assert_array_equal(policy.observations[t].images["agentview"], nom["frames"][t])


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_d04_a_block_lands_on_part_of_the_goal_region_at_fire_time(serve_app, scenes, ref):
    p = PARAMS[ref]["D04"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "D04")
    fired_at_fallback(rec, policy, nom)
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_d04_block"]
    sid = scene.inner.sim.model.site_name2id(sem.receiver_region)
    owner = int(scene.model.body_rootid[scene.model.site_bodyid[sid]])
    centre, half = scene.data.site_xpos[sid][:2], scene.model.site_size[sid][:2]
    rot = scene.data.site_xmat[sid].reshape(3, 3)[:2, :2]
    lo, hi = world_box(scene, bid)
    for x in (lo[0], hi[0]):  # wholly inside the region
        for y in (lo[1], hi[1]):
            local = rot.T @ (np.array([x, y]) - centre)
            assert np.all(np.abs(local) <= half + 0.01)
    covered = (hi[0] - lo[0]) * (hi[1] - lo[1]) / (4 * half[0] * half[1])
    assert 0.1 <= covered <= 0.5
    assert rec.shifts[0]["params"]["height_m"] == pytest.approx(hi[2] - lo[2], abs=1e-3) == p["height_m"]
    # it rests on the region's owner (the stove / the basket), touching nothing
    z, root = ray_down(scene, (lo[:2] + hi[:2]) / 2, hi[2] + 0.01, {bid})
    assert root == owner and -0.001 <= lo[2] - z <= 0.04
    assert prop_contacts(scene, bid) == []


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_d05_an_obstacle_appears_on_the_remaining_path_at_fire_time(serve_app, scenes, ref):
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "D05")
    fired_at_fallback(rec, policy, nom)
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_d05_obstacle"]
    a = scene.body_pos(scene.root_body(sem.target))[:2]  # held still: where it was at fire time
    b = goal_xy(scene, ref)
    pos = scene.data.xpos[bid]
    assert seg_distance(pos[:2], a, b) < 0.005
    lo, hi = world_box(scene, bid)
    assert abs(lo[2] - floor_height(scene)) < 0.003
    assert prop_contacts(scene, bid) == []
    assert np.abs(policy.observations[FIRE].images["agentview"].astype(int) - nom["frames"][FIRE]).max() > 30


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_d06_a_lookalike_appears_beside_the_target_at_fire_time(serve_app, scenes, ref):
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "D06")
    fired_at_fallback(rec, policy, nom)
    sem = semantics_of(ref)
    bid = scene.props["liberopro_prop_d06_lookalike"]
    t_lo, t_hi = world_box(scene, scene.root_body(sem.target))
    lo, hi = world_box(scene, bid)
    assert 0.04 <= box_gap(lo, hi, t_lo, t_hi) <= 0.16
    assert prop_contacts(scene, bid) == []
    assert np.abs(policy.observations[FIRE].images["agentview"].astype(int) - nom["frames"][FIRE]).max() > 30
    expected = {GOAL1: "put the black bowl on the stove", OBJECT5: nom["instruction"]}[ref]
    assert policy.resets[-1][1] == expected  # from the first step on


@pytest.mark.parametrize("ref", TASKS, ids=str)
def test_d09_an_occluder_enters_the_line_of_sight_at_fire_time(serve_app, scenes, ref):
    p = PARAMS[ref]["D09"]
    nom = nominal(serve_app, scenes, ref)
    rec, scene, policy = run(serve_app, scenes, ref, "D09")
    fired_at_fallback(rec, policy, nom)
    bid = scene.props["liberopro_prop_d09_occluder"]
    with_board = target_mask(scene, ref, 512)
    pos = scene.model.body_pos[bid].copy()
    scene.model.body_pos[bid] = pos + np.array([0, 0, -30.0])
    mujoco.mj_kinematics(scene.model, scene.data)
    without = target_mask(scene, ref, 512)
    scene.model.body_pos[bid] = pos
    mujoco.mj_kinematics(scene.model, scene.data)
    assert (without & ~with_board).sum() / without.sum() == pytest.approx(p["fraction"], abs=0.06)
    assert np.abs(policy.observations[FIRE].images["agentview"].astype(int) - nom["frames"][FIRE]).max() > 30


def test_d09_the_arm_in_front_of_the_target_neither_blocks_nor_moves_the_occluder(serve_app, scenes):
    """Issue 22, item 5: D09 measures the occlusion with the robot out of the picture, so a policy
    that brings the gripper between the agentview camera and the target by the firing step gets
    the board of a policy that holds still, at the same place, hiding the stated share; the arm
    does hide part of the target then (measured here), which used to shift the board or, with
    the post-condition's 0.05 tolerance exceeded, void the episode."""
    from liberopro.shifts.s09_occlusion import robot_out_of_view

    from .policies import toward

    ref, late = GOAL1, 25
    params = {**PARAMS[ref]["D09"], "fallback_step": late}
    scene = union_scene(scenes, ref)  # D09's props do not depend on its parameters
    sem = semantics_of(ref)
    cam = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_CAMERA, "agentview")

    def in_front() -> np.ndarray:  # 12 cm from the target toward the camera
        target = scene.body_pos(scene.root_body(sem.target))
        return target + 0.12 * (scene.data.cam_xpos[cam] - target) / np.linalg.norm(scene.data.cam_xpos[cam] - target)

    recs = {}
    for name, fn in (("still", None), ("in front", toward(in_front, offset=(0.0, 0.0, 0.0), gain=1.0))):
        policy = Recorder(metadata("hold"), fn)
        url = serve_app(create_app(policy))
        with PolicyClient(url) as client:
            runner = EpisodeRunner(
                client, policy.metadata, RunSettings(render_size=PX, max_steps=late + 1), scenes=scenes
            )
            recs[name] = runner.run_episode(EpisodePlan(inst(ref, "D09", params), 0, 0, 0))
        assert recs[name].valid and recs[name].termination_reason == "horizon", recs[name].detail
        assert (recs[name].shifts[0]["fired_by"], recs[name].shifts[0]["fired_at_step"]) == ("fallback", late)
    # after the last step of the arm's episode, the board parked: the arm hides a good share of the target
    bid = scene.props["liberopro_prop_d09_occluder"]
    pos = scene.model.body_pos[bid].copy()
    scene.model.body_pos[bid] = pos + np.array([0, 0, -30.0])
    mujoco.mj_kinematics(scene.model, scene.data)
    xpos = scene.data.xpos.copy()
    with_arm = target_mask(scene, ref, 256)
    with robot_out_of_view(scene):
        without_arm = target_mask(scene, ref, 256)
    np.testing.assert_array_equal(scene.data.xpos, xpos)  # put back exactly
    scene.model.body_pos[bid] = pos
    mujoco.mj_kinematics(scene.model, scene.data)
    assert (without_arm & ~with_arm).sum() / without_arm.sum() > 0.1
    still, arm = (recs[k].shifts[0]["applied"] for k in ("still", "in front"))
    assert arm["robot_excluded"] and arm["offset_m"] == still["offset_m"] and arm["board_m"] == still["board_m"]
    assert arm["post_condition"]["hidden_fraction"] == pytest.approx(params["fraction"], abs=0.05)


def test_prop_shifts_are_deterministic_per_episode(serve_app, scenes):
    first, _, _ = run(serve_app, scenes, GOAL1, "S07", max_steps=1)
    second, scene, _ = run(serve_app, scenes, GOAL1, "S07", max_steps=1)
    assert first.shifts[0]["applied"] == second.shifts[0]["applied"]


def test_closing_a_scene_frees_its_gl_context_at_once_and_others_still_render(serve_app, scenes):
    """A closed scene's EGL context is freed by close(), not later by the garbage collector
    (whose eglReleaseThread could unbind another scene's context between its make_current and
    its render, which then returns the previous pixels)."""
    nominal(serve_app, scenes, GOAL1)
    plain = EpisodeRunner(None, metadata("hold"), RunSettings(render_size=PX), scenes=scenes).scene_for(GOAL1)
    extra = LiberoScene(task_info(OBJECT5), cameras=CAMS, render_size=PX)
    extra.render("agentview", PX)
    ctx = extra.inner.sim._render_context_offscreen
    extra.close()
    assert ctx.gl_ctx._context is None
    assert ctx.con.offFBO == 0 and ctx.con.ntexture == 0  # its GL objects were freed in its own context
    ctx.con.free()  # what the garbage collector will run later, with another context current: nothing left
    assert plain.render("agentview", 96).astype(float).mean() > 0
    before = plain.render("agentview", 96).astype(float).mean()
    light = plain.model_field("light_diffuse")
    saved = light.copy()
    try:
        light[:] = saved * 0.2
        plain.refresh()
        assert plain.render("agentview", 96).astype(float).mean() < 0.8 * before
    finally:
        light[:] = saved
        plain.refresh()


def test_privileged_controllers_steer_by_the_episodes_own_scene(serve_app, scenes):
    """A prop shift's episode runs in a variant scene of its own: the validation controller
    (manifests) must read that scene, not the task's plain scene that the cache also holds
    (reading the plain one, it steered by a robot that never moved)."""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.instances.generation import _validation_metadata, _ValidationPolicy

    nominal(serve_app, scenes, GOAL1)  # the plain scene is in the cache first
    meta = _validation_metadata(["D04"])
    scene = CurrentScene()
    policy = _ValidationPolicy(meta, scene, GOAL1)
    runner = scene.bind(
        EpisodeRunner(LocalPolicyClient(policy), meta, RunSettings(render_size=PX, max_steps=3), scenes=scenes)
    )
    runner.run_episode(EpisodePlan(inst(GOAL1, "D04", PARAMS[GOAL1]["D04"]), 0, 0, 0))
    assert runner.current_scene is not None and "liberopro_prop_d04_block" in runner.current_scene.props
    assert policy._controller is not None and policy._controller.scene is runner.current_scene


@pytest.mark.parametrize("ref", [TaskRef("libero_object", 2)], ids=str)
def test_d04_fires_by_phase_at_transport_under_the_oracle_where_placement_had_no_spot(scenes, ref):
    """D04 fires at transport (a documented deviation, docs/shifts.md): on this task, fired at
    its definition's placement phase, the block found "no free spot on the goal region" and the
    episode was invalid (docs/instances.md, "Known limits of this run"). Driven by the privileged
    validation controller, without cameras, with a fallback too late to matter. (LIBERO-Spatial
    task 3, once here too, is refused by D04's footprint rule since issue 22:
    ``tests/evaluator/test_static_validity.py``.)"""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.instances.generation import _validation_metadata, _ValidationPolicy

    meta = _validation_metadata(["D04"])
    assert meta.cameras == []
    settings = RunSettings(render_size=PX, max_steps=300, stop_when_shifts_done=True)
    scene = CurrentScene()
    runner = scene.bind(
        EpisodeRunner(LocalPolicyClient(_ValidationPolicy(meta, scene, ref)), meta, settings, scenes=scenes)
    )
    params = {"cover": 0.2, "height_m": 0.025, "fallback_step": 299}
    rec = runner.run_episode(EpisodePlan(inst(ref, "D04", params), 0, 0, 0))
    shift = rec.shifts[0]
    assert rec.valid, rec.detail
    assert shift["params"]["trigger"] == "transport"
    assert shift["fired_by"] == "phase" and shift["fired_at_step"] < 299, shift
    post = shift["applied"]["post_condition"]
    assert 0.1 <= post["covered_fraction"] <= 0.5 and not post["touching"]
    assert post["free_area_m2"] >= post["target_footprint_m2"]  # issue 22: the target fits beside the block
