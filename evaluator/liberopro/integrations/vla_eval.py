"""LIBERO-Pro2.0 instances as a benchmark of allenai's vla-evaluation-harness (``vla-eval``, the
``vlaeval`` extra; ``docs/integrations.md``).

vla-eval runs a benchmark class named in its config by import string against a model server
over its WebSocket protocol::

    benchmarks:
      - benchmark: "liberopro.integrations.vla_eval:LiberoProBenchmark"
        episodes_per_task: 10
        params: {manifest: manifests/public.jsonl, seed: 0}

One vla-eval task is one instance (task + shifts + parameters); its episode ``e`` is the
evaluator's episode of init state ``e mod 50`` and env seed ``seed + e``
(:func:`liberopro.instances.build.plan_episodes`), stepped by
:class:`liberopro.integrations.stepper.EpisodeStepper`: the same scene, shifts and checks.
Observations follow vla-eval's LIBERO convention (``images`` agentview and wrist, rotated 180
degrees, ``task_description``, ``states``: the 8-number LIBERO state); actions are 7 numbers
(arm deltas, gripper +1 closes), the gripper binarised as vla-eval's LIBERO benchmark does.

An episode whose shift cannot be realised from its init state (termination reason
``shift_invalid``, not scored by the evaluator) raises :class:`ShiftInvalidAtReset` at reset:
vla-eval then records it as an episode error (``failure_reason`` ``shift_invalid``,
``failure_detail`` the reason) without asking the model server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from submission_spec.models import LIBERO_STATE8, CameraSpec, PolicyMetadata
from vla_eval.benchmarks.base import StepBenchmark, StepResult
from vla_eval.runners.base import EpisodeError
from vla_eval.specs import (
    GRIPPER_CLOSE_POS,
    IMAGE_RGB,
    LANGUAGE,
    POSITION_DELTA,
    ROTATION_AA,
    STATE_EEF_POS_AA_GRIP,
    DimSpec,
)

from liberopro.episode.runner import RunSettings
from liberopro.instances.build import N_INIT_STATES, Instance
from liberopro.integrations.stepper import EpisodeStepper, StepOutcome, first_valid_draw
from liberopro.schema.manifest import read_manifest
from liberopro.sim.tasks import task_info


class ShiftInvalidAtReset(EpisodeError):
    """An episode's shift cannot be realised from its init state and env seed (the evaluator's
    termination reason ``shift_invalid``: the episode is not run and not scored). Raised by
    :meth:`LiberoProBenchmark.reset`; vla-eval's orchestrator records the episode with
    ``failure_reason`` ``shift_invalid`` (this class's ``phase``) and ``failure_detail`` ending
    in the message (instance, init state, env seed, why), counts it in ``num_errors`` and never
    asks the model server. Its ``metrics`` are then ``{"success": False}``: vla-eval's success
    mean counts it as a failure, its summary flags the errors."""

    phase = "shift_invalid"


class LiberoProBenchmark(StepBenchmark):
    """LIBERO-Pro2.0 instances for vla-eval (a ``StepBenchmark``).

    Args:
        manifest: a manifest file (``instances.jsonl``, ``docs/definition.md``); every instance
            is a task, or those of ``instance_ids``.
        instance_ids: the manifest's instances to run (default all).
        suite, task_index, shifts, instance_seed: instead of a manifest, one instance drawn as
            the generator draws it, the first parameter draw realised at reset on init state 0
            with env seed ``seed`` (the first episode's;
            :func:`liberopro.integrations.stepper.first_valid_draw`, 5-10 s at
            construction); ``ValueError`` when none of the first 10 draws is.
        seed: episode ``e`` runs with env seed ``seed + e`` from init state ``e mod 50``.
        image_size: the square size (px) of the images sent (resized with padding).
        send_wrist_image, send_state: send the wrist camera and the 8-number state (a model
            server may ask for them through its ``observation_params``).
        binarize_gripper: the gripper action's sign only (+1 closes), as vla-eval's LIBERO.
        render_size: the simulator's render size (px); max_steps: a cap on the horizon.
    """

    render_backends = frozenset({"gpu", "cpu"})

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        """Nothing to set: the evaluator renders with headless EGL (a GPU's driver, or Mesa's
        llvmpipe on a CPU; ``MUJOCO_GL`` as set, ``docs/simulation-stack.md``)."""
        return {}

    def __init__(
        self,
        manifest: str | None = None,
        instance_ids: list[str] | None = None,
        suite: str | None = None,
        task_index: int | None = None,
        shifts: str = "",
        instance_seed: int = 0,
        seed: int = 0,
        image_size: int = 224,
        send_wrist_image: bool = True,
        send_state: bool = True,
        binarize_gripper: bool = True,
        render_size: int = 256,
        max_steps: int | None = None,
    ) -> None:
        super().__init__()
        self.instances = _instances(manifest, instance_ids, suite, task_index, shifts, instance_seed, seed)
        self.seed, self.send_state, self.send_wrist_image = seed, send_state, send_wrist_image
        cams = ["agentview", "wrist"] if send_wrist_image else ["agentview"]
        self.meta = PolicyMetadata(
            policy_name="vla-eval",
            cameras=[CameraSpec(name=c, height=image_size, width=image_size) for c in cams],
            state_fields=list(LIBERO_STATE8),
            binarize_gripper=binarize_gripper,
        )
        self.settings = RunSettings(render_size=render_size, max_steps=max_steps)
        self._stepper: EpisodeStepper | None = None
        self._ended: StepOutcome | None = None  # an episode over at reset (an intervention's success)

    def get_tasks(self) -> list[dict[str, Any]]:
        """One task per instance: ``name`` (``suite/index case instance_id``), ``suite``,
        ``task_index``, ``instance_id``, ``case``, ``instruction``."""
        return [
            {
                "name": f"{inst.suite}/{inst.task_index} {inst.case} {inst.instance_id}",
                "suite": inst.suite,
                "task_index": inst.task_index,
                "instance_id": inst.instance_id,
                "case": inst.case,
                "instruction": task_info(inst.task).instruction,
            }
            for inst in self.instances
        ]

    def reset(self, task: dict[str, Any]) -> StepOutcome:
        """Begin episode ``task["episode_idx"]`` (default 0) of the task's instance (one scene
        is kept: another instance's is closed first). Raises :class:`ShiftInvalidAtReset` when
        a shift cannot be realised from the episode's init state and env seed."""
        inst = next(i for i in self.instances if i.instance_id == task["instance_id"])
        if self._stepper is None or self._stepper.instance != inst:
            self.cleanup()
            self._stepper = EpisodeStepper(inst, self.meta, self.settings)
        e = int(task.get("episode_idx", 0))
        outcome = self._stepper.reset(e % N_INIT_STATES, self.seed + e)
        if not outcome.info["valid"]:
            raise ShiftInvalidAtReset(
                f"{outcome.info['termination_reason']}: {inst.instance_id} ({inst.case} on {inst.task}) from "
                f"init state {e % N_INIT_STATES}, env seed {self.seed + e}: {outcome.info['detail']}"
            )
        self._ended = outcome if outcome.terminated else None
        self._record(outcome)
        return outcome

    def step(self, action: dict[str, Any]) -> StepResult:
        """One policy step with ``action["actions"]`` (or ``"action"``): 7 numbers, or a chunk
        whose first row is used. ``done`` on success, at the horizon, or on an invalid episode."""
        assert self._stepper is not None, "reset first"
        outcome, self._ended = self._ended, None
        if outcome is None:
            raw = np.asarray(action.get("actions", action.get("action")), dtype=np.float64)
            outcome = self._stepper.step(raw.reshape(-1, 7)[0] if raw.ndim == 2 else raw)
            self._record(outcome)
        done = outcome.terminated or outcome.truncated
        return StepResult(obs=outcome, reward=float(outcome.success), done=done, info=outcome.info)

    def _record(self, outcome: StepOutcome) -> None:
        """The agentview image to vla-eval's episode recorder (a no-op when it records nothing)."""
        self._recorder.record_video(outcome.observation.images["agentview"])

    def make_obs(self, raw_obs: StepOutcome, task: dict[str, Any]) -> dict[str, Any]:
        """``images`` (camera -> (S, S, 3) uint8, S = ``image_size``), ``task_description``
        (the instruction delivered at this step: a language shift may change it), ``states``
        ((8,) float64: eef position, axis-angle, gripper fingers) when sent."""
        obs = raw_obs.observation
        out: dict[str, Any] = {"images": dict(obs.images), "task_description": obs.instruction}
        if self.send_state:
            out["states"] = obs.state(LIBERO_STATE8)
        return out

    def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
        """``success``, ``valid`` (True: an invalid episode ends at reset, :class:`ShiftInvalidAtReset`),
        ``termination_reason`` (``success``, ``horizon``, ``shift_blocked``: a runtime shift not
        realisable once the policy had acted, the policy's failure), ``detail``, ``steps`` (control
        steps) and the ``shifts`` records."""
        info = step_result.info
        keys = ("valid", "termination_reason", "detail", "steps", "shifts")
        return {"success": bool(info.get("is_success", False)), **{k: info.get(k) for k in keys}}

    def get_metric_keys(self) -> dict[str, str]:
        """``success``: its mean is the success rate (invalid episodes, vla-eval's errors, count as failures)."""
        return {"success": "mean"}

    def get_metadata(self) -> dict[str, Any]:
        horizon = max(self.settings.horizon(i.task) for i in self.instances)
        return {"max_steps": horizon, "max_episodes_per_task": N_INIT_STATES, "suite": "liberopro"}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"position": POSITION_DELTA, "rotation": ROTATION_AA, "gripper": GRIPPER_CLOSE_POS}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        spec: dict[str, DimSpec] = {"agentview": IMAGE_RGB, "language": LANGUAGE}
        if self.send_wrist_image:
            spec["wrist"] = IMAGE_RGB
        if self.send_state:
            spec["state"] = STATE_EEF_POS_AA_GRIP
        return spec

    def cleanup(self) -> None:
        """Free the scene."""
        if self._stepper is not None:
            self._stepper.close()
            self._stepper = None


def _instances(
    manifest: str | None,
    instance_ids: list[str] | None,
    suite: str | None,
    task_index: int | None,
    shifts: str,
    instance_seed: int,
    seed: int,
) -> list[Instance]:
    """The benchmark's instances (its constructor's arguments); ``ValueError`` when they name none."""
    if manifest is None:
        return [first_valid_draw(suite, task_index, shifts, instance_seed, env_seed=seed)]
    if suite is not None:
        raise ValueError("give a manifest or suite and task_index, not both")
    by_id = read_manifest(Path(manifest)).by_id()
    missing = [i for i in instance_ids or [] if i not in by_id]
    if missing:
        raise ValueError(f"not in {manifest}: {', '.join(missing)}")
    return [by_id[i] for i in instance_ids] if instance_ids else list(by_id.values())
