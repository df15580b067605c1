"""Geometry and appearance shifts that need no extra bodies (S02, S03, S10, S11, S13, D02, D03,
D07, D08), realised on real LIBERO scenes and checked from simulator state and rendered pixels
(what the policy received, segmentation renders), not from the shifts' own records alone.

Scenes: libero_goal:8 ("put the bowl on the plate"), libero_spatial:5 (the bowl on the ramekin:
a stacked target; the second black bowl is a look-alike), libero_object:0 (the objects stand on
the floor), libero_goal:5 (push the plate to the front of the stove: a goal region of the table,
named after the stove). Every shifted episode is compared with a nominal episode of the same
init state and seed: static physics is deterministic, so any difference is the shift's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry, make_instance, semantics_of
from liberopro.oracle.scripted import ScriptedController
from liberopro.shifts._placement import is_ground
from liberopro.sim.observation import orient
from liberopro.sim.tasks import TaskRef

from submission_spec import PolicyClient, create_app

from .policies import Recorder, metadata

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

GOAL8 = TaskRef("libero_goal", 8)
GOAL5 = TaskRef("libero_goal", 5)
SPATIAL5 = TaskRef("libero_spatial", 5)
OBJECT0 = TaskRef("libero_object", 0)
PX = 64

_nominal: dict = {}


def run(serve_app, scenes, policy, instance: Instance, max_steps: int):
    url = serve_app(create_app(policy))
    with PolicyClient(url) as client:
        runner = EpisodeRunner(client, policy.metadata, RunSettings(render_size=PX, max_steps=max_steps), scenes=scenes)
        plan = EpisodePlan(instance=instance, episode_index=0, init_state_index=0, seed=0)
        return runner.run_episode(plan), runner.scene_for(instance.task)


def inst(ref: TaskRef, shift_id: str, params: dict) -> Instance:
    return Instance(
        instance_id=f"test-{shift_id}",
        suite=ref.suite,
        task_index=ref.index,
        shifts=[ShiftEntry(id=shift_id, params=params)],
    )


def poses(scene) -> dict[str, np.ndarray]:
    from liberopro.shifts._placement import entity_pose

    return {
        n: entity_pose(scene, n)[0].copy()
        for n in scene.object_names() + scene.fixture_names()
        if n in scene.inner.obj_body_id
    }


def scene_of(scenes, ref: TaskRef):
    """The shared scene the runner uses for ``ref`` (built if needed), so that a test policy can
    read privileged state from it."""
    return EpisodeRunner(None, metadata("hold"), RunSettings(render_size=PX), scenes=scenes).scene_for(ref)


def nominal(serve_app, scenes, ref: TaskRef, steps: int = 10) -> dict:
    """Nominal episode of ``ref`` (hold still, ``steps`` steps), cached per task: the frames the
    policy received, entity poses after settling and after the run, camera pose, goal-region
    sites, segmentation (in the policy's image orientation), lights."""
    if ref not in _nominal:
        scene = scene_of(scenes, ref)
        settled: dict = {}

        def act(obs):
            if not settled:
                settled.update(poses(scene))
            return np.array([[0, 0, 0, 0, 0, 0, -1.0]])

        policy = Recorder(metadata("hold"), act)
        rec, scene = run(
            serve_app,
            scenes,
            policy,
            Instance(instance_id="nominal", suite=ref.suite, task_index=ref.index),
            max_steps=steps,
        )
        assert rec.valid and rec.steps == steps
        cid = scene.inner.sim.model.camera_name2id("agentview")
        seg = scene.render("agentview", PX, segmentation=True)
        _nominal[ref] = {
            "frames": [o.images["agentview"].astype(np.float64) for o in policy.observations],
            "settled": settled,
            "end": poses(scene),
            "cam": (scene.data.cam_xpos[cid].copy(), scene.data.cam_xmat[cid].reshape(3, 3).copy()),
            "sites": {
                n: scene.data.site_xpos[scene.inner.sim.model.site_name2id(n)].copy()
                for n in scene.inner.object_sites_dict
            },
            "seg": orient(seg, policy.metadata.image_orientation),
            "light_diffuse": scene.model.light_diffuse.copy(),
        }
    return _nominal[ref]


def geoms_of(scene, roots: set[int]) -> list[int]:
    return [g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) in roots]


def grow(mask: np.ndarray) -> np.ndarray:
    pad = np.pad(mask, 1)
    h, w = mask.shape
    return np.any([pad[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)], axis=0)


def penetrations(scene, names: list[str], tol: float = 0.003) -> list:
    bodies = {scene.root_body(n) for n in names}
    return [
        (a, b, d)
        for a, b, d, _ in scene.contacts()
        if (a in bodies) != (b in bodies) and d < -tol and not is_ground(scene, b if a in bodies else a)
    ]


def hold_policy():
    return Recorder(metadata("hold"))


# ----------------------------------------------------------------------------- S02 / D02
@pytest.mark.parametrize("ref", [GOAL8, SPATIAL5])
def test_s02_moves_the_receiver_and_leaves_the_target(serve_app, scenes, ref):
    sem = semantics_of(ref)
    base = nominal(serve_app, scenes, ref)["end"]
    params = {"distance_m": 0.12, "direction_deg": 90.0, "yaw_deg": 20.0}
    rec, scene = run(serve_app, scenes, hold_policy(), inst(ref, "S02", params), max_steps=1)
    assert rec.valid, rec.detail
    now = poses(scene)
    realised = rec.shifts[0]["applied"]["distance_m"]
    assert 0.08 - 1e-6 <= realised <= 0.12 + 1e-6
    moved = np.linalg.norm(now[sem.receiver][:2] - base[sem.receiver][:2])
    assert moved == pytest.approx(realised, abs=0.01)
    assert abs(now[sem.receiver][2] - base[sem.receiver][2]) < 0.005  # resting on the table
    assert np.linalg.norm(now[sem.target] - base[sem.target]) < 0.005  # the target stayed
    assert not penetrations(scene, [sem.receiver])
    for name in set(now) - {sem.receiver, sem.target}:  # nothing else moved (no object rests on the plate)
        assert np.linalg.norm(now[name][:2] - base[name][:2]) < 0.005, name


def test_s02_moves_the_front_of_the_stove_with_the_stove(serve_app, scenes):
    # libero_goal:5's goal region belongs to the table but is named after the stove: both move,
    # and LIBERO's own success check follows the region.
    base = nominal(serve_app, scenes, GOAL5, steps=1)
    params = {"distance_m": 0.10, "direction_deg": 270.0, "yaw_deg": 0.0}
    rec, scene = run(serve_app, scenes, hold_policy(), inst(GOAL5, "S02", params), max_steps=1)
    assert rec.valid, rec.detail
    applied = rec.shifts[0]["applied"]
    assert applied["receiver"] == "flat_stove_1"
    stove_now = poses(scene)["flat_stove_1"]
    shift = stove_now[:2] - base["end"]["flat_stove_1"][:2]
    assert np.linalg.norm(shift) == pytest.approx(applied["distance_m"], abs=1e-3)
    sid = scene.inner.sim.model.site_name2id("main_table_stove_front_region")
    region = scene.data.site_xpos[sid].copy()
    region_before = base["sites"]["main_table_stove_front_region"]
    assert region[:2] - region_before[:2] == pytest.approx(shift, abs=1e-3)  # yaw 0: the same translation
    # Put the plate on the moved region: LIBERO's unchanged goal check holds; on the old place it does not.
    plate = scene.object_pose("plate_1")
    scene.set_object_pose("plate_1", np.array([region[0], region[1], plate[0][2]]), plate[1])
    scene.inner.sim.forward()
    assert scene.success()
    old = region[:2] - shift
    scene.set_object_pose("plate_1", np.array([old[0], old[1], plate[0][2]]), plate[1])
    scene.inner.sim.forward()
    assert not scene.success()


def test_d02_moves_the_receiver_while_the_scripted_robot_carries_the_target(serve_app, scenes):
    # The scripted controller (privileged state, tests only) lifts the bowl; D02 fires at transport.
    sem = semantics_of(GOAL8)
    base = nominal(serve_app, scenes, GOAL8)
    scene = scene_of(scenes, GOAL8)
    state: dict = {"heights": []}

    def act(obs):
        if "ctl" not in state:  # built on the settled scene of this episode
            state["ctl"] = ScriptedController(scene, sem)
        state["heights"].append(scene.object_pose(sem.target)[0][2])
        return state["ctl"]()[None]

    params = {"trigger": "transport", "fallback_step": 150, "distance_m": 0.08, "direction_deg": 0.0, "yaw_deg": 10.0}
    rec, scene = run(serve_app, scenes, Recorder(metadata("scripted"), act), inst(GOAL8, "D02", params), max_steps=56)
    assert rec.valid, rec.detail
    d02 = rec.shifts[0]
    assert d02["fired_by"] == "phase", rec.phases
    fired = d02["fired_at_step"]
    assert rec.phases["transport"] < fired  # the target was already lifted: carried
    assert state["heights"][fired] - base["settled"][sem.target][2] >= 0.03
    plate = scene.object_pose("plate_1")[0]
    moved = np.linalg.norm(plate[:2] - base["end"]["plate_1"][:2])
    assert moved == pytest.approx(d02["applied"]["distance_m"], abs=0.01)
    assert d02["applied"]["distance_m"] >= 0.05
    assert abs(plate[2] - base["end"]["plate_1"][2]) < 0.005
    robot, plate_body = scene.robot_root(), scene.root_body("plate_1")
    assert not [c for c in scene.contacts() if plate_body in c[:2] and robot in c[:2]]


def test_d02_fires_at_its_fallback_step_on_a_second_suite(serve_app, scenes):
    base = nominal(serve_app, scenes, SPATIAL5)
    params = {"trigger": "transport", "fallback_step": 2, "distance_m": 0.10, "direction_deg": 200.0, "yaw_deg": -10.0}
    rec, scene = run(serve_app, scenes, hold_policy(), inst(SPATIAL5, "D02", params), max_steps=4)
    assert rec.valid, rec.detail
    d02 = rec.shifts[0]
    assert (d02["fired_by"], d02["fired_at_step"]) == ("fallback", 2)
    now = poses(scene)
    assert np.linalg.norm(now["plate_1"][:2] - base["end"]["plate_1"][:2]) == pytest.approx(
        d02["applied"]["distance_m"], abs=0.005
    )
    assert np.linalg.norm(now["akita_black_bowl_1"] - base["end"]["akita_black_bowl_1"]) < 0.005


# ----------------------------------------------------------------------------- S03 / D03
@pytest.mark.parametrize(
    "ref,partners",
    [
        (GOAL8, ["cream_cheese_1", "wine_bottle_1"]),
        (SPATIAL5, ["cookies_1"]),
    ],
)
def test_s03_swaps_the_target_with_a_partner_on_the_same_support(serve_app, scenes, ref, partners):
    sem = semantics_of(ref)
    base = nominal(serve_app, scenes, ref)["end"]
    rec, scene = run(serve_app, scenes, hold_policy(), inst(ref, "S03", {"partners": partners}), max_steps=1)
    assert rec.valid, rec.detail
    applied = rec.shifts[0]["applied"]
    partner = applied["partner"]
    assert partner in partners
    t_bottom, p_bottom = applied["target_unit"][0], applied["partner_unit"][0]
    now = poses(scene)
    assert np.linalg.norm(now[t_bottom][:2] - base[p_bottom][:2]) < 0.02
    assert np.linalg.norm(now[p_bottom][:2] - base[t_bottom][:2]) < 0.02
    for name in applied["target_unit"] + applied["partner_unit"]:
        assert abs(now[name][2] - base[name][2]) < 0.01, name  # resting at its own height
    assert not penetrations(scene, applied["target_unit"] + applied["partner_unit"])
    if ref == SPATIAL5:  # units: the bowl stays on its ramekin, the look-alike on the cookie box
        assert applied["target_unit"] == ["glazed_rim_porcelain_ramekin_1", "akita_black_bowl_1"]
        assert applied["partner_unit"] == ["cookies_1", "akita_black_bowl_2"]
        for top, bottom in (
            ("akita_black_bowl_1", "glazed_rim_porcelain_ramekin_1"),
            ("akita_black_bowl_2", "cookies_1"),
        ):
            assert np.linalg.norm(now[top][:2] - now[bottom][:2]) < 0.03
            assert now[top][2] > now[bottom][2]
    unmoved = set(now) - set(applied["target_unit"]) - set(applied["partner_unit"]) - {sem.target}
    for name in unmoved:
        assert np.linalg.norm(now[name][:2] - base[name][:2]) < 0.005, name


def test_s03_and_d03_do_not_apply_without_a_partner():
    for ref, why in [
        (TaskRef("libero_goal", 0), "fixture"),
        (TaskRef("libero_spatial", 7), "no object"),
        (TaskRef("libero_spatial", 4), "no object"),
        (TaskRef("libero_10", 8), "no object"),
    ]:
        for sid in ("S03", "D03"):
            reason = make_instance(ref, [sid], seed=0)
            assert isinstance(reason, str) and why in reason, (ref, reason)
    spec = make_instance(TaskRef("libero_object", 3), ["S03"], seed=1).shifts[0]
    assert "basket_1" not in spec.params["partners"] and len(spec.params["partners"]) == 5


@pytest.mark.parametrize("ref,partners", [(GOAL8, ["cream_cheese_1"]), (SPATIAL5, ["cookies_1"])])
def test_d03_swaps_at_its_trigger_step(serve_app, scenes, ref, partners):
    sem = semantics_of(ref)
    base = nominal(serve_app, scenes, ref)["end"]
    params = {"trigger": "approach", "fallback_step": 2, "partners": partners}
    rec, scene = run(serve_app, scenes, hold_policy(), inst(ref, "D03", params), max_steps=4)
    assert rec.valid, rec.detail
    d03 = rec.shifts[0]
    assert (d03["fired_by"], d03["fired_at_step"]) == ("fallback", 2)
    now = poses(scene)
    t_bottom, p_bottom = d03["applied"]["target_unit"][0], d03["applied"]["partner_unit"][0]
    assert np.linalg.norm(now[t_bottom][:2] - base[p_bottom][:2]) < 0.01
    assert np.linalg.norm(now[p_bottom][:2] - base[t_bottom][:2]) < 0.01
    assert abs(now[sem.target][2] - base[sem.target][2]) < 0.01


# ----------------------------------------------------------------------------- S10 / S11 / S13
def _frame_change(policy, ref, serve_app, scenes):
    nom = nominal(serve_app, scenes, ref)
    return np.abs(policy.observations[0].images["agentview"].astype(np.float64) - nom["frames"][0]).mean(axis=2), nom


def _region_checks(change: np.ndarray, region: np.ndarray, min_mean: float, others: np.ndarray | None = None):
    inside = region & ~grow(~region)  # one pixel in from the edge
    outside = ~grow(region) if others is None else others
    assert inside.sum() > 5
    assert change[inside].mean() >= min_mean, change[inside].mean()
    assert (change[outside] > 8).mean() <= 0.01, (change[outside] > 8).mean()


@pytest.mark.parametrize("ref", [GOAL8, SPATIAL5])
def test_s10_recolours_the_target_and_nothing_else(serve_app, scenes, ref):
    sem = semantics_of(ref)
    look = {"textures": ["none"], "rgb": [0.9, 0.2, 0.1]}
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(ref, "S10", {"look": look}), max_steps=1)
    assert rec.valid, rec.detail
    change, nom = _frame_change(policy, ref, serve_app, scenes)
    names = [sem.target] + (["akita_black_bowl_2"] if ref == SPATIAL5 else [])  # look-alikes take the look too
    assert rec.shifts[0]["applied"]["lookalikes"] == names[1:]
    region = np.isin(nom["seg"], geoms_of(scene, {scene.root_body(n) for n in names}))
    _region_checks(change, region, 20.0)
    # In the simulator: the target's drawn geoms lost their material and took the colour.
    drawn = [g for g in geoms_of(scene, {scene.root_body(sem.target)}) if scene.model.geom_group[g] != 0]
    assert all(scene.model.geom_matid[g] == -1 for g in drawn)
    assert np.allclose(scene.model.geom_rgba[drawn][:, :3], [0.9, 0.2, 0.1])


@pytest.mark.parametrize("ref", [GOAL8, OBJECT0])
def test_s11_changes_the_support_surface_only(serve_app, scenes, ref):
    look = {"textures": ["planks", "wood"], "rgb": [0.4, 0.6, 0.9]}
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(ref, "S11", {"look": look}), max_steps=1)
    assert rec.valid, rec.detail
    applied = rec.shifts[0]["applied"]
    support = {GOAL8: "table", OBJECT0: "floor"}[ref]
    assert applied["support"] == support
    assert applied["texture"] == ("wood" if ref == OBJECT0 else "planks")  # LIBERO-Object's floor is planks already
    change, nom = _frame_change(policy, ref, serve_app, scenes)
    region = np.isin(nom["seg"], geoms_of(scene, {scene.body_id(support)}))
    _region_checks(change, region, 15.0)


def _mirror_mask(scene, seg: np.ndarray) -> np.ndarray:
    import mujoco

    m = scene.model
    mirrors = [
        g
        for g in range(m.ngeom)
        if m.geom_type[g] in (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_BOX)
        and m.geom_matid[g] >= 0
        and m.mat_reflectance[m.geom_matid[g]] > 0
    ]
    return np.isin(seg, mirrors)


@pytest.mark.parametrize("ref", [GOAL8, OBJECT0])
def test_s13_changes_floor_and_walls_but_not_the_support(serve_app, scenes, ref):
    params = {
        "floor": {"textures": ["none"], "rgb": [0.3, 0.5, 0.3]},
        "walls": {"textures": ["none"], "rgb": [0.7, 0.3, 0.5]},
    }
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(ref, "S13", params), max_steps=1)
    assert rec.valid, rec.detail
    change, nom = _frame_change(policy, ref, serve_app, scenes)
    import mujoco

    names = {g: mujoco.mj_id2name(scene.model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(scene.model.ngeom)}
    walls = np.isin(nom["seg"], [g for g, n in names.items() if n.startswith("wall_")])
    floor = np.isin(nom["seg"], [g for g, n in names.items() if n == "floor"])
    if ref == OBJECT0:  # the floor is the support there: S11's, left alone
        assert set(rec.shifts[0]["applied"]["surfaces"]) == {"walls"}
        assert change[floor & ~grow(walls)].max() <= 8
        region = walls
    else:
        region = walls | floor
    others = ~grow(region) & ~_mirror_mask(
        scene, orient(scene.render("agentview", PX, segmentation=True), policy.metadata.image_orientation)
    )
    _region_checks(change, region, 20.0, others)


# ----------------------------------------------------------------------------- D07 / D08
@pytest.mark.parametrize("ref,trigger", [(GOAL8, "approach"), (SPATIAL5, "transport")])
def test_d07_bumps_the_camera_at_its_trigger_and_it_stays(serve_app, scenes, ref, trigger):
    nom = nominal(serve_app, scenes, ref)
    params = {
        "trigger": trigger,
        "fallback_step": 2,
        "shift_m": 0.06,
        "shift_azimuth_deg": 30.0,
        "shift_elevation_deg": 10.0,
        "turn_deg": 8.0,
        "axis_azimuth_deg": 90.0,
        "axis_elevation_deg": 20.0,
    }
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(ref, "D07", params), max_steps=6)
    assert rec.valid, rec.detail
    assert (rec.shifts[0]["fired_by"], rec.shifts[0]["fired_at_step"]) == ("fallback", 2)
    cid = scene.inner.sim.model.camera_name2id("agentview")
    pos0, mat0 = nom["cam"]
    pos1, mat1 = scene.data.cam_xpos[cid], scene.data.cam_xmat[cid].reshape(3, 3)
    assert np.linalg.norm(pos1 - pos0) == pytest.approx(0.06, abs=1e-4)
    assert math.degrees(math.acos((np.trace(mat0.T @ mat1) - 1) / 2)) == pytest.approx(8.0, abs=0.05)
    frames = [o.images["agentview"].astype(np.float64) for o in policy.observations]
    for t in (0, 1):  # before the bump: the nominal view
        assert np.abs(frames[t] - nom["frames"][t]).mean() < 0.5
    for t in range(2, 6):  # from the trigger step on: moved, and it stays
        assert np.abs(frames[t] - nom["frames"][t]).mean() > 5


def test_d08_dims_the_lights_from_its_trigger_on(serve_app, scenes):
    nom = nominal(serve_app, scenes, GOAL8)
    params = {"trigger": "approach", "fallback_step": 2, "mode": "dim", "scale": 0.3}
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(GOAL8, "D08", params), max_steps=6)
    assert rec.valid, rec.detail
    assert rec.shifts[0]["fired_at_step"] == 2
    np.testing.assert_allclose(scene.model.light_diffuse, nom["light_diffuse"] * 0.3, atol=1e-6)
    frames = [o.images["agentview"].astype(np.float64) for o in policy.observations]
    for t in (0, 1):
        assert np.abs(frames[t] - nom["frames"][t]).mean() < 0.5
    for t in range(2, 6):
        assert frames[t].mean() < 0.75 * nom["frames"][t].mean()


def test_d08_flickers_for_its_window_then_restores(serve_app, scenes):
    nom = nominal(serve_app, scenes, SPATIAL5)
    params = {
        "trigger": "approach",
        "fallback_step": 2,
        "mode": "flicker",
        "scale": 0.3,
        "duration_steps": 6,
        "period_steps": 2,
    }
    policy = hold_policy()
    rec, scene = run(serve_app, scenes, policy, inst(SPATIAL5, "D08", params), max_steps=10)
    assert rec.valid, rec.detail
    frames = [o.images["agentview"].astype(np.float64) for o in policy.observations]
    ratio = [frames[t].mean() / nom["frames"][t].mean() for t in range(10)]
    dim = [t for t in range(10) if ratio[t] < 0.75]
    full = [t for t in range(10) if np.abs(frames[t] - nom["frames"][t]).mean() < 0.5]
    assert dim == [2, 4, 6], ratio  # dim, full, dim, full, dim, full within steps 2-7
    assert full == [0, 1, 3, 5, 7, 8, 9], ratio  # and full (exactly the nominal view) after the window
    np.testing.assert_allclose(scene.model.light_diffuse, nom["light_diffuse"], atol=1e-6)
    assert rec.shifts[0]["applied"]["post_condition"]["flicker_dim_over_full"] < 0.75
