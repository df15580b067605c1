"""The bounded delay of runtime shifts (issue 11, item 3; ``liberopro.shifts.base``): a fire that
finds no free placement only because of the robot or the carried object at that moment raises
:class:`ShiftDeferred`; the shift retries at each following step and records the delay, and the
shift counts as unrealised only past :data:`MAX_DELAY_STEPS` (the runner then ends the episode
``shift_blocked``, the policy's failure: ``tests/evaluator/test_shifts_realized.py``). A fake shift (D19's parameters, its own
``fire``), no simulator."""

from __future__ import annotations

import pytest
from liberopro.schema.results import ShiftRecord
from liberopro.shifts.base import MAX_DELAY_STEPS, ShiftDeferred, ShiftInvalid
from liberopro.shifts.d19_robot_displacement import RobotDisplacement

PARAMS = {"trigger": "approach", "fallback_step": 40, "distance_m": 0.05, "direction_deg": 90.0}


class Blocked(RobotDisplacement):
    """Defers its first ``defer`` attempts ("the gripper is in the way"), then fires; records
    every attempt's step and the scene it saw (a dict standing in for the scene)."""

    def __init__(self, params, defer: int) -> None:
        super().__init__(params)
        self.defer = defer
        self.attempts: list[int] = []

    def fire(self, ctx, step: int) -> None:
        self.attempts.append(step)
        assert self.fired_at == step  # fire may read fired_at / fired_by
        if len(self.attempts) <= self.defer:
            self.applied = {"partial": True}  # a deferred attempt's partial record must not stay
            raise ShiftDeferred(self.id, f"within 20 mm of robot0_base at step {step}")
        ctx["moved"] = step
        self.applied = {"moved_at": step}


def drive(shift: Blocked, phase_at: int, steps: int) -> tuple[list[int], dict]:
    """Run ``maybe_fire`` over ``steps`` steps, the trigger phase reached at ``phase_at``; returns
    the steps at which it reported firing and the fake scene."""
    scene: dict = {}
    fired = []
    for t in range(steps):
        reached = {"approach": phase_at} if t >= phase_at else {}
        why = shift.maybe_fire(scene, t, reached)  # type: ignore[arg-type]
        if why is not None:
            fired.append((t, why))
    return fired, scene


def test_a_deferred_shift_fires_at_the_step_it_acts_and_records_its_delay():
    shift = Blocked(PARAMS, defer=2)
    fired, scene = drive(shift, phase_at=7, steps=60)
    assert fired == [(9, "phase")]  # once, by its phase, two steps late
    assert shift.attempts == [7, 8, 9] and scene == {"moved": 9}
    assert (shift.fired_at, shift.fired_by, shift.due_at, shift.delay_steps) == (9, "phase", 7, 2)
    assert shift.done_after() == 9 + 15 + 5  # the window counts from when it acted
    rec = shift.record()
    assert rec["fired_at_step"] == 9 and rec["due_at_step"] == 7 and rec["delay_steps"] == 2
    assert rec["deferred_reason"] == "within 20 mm of robot0_base at step 7"
    assert rec["applied"] == {"moved_at": 9}
    # the results schema reads and writes the delay keys
    out = ShiftRecord.model_validate(rec).model_dump(mode="json")
    assert out["delay_steps"] == 2 and out["due_at_step"] == 7


def test_a_delay_keeps_the_cause_that_made_the_shift_due():
    """Due at its fallback step (40), deferred; the phase reached meanwhile does not relabel it."""
    shift = Blocked(PARAMS, defer=3)
    fired, _ = drive(shift, phase_at=41, steps=60)
    assert fired == [(43, "fallback")] and shift.delay_steps == 3


def test_a_shift_never_deferred_writes_no_delay_keys():
    shift = Blocked(PARAMS, defer=0)
    fired, _ = drive(shift, phase_at=5, steps=10)
    assert fired == [(5, "phase")] and shift.delay_steps == 0
    assert not {"due_at_step", "delay_steps", "deferred_reason"} & set(shift.record())
    assert not {"due_at_step", "delay_steps"} & set(ShiftRecord.model_validate(shift.record()).model_dump())


def test_a_shift_deferred_up_to_the_bound_still_fires():
    shift = Blocked(PARAMS, defer=MAX_DELAY_STEPS)
    fired, _ = drive(shift, phase_at=3, steps=60)
    assert fired == [(3 + MAX_DELAY_STEPS, "phase")] and shift.delay_steps == MAX_DELAY_STEPS


def test_a_shift_deferred_past_the_bound_makes_the_episode_invalid():
    shift = Blocked(PARAMS, defer=MAX_DELAY_STEPS + 1)
    with pytest.raises(ShiftInvalid) as exc:
        drive(shift, phase_at=3, steps=60)
    assert not isinstance(exc.value, ShiftDeferred)
    assert "within 25 steps of coming due at step 3 (by phase)" in exc.value.reason
    assert "first: within 20 mm of robot0_base at step 3" in exc.value.reason
    assert shift.attempts == list(range(3, 3 + MAX_DELAY_STEPS + 1))
    rec = shift.record()
    assert rec["fired_at_step"] is None and rec["fired_by"] is None and rec["applied"] == {}
    assert rec["delay_steps"] == MAX_DELAY_STEPS and rec["due_at_step"] == 3


def test_a_permanent_failure_after_a_deferral_is_invalid_at_once_with_the_delay_recorded():
    """Deferred at its phase step (the carried target over the spot), then, one step later, only
    fixtures in the way: the episode is invalid at that step, not at the bound."""

    class ThenFixed(Blocked):
        def fire(self, ctx, step: int) -> None:
            self.attempts.append(step)
            if len(self.attempts) == 1:
                raise ShiftDeferred(self.id, "the carried target over the spot")
            raise ShiftInvalid(self.id, "only the cabinet on the path")

    shift = ThenFixed(PARAMS, defer=0)
    with pytest.raises(ShiftInvalid, match="only the cabinet on the path"):
        drive(shift, phase_at=4, steps=60)
    assert shift.attempts == [4, 5]
    rec = shift.record()
    assert (rec["due_at_step"], rec["delay_steps"], rec["deferred_reason"]) == (
        4,
        1,
        "the carried target over the spot",
    )
