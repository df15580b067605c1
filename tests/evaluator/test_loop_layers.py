"""The parts of the episode loop on fakes (no simulator, no scene: milliseconds): the chunked
policy, runtime firing, frozen observations, the recovery protocols and the shift adapter.
The loop assembled from them on real scenes is pinned by ``tests/evaluator/test_golden.py``
and the diagnostics of ``tests/evaluator/test_manifest_and_diagnostics.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
import pytest
from liberopro.catalog.spec import RuntimeParams, ShiftParams
from liberopro.episode.loop import (
    ChunkedPolicy,
    FrozenObservations,
    Hold,
    Recovery,
    Restore,
    Retry,
    execute,
    intervene,
    observation_layers,
    observe,
    recovery_for,
    start_action,
)
from liberopro.shifts.adapter import ShiftLayer, ShiftStack
from liberopro.shifts.base import EpisodeContext, RuntimeShift, Shift, stable_seed


# --------------------------------------------------------------------------- fakes
@dataclass
class Frame:
    """Stands for :class:`liberopro.sim.scene.RawFrame` (the layers need ``copy`` only)."""

    step: int
    pixels: np.ndarray = field(default_factory=lambda: np.zeros((2, 2, 3), dtype=np.uint8))

    def copy(self) -> Frame:
        return Frame(self.step, self.pixels.copy())


class FakeScene:
    def __init__(self) -> None:
        self.qpos = np.array([0.1, 0.2, 0.3])
        self.settles = 0
        self.set_to: list[np.ndarray] = []

    def robot_state(self) -> np.ndarray:
        return self.qpos.copy()

    def set_robot_state(self, qpos: np.ndarray) -> None:
        self.set_to.append(qpos)
        self.qpos = qpos.copy()

    def eef_pos(self) -> np.ndarray:
        return np.array([0.123456, -0.5, 1.00004])

    def settle(self) -> None:
        self.settles += 1


class Requests:
    """A policy that answers chunks of ``length`` rows: row i of the chunk asked at step t is
    ``[t, i, 0, 0, 0, 0, 1]``."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.asked: list[tuple[int, int]] = []  # (step, frame's step)

    def __call__(self, frame: Frame, step: int) -> np.ndarray:
        self.asked.append((step, frame.step))
        return np.array([[step, i, 0, 0, 0, 0, 1.0] for i in range(self.length)])


class _Params(RuntimeParams):
    trigger: Literal["grasp", "approach"] = "grasp"


class FakeRuntime(RuntimeShift):
    id, name, category, kind = "D99", "fake runtime", "execution", "runtime"  # type: ignore[assignment]
    Params: ClassVar = _Params

    def __init__(self, params) -> None:
        super().__init__(params)
        self.fired: list[tuple[int, int | None]] = []  # (step, fired_at seen by fire)
        self.hold_until = -1

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self.fired.append((step, self.fired_at))
        self.applied = {"fired": step}

    def override(self, ctx: EpisodeContext, step: int) -> np.ndarray | None:
        return np.full(7, 0.5) if step < self.hold_until else None

    def observe(self, frame, step, ctx):
        return Frame(frame.step, frame.pixels + 1)

    def execute(self, action, step, ctx):
        return action * 2


class _NoParams(ShiftParams):
    pass


class FakeStatic(Shift):
    id, name, category, kind = "S99", "fake static", "perception", "static"  # type: ignore[assignment]
    Params: ClassVar = _NoParams

    def __init__(self, params, moves: bool = False) -> None:
        super().__init__(params)
        self.moves, self.calls = moves, []

    def on_episode_start(self, ctx):
        self.calls.append(("start", ctx.scene.settles))

    def on_settled(self, ctx):
        self.calls.append(("settled", ctx.scene.settles))
        return self.moves

    def verify(self, ctx):
        self.calls.append(("verify", ctx.scene.settles))

    def instruction(self, text, step):
        return text + " (static)"


def runtime(trigger: str = "grasp", fallback_step: int = 20) -> FakeRuntime:
    return FakeRuntime(_Params(trigger=trigger, fallback_step=fallback_step))


def ctx(scene=None) -> EpisodeContext:
    return EpisodeContext(scene=scene or FakeScene(), sem=None, rng=np.random.default_rng(0))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- ChunkedPolicy
def test_chunked_policy_executes_k_actions_of_each_chunk_then_asks_again():
    ask = Requests(length=8)
    policy = ChunkedPolicy(ask, replan_steps=3)
    actions = [policy.next(Frame(t), t) for t in range(10)]
    assert [s for s, _ in ask.asked] == [0, 3, 6, 9]
    assert [f for _, f in ask.asked] == [0, 3, 6, 9], "the frame of the asking step is sent"
    assert [(a[0], a[1]) for a in actions] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (3, 0),
        (3, 1),
        (3, 2),
        (6, 0),
        (6, 1),
        (6, 2),
        (9, 0),
    ]
    assert actions[0].shape == (7,)


def test_chunked_policy_uses_up_a_chunk_shorter_than_k():
    ask = Requests(length=2)
    policy = ChunkedPolicy(ask, replan_steps=5)
    for t in range(6):
        policy.next(Frame(t), t)
    assert [s for s, _ in ask.asked] == [0, 2, 4]


def test_chunked_policy_k_equal_to_chunk_length_and_k_one():
    ask = Requests(length=4)
    policy = ChunkedPolicy(ask, replan_steps=4)
    for t in range(9):
        policy.next(Frame(t), t)
    assert [s for s, _ in ask.asked] == [0, 4, 8]
    ask1 = Requests(length=4)
    policy1 = ChunkedPolicy(ask1, replan_steps=1)
    for t in range(3):
        policy1.next(Frame(t), t)
    assert [s for s, _ in ask1.asked] == [0, 1, 2]


def test_chunked_policy_flush_and_episode_end_drop_the_rest_of_the_chunk():
    ask = Requests(length=8)
    policy = ChunkedPolicy(ask, replan_steps=5)
    policy.next(Frame(0), 0)
    policy.next(Frame(1), 1)
    policy.flush()  # an intervention at step 2
    assert policy.chunk == []
    assert policy.next(Frame(3), 3)[0] == 3 and [s for s, _ in ask.asked] == [0, 3]
    # the episode ends with 4 actions left; the next episode has its own policy: it asks at step 0
    assert len(policy.chunk) == 4
    ask2 = Requests(length=8)
    nxt = ChunkedPolicy(ask2, replan_steps=5)
    assert nxt.next(Frame(0), 0)[0] == 0 and ask2.asked == [(0, 0)]


# --------------------------------------------------------------------------- runtime firing
def test_runtime_shift_fires_once_at_the_first_step_its_phase_is_reached():
    s, c = runtime("grasp", fallback_step=20), ctx()
    reached: dict = {}
    whys = []
    for t in range(30):
        if t == 4:
            reached["approach"] = 4
        if t == 7:
            reached["grasp"] = 6  # the tracker updates after the step: seen at the next one
        whys.append(s.maybe_fire(c, t, reached))
    assert [(t, w) for t, w in enumerate(whys) if w is not None] == [(7, "phase")]
    assert s.fired == [(7, 7)], "fired once; fired_at is set before fire() runs"
    assert (s.fired_at, s.fired_by) == (7, "phase")
    rec = s.record()
    assert rec["fired_at_step"] == 7 and rec["fired_by"] == "phase" and rec["applied"] == {"fired": 7}


def test_runtime_shift_fires_at_its_fallback_step_when_the_phase_never_comes():
    s, c = runtime("grasp", fallback_step=12), ctx()
    whys = [s.maybe_fire(c, t, {"approach": 3}) for t in range(25)]
    assert [(t, w) for t, w in enumerate(whys) if w is not None] == [(12, "fallback")]
    assert s.record()["fired_at_step"] == 12 and s.record()["fired_by"] == "fallback"
    assert s.done_after() == 12 + 5


def test_runtime_shift_that_never_fires_records_none():
    s, c = runtime("grasp", fallback_step=50), ctx()
    for t in range(10):
        assert s.maybe_fire(c, t, {}) is None
    assert s.record()["fired_at_step"] is None and s.record()["fired_by"] is None and s.done_after() is None


def test_a_phase_reached_by_the_fallback_step_counts_as_phase():
    s, c = runtime("approach", fallback_step=5), ctx()
    assert s.maybe_fire(c, 5, {"approach": 4}) == "phase"


def test_static_shifts_never_fire_and_the_stack_reports_any_firing():
    scene = FakeScene()
    late, early, static = runtime("grasp", 10), runtime("approach", 3), FakeStatic(_NoParams())
    stack = ShiftStack([late, static, early])
    stack.bind(scene, None, seed=1)  # type: ignore[arg-type]
    assert [layer.shift for layer in stack.layers] == [static, late, early], "static first, then instance order"
    assert static.maybe_fire(stack.layers[0].ctx, 99, {"grasp": 0}) is None
    fired = [t for t in range(12) if stack.fire_due(t, {})]
    assert fired == [3, 10]
    assert (early.fired_at, late.fired_at) == (3, 10)
    assert not stack.done(10) and stack.done(15) and not ShiftStack([static]).done(100)


# --------------------------------------------------------------------------- the shift adapter
def test_shift_stack_binds_contexts_seeded_per_shift_in_instance_order():
    scene = FakeScene()
    a, b = runtime(), FakeStatic(_NoParams())
    stack = ShiftStack([a, b])
    stack.bind(scene, None, seed=7)  # type: ignore[arg-type]
    by_shift = {layer.shift: layer.ctx for layer in stack.layers}

    assert by_shift[a].rng.random() == np.random.default_rng(stable_seed(7, "D99", 0)).random()
    assert by_shift[b].rng.random() == np.random.default_rng(stable_seed(7, "S99", 1)).random()
    assert stack.records()[0]["id"] == "D99", "records keep the instance's order"


def test_shift_stack_prepare_runs_the_static_phase_and_resettles_when_something_moved():
    for moves, settles in ((False, 1), (True, 2)):
        scene = FakeScene()
        static = FakeStatic(_NoParams(), moves=moves)
        stack = ShiftStack([runtime(), static])
        stack.bind(scene, None, seed=0)  # type: ignore[arg-type]
        stack.prepare(scene)
        assert static.calls == [("start", 0), ("settled", 1), ("verify", settles)]
        assert scene.settles == settles


def test_shift_layers_observe_execute_and_intervene():
    s = runtime()
    layer = ShiftLayer(s, ctx())
    assert observe([layer, layer], Frame(3), 3).pixels[0, 0, 0] == 2
    assert execute([layer], np.ones(7), 0).tolist() == [2.0] * 7
    last = np.array([0, 0, 0, 0, 0, 0, 1.0])
    assert layer.intervene(0, last) is None and layer.ctx.last_action is last
    s.hold_until = 5
    assert intervene([layer, Hold(3)], 1, last).tolist() == [0.5] * 7
    assert ShiftStack([FakeStatic(_NoParams()), s]).instruction("pick", 0) == "pick (static)"


def test_intervene_stops_at_the_first_action_and_only_updates_the_layers_before_it():
    first, second = ShiftLayer(runtime(), ctx()), ShiftLayer(runtime(), ctx())
    first.shift.hold_until = 10
    old = second.ctx.last_action
    last = np.array([0, 0, 0, 0, 0, 0, 1.0])
    assert intervene([first, second], 0, last) is not None
    assert first.ctx.last_action is last and second.ctx.last_action is old


# --------------------------------------------------------------------------- frozen observations
def test_frozen_observations_repeat_a_copy_of_the_first_frame_after_the_shift_layers():
    layer = ShiftLayer(runtime(), ctx())
    layers = observation_layers([layer], "frozen")
    assert isinstance(layers[-1], FrozenObservations) and layers[0] is layer
    assert observation_layers([layer], "live") == [layer]
    first = Frame(0)
    seen = [observe(layers, first if t == 0 else Frame(t), t) for t in range(4)]
    assert all(f is seen[0] for f in seen), "the same frame object every step"
    assert seen[0].step == 0 and seen[0].pixels[0, 0, 0] == 1, "the first frame after the shift's layer"
    first.pixels[:] = 200
    assert seen[0].pixels[0, 0, 0] == 1, "a copy: later changes to the original do not leak"


# --------------------------------------------------------------------------- recovery protocols
def test_no_recovery_never_applies():
    r = recovery_for("none", 6, 5)
    assert type(r) is Recovery
    r.arm()
    assert not r.pending and r.intervene(0, start_action()) is None and r.record == {"protocol": "none"}
    assert r.limit(30) == 30


def test_hold_keeps_the_robot_still_for_its_steps_with_the_last_gripper_command():
    r = recovery_for("hold", 3, 5)
    assert isinstance(r, Hold)
    assert r.intervene(0, start_action()) is None, "not armed: nothing"
    r.arm()
    last = np.array([0.3, 0, 0, 0, 0, 0, 1.0])
    actions = [r.intervene(t, last) for t in range(4, 9)]
    assert [a.tolist() if a is not None else None for a in actions[:3]] == [[0, 0, 0, 0, 0, 0, 1.0]] * 3
    assert actions[3] is None and actions[4] is None
    assert actions[0].dtype == np.float64
    assert r.record == {"protocol": "hold", "at_step": 4, "hold_steps": 3} and r.applied_at == 4
    r.arm()  # a second runtime shift fires later: the protocol applies once per episode
    assert not r.pending and r.intervene(20, last) is None and r.record["at_step"] == 4


def test_recovery_waits_while_a_shift_holds_control():
    s = runtime()
    s.hold_until = 3
    layer, r = ShiftLayer(s, ctx()), Hold(2)
    r.arm()
    got = [intervene([layer, r], t, start_action()) for t in range(6)]
    assert [g[0] if g is not None else None for g in got] == [0.5, 0.5, 0.5, 0.0, 0.0, None]
    assert r.record["at_step"] == 3


def test_retry_extends_the_step_limit_once():
    r = recovery_for("retry", 6, 5)
    assert isinstance(r, Retry) and r.limit(25) == 25
    r.arm()
    assert r.intervene(9, start_action()) is None, "no action: the policy acts, with a fresh chunk"
    assert r.limit(25) == 30 and r.record == {"protocol": "retry", "at_step": 9, "extra_steps": 5}
    r.arm()
    r.intervene(12, start_action())
    assert r.limit(25) == 30


def test_restore_puts_the_robot_back_at_its_loop_start_state():
    scene = FakeScene()
    r = recovery_for("restore", 6, 5)
    assert isinstance(r, Restore)
    r.begin(scene)  # type: ignore[arg-type]
    scene.qpos = np.array([9.0, 9.0, 9.0])  # the robot moved
    r.arm()
    assert r.intervene(7, start_action()) is None
    assert scene.set_to[0].tolist() == [0.1, 0.2, 0.3]
    assert r.record == {"protocol": "restore", "at_step": 7, "restored_eef_m": [0.1235, -0.5, 1.0]}


def test_unknown_recovery_protocol():
    with pytest.raises(KeyError):
        recovery_for("rewind", 1, 1)
