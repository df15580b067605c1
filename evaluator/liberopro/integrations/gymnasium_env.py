"""The Gymnasium environment over one instance: ``LiberoPro/Instance-v0`` (``docs/integrations.md``).

::

    import gymnasium, liberopro.integrations
    env = gymnasium.make("LiberoPro/Instance-v0", suite="libero_goal", task_index=1, shifts="D19")
    obs, info = env.reset(seed=0, options={"init_state": 3})
    obs, reward, terminated, truncated, info = env.step(action)

An episode is the evaluator's episode of that instance, init state and seed
(:class:`liberopro.integrations.stepper.EpisodeStepper`): same scene, shifts, phases and checks.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from submission_spec.models import PROPRIO_FIELDS, PolicyMetadata
from submission_spec.policy import Observation

from liberopro.episode.runner import RunSettings
from liberopro.instances.build import N_INIT_STATES, Instance
from liberopro.integrations.stepper import DEFAULT_METADATA, EpisodeStepper, StepOutcome, instance_from

#: Longest instruction the observation space admits (characters; LIBERO's are under 100).
MAX_INSTRUCTION = 1000


def observation_space(meta: PolicyMetadata) -> spaces.Dict:
    """The observation space for ``meta``: ``images`` (camera -> Box uint8 (H, W, 3), the
    camera's requested size), ``proprio`` (field -> Box float64 (n,), ``PROPRIO_FIELDS``'s
    length) and ``instruction`` (Text of printable ASCII)."""
    images: dict[str, spaces.Space[Any]] = {
        c.name: spaces.Box(0, 255, (c.height, c.width, 3), np.uint8) for c in meta.cameras
    }
    proprio: dict[str, spaces.Space[Any]] = {
        f: spaces.Box(-np.inf, np.inf, (PROPRIO_FIELDS[f][0],), np.float64) for f in meta.state_fields
    }
    return spaces.Dict(
        {
            "images": spaces.Dict(images),
            "proprio": spaces.Dict(proprio),
            "instruction": spaces.Text(MAX_INSTRUCTION, min_length=0, charset=string.printable),
        }
    )


def as_dict(obs: Observation) -> dict[str, Any]:
    """A :class:`submission_spec.Observation` as the environment's observation dict (the same
    arrays: images (H, W, 3) uint8, proprioception float64 vectors, the instruction)."""
    return {"images": dict(obs.images), "proprio": dict(obs.proprio), "instruction": obs.instruction}


class InstanceEnv(gymnasium.Env[dict[str, Any], np.ndarray]):
    """One LIBERO-Pro2.0 instance as a Gymnasium environment.

    Build it from exactly one of ``instance``, ``manifest_line`` (a line of a manifest's
    ``instances.jsonl``) or ``suite`` and ``task_index`` with ``shifts`` (ids: ``"S01"``,
    ``"S01+D19"``, a list; none: nominal) drawn with ``instance_seed``
    (:func:`liberopro.integrations.stepper.instance_from`).

    Args:
        metadata: the policy's side of the contract (:class:`submission_spec.PolicyMetadata`
            or its dict): cameras and sizes, image orientation, proprioception fields, gripper
            convention. Default: agentview and wrist at 224 x 224, LIBERO's 8-number state,
            LIBERO's gripper (-1 opens, +1 closes).
        init_states: the LIBERO init states (0-49) a reset that names none draws from, uniformly
            (default: all 50; e.g. those a manifest's proof lists: a static shift may not be
            realisable from every init state).
        render_size: the simulator's square render size (px) before the resize to the cameras'.
        max_steps: a cap on the task's horizon (control steps).
        render_mode: None or ``rgb_array`` (:meth:`render`: the first camera's last image).

    Observation: ``{"images": {camera: (H, W, 3) uint8}, "proprio": {field: (n,) float64},
    "instruction": str}``, what a policy receives under the contract. Action: (7,) arm deltas
    and gripper in the metadata's convention (float, clipped to [-1, 1] after conversion).
    Reward 1.0 on success, else 0.0; ``terminated`` on success or on a shift that cannot be
    realised (``info["valid"]`` False); ``truncated`` at the horizon. ``info``:
    :meth:`liberopro.integrations.stepper.EpisodeStepper.info` plus ``sim_steps``.
    """

    #: Gymnasium's class attribute: ``render_fps`` is the control frequency (20 Hz, LIBERO's
    #: ``control_freq``); a ``step`` under an intervention runs several control steps.
    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}  # noqa: RUF012

    def __init__(
        self,
        instance: Instance | None = None,
        manifest_line: str | None = None,
        suite: str | None = None,
        task_index: int | None = None,
        shifts: str | Sequence[str] = (),
        instance_seed: int = 0,
        metadata: PolicyMetadata | dict[str, Any] | None = None,
        init_states: Sequence[int] | None = None,
        render_size: int = 256,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if instance is None:
            instance = instance_from(manifest_line, suite, task_index, shifts, instance_seed)
        elif manifest_line is not None or suite is not None:
            raise ValueError("give one of instance, manifest_line, or suite and task_index")
        meta = PolicyMetadata.model_validate(metadata) if isinstance(metadata, dict) else metadata or DEFAULT_METADATA
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', not {render_mode!r}")
        self.render_mode = render_mode
        self.stepper = EpisodeStepper(instance, meta, RunSettings(render_size=render_size, max_steps=max_steps))
        self.observation_space = observation_space(meta)
        self.action_space = spaces.Box(-1.0, 1.0, (7,), np.float32)
        self.init_states = list(range(N_INIT_STATES)) if init_states is None else [int(k) for k in init_states]
        if not self.init_states or not all(0 <= k < N_INIT_STATES for k in self.init_states):
            raise ValueError(f"init_states must be some of 0..{N_INIT_STATES - 1}, got {init_states!r}")
        self._last: dict[str, Any] | None = None
        self._ended: StepOutcome | None = None  # an episode invalid from its reset

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Begin an episode: ``options["init_state"]`` (LIBERO init state 0-49; default drawn
        from ``init_states`` with the environment's generator) and env seed ``seed`` (default drawn likewise), as
        the evaluator's episode of that init state and seed. When a static shift cannot be
        realised there, ``info["valid"]`` is False and the first :meth:`step` ends the episode
        (``terminated``, reward 0) without simulating."""
        super().reset(seed=seed)
        init_state = (options or {}).get("init_state")
        if init_state is None:
            init_state = self.init_states[int(self.np_random.integers(len(self.init_states)))]
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        outcome = self.stepper.reset(int(init_state), episode_seed)
        self._ended = outcome if outcome.terminated else None
        return self._obs(outcome), outcome.info | {"sim_steps": outcome.sim_steps}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """One policy step (:meth:`liberopro.integrations.stepper.EpisodeStepper.step`)."""
        outcome, self._ended = self._ended or self.stepper.step(action), None
        info = outcome.info | {"sim_steps": outcome.sim_steps}
        return self._obs(outcome), float(outcome.success), outcome.terminated, outcome.truncated, info

    def _obs(self, outcome: StepOutcome) -> dict[str, Any]:
        self._last = as_dict(outcome.observation)
        return self._last

    def render(self) -> np.ndarray | None:
        """``rgb_array``: the first camera's image of the last observation ((H, W, 3) uint8); None
        without a render mode or before a reset."""
        if self.render_mode is None or self._last is None:
            return None
        return next(iter(self._last["images"].values()))

    def close(self) -> None:
        """Free the scene."""
        self.stepper.close()
