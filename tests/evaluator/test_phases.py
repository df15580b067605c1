"""Phase detection (approach, grasp, transport, placement) on real LIBERO scenes, one task of each
kind, driven by the privileged scripted controller (tests and tooling only), and D18 grasp loss.

Every phase is checked against the simulator state at the step it was reported, measured here
independently of the tracker (contacts between finger geoms and the actor's geoms, heights,
joint values, LIBERO's own predicates). Scenes have no cameras (nothing here renders) and are
shared through the session cache under the runner's key, so the D18 episodes reuse them.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from liberopro.catalog import shift_class
from liberopro.episode.phases import (
    APPROACH_RADIUS_M,
    LIFT_M,
    PLACEMENT_RADIUS_M,
    PhaseTracker,
    entity_geoms,
    region_pos,
    subtree_bodies,
)
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, ShiftEntry, semantics_of
from liberopro.oracle.scripted import Articulate, ScriptedController, drive_to_phase
from liberopro.sim.scene import LiberoScene, SceneVariant
from liberopro.sim.tasks import TaskRef, task_info

from submission_spec import PolicyClient, create_app

from .policies import Recorder, metadata

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

GOAL8 = TaskRef("libero_goal", 8)  # put the bowl on the plate (pick and place)
GOAL0 = TaskRef("libero_goal", 0)  # open the middle drawer of the cabinet
GOAL7 = TaskRef("libero_goal", 7)  # turn on the stove (knob)
GOAL5 = TaskRef("libero_goal", 5)  # push the plate to the front of the stove
LONG9 = TaskRef("libero_10", 9)  # put the mug in the microwave and close it (door)
OBJECT0 = TaskRef("libero_object", 0)  # alphabet soup into the basket (a can)
RENDER = 64


def scene_for(scenes: dict, ref: TaskRef) -> LiberoScene:
    """A camera-less scene from the session cache, under the key the runner uses for a policy
    without cameras."""
    key = (ref, (), RENDER, SceneVariant())
    if key not in scenes:
        scenes[key] = LiberoScene(task_info(ref), cameras=(), render_size=RENDER)
    return scenes[key]


def start(scenes: dict, ref: TaskRef, episode: int = 0) -> LiberoScene:
    scene = scene_for(scenes, ref)
    scene.start_episode(task_info(ref).init_states()[episode], episode)
    scene.settle()
    return scene


def finger_touches(scene: LiberoScene, geoms: set[int]) -> bool:
    """Simulator check, independent of the tracker: a finger geom in contact with ``geoms``."""
    fingers = scene.gripper_geoms()
    return any((a in fingers and b in geoms) or (b in fingers and a in geoms) for a, b in scene.contact_geoms())


def part_geoms(scene: LiberoScene, joint: str) -> set[int]:
    m = scene.model
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)
    bodies = subtree_bodies(m, int(m.jnt_bodyid[jid]))
    return {g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in bodies}


def joint_q(scene: LiberoScene, joint: str) -> float:
    m = scene.model
    return float(scene.data.qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)]])


def drive(scene, sem, steps, probe, tracker=None, controller=None, stop_at="placement", offset=0):
    """Step with the scripted controller from loop step ``offset``; ``probe()`` measures the
    state after every step. Returns (tracker, {phase: probe at its step}, [probe per step])."""
    tracker = tracker or PhaseTracker(scene, sem)
    controller = controller or ScriptedController(scene, sem)
    at, trace = {}, []
    for t in range(offset, offset + steps):
        scene.step(controller())
        new = tracker.update(t)
        trace.append(probe())
        for p in new:
            at[p] = trace[-1]
        if stop_at in tracker.reached:
            break
    return tracker, at, trace


def in_order(reached: dict) -> None:
    assert list(reached) == ["approach", "grasp", "transport", "placement"], reached
    steps = [reached[p] for p in ("approach", "grasp", "transport", "placement")]
    assert steps == sorted(steps) and steps[0] < steps[1], reached


# ----------------------------------------------------------------------------- pick and place
def test_pick_and_place_phases_follow_the_bowl_to_the_plate(scenes):
    scene = start(scenes, GOAL8)
    sem = semantics_of(GOAL8)
    bowl = set(entity_geoms(scene, sem.target, collision_only=False))
    z0 = scene.object_pose(sem.target)[0][2]
    tracker = PhaseTracker(scene, sem)
    for t in range(5):  # a robot that holds still approaches nothing
        scene.step(np.array([0, 0, 0, 0, 0, 0, -1.0]))
        assert tracker.update(t) == []
    actor = tracker.actor(sem.target)

    def probe():
        pos = scene.object_pose(sem.target)[0]
        return {
            "eef": scene.eef_pos(),
            "pos": pos,
            "touch": finger_touches(scene, bowl),
            "box_dist": tracker.distance(actor, scene.eef_pos()),
            "plate": region_pos(scene, "plate_1"),
        }

    tracker, at, trace = drive(scene, sem, 130, probe, tracker=tracker, offset=5)
    in_order(tracker.reached)
    assert set(tracker.reached_by.values()) == {sem.target}
    first_touch = next(i for i, p in enumerate(trace) if p["touch"])
    # approach: within the radius of the bowl's box, closer than at the start, no contact yet
    assert at["approach"]["box_dist"] <= APPROACH_RADIUS_M and not at["approach"]["touch"]
    assert not any(p["touch"] for p in trace[: tracker.reached["approach"] - 5 + 1])
    # grasp: the first finger contact with the bowl, found from the simulator's contacts
    assert tracker.reached["grasp"] == first_touch + 5
    # transport: lifted by at least LIFT_M while held; never before it rose
    assert at["transport"]["pos"][2] - z0 >= LIFT_M and at["transport"]["touch"]
    assert all(p["pos"][2] - z0 < LIFT_M for p in trace[: tracker.reached["transport"] - 5])
    # placement: over the plate (horizontal radius), still above it
    place = at["placement"]
    assert np.linalg.norm(place["pos"][:2] - place["plate"][:2]) <= PLACEMENT_RADIUS_M
    assert place["pos"][2] > place["plate"][2]
    assert np.linalg.norm(trace[0]["pos"][:2] - trace[0]["plate"][:2]) > PLACEMENT_RADIUS_M


def test_transport_needs_the_gripper(scenes):
    # Teleporting the bowl up or a drawer open is not transport: nobody holds it.
    scene = start(scenes, GOAL0)
    sem = semantics_of(GOAL0)
    tracker = PhaseTracker(scene, sem)
    assert [a.name for a in tracker.actors] == ["wooden_cabinet_1_middle_region"]
    adr = scene.model.jnt_qposadr[
        mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_JOINT, "wooden_cabinet_1_middle_level")
    ]
    scene.data.qpos[adr] = -0.08
    scene.refresh()
    assert tracker.update(0) == []
    scene8 = start(scenes, GOAL8)
    sem8 = semantics_of(GOAL8)
    tracker8 = PhaseTracker(scene8, sem8)
    pos, quat = scene8.object_pose(sem8.target)
    scene8.set_object_pose(sem8.target, pos + np.array([0, 0, 0.10]), quat)
    scene8.refresh()
    assert "transport" not in tracker8.update(0)


# ----------------------------------------------------------------------------- drawer
def test_drawer_phases_follow_the_handle_and_the_drawer_joint(scenes):
    scene = start(scenes, GOAL0)
    sem = semantics_of(GOAL0)
    joint = "wooden_cabinet_1_middle_level"
    drawer = part_geoms(scene, joint)
    others = {j: joint_q(scene, j) for j in ("wooden_cabinet_1_top_level", "wooden_cabinet_1_bottom_level")}
    q0 = joint_q(scene, joint)
    tracker = PhaseTracker(scene, sem)
    part = tracker.actors[0].part
    assert part.joint == joint and not part.hinge
    actor = tracker.actors[0]
    handle = np.mean([scene.data.geom_xpos[g] for g in part.handle], axis=0)
    # the handle is the front-most geom of the middle drawer, facing the way the drawer opens
    assert np.allclose(part.pull_dir, [0, 1, 0], atol=0.05)
    assert handle[1] > max(scene.data.geom_xpos[g][1] for g in part.geoms if g not in part.handle)

    def probe():
        return {
            "eef": scene.eef_pos(),
            "q": joint_q(scene, joint),
            "touch": finger_touches(scene, drawer),
            "handle_dist": tracker.distance(actor, scene.eef_pos()),
            "success": scene.success(),
        }

    tracker, at, trace = drive(scene, sem, 200, probe, tracker=tracker)
    in_order(tracker.reached)
    assert at["approach"]["handle_dist"] <= APPROACH_RADIUS_M and not at["approach"]["touch"]
    assert trace[0]["handle_dist"] > APPROACH_RADIUS_M
    assert at["approach"]["q"] == pytest.approx(q0, abs=1e-3)
    assert at["grasp"]["touch"] and not any(p["touch"] for p in trace[: tracker.reached["grasp"]])
    assert at["grasp"]["q"] == pytest.approx(q0, abs=5e-3)
    assert q0 - at["transport"]["q"] >= 0.01  # opened (negative joint direction) by 1 cm
    assert at["placement"]["success"] and not trace[tracker.reached["placement"] - 1]["success"]
    for j, q in others.items():  # the other drawers never moved
        assert joint_q(scene, j) == pytest.approx(q, abs=2e-3)


# ----------------------------------------------------------------------------- stove knob
def test_stove_knob_phases_follow_the_knob_and_its_hinge(scenes):
    scene = start(scenes, GOAL7)
    sem = semantics_of(GOAL7)
    joint = "flat_stove_1_button"
    knob = part_geoms(scene, joint)
    tracker = PhaseTracker(scene, sem)
    part = tracker.actors[0].part
    assert part.hinge and part.knob

    def probe():
        return {
            "q": joint_q(scene, joint),
            "touch": finger_touches(scene, knob),
            "success": scene.success(),
            "knob_dist": tracker.distance(tracker.actors[0], scene.eef_pos()),
        }

    tracker, at, trace = drive(scene, sem, 160, probe, tracker=tracker)
    in_order(tracker.reached)
    assert at["approach"]["knob_dist"] <= APPROACH_RADIUS_M and not at["approach"]["touch"]
    assert at["grasp"]["touch"] and not any(p["touch"] for p in trace[: tracker.reached["grasp"]])
    assert abs(at["grasp"]["q"]) < 0.05 <= abs(at["transport"]["q"])
    assert at["placement"]["q"] >= 0.5 and at["placement"]["success"]  # LIBERO's turn-on range


# ----------------------------------------------------------------------------- microwave door
def test_microwave_door_phases_when_followed_and_the_mug_by_default(scenes):
    scene = start(scenes, LONG9)
    sem = semantics_of(LONG9)
    # By default the phases follow the mug: the door is closed only after it (and its handle
    # starts within reach of the gripper).
    assert [a.name for a in PhaseTracker(scene, sem).actors] == ["white_yellow_mug_1"]
    joint = "microwave_1_microjoint"
    door = part_geoms(scene, joint)
    fixture = scene.inner.get_object("microwave_1")
    q0 = joint_q(scene, joint)
    assert fixture.is_open(q0)
    tracker = PhaseTracker(scene, sem, actors=["microwave_1"])
    controller = ScriptedController(scene, sem, stages=[Articulate("microwave_1")])

    def probe():
        return {
            "q": joint_q(scene, joint),
            "touch": finger_touches(scene, door),
            "handle_dist": tracker.distance(tracker.actors[0], scene.eef_pos()),
        }

    tracker, at, trace = drive(scene, sem, 140, probe, tracker=tracker, controller=controller)
    in_order(tracker.reached)
    assert at["approach"]["handle_dist"] <= APPROACH_RADIUS_M and not at["approach"]["touch"]
    assert at["grasp"]["touch"] and not any(p["touch"] for p in trace[: tracker.reached["grasp"]])
    assert at["transport"]["q"] - q0 >= 0.05  # swinging shut
    assert fixture.is_close(at["placement"]["q"]) and not fixture.is_close(trace[tracker.reached["placement"] - 1]["q"])


# ----------------------------------------------------------------------------- push
def test_push_phases_follow_the_plate_to_the_front_of_the_stove(scenes):
    scene = start(scenes, GOAL5)
    sem = semantics_of(GOAL5)
    assert sem.kind == "push"
    plate = set(entity_geoms(scene, "plate_1", collision_only=False))
    p0 = scene.object_pose("plate_1")[0]

    def probe():
        return {
            "pos": scene.object_pose("plate_1")[0],
            "touch": finger_touches(scene, plate),
            "goal": region_pos(scene, "main_table_stove_front_region"),
        }

    tracker, at, trace = drive(scene, sem, 160, probe)
    in_order(tracker.reached)
    assert at["grasp"]["touch"] and not any(p["touch"] for p in trace[: tracker.reached["grasp"]])
    moved = np.linalg.norm(at["transport"]["pos"][:2] - p0[:2])
    assert moved >= 0.02 and at["transport"]["touch"]
    assert abs(at["transport"]["pos"][2] - p0[2]) < 0.02  # pushed along the table, not lifted
    place = at["placement"]
    assert np.linalg.norm(place["pos"][:2] - place["goal"][:2]) <= PLACEMENT_RADIUS_M


def test_drive_to_phase_continues_an_earlier_drive(scenes):
    scene = start(scenes, GOAL8)
    sem = semantics_of(GOAL8)
    tracker, controller = PhaseTracker(scene, sem), ScriptedController(scene, sem)
    a = drive_to_phase(scene, sem, "approach", 60, controller=controller, tracker=tracker)
    g = drive_to_phase(scene, sem, "grasp", 60, controller=controller, tracker=tracker)
    assert a is not None and g is not None and a < g == tracker.reached["grasp"]
    assert controller.steps == g + 1
    assert drive_to_phase(scene, sem, "approach", 5, controller=controller, tracker=tracker) == a


# ----------------------------------------------------------------------------- D18 grasp loss
def run_d18(serve_app, scenes, ref: TaskRef, params: dict, max_steps: int, scripted: bool = True):
    """One episode under D18 with the scripted controller as the policy (over real HTTP); the
    policy records, at every step it is asked, whether a finger touches the target."""
    sem = semantics_of(ref)
    scene = scene_for(scenes, ref)
    target = set(entity_geoms(scene, sem.target, collision_only=False))
    state: dict = {"log": []}

    def act(obs):
        if "ctl" not in state and scripted:  # built on this episode's settled scene
            state["ctl"] = ScriptedController(scene, sem)
        state["log"].append((obs.step, finger_touches(scene, target), float(scene.object_pose(sem.target)[0][2])))
        return state["ctl"]()[None] if scripted else np.array([[0, 0, 0, 0, 0, 0, -1.0]])

    policy = Recorder(metadata("scripted", cameras=()), act)
    url = serve_app(create_app(policy))
    inst = Instance(
        instance_id="test-D18", suite=ref.suite, task_index=ref.index, shifts=[ShiftEntry(id="D18", params=params)]
    )
    with PolicyClient(url) as client:
        runner = EpisodeRunner(
            client, policy.metadata, RunSettings(render_size=RENDER, max_steps=max_steps), scenes=scenes
        )
        rec = runner.run_episode(EpisodePlan(instance=inst, episode_index=0, init_state_index=0, seed=0))
    return rec, state["log"]


@pytest.mark.parametrize("ref", [GOAL8, OBJECT0])
def test_d18_drops_the_carried_object_then_returns_control(serve_app, scenes, ref):
    rec, log = run_d18(
        serve_app, scenes, ref, {"trigger": "transport", "fallback_step": 300, "open_steps": 10}, max_steps=110
    )
    assert rec.valid, rec.detail
    d18 = rec.shifts[0]
    fired = d18["fired_at_step"]
    assert d18["fired_by"] == "phase" and fired == rec.phases["transport"] + 1
    applied = d18["applied"]
    assert applied["held_at_fire"] == [semantics_of(ref).target]
    end = applied["window_steps"][1]
    assert end - fired >= 10
    steps = {s: (touch, z) for s, touch, z in log}
    # the policy was not asked inside the window, and was asked again right after it
    assert not [s for s in steps if fired <= s < end] and end in steps
    # before the window the scripted robot held the object; after it, no finger touches it
    assert steps[fired - 1][0] and not steps[end][0]
    post = applied["post_condition"]
    assert post["in_gripper_after"] == [] and post["released"]
    # it fell: lifted >= 2 cm just before the window, back down (on the table or floor) after it
    z0 = log[0][2]
    assert steps[fired - 1][1] - z0 >= 0.02 and steps[end][1] - z0 < 0.01
    assert post["dropped_m"][semantics_of(ref).target] < -0.02
    assert applied["opening_at_release_m"] > applied["opening_at_fire_m"] + 0.01


def test_d18_at_its_fallback_with_nothing_held_only_opens_the_gripper(serve_app, scenes):
    rec, log = run_d18(
        serve_app,
        scenes,
        GOAL8,
        {"trigger": "transport", "fallback_step": 3, "open_steps": 8},
        max_steps=14,
        scripted=False,
    )
    assert rec.valid, rec.detail
    d18 = rec.shifts[0]
    assert (d18["fired_by"], d18["fired_at_step"]) == ("fallback", 3)
    assert d18["applied"]["held_at_fire"] == [] and d18["applied"]["window_steps"] == [3, 11]
    assert [s for s, _, _ in log] == [0, 1, 2, 11, 12, 13]


def test_d18_catalog_and_applicability():
    cls = shift_class("D18")
    assert (cls.kind, cls.category, cls.triggers) == ("runtime", "Robot", ("transport",))
    assert cls.applicable(GOAL5, semantics_of(GOAL5)) is not None  # a pushed plate is never held
    for ref in (GOAL8, GOAL0, GOAL7, LONG9, OBJECT0):
        assert cls.applicable(ref, semantics_of(ref)) is None
    rng = np.random.default_rng(0)
    drawn = [cls.sample_params(rng, GOAL8, semantics_of(GOAL8)).open_steps for _ in range(50)]
    assert min(drawn) >= 10 and max(drawn) <= 14 and len(set(drawn)) > 1
