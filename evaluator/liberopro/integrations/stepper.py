"""One episode of one instance, stepped from outside the evaluator (a Gymnasium environment, a
vla-eval benchmark): :class:`EpisodeStepper`.

It is the episode runner's own episode (:meth:`liberopro.episode.runner.EpisodeRunner.begin_episode`,
:class:`liberopro.episode.runner.EpisodeSteps`): the same scene build, static shifts and settle steps
at reset, runtime shifts fired at task phases (or their fallback steps), interventions, observation
and action layers and validity checks, with the caller as the policy. The caller is asked for an
action exactly where the runner would ask a policy whose chunks are one action long: a step at which
an intervention (a shift holding control, a recovery protocol) supplies the action is run without
it, so one :meth:`EpisodeStepper.step` may advance the simulation by more than one control step.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from submission_spec.client import PolicyClient
from submission_spec.models import PolicyMetadata
from submission_spec.policy import Observation, as_action_chunk

from liberopro.episode.runner import EpisodeRunner, EpisodeSteps, RunSettings, only_cameras
from liberopro.instances.build import EpisodePlan, Instance, make_instance
from liberopro.instances.generation import ATTEMPTS, reset_validity
from liberopro.schema.reasons import TerminationReason, unrealised
from liberopro.shifts import ShiftInvalid
from liberopro.sim.observation import to_message
from liberopro.sim.scene import RawFrame
from liberopro.sim.tasks import TaskRef, task_info

#: The metadata an external policy gets when it names none: the contract's defaults (agentview
#: and wrist at 224 x 224, rotated 180 degrees, resize with pad; LIBERO's 8-number state; LIBERO's
#: gripper convention, -1 opens, +1 closes).
DEFAULT_METADATA = PolicyMetadata(policy_name="external")


def instance_from(
    manifest_line: str | None = None,
    suite: str | None = None,
    task_index: int | None = None,
    shifts: str | Sequence[str] = (),
    seed: int = 0,
) -> Instance:
    """The instance named by a manifest line (one JSON object, as ``instances.jsonl`` holds it,
    ``docs/definition.md``) or drawn from (``suite``, ``task_index``, ``shifts``, ``seed``) as the
    manifest generator draws it (:func:`liberopro.instances.build.make_instance`; ``shifts``: ids,
    a list or ``"S01+D19"``, empty or ``"nominal"`` for none). Raises ``ValueError`` when neither or
    both are given, or the shifts do not apply to the task; ``KeyError`` for an unknown shift id;
    ``pydantic.ValidationError`` for a malformed line."""
    if (manifest_line is None) == (suite is None or task_index is None):
        raise ValueError("give either manifest_line or suite and task_index")
    if manifest_line is not None:
        return Instance.model_validate_json(manifest_line)
    assert suite is not None and task_index is not None
    ids = [s for s in shifts.split("+") if s and s.lower() != "nominal"] if isinstance(shifts, str) else list(shifts)
    inst = make_instance(TaskRef(suite, task_index), ids, seed)
    if isinstance(inst, str):
        raise ValueError(inst)
    return inst


def first_valid_draw(
    suite: str | None,
    task_index: int | None,
    shifts: str | Sequence[str] = (),
    seed: int = 0,
    env_seed: int = 0,
    attempts: int = ATTEMPTS,
) -> Instance:
    """The instance of (``suite``, ``task_index``, ``shifts``, ``seed``) as :func:`instance_from`
    draws it, redrawn as manifest generation redraws (parameter draws 1, 2, ... up to
    ``attempts``) until one is realised at reset on LIBERO init state 0 with env seed
    ``env_seed``: the first episode of a run (:func:`liberopro.instances.generation.reset_validity`:
    the static shifts applied, the scene settled, the post-conditions measured, one step of the
    privileged oracle, no cameras unless a shift works on images; a scene build and a few seconds
    of CPU, the scene closed after). Nominal is returned as drawn. Runtime shifts are checked
    only as far as they are at reset. Raises ``ValueError`` naming the pair, the draws' reasons
    and what to do when no draw is realised there; otherwise as :func:`instance_from`."""
    first = instance_from(None, suite, task_index, shifts, seed)
    if not first.shifts:
        return first
    case = [s.id for s in first.shifts]
    cache: dict = {}
    reasons: list[str] = []
    try:
        for attempt in range(attempts):
            inst = first if attempt == 0 else make_instance(first.task, case, seed, attempt)
            if isinstance(inst, str):  # a redraw that no longer composes (runtime triggers in one phase)
                reasons.append(f"draw {attempt + 1}: {inst}")
                continue
            bad = reset_validity(inst, cache, env_seed, (0,))
            if not bad:
                return inst
            reasons.append(f"draw {attempt + 1}: {bad[0]}")
    finally:
        for scene in cache.values():
            scene.close()
    raise ValueError(
        f"{'+'.join(case)} on {first.task}: none of the first {attempts} parameter draws with instance seed "
        f"{seed} can be realised at reset on init state 0 with env seed {env_seed}, where the first episode "
        f"starts ({'; '.join(reasons)[:600]}). Draw with another instance seed, choose another shift, or "
        "evaluate a manifest's instances (`liberopro instances generate`), proven on their init states."
    )


@dataclass
class StepOutcome:
    """What one :meth:`EpisodeStepper.step` (or the reset) came to.

    Attributes:
        observation: what the policy receives next (:class:`submission_spec.Observation`: images
            (H, W, 3) uint8 per camera of the metadata, proprioception float64 vectors, the
            instruction), or, once the episode is over, the last frame as it would receive it.
        success: LIBERO's goal predicate held after the last control step.
        terminated: the episode ended on success, or on a shift that could not be realised
            (``info["valid"]`` False).
        truncated: the step limit (the horizon, plus the Retry protocol's extra steps) was reached.
        sim_steps: control steps run since the last observation (more than one when
            interventions supplied actions).
    """

    observation: Observation
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    sim_steps: int = 0
    info: dict[str, Any] = field(default_factory=dict)


class EpisodeStepper:
    """Episodes of one ``instance`` driven by a caller, one action at a time.

    Args:
        instance: the instance (task, shifts with every parameter fixed).
        metadata: what the caller is as a policy (:class:`submission_spec.PolicyMetadata`: the
            cameras and their sizes, image orientation, proprioception fields, gripper
            convention); default :data:`DEFAULT_METADATA`. Chunk length and replan steps are
            ignored: the caller supplies one action per call.
        settings: the evaluator's settings (render size, ``max_steps``); default as an evaluation.

    Not thread-safe; one episode at a time. :meth:`close` frees the scene (1.5-2.5 GB).
    """

    def __init__(
        self, instance: Instance, metadata: PolicyMetadata | None = None, settings: RunSettings | None = None
    ) -> None:
        self.instance = instance
        self.meta = metadata or DEFAULT_METADATA
        self.settings = settings or RunSettings()
        # No policy server: the runner only builds scenes and begins episodes here (begin_episode
        # asks no client), so it gets none.
        self.runner = EpisodeRunner(cast(PolicyClient, None), self.meta, self.settings)
        self._steps: EpisodeSteps | None = None
        self._episode_id = ""
        self._instruction = ""  # the last instruction delivered
        self._over = True

    @property
    def horizon(self) -> int:
        """The task's horizon under the settings (control steps, before any Retry extension)."""
        return self.settings.horizon(self.instance.task)

    def reset(self, init_state: int, seed: int) -> StepOutcome:
        """Begin an episode from LIBERO init state ``init_state`` (0-49) with env seed ``seed``,
        as the evaluator's episode of that init state and seed: static shifts applied and
        settled. Returns the first observation (``sim_steps`` counts steps an intervention
        supplied before it). When a static shift cannot be realised from this init state and
        seed, the episode is over at once: ``terminated``, ``info["valid"]`` False,
        ``info["termination_reason"]`` ``shift_invalid``, the scene's frame as the observation.
        Raises ``IndexError`` for an init state out of range."""
        plan = EpisodePlan(instance=self.instance, episode_index=0, init_state_index=init_state, seed=seed)
        self._over = True  # until the episode has begun (a fault leaves none to step)
        self._episode_id = uuid.uuid4().hex
        self._steps = self.runner.begin_episode(plan)
        self._instruction = self._steps.out.instruction
        if self._steps.out.reason == TerminationReason.shift_invalid:
            return self._ended(0)
        return self._advance(done=False)

    def step(self, action: np.ndarray | Sequence[float]) -> StepOutcome:
        """Run ``action`` ((7,): arm deltas in [-1, 1], gripper in the metadata's convention) at
        the current step through the action layers, then every step an intervention supplies, up
        to the next step the policy is asked at or the episode's end. The action is first made
        float32, as a policy's chunk is under the contract (:func:`submission_spec.as_action_chunk`),
        so that the same actions give the evaluator's episode bit for bit. Raises
        ``RuntimeError`` after the end (reset first), ``ValueError`` for an action that is not 7
        finite numbers; an evaluator or simulator fault (e.g. MuJoCo's instability) is raised
        and ends the episode (nothing is charged: reset to go on)."""
        steps = self._steps
        if steps is None or self._over:
            raise RuntimeError("the episode is over: reset first")
        chunk = as_action_chunk(action)  # the contract's normalisation: float32, as a policy server's
        if chunk.shape[0] != 1:
            raise ValueError(f"an action is 7 finite numbers, got shape {np.shape(action)}")
        a = chunk[0].astype(np.float64)
        self._over = True  # until the next step is reached (a fault ends the episode)
        try:
            done = steps.end_step(steps.policy_action(a), a)
        except ShiftInvalid as exc:
            return self._invalid(exc, 1)
        return self._advance(done, sim_steps=1)

    def _advance(self, done: bool, sim_steps: int = 0) -> StepOutcome:
        """Run intervention steps until the policy is asked or the episode ends."""
        steps = self._steps
        assert steps is not None
        try:
            while not done and steps.t < steps.limit:
                action, frame = steps.begin_step()
                if action is None:
                    self._over = False
                    return StepOutcome(self._observe(frame), sim_steps=sim_steps, info=self.info())
                done = steps.end_step(action, None)
                sim_steps += 1
            steps.stack.end()
        except ShiftInvalid as exc:
            return self._invalid(exc, sim_steps)
        self._over = True
        return StepOutcome(
            self._observe(steps.scene.frame(), final=True),
            success=done,
            terminated=done,
            truncated=not done,
            sim_steps=sim_steps,
            info=self.info(),
        )

    def _invalid(self, exc: ShiftInvalid, sim_steps: int) -> StepOutcome:
        """The end of an episode whose runtime shift could not be realised: ``shift_blocked`` (the
        policy's failure, scored) once the policy acted, else ``shift_invalid`` (not scored)."""
        steps = self._steps
        assert steps is not None
        out = steps.out
        out.reason, out.detail, out.success = unrealised(out.acted), str(exc), False
        return self._ended(sim_steps)

    def _ended(self, sim_steps: int) -> StepOutcome:
        """The end of an invalid episode: terminated, no success."""
        steps = self._steps
        assert steps is not None
        self._over = True
        obs = self._observe(steps.scene.frame(), final=True)
        return StepOutcome(obs, terminated=True, sim_steps=sim_steps, info=self.info())

    def _observe(self, frame: RawFrame, final: bool = False) -> Observation:
        """``frame`` as the policy receives it at the current step, with that step's instruction
        (the shifts' hooks see it as delivered, as when the runner asks a policy). A ``final``
        frame (the episode is over: nobody is asked) is the scene's, with the policy's cameras,
        not passed through the observation layers, with the last instruction delivered."""
        steps = self._steps
        assert steps is not None
        if final:
            frame = only_cameras(frame, tuple(c.name for c in self.meta.cameras))
        else:
            self._instruction = steps.stack.instruction(task_info(self.instance.task).instruction, steps.t)
        msg = to_message(frame, self.meta, self._episode_id, steps.t, self._instruction)
        return Observation.from_message(msg)

    def info(self) -> dict[str, Any]:
        """The episode so far: ``is_success``; ``valid`` and ``termination_reason`` (a
        :class:`~liberopro.schema.reasons.TerminationReason` value, ``horizon`` while running);
        ``detail``; ``steps`` (control steps run); ``horizon``; ``shifts`` (each shift's record as
        ``episodes.jsonl`` writes it: id, params, ``applied``, and for a runtime shift
        ``fired_at_step`` and ``fired_by``); ``phases`` (task phase -> step reached);
        ``instruction`` (of step 0); ``instance_id``, ``init_state``, ``seed``."""
        steps = self._steps
        if steps is None:
            return {}
        out, plan = steps.out, steps.plan
        return {
            "is_success": out.success,
            "valid": TerminationReason(out.reason).scored,
            "termination_reason": str(TerminationReason(out.reason).value),
            "detail": out.detail,
            "steps": out.steps,
            "horizon": self.horizon,
            "shifts": steps.stack.records(),
            "phases": {str(k): v for k, v in out.tracker.reached.items()} if out.tracker is not None else {},
            "instruction": out.instruction,
            "instance_id": self.instance.instance_id,
            "init_state": plan.init_state_index,
            "seed": plan.seed,
        }

    def close(self) -> None:
        """Free the scene (a later :meth:`reset` builds it again)."""
        self.runner.close()
        self._steps, self._over = None, True


__all__ = ["DEFAULT_METADATA", "EpisodeStepper", "StepOutcome", "first_valid_draw", "instance_from"]
