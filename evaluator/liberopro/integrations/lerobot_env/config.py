"""The lerobot environment type ``LiberoPro``: a lerobot ``EnvConfig`` for one LIBERO-Pro2.0
instance (imports lerobot; ``docs/integrations.md``, "lerobot").

Importing this module registers the type; ``lerobot-eval
--env.discover_packages_path=liberopro.integrations.lerobot_env`` imports it. Written against
lerobot 0.4.4 (the last release for Python 3.11) and the ``EnvConfig`` of later releases (their
``create_envs`` builds the environment from :attr:`LiberoProEnv.gym_id` and ``gym_kwargs`` alike).
No ``from __future__ import annotations``: draccus reads the fields' types at run time.
"""

from dataclasses import dataclass, field
from typing import Any

from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.utils.constants import ACTION, OBS_IMAGES, OBS_STATE

from liberopro.integrations.lerobot_env import CONTROL_HZ, ENV_TYPE, LEROBOT_ENV_ID, STATE_DIM


@EnvConfig.register_subclass(ENV_TYPE)
@dataclass
class LiberoProEnv(EnvConfig):
    """One instance (``--env.suite``, ``--env.task_index``, ``--env.shifts``, ``--env.instance_seed``;
    or ``--env.manifest`` and ``--env.instance_id``), its episodes from ``--env.init_states``
    (default all 50; episode ``e`` of ``--seed S``: init state ``init_states[(S + e) mod n]``, env
    seed ``S + e``), images of ``--env.image_size`` px rendered at ``--env.render_size``, the horizon
    capped by ``--env.episode_length``, the images named ``--env.image_key`` and ``--env.wrist_key``
    (``""``: no wrist image). ``task`` is unused (the instance is named by the fields above)."""

    suite: str | None = "libero_goal"
    task_index: int | None = 0
    shifts: str = "nominal"
    instance_seed: int = 0
    manifest: str | None = None
    instance_id: str | None = None
    init_states: list[int] | None = None
    image_size: int = 256
    render_size: int = 256
    episode_length: int | None = None
    image_key: str = "image"
    wrist_key: str = "image2"
    fps: int = CONTROL_HZ
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        image = PolicyFeature(type=FeatureType.VISUAL, shape=(self.image_size, self.image_size, 3))
        cameras = [self.image_key] + ([self.wrist_key] if self.wrist_key else [])
        self.features = {ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(7,))}
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE}
        for name in cameras:
            self.features[f"pixels/{name}"] = image
            self.features_map[f"pixels/{name}"] = f"{OBS_IMAGES}.{name}"
        self.features["agent_pos"] = PolicyFeature(type=FeatureType.STATE, shape=(STATE_DIM,))

    @property
    def package_name(self) -> str:
        """What lerobot imports when :attr:`gym_id` is not registered (it registers it)."""
        return "liberopro.integrations.lerobot_env"

    @property
    def gym_id(self) -> str:
        return LEROBOT_ENV_ID

    @property
    def gym_kwargs(self) -> dict[str, Any]:
        """:class:`liberopro.integrations.lerobot_env.LeRobotInstanceEnv`'s arguments."""
        named: dict[str, Any] = {"manifest": self.manifest, "instance_id": self.instance_id}
        if self.manifest is None:
            named = {"suite": self.suite, "task_index": self.task_index, "shifts": self.shifts}
        return named | {
            "instance_seed": self.instance_seed,
            "init_states": self.init_states,
            "image_size": self.image_size,
            "render_size": self.render_size,
            "max_steps": self.episode_length,
            "image_key": self.image_key,
            "wrist_key": self.wrist_key,
        }
