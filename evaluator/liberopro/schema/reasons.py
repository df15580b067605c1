"""Why an episode ended, and which side is charged with it: the one vocabulary of
``EpisodeRecord.termination_reason`` for the evaluator, the platform and the reports
(``docs/platform.md``, "Who is charged with an episode").

Three sides:

* ``policy``: the episode is valid and counts in every success rate, as a success (``success``)
  or as the policy's failure. Everything the policy's own answers or actions decide is here,
  including faults it can provoke with in-range, finite actions (an unstable simulation, an
  evaluator exception its actions bring about): were they the platform's, a policy losing an
  episode could turn it into a re-run. So is a runtime shift that could not be realised once the
  policy had acted (``shift_blocked``): where the robot stands when it comes due is the policy's
  doing, and were it invalid, a policy could void a shift it would fail by parking the arm where
  the shift cannot act.
* ``instance``: the instance's shift could not be realised as stated before the policy acted
  (``shift_invalid``: a static shift at reset, decided before the first action); the episode is
  invalid and counts in no rate (``docs/definition.md``, "Instances").
* ``platform``: the evaluator or the infrastructure failed in a way no action of the policy can
  cause (a stream process that died, an evaluator exception that recurs when the robot holds
  still or does not recur at all when the episode is replayed). Never scored: a local run
  records the episode invalid, the platform does not store it and runs it again, and a fault
  that persists ends the submission as a platform error, never as a lower score.

Light: no simulator, no pydantic model; the platform imports it.
"""

from __future__ import annotations

import enum


class Side(enum.StrEnum):
    """Who an episode's ending is charged to (module docstring)."""

    policy = "policy"
    instance = "instance"
    platform = "platform"


class TerminationReason(enum.StrEnum):
    """Every value ``EpisodeRecord.termination_reason`` takes. :attr:`side` says who is charged;
    :attr:`meaning` says what happened and why that side. The ``policy_*`` transport reasons are
    ``submission_spec.client.FailureReason`` (the client raises them); ``policy_crashed`` and
    ``policy_out_of_memory`` are added by the platform, which sees the policy container die."""

    success = "success"
    horizon = "horizon"
    policy_connect_error = "policy_connect_error"
    policy_timeout = "policy_timeout"
    policy_episode_timeout = "policy_episode_timeout"
    policy_http_error = "policy_http_error"
    policy_bad_response = "policy_bad_response"
    policy_step_mismatch = "policy_step_mismatch"
    policy_bad_action_shape = "policy_bad_action_shape"
    policy_nonfinite_action = "policy_nonfinite_action"
    policy_crashed = "policy_crashed"
    policy_out_of_memory = "policy_out_of_memory"
    physics_unstable = "physics_unstable"
    action_fault = "action_fault"
    shift_blocked = "shift_blocked"
    shift_invalid = "shift_invalid"
    evaluator_error = "evaluator_error"
    worker_crashed = "worker_crashed"

    @property
    def side(self) -> Side:
        """The side charged with an episode that ended this way."""
        return _TABLE[self][0]

    @property
    def meaning(self) -> str:
        """What happened, and why it is charged to :attr:`side` (one sentence)."""
        return _TABLE[self][1]

    @property
    def scored(self) -> bool:
        """True when the episode counts in success rates (``side`` is ``policy``)."""
        return self.side is Side.policy


_TABLE: dict[TerminationReason, tuple[Side, str]] = {
    TerminationReason.success: (Side.policy, "LIBERO's goal predicate held: the policy's success"),
    TerminationReason.horizon: (Side.policy, "the step limit came first: the policy did not finish the task in time"),
    TerminationReason.policy_connect_error: (
        Side.policy,
        "the policy server could not be reached (connection refused or reset, not healthy)",
    ),
    TerminationReason.policy_timeout: (Side.policy, "one request got no complete answer within the request timeout"),
    TerminationReason.policy_episode_timeout: (
        Side.policy,
        "the policy used up its time budget for the episode (all its answers together)",
    ),
    TerminationReason.policy_http_error: (Side.policy, "the policy answered with an HTTP error status"),
    TerminationReason.policy_bad_response: (
        Side.policy,
        "the policy's answer was not a valid reply of the spec (malformed, too large, wrong fields)",
    ),
    TerminationReason.policy_step_mismatch: (
        Side.policy,
        "the policy answered for another episode or step than the one asked",
    ),
    TerminationReason.policy_bad_action_shape: (
        Side.policy,
        "the action chunk had the wrong shape (not (T, 7) with 1 <= T <= chunk_length)",
    ),
    TerminationReason.policy_nonfinite_action: (Side.policy, "the action chunk held NaN or infinity"),
    TerminationReason.policy_crashed: (Side.policy, "the policy process or container exited during the episode"),
    TerminationReason.policy_out_of_memory: (
        Side.policy,
        "the policy container was killed for exceeding its memory limit",
    ),
    TerminationReason.physics_unstable: (
        Side.policy,
        "MuJoCo found the simulation unstable (NaN or huge accelerations, velocities or positions) or "
        "failed during a step the policy commanded: its in-range actions brought it about",
    ),
    TerminationReason.action_fault: (
        Side.policy,
        "the evaluator failed after the policy acted, and the fault recurs when the policy's own outputs "
        "are replayed but not when the robot holds still: its actions provoke it",
    ),
    TerminationReason.shift_blocked: (
        Side.policy,
        "a shift could not be realised after the policy had acted (e.g. the arm where a runtime shift "
        "must place or push something, past the bounded delay): the robot's state is the policy's doing, "
        "so the episode is its failure, never dropped from the denominator",
    ),
    TerminationReason.shift_invalid: (
        Side.instance,
        "the instance's shift could not be realised as stated before the policy acted (a static shift at "
        "reset), so the episode measures nothing",
    ),
    TerminationReason.evaluator_error: (
        Side.platform,
        "the evaluator failed before the policy acted, or in a way no action causes (the fault does not "
        "recur when the episode is replayed, or recurs when the robot holds still)",
    ),
    TerminationReason.worker_crashed: (
        Side.platform,
        "a simulator stream process of the evaluator died twice, so the episode never ran to its end",
    ),
}


def unrealised(acted: bool) -> TerminationReason:
    """The reason of an episode whose shift could not be realised (a
    ``liberopro.shifts.ShiftInvalid``): ``shift_blocked`` (the policy's failure) once the policy
    had supplied an action (``acted``), else ``shift_invalid`` (invalid, in no rate)."""
    return TerminationReason.shift_blocked if acted else TerminationReason.shift_invalid


def side_of(reason: str) -> Side:
    """The side charged with ``reason`` (a :class:`TerminationReason` value); ``ValueError`` for
    a string outside the vocabulary."""
    return TerminationReason(reason).side


def reasons_of(side: Side) -> frozenset[TerminationReason]:
    """Every reason charged to ``side``."""
    return frozenset(r for r in TerminationReason if r.side is side)


__all__ = ["Side", "TerminationReason", "reasons_of", "side_of", "unrealised"]
