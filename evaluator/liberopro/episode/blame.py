"""Who is charged with an episode that a fault ended (``docs/evaluator.md``, "Who is charged with an
episode"; the sides are :class:`liberopro.schema.reasons.Side`).

A fault is an exception inside the evaluator or the simulator (not a
:class:`submission_spec.PolicyError`, not a :class:`liberopro.shifts.ShiftInvalid`), including
:class:`PhysicsUnstable`, which :meth:`liberopro.sim.scene.LiberoScene.step` raises when MuJoCo found the
simulation unstable. The rule (:func:`charge`):

* before the policy supplied its first action (scene build, reset, static shifts, settle, the first
  frame, the first ``/act`` message): nothing the policy did can have caused it, ``evaluator_error``
  (platform);
* after it, the episode is replayed twice, in fresh scenes, without the policy (an episode is a
  pure function of task, init state, seed, shift parameters and the policy's outputs):

  1. with the chunks the policy returned, at the steps it returned them, up to the fault's step:
     if the same fault (same exception type at the same step) does not recur, it was transient
     (the machine, the infrastructure): ``evaluator_error``;
  2. with a neutral policy (arm still, gripper open) up to the horizon: if a fault occurs there
     too, it does not depend on the actions (a bug of ours): ``evaluator_error``; otherwise the
     policy's actions provoke it: ``physics_unstable`` for :class:`PhysicsUnstable`, else
     ``action_fault`` (both the policy's, scored as failures).

A policy cannot steer either replay away from its own fault (the first repeats its outputs, the
second ignores them), so a losing policy cannot turn an episode into a re-run by provoking one.

Light: no simulator (the fast tests call :func:`charge` with made-up replay results).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

from liberopro.schema.reasons import TerminationReason


class PhysicsUnstable(RuntimeError):
    """MuJoCo found the simulation unstable during a control step: a NaN, infinite or huge
    position, velocity or acceleration (its ``mjWARN_BADQPOS``, ``mjWARN_BADQVEL`` or
    ``mjWARN_BADQACC`` warning). MuJoCo 2.3.7 raises nothing then: it prints a warning, resets
    ``mjData`` to the model's defaults and goes on, so the scene after it is not the episode's
    any more (:meth:`liberopro.sim.scene.LiberoScene.step` raises this instead)."""


class ReplayDiverged(RuntimeError):
    """A replay asked for the policy's chunk at a step where the episode did not ask for one: the
    replay is not the episode any more (it never counts as the fault recurring)."""


@dataclass(frozen=True)
class Fault:
    """An exception that ended an episode inside the evaluator.

    Attributes:
        kind: the exception's type, ``module.QualifiedName`` (e.g. ``liberopro.episode.blame.PhysicsUnstable``).
        step: the policy-loop step (0-based) in progress when it was raised, -1 before the loop
            (scene build, reset, static shifts, settle steps, ``/reset``); after the loop (the
            shifts' end), its last step.
        acted: whether the policy had supplied an action by then (an action of its chunk handed
            to the action layers); False for a fault in the scene build, reset, static shifts,
            settle steps or before the first answer.
        text: ``repr`` of the exception and its traceback (the last 5 frames).
    """

    kind: str
    step: int
    acted: bool
    text: str

    @classmethod
    def of(cls, exc: BaseException, step: int, acted: bool) -> Fault:
        """The fault of ``exc``, raised at policy-loop step ``step`` (call it in the ``except``
        block: the traceback is the one being handled)."""
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        return cls(kind, step, acted, f"{exc!r}\n{traceback.format_exc(limit=5)}")

    def same(self, other: Fault | None) -> bool:
        """True when ``other`` is this fault again: the same exception type at the same step."""
        return other is not None and (other.kind, other.step) == (self.kind, self.step)

    def short(self) -> str:
        """``Kind('message') at step N`` (or ``before the policy loop``): the first line of
        :attr:`text`, with the step."""
        where = f"at step {self.step}" if self.step >= 0 else "before the policy loop"
        return f"{self.text.splitlines()[0] if self.text else self.kind} {where}"


#: :attr:`Fault.kind` of :class:`PhysicsUnstable`.
PHYSICS_UNSTABLE = f"{PhysicsUnstable.__module__}.{PhysicsUnstable.__qualname__}"


def charge(
    fault: Fault,
    replay: Callable[[], Fault | None],
    neutral: Callable[[], Fault | None],
) -> tuple[TerminationReason, str]:
    """The termination reason of an episode ended by ``fault``, and the ``detail`` that says why
    (for admins: the decision, what each replay saw, then the fault's traceback).

    Args:
        fault: the episode's fault.
        replay: runs the episode again with the policy's recorded chunks through step
            ``fault.step`` (its fault, or None when it ran through); called only when
            ``fault.acted``.
        neutral: runs it with the neutral policy up to the horizon (its fault or None); called
            only when ``replay`` gave the same fault.

    Returns ``(reason, detail)``: ``evaluator_error`` (platform) when the policy had not acted,
    when the replay does not give the same fault (an exception of another type, or at another
    step, counts as not recurring) or when the neutral run faults too; else ``physics_unstable``
    or ``action_fault`` (the policy's). Raises nothing of its own.
    """
    what = "MuJoCo found the simulation unstable" if fault.kind == PHYSICS_UNSTABLE else "the evaluator failed"
    if not fault.acted:
        why = f"evaluator_error: {what} before the policy's first action, so no action of it caused this (platform)"
        return TerminationReason.evaluator_error, f"{why}.\n{fault.text}"
    again = replay()
    seen = f"replayed with the policy's recorded actions through step {fault.step}: " + (
        "the same fault" if fault.same(again) else again.short() if again else "no fault"
    )
    if not fault.same(again):
        why = f"evaluator_error: {what} after the policy acted, not again with its actions: transient (platform)"
        return TerminationReason.evaluator_error, f"{why}; {seen}.\n{fault.text}"
    still = neutral()
    seen += "; replayed with the robot held still to the horizon: " + (still.short() if still else "no fault")
    if still is not None:
        why = f"evaluator_error: {what} after the policy acted, also with the robot still: not its actions (platform)"
        return TerminationReason.evaluator_error, f"{why}; {seen}.\n{fault.text}"
    reason = TerminationReason.physics_unstable if fault.kind == PHYSICS_UNSTABLE else TerminationReason.action_fault
    why = f"{reason.value}: {what} after the policy acted, again with its actions, not with the robot still (policy)"
    return reason, f"{why}; {seen}.\n{fault.text}"


__all__ = ["PHYSICS_UNSTABLE", "Fault", "PhysicsUnstable", "ReplayDiverged", "charge"]
