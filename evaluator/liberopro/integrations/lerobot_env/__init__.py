"""LIBERO-Pro2.0 instances in lerobot's evaluation, ``lerobot-eval`` (``docs/integrations.md``, "lerobot").

lerobot is no dependency of this project (it pulls torch): this package imports without it.
It holds the environment lerobot steps, :class:`LeRobotInstanceEnv` (the Gymnasium environment
``LiberoPro/Instance-v0`` with lerobot's LIBERO observation convention), registered as
``LiberoPro/LeRobot-v0``; its submodule :mod:`liberopro.integrations.lerobot_env.config` (which
imports lerobot) registers the lerobot environment type ``LiberoPro``. ``lerobot-eval`` finds both
through its plugin option::

    lerobot-eval --env.discover_packages_path=liberopro.integrations.lerobot_env --env.type=LiberoPro \\
        --env.suite=libero_goal --env.task_index=1 --env.shifts=S01 --policy.path=... --eval.n_episodes=10

lerobot's plugin loader imports this package and lists its submodules (``__path__``), which is why
it is a package: a plain module there fails with an AttributeError.

Observation (lerobot's LIBERO environment after its ``LiberoProcessorStep``, which this one needs
none of): ``pixels`` {``image``: agentview, ``image2``: wrist} (H, W, 3) uint8, rotated 180 degrees
as the LIBERO datasets are; ``agent_pos`` (8,) float32, eef position (m), axis-angle (rad), gripper
finger positions (m), world frame. lerobot turns these into ``observation.images.image``,
``observation.images.image2`` and ``observation.state``, and the instruction (``task_description``)
into ``task``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from submission_spec.models import LIBERO_STATE8, CameraSpec, PolicyMetadata

from liberopro.instances.build import Instance
from liberopro.integrations.gymnasium_env import InstanceEnv
from liberopro.integrations.stepper import first_valid_draw

log = logging.getLogger(__name__)

#: The Gymnasium id of :class:`LeRobotInstanceEnv` (lerobot's ``gym_id`` for the ``LiberoPro`` type).
LEROBOT_ENV_ID = "LiberoPro/LeRobot-v0"
#: lerobot's environment type. Not lower case on purpose: lerobot 0.4 sends every type whose name
#: contains "libero" to its own LIBERO environment and processor (``make_env``,
#: ``make_env_pre_post_processors``), so the type must not contain it.
ENV_TYPE = "LiberoPro"
#: LIBERO's control rate (Hz): one step is one 20 Hz OSC_POSE control step; lerobot's videos' frame rate.
CONTROL_HZ = 20
#: The state's length: eef position 3, axis-angle 3, gripper fingers 2 (``LIBERO_STATE8``).
STATE_DIM = 8


def lerobot_observation(obs: dict[str, Any], image_key: str = "image", wrist_key: str = "image2") -> dict[str, Any]:
    """The environment's observation (``{"images": {"agentview", ["wrist"]}, "proprio": {...}}``,
    :func:`liberopro.integrations.gymnasium_env.as_dict`) in lerobot's convention:
    ``{"pixels": {image_key: agentview, wrist_key: wrist}, "agent_pos": (8,) float32}`` (the
    images' arrays as given, (H, W, 3) uint8; no wrist entry when ``wrist_key`` is empty).
    Raises ``KeyError`` naming a camera or proprioception field the observation lacks."""
    images = obs["images"]
    pixels = {image_key: images["agentview"]}
    if wrist_key:
        pixels[wrist_key] = images["wrist"]
    state = np.concatenate([np.asarray(obs["proprio"][f], dtype=np.float64) for f in LIBERO_STATE8])
    return {"pixels": pixels, "agent_pos": state.astype(np.float32)}


def init_state_for(seed: int, init_states: Sequence[int]) -> int:
    """The LIBERO init state of the episode reset with env seed ``seed``: ``init_states[seed mod n]``.
    lerobot-eval seeds its episode ``e`` with ``--seed`` + e, so with all 50 init states and a
    seed that is a multiple of 50 (lerobot's default 1000, or 0), its episode ``e`` is the
    evaluator's episode ``e`` of ``liberopro evaluate --seed`` that seed (init state e mod 50, env
    seed seed + e)."""
    return int(init_states[seed % len(init_states)])


class LeRobotInstanceEnv(gymnasium.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """One instance as lerobot's evaluation steps it: :class:`InstanceEnv` (the evaluator's own
    episode) with lerobot's LIBERO observation convention (:func:`lerobot_observation`).

    Args:
        suite, task_index, shifts, instance_seed: the instance, drawn as the manifest generator
            draws it (``shifts``: ``"S01"``, ``"S01+D19"``, ``""`` or ``"nominal"``), redrawn until
            realised at reset on init state 0 (:func:`liberopro.integrations.stepper.first_valid_draw`:
            a camera-less scene, 5-10 s; ``ValueError`` when no draw is); or
        manifest, instance_id: a manifest file (``instances.jsonl``) and one of its instance ids;
            or ``instance``.
        init_states: the LIBERO init states (0-49) episodes start from (default all 50).
        image_size: the square size (px) of the images; render_size: the simulator's render (px).
        max_steps: a cap on the task's horizon (control steps).
        image_key, wrist_key: the names of the agentview and wrist images under ``pixels``
            (lerobot's LIBERO: ``image``, ``image2``); an empty ``wrist_key`` sends no wrist image.

    ``reset(seed=s)`` begins the episode of init state :func:`init_state_for` (``options``'s
    ``init_state`` overrides it) with env seed ``s``; without a seed (lerobot's automatic reset at
    an episode's end) both are drawn. An episode whose static shift cannot be realised there ends
    at its first step (``info["valid"]`` False); lerobot, which knows no invalid episodes, counts
    it as a failure, so the reset logs a warning naming it. Actions: (7,) arm deltas and gripper, -1 opens, +1 closes
    (LIBERO's, as lerobot's LIBERO). ``info`` is :class:`InstanceEnv`'s: ``is_success`` (what
    lerobot-eval counts), ``valid``, ``termination_reason``, ``shifts``, ``phases``, ...
    Raises ``ValueError`` for an instance named twice or not at all (:func:`instance_from`), an
    unknown manifest instance id, or init states out of 0-49.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": CONTROL_HZ}  # noqa: RUF012 (gymnasium's)

    def __init__(
        self,
        suite: str | None = None,
        task_index: int | None = None,
        shifts: str = "",
        instance_seed: int = 0,
        manifest: str | None = None,
        instance_id: str | None = None,
        instance: Instance | None = None,
        init_states: Sequence[int] | None = None,
        image_size: int = 256,
        render_size: int = 256,
        max_steps: int | None = None,
        image_key: str = "image",
        wrist_key: str = "image2",
    ) -> None:
        if manifest is not None:
            if instance is not None or suite is not None:
                raise ValueError("give one of manifest (with instance_id), suite and task_index, or instance")
            instance = _from_manifest(manifest, instance_id)
        elif instance is None and suite is not None and shifts not in ("", "nominal"):
            # lerobot counts an invalid episode as a failure: take the first draw realised on init state 0
            instance = first_valid_draw(suite, task_index, shifts, instance_seed)
            suite = task_index = None
            shifts = ""
        cams = [CameraSpec(name="agentview", height=image_size, width=image_size)]
        if wrist_key:
            cams.append(CameraSpec(name="wrist", height=image_size, width=image_size))
        meta = PolicyMetadata(policy_name="lerobot", cameras=cams, state_fields=list(LIBERO_STATE8))
        env = InstanceEnv(
            instance=instance,
            suite=suite,
            task_index=task_index,
            shifts=shifts,
            instance_seed=instance_seed,
            metadata=meta,
            init_states=init_states,
            render_size=render_size,
            max_steps=max_steps,
            render_mode="rgb_array",
        )
        super().__init__(env)
        self.inner = env
        self.image_key, self.wrist_key = image_key, wrist_key
        image = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
        pixels: dict[str, spaces.Space[Any]] = {image_key: image}
        if wrist_key:
            pixels[wrist_key] = image
        self.observation_space = spaces.Dict(
            {"pixels": spaces.Dict(pixels), "agent_pos": spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)}
        )
        #: lerobot-eval's step limit for a rollout (policy steps): the task's horizon, capped.
        self._max_episode_steps = env.stepper.horizon
        self._instruction = ""

    @property
    def task_description(self) -> str:
        """The instruction delivered at the current step (a language shift may change it); lerobot
        passes it to the policy as ``task``."""
        return self._instruction

    @property
    def task(self) -> str:
        """The instance's id (lerobot's environments name their task here)."""
        return self.inner.stepper.instance.instance_id

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Begin an episode (see the class docstring); ``info["is_success"]`` is False."""
        options = dict(options or {})
        if seed is not None and "init_state" not in options:
            options["init_state"] = init_state_for(seed, self.inner.init_states)
        obs, info = self.env.reset(seed=seed, options=options)
        if not info["valid"]:
            log.warning(
                "episode of %s from init state %s, seed %s is invalid (lerobot counts it as a failure): %.300s",
                info["instance_id"],
                info["init_state"],
                info["seed"],
                info["detail"],
            )
        return self._map(obs), info

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """One policy step of :class:`InstanceEnv` (``action``: (7,))."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._map(obs), float(reward), terminated, truncated, info

    def _map(self, obs: dict[str, Any]) -> dict[str, Any]:
        self._instruction = obs["instruction"]
        return lerobot_observation(obs, self.image_key, self.wrist_key)


def _from_manifest(manifest: str, instance_id: str | None) -> Instance:
    """The instance ``instance_id`` of the manifest file ``manifest``; ``ValueError`` when the id
    is missing or not in the file."""
    from liberopro.schema.manifest import read_manifest

    if not instance_id:
        raise ValueError(f"name the instance of {manifest} to run: instance_id (an id from its instances.jsonl)")
    by_id = read_manifest(Path(manifest)).by_id()
    if instance_id not in by_id:
        raise ValueError(f"instance {instance_id!r} is not in {manifest}")
    return by_id[instance_id]


if LEROBOT_ENV_ID not in gymnasium.registry:
    # No OrderEnforcing wrapper: lerobot looks for task_description on the environment itself.
    gymnasium.register(
        id=LEROBOT_ENV_ID,
        entry_point="liberopro.integrations.lerobot_env:LeRobotInstanceEnv",
        order_enforce=False,
        disable_env_checker=True,
    )

__all__ = ["CONTROL_HZ", "ENV_TYPE", "LEROBOT_ENV_ID", "LeRobotInstanceEnv", "init_state_for", "lerobot_observation"]
