"""Who is charged with a fault (liberopro.episode.blame.charge), as a pure function of what the replays
saw, without the simulator; the neutral policy's action in every gripper convention; the replay
session answers from the recorded chunks and asks no server; ``valid`` follows the reason's side.
The same rules on real LIBERO scenes: tests/evaluator/test_blame_sim.py."""

from __future__ import annotations

import numpy as np
import pytest
from liberopro.episode.blame import PHYSICS_UNSTABLE, Fault, PhysicsUnstable, ReplayDiverged, charge
from liberopro.episode.runner import ReplaySession
from liberopro.schema.reasons import Side, TerminationReason
from liberopro.sim.observation import neutral_action, to_libero_action
from liberopro.sim.scene import SETTLE_ACTION, RawFrame

from .policies import metadata

ERROR = "builtins.RuntimeError"


def fault(kind: str = ERROR, step: int = 7, acted: bool = True) -> Fault:
    return Fault(kind, step, acted, f"{kind.split('.')[-1]}('boom')\nTraceback ...")


class Replays:
    """The two replays as callables returning what they saw; counts the calls."""

    def __init__(self, replay: Fault | None, neutral: Fault | None) -> None:
        self.results = {"replay": replay, "neutral": neutral}
        self.calls: list[str] = []

    def __call__(self, which: str):
        def run() -> Fault | None:
            self.calls.append(which)
            return self.results[which]

        return run

    def charge(self, f: Fault) -> tuple[TerminationReason, str]:
        return charge(f, self("replay"), self("neutral"))


def test_a_fault_before_the_policy_acted_is_the_platforms_and_nothing_is_replayed():
    r = Replays(fault(), fault())
    reason, detail = r.charge(fault(acted=False, step=-1))
    assert reason is TerminationReason.evaluator_error and reason.side is Side.platform
    assert r.calls == [] and "before the policy's first action" in detail and "RuntimeError('boom')" in detail
    reason, detail = Replays(None, None).charge(fault(PHYSICS_UNSTABLE, acted=False, step=0))  # the first /act
    assert reason is TerminationReason.evaluator_error and "MuJoCo found the simulation unstable" in detail


@pytest.mark.parametrize(
    "again",
    [None, fault(step=6), fault(step=8), fault("builtins.ValueError"), fault("liberopro.episode.blame.ReplayDiverged")],
    ids=["no-fault", "earlier-step", "later-step", "other-type", "diverged"],
)
def test_a_fault_that_does_not_recur_with_the_recorded_actions_is_transient(again):
    r = Replays(again, None)
    reason, detail = r.charge(fault())
    assert reason is TerminationReason.evaluator_error and r.calls == ["replay"]
    assert "transient (platform)" in detail and "recorded actions through step 7" in detail


def test_a_fault_that_recurs_also_with_the_robot_held_still_is_the_platforms():
    for still in (fault(), fault("builtins.KeyError", step=2)):  # any fault of the neutral run
        r = Replays(fault(), still)
        reason, detail = r.charge(fault())
        assert reason is TerminationReason.evaluator_error and r.calls == ["replay", "neutral"]
        assert "recorded actions through step 7: the same fault" in detail
        assert f"held still to the horizon: {still.short()}" in detail


def test_a_fault_the_actions_provoke_is_the_policys():
    r = Replays(fault(), None)
    reason, detail = r.charge(fault())
    assert reason is TerminationReason.action_fault and reason.scored and r.calls == ["replay", "neutral"]
    assert detail.startswith("action_fault:") and "held still to the horizon: no fault" in detail
    reason, detail = Replays(fault(PHYSICS_UNSTABLE), None).charge(fault(PHYSICS_UNSTABLE))
    assert reason is TerminationReason.physics_unstable and reason.scored
    assert detail.startswith("physics_unstable: MuJoCo found the simulation unstable")


def test_fault_of_an_exception_names_its_type_and_step():
    try:
        raise PhysicsUnstable("BADQACC x1")
    except PhysicsUnstable as exc:
        f = Fault.of(exc, 12, True)
    assert f.kind == PHYSICS_UNSTABLE and f.step == 12 and "BADQACC x1" in f.text and "Traceback" in f.text
    assert f.same(Fault(PHYSICS_UNSTABLE, 12, True, "")) and not f.same(Fault(PHYSICS_UNSTABLE, 13, True, ""))
    assert f.short() == "PhysicsUnstable('BADQACC x1') at step 12"
    assert Fault("k", -1, False, "KeyError('x')\n").short() == "KeyError('x') before the policy loop"


def test_valid_is_the_reasons_side():
    assert {r for r in TerminationReason if r.scored} >= {
        TerminationReason.physics_unstable,
        TerminationReason.action_fault,
    }
    unscored = {r for r in TerminationReason if not r.scored}
    assert unscored == {
        TerminationReason.shift_invalid,
        TerminationReason.evaluator_error,
        TerminationReason.worker_crashed,
    }


@pytest.mark.parametrize("convention", ["libero", "open_positive", "unit_open_is_one", "unit_close_is_one"])
@pytest.mark.parametrize("binarize", [False, True])
def test_the_neutral_action_holds_still_with_the_gripper_open_in_every_convention(convention, binarize):
    meta = metadata("m").model_copy(update={"gripper_convention": convention, "binarize_gripper": binarize})
    a = neutral_action(meta)
    assert a.shape == (7,) and a.dtype == np.float64
    np.testing.assert_array_equal(to_libero_action(a, meta), SETTLE_ACTION)


def _frame() -> RawFrame:
    proprio = {
        "eef_pos": np.zeros(3),
        "eef_axis_angle": np.zeros(3),
        "gripper_qpos": np.zeros(2),
        "joint_pos": np.zeros(7),
    }
    return RawFrame({"agentview": np.zeros((64, 64, 3), np.uint8)}, proprio)


def test_the_replay_session_answers_with_the_recorded_chunks_and_asks_no_server():
    meta = metadata("m", chunk=4, replan=2)
    recorded = {0: np.full((4, 7), 0.5), 2: np.full((3, 7), -0.5)}
    asked: list[int] = []
    replay = ReplaySession(meta, "e" * 32, lambda step: asked.append(step) or "do it", recorded)
    replay.reset("do it")  # no server: nothing happens
    assert replay.client is None
    np.testing.assert_array_equal(replay.act(_frame(), 0), recorded[0])
    np.testing.assert_array_equal(replay.act(_frame(), 2), recorded[2])
    assert asked == [0, 2]  # the message was built (its instruction asked) as the episode's was
    with pytest.raises(ReplayDiverged, match="step 1"):
        replay.act(_frame(), 1)
    assert replay.latency.stats().requests == 0 and list(replay.chunks) == [0, 2]
    neutral = ReplaySession(meta.model_copy(update={"gripper_convention": "unit_close_is_one"}), "e", str, None)
    chunk = neutral.act(_frame(), 5)
    assert chunk.shape == (4, 7) and (chunk[:, :6] == 0).all() and (chunk[:, 6] == 0).all()
