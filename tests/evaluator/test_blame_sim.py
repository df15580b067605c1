"""Who is charged with a fault, on a real LIBERO scene (``docs/evaluator.md``, "Who is charged with an
episode"; the rule as a pure function: tests/evaluator/test_blame.py).

Evaluator faults are injected through a narrow seam, :meth:`liberopro.episode.phases.PhaseTracker.update`
(called after every env step of the policy loop) or :meth:`liberopro.sim.scene.LiberoScene.start_episode`,
monkeypatched here; nothing in the production code knows about them. Replays must not ask the
policy (the in-process policy counts its requests) nor write actions.

Physics: no legal action sequence we tried made a LIBERO scene unstable (MuJoCo 2.3.7, 2 ms
steps; ``docs/evaluator.md``, "Who is charged with an episode"), so the instability tests make the physics fragile with a
documented model edit, in this module's own scenes only: ``model.opt.timestep`` 0.05 s instead of
0.002 s (robosuite keeps 25 substeps per 50 ms control step, so each control step covers 1.25 s of
simulated time). With it, the settle action stays stable for 40 steps and more while an arm
action at the edge of the range ([1, 1, 1, 1, 1, 1, 1]) makes MuJoCo report NaN accelerations
in its first step; at 0.08 s even settling is unstable. What is tested is the detection
(``LiberoScene.step`` raises ``PhysicsUnstable``) and the charging.
"""

from __future__ import annotations

import numpy as np
import pytest
from liberopro.episode.local_policy import LocalPolicyClient
from liberopro.episode.phases import PhaseTracker
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.episode.video import load_actions
from liberopro.instances.build import EpisodePlan, Instance
from liberopro.sim.scene import SETTLE_ACTION, LiberoScene
from robosuite import macros

from .policies import Recorder, metadata, sweep

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

INSTANCE = Instance(instance_id="blame-nominal", suite="libero_goal", task_index=8)
MAX_STEPS = 6
#: A timestep at which max-range actions are unstable and the settle action is not (module docstring).
FRAGILE_TIMESTEP_S = 0.05
#: A timestep at which the settle steps themselves are unstable.
BROKEN_TIMESTEP_S = 0.08
#: How far the end effector moves from its start before the "provoked" fault fires (metres).
MOVED_M = 0.02


@pytest.fixture(scope="module")
def own_scenes():
    """This module's scene cache (not the session's: the physics tests edit the model)."""
    cache: dict = {}
    yield cache
    for scene in cache.values():
        scene.close()


def run(scenes: dict, act=None, **settings):
    """One episode of libero_goal:8 (init state 0, seed 0) against an in-process policy acting
    with ``act`` (default: hold still); (record, the policy: its ``observations`` are the
    requests it got)."""
    meta = metadata("blame")
    policy = Recorder(meta, act)
    runner = EpisodeRunner(
        LocalPolicyClient(policy),
        meta,
        RunSettings(render_size=64, max_steps=MAX_STEPS, **settings),
        scenes=scenes,
    )
    return runner.run_episode(EpisodePlan(INSTANCE, 0, 0, 0)), policy


def inject(monkeypatch, when) -> list[int]:
    """Make ``PhaseTracker.update(step)`` raise ``RuntimeError`` when ``when(tracker, step)``;
    returns the list of steps it raised at."""
    original = PhaseTracker.update
    raised: list[int] = []

    def update(self, step):
        if when(self, step):
            raised.append(step)
            raise RuntimeError(f"injected at step {step}")
        return original(self, step)

    monkeypatch.setattr(PhaseTracker, "update", update)
    return raised


def test_a_fault_at_reset_is_the_platforms_and_nothing_is_replayed(monkeypatch, own_scenes):
    calls = []

    def start_episode(self, init_state, seed):
        calls.append(seed)
        raise RuntimeError("injected at reset")

    monkeypatch.setattr(LiberoScene, "start_episode", start_episode)
    rec, policy = run(own_scenes)
    assert (rec.termination_reason, rec.valid, rec.success, rec.steps) == ("evaluator_error", False, False, 0)
    assert "before the policy's first action" in rec.detail and "injected at reset" in rec.detail
    assert calls == [0] and policy.observations == [] and policy.resets == []


def test_a_transient_fault_after_the_policy_acted_is_the_platforms(monkeypatch, own_scenes, tmp_path):
    once = [True]

    def when(tracker, step):
        if step == 2 and once[0]:
            once[0] = False
            return True
        return False

    raised = inject(monkeypatch, when)
    rec, policy = run(own_scenes, sweep(speed=1.0), record_actions=True, output_dir=str(tmp_path))
    assert (rec.termination_reason, rec.valid, rec.steps) == ("evaluator_error", False, 3)
    assert raised == [2]  # the replay went through step 2 without it
    assert "not again with its actions: transient (platform)" in rec.detail
    assert "recorded actions through step 2: no fault" in rec.detail and "injected at step 2" in rec.detail
    assert len(policy.observations) == 3 and len(policy.resets) == 1  # the replay asked the policy nothing
    files = list((tmp_path / "actions").iterdir())
    assert len(files) == 1 and load_actions(files[0])["executed"].shape == (3, 7)  # the episode's only


def test_a_fault_the_actions_provoke_is_the_policys(monkeypatch, own_scenes):
    """The fault fires once the end effector is MOVED_M from where it started: the policy's sweep
    gets it there, the robot held still does not."""

    def when(tracker, step):
        start = tracker.__dict__.setdefault("_test_start", tracker.scene.eef_pos())
        return bool(np.linalg.norm(tracker.scene.eef_pos() - start) > MOVED_M)

    raised = inject(monkeypatch, when)
    rec, policy = run(own_scenes, sweep(speed=1.0))
    assert (rec.termination_reason, rec.valid, rec.success) == ("action_fault", True, False)
    assert 1 <= rec.steps < MAX_STEPS and raised == [rec.steps - 1] * 2  # the episode and its replay
    assert f"recorded actions through step {rec.steps - 1}: the same fault" in rec.detail
    assert "held still to the horizon: no fault" in rec.detail
    assert len(policy.observations) == rec.steps


def test_a_fault_at_every_step_whatever_the_actions_is_the_platforms(monkeypatch, own_scenes):
    raised = inject(monkeypatch, lambda tracker, step: True)
    rec, policy = run(own_scenes, sweep(speed=1.0))
    assert (rec.termination_reason, rec.valid, rec.steps) == ("evaluator_error", False, 1)
    assert raised == [0, 0, 0]  # the episode, its replay, the robot held still
    assert "also with the robot still: not its actions (platform)" in rec.detail
    assert "held still to the horizon: RuntimeError('injected at step 0') at step 0" in rec.detail
    assert len(policy.observations) == 1


def fragile(monkeypatch, timestep: float) -> None:
    """Every scene's ``model.opt.timestep`` at ``timestep`` from the start of each episode
    (the replays' fresh scenes too): the documented model edit of the module docstring."""
    original = LiberoScene.start_episode

    def start_episode(self, init_state, seed):
        original(self, init_state, seed)
        self.model.opt.timestep = timestep

    monkeypatch.setattr(LiberoScene, "start_episode", start_episode)


@pytest.fixture
def restored_timestep(own_scenes, monkeypatch, tmp_path):
    """Puts the default timestep back on the module's scenes after a fragile-physics test; MuJoCo's
    warnings go to ``MUJOCO_LOG.TXT`` in the working directory: a temporary one."""
    monkeypatch.chdir(tmp_path)
    yield
    for scene in own_scenes.values():
        scene.model.opt.timestep = macros.SIMULATION_TIMESTEP


def test_physics_made_unstable_by_legal_actions_is_the_policys_failure(monkeypatch, own_scenes, restored_timestep):
    fragile(monkeypatch, FRAGILE_TIMESTEP_S)
    asked = []

    def act(obs):  # two steps still, then the arm at the edge of the range (legal: finite, in [-1, 1])
        asked.append(obs.step)
        return (SETTLE_ACTION if obs.step < 2 else np.ones(7))[None]

    rec, policy = run(own_scenes, act)
    assert (rec.termination_reason, rec.valid, rec.success, rec.steps) == ("physics_unstable", True, False, 2)
    assert rec.detail.startswith("physics_unstable: MuJoCo found the simulation unstable after the policy acted")
    assert "PhysicsUnstable(" in rec.detail and "QACC" in rec.detail
    assert "held still to the horizon: no fault" in rec.detail
    assert asked == [0, 1, 2]
    still, _ = run(own_scenes)  # the same fragile physics held still: no fault
    assert (still.termination_reason, still.valid, still.steps) == ("horizon", True, MAX_STEPS)


def test_physics_unstable_while_settling_is_the_platforms(monkeypatch, own_scenes, restored_timestep):
    fragile(monkeypatch, BROKEN_TIMESTEP_S)
    rec, policy = run(own_scenes, lambda obs: np.ones((1, 7)))
    assert (rec.termination_reason, rec.valid, rec.steps) == ("evaluator_error", False, 0)
    assert "MuJoCo found the simulation unstable before the policy's first action" in rec.detail
    assert policy.observations == []
