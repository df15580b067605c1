"""The lerobot environment's parts that need neither lerobot nor a scene (fast tier): the
observation in lerobot's LIBERO convention, the init state a seed picks, the Gymnasium
registration lerobot's ``make_env`` relies on, and the arguments refused before any scene is
built. lerobot's own evaluation running an instance: ``test_integrations_lerobot.py`` (opt-in)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from liberopro.integrations.lerobot_env import (
    ENV_TYPE,
    LEROBOT_ENV_ID,
    LeRobotInstanceEnv,
    init_state_for,
    lerobot_observation,
)


def _obs() -> dict:
    rng = np.random.default_rng(0)
    return {
        "images": {
            "agentview": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
            "wrist": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        },
        "proprio": {
            "eef_pos": np.array([0.1, -0.2, 1.05]),
            "eef_axis_angle": np.array([3.1, 0.01, -0.02]),
            "gripper_qpos": np.array([0.039, -0.039]),
            "joint_pos": np.zeros(7),  # sent when asked for; not part of the state
        },
        "instruction": "put the bowl on the stove",
    }


def test_observation_in_lerobots_libero_convention():
    obs = _obs()
    out = lerobot_observation(obs)
    assert set(out) == {"pixels", "agent_pos"} and set(out["pixels"]) == {"image", "image2"}
    assert out["pixels"]["image"] is obs["images"]["agentview"] and out["pixels"]["image2"] is obs["images"]["wrist"]
    assert out["agent_pos"].dtype == np.float32 and out["agent_pos"].shape == (8,)
    expected = [0.1, -0.2, 1.05, 3.1, 0.01, -0.02, 0.039, -0.039]  # eef pos, axis-angle, fingers
    np.testing.assert_allclose(out["agent_pos"], expected, rtol=1e-6)
    renamed = lerobot_observation(obs, image_key="image", wrist_key="wrist_image")
    assert set(renamed["pixels"]) == {"image", "wrist_image"}
    assert set(lerobot_observation(obs, wrist_key="")["pixels"]) == {"image"}


def test_observation_without_a_camera_names_it():
    obs = _obs()
    del obs["images"]["wrist"]
    with pytest.raises(KeyError, match="wrist"):
        lerobot_observation(obs)


def test_seed_picks_the_evaluators_init_state():
    every = list(range(50))
    # lerobot-eval's episode e has seed --seed + e: with --seed 1000 (its default) or 0, init state e mod 50
    assert [init_state_for(1000 + e, every) for e in (0, 1, 49, 50, 51)] == [0, 1, 49, 0, 1]
    assert [init_state_for(s, [7, 3, 9]) for s in range(5)] == [7, 3, 9, 7, 3]


def test_registered_without_order_enforcing():
    """lerobot's add_envs_task looks for task_description on the vector env's sub-environment
    itself: gymnasium.make must not wrap it."""
    spec = gymnasium.spec(LEROBOT_ENV_ID)
    assert spec.order_enforce is False and spec.disable_env_checker is True and spec.max_episode_steps is None
    assert spec.entry_point == "liberopro.integrations.lerobot_env:LeRobotInstanceEnv"
    assert "libero" not in ENV_TYPE  # lerobot 0.4 would route the type to its own LIBERO environment


def test_instance_named_twice_or_half_is_refused(tmp_path):
    with pytest.raises(ValueError, match="one of manifest"):
        LeRobotInstanceEnv(suite="libero_goal", task_index=1, manifest=str(tmp_path / "m.jsonl"))
    with pytest.raises(ValueError, match="instance_id"):
        LeRobotInstanceEnv(manifest=str(tmp_path / "m.jsonl"))
