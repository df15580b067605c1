"""Every runtime shift (D01-D20) fires by its trigger phase, not by its fallback step, when the
privileged scripted controller drives the robot (issue 11, item 7), and its episode stays valid.

Task: libero_object:0 (a training task): every runtime shift applies to it, and the controller
reaches each trigger phase before its fallback step (init state 0, measured 2026-12-02 with
``benchmarks/runtime_validity.py``: approach at step 14, grasp 38, transport 50; fallbacks 30, 48,
60 by :mod:`liberopro.catalog.fallbacks`). libero_10:9, the first choice, stopped qualifying when
the controller learned to put the mug into the microwave by its handle: it reaches grasp at step
49, past the task's provisional grasp fallback (48). Parameters: the
instance a manifest of seed 0 draws (:func:`liberopro.instances.build.make_instance`, attempt 0), so
the fallback step is the task's own. No cameras except for the Observation shifts (D10-D13:
one camera at 64 px, of :func:`liberopro.instances.generation._validation_metadata`'s two); episodes stop
once the shift has acted (``stop_when_shifts_done``). The prop shifts share one scene holding
all their props (registered in the ``scenes`` cache under each shift's own variant; parked props
leave the scene as it was, ``test_shifts_props.py``), and the Observation shifts one with a camera.
"""

from __future__ import annotations

import pytest
from liberopro.catalog import get_spec, shift_class
from liberopro.episode.local_policy import LocalPolicyClient
from liberopro.episode.runner import CurrentScene, EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance, make_instance
from liberopro.instances.generation import _validation_metadata, _ValidationPolicy
from liberopro.shifts.base import MAX_DELAY_STEPS
from liberopro.sim.scene import LiberoScene, SceneVariant
from liberopro.sim.tasks import TaskRef, task_info

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

TASK = TaskRef("libero_object", 0)
RUNTIME = [f"D{i:02d}" for i in range(1, 21)]
PX = 64
_built: set[int] = set()  # the scene caches that hold the shared scenes already


def instance(sid: str) -> Instance:
    inst = make_instance(TASK, [sid], 0)
    assert isinstance(inst, Instance), inst
    return inst


def metadata(sid: str):
    """The validation policy's metadata, with one camera (64 px) for an Observation shift: the one
    it acts on where it names one (D11), else agentview; no camera otherwise."""
    meta = _validation_metadata([sid])
    cam = instance(sid).shifts[0].params.get("camera", "agentview")
    return meta.model_copy(update={"cameras": [c for c in meta.cameras if c.name == cam]})


def cams_of(sid: str) -> tuple[str, ...]:
    return tuple(c.name for c in metadata(sid).cameras)


def variant(inst: Instance) -> SceneVariant:
    entry = inst.shifts[0]
    return EpisodeRunner.variant_of([shift_class(entry.id)(entry.params)])


def shared_scenes(scenes: dict) -> None:
    """One scene per camera set holding the props of every runtime shift of the task, registered
    under each shift's own scene key (the runner's :meth:`EpisodeRunner.scene_for` key)."""
    if id(scenes) in _built:
        return
    by_cams: dict[tuple[str, ...], list[SceneVariant]] = {}
    for sid in RUNTIME:
        by_cams.setdefault(cams_of(sid), []).append(variant(instance(sid)))
    for cams, variants in by_cams.items():
        union = SceneVariant()
        for v in variants:
            union = union.merged(v)
        scene = LiberoScene(task_info(TASK), cameras=cams, render_size=PX, variant=union)
        for v in variants:
            key = (TASK, cams, PX, v)
            if key in scenes and scenes[key] is not scene:
                scenes.pop(key).close()
            scenes[key] = scene
    _built.add(id(scenes))


@pytest.mark.parametrize("sid", RUNTIME)
def test_every_runtime_shift_fires_by_its_phase_under_the_oracle(scenes, sid):
    inst = instance(sid)
    params = inst.shifts[0].params
    trigger, fallback = params["trigger"], params["fallback_step"]
    assert trigger in get_spec(sid).triggers
    shared_scenes(scenes)
    meta = metadata(sid)
    assert len(meta.cameras) == (get_spec(sid).category == "Observation")
    settings = RunSettings(render_size=PX, max_steps=fallback + MAX_DELAY_STEPS + 60, stop_when_shifts_done=True)
    scene = CurrentScene()
    runner = scene.bind(
        EpisodeRunner(LocalPolicyClient(_ValidationPolicy(meta, scene, TASK)), meta, settings, scenes=scenes)
    )
    rec = runner.run_episode(EpisodePlan(inst, 0, 0, 0))
    shift = rec.shifts[0]
    assert rec.valid, rec.detail
    assert shift["fired_by"] == "phase", (shift["fired_at_step"], fallback, rec.phases)
    assert trigger in rec.phases
    # it came due the step after the phase was reached (the tracker updates after env steps),
    # before its fallback step; it acted then or after a bounded delay
    due = shift["due_at_step"] if "due_at_step" in shift else shift["fired_at_step"]
    assert due == rec.phases[trigger] + 1 < fallback, (due, rec.phases, fallback)
    assert 0 <= shift["fired_at_step"] - due <= MAX_DELAY_STEPS
    assert rec.steps < settings.max_steps  # stopped once the shift had acted


def test_a_placement_blocked_by_the_arm_waits_for_it_and_acts_within_the_bound(scenes):
    """D05 on libero_goal:1 as seed 0 draws it, under the oracle: at its fallback step (38) the
    arm stands over the path's free spots (0.000 m from the robot), the only other spots lie on
    the stove; before the bounded delay the episode was invalid ("no room on the path ahead").
    Now the obstacle waits for the arm and appears a few steps later, clear of it."""
    ref = TaskRef("libero_goal", 1)
    inst = make_instance(ref, ["D05"], 0)
    assert isinstance(inst, Instance)
    params = inst.shifts[0].params
    meta = _validation_metadata(["D05"])
    settings = RunSettings(
        render_size=PX, max_steps=params["fallback_step"] + MAX_DELAY_STEPS + 20, stop_when_shifts_done=True
    )
    scene = CurrentScene()
    runner = scene.bind(
        EpisodeRunner(LocalPolicyClient(_ValidationPolicy(meta, scene, ref)), meta, settings, scenes=scenes)
    )
    rec = runner.run_episode(EpisodePlan(inst, 0, 0, 0))
    shift = rec.shifts[0]
    assert rec.valid, rec.detail
    assert shift["due_at_step"] == params["fallback_step"] and shift["fired_by"] == "fallback"
    assert 0 < shift["delay_steps"] <= MAX_DELAY_STEPS
    assert shift["fired_at_step"] == shift["due_at_step"] + shift["delay_steps"]
    assert "from the robot" in shift["deferred_reason"]
    assert shift["applied"]["post_condition"]["robot_clearance_m"] >= 0.02
    assert not shift["applied"]["post_condition"]["touching"]


def test_validation_meets_a_shift_at_its_phase_where_the_fallback_comes_first(scenes):
    """libero_goal:0 (open the middle drawer): the oracle approaches the drawer's handle at step 53
    and pulls it at 107, while the fallback rule puts D08's approach fallback at 26 and D18's
    transport fallback at 52 (0.25 and 0.5 of the oracle's fastest success), so under the
    instance's own fallbacks both fire by fallback and their phase realisation is never checked.
    Validation suspends the fallbacks: each fires at its phase, past its fallback step, and the
    instance keeps its fallback for policies."""
    from liberopro.instances.generation import validate_instance

    ref = TaskRef("libero_goal", 0)
    for sid in ("D08", "D18"):
        inst = make_instance(ref, [sid], 0)
        assert isinstance(inst, Instance)
        fallback = inst.shifts[0].params["fallback_step"]
        ok, why, applied = validate_instance(inst, scenes, 0)
        assert ok, why
        assert applied[sid]["fired_by"] == "phase"
        assert applied[sid]["fired_at_step"] > fallback, (applied[sid]["fired_at_step"], fallback)
        assert inst.shifts[0].params["fallback_step"] == fallback  # the instance itself is unchanged
