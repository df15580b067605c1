"""Opt-in (marker ``lerobot``, in a venv with lerobot and this project: ``docs/integrations.md``,
"lerobot"): lerobot's own evaluation runs one real instance. ``lerobot-eval`` finds the
``LiberoPro`` environment type through its plugin option and evaluates a small randomly initialised
ACT policy (no pretrained weights, nothing from the Hub) for one short episode; and lerobot's
``make_env`` and observation functions turn the environment's observation into the policy's
``observation.images.*``, ``observation.state`` and ``task``. Deselected by ``scripts/test.sh``
like the rest of the ``lerobot`` tier; run as::

    LIBEROPRO_LEROBOT=1 HF_HUB_OFFLINE=1 /tmp/lerobot-venv/bin/python -m pytest -q -p no:cacheprovider \\
        -m lerobot tests/evaluator/test_integrations_lerobot.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.sim,
    pytest.mark.skipif(
        os.environ.get("LIBEROPRO_LEROBOT") != "1",
        reason="opt-in: set LIBEROPRO_LEROBOT=1 in a venv with lerobot and this project (docs/integrations.md)",
    ),
]

#: libero_goal:1 under S14 (sensor noise: realisable from every init state), 64 px, 20 policy steps.
ENV_ARGS = {"suite": "libero_goal", "task_index": 1, "shifts": "S14", "image_size": 64, "render_size": 64}
STEPS = 20
#: A small ACT, randomly initialised (no ImageNet backbone weights: nothing is downloaded).
ACT = {
    "type": "act",
    "device": "cpu",
    "pretrained_backbone_weights": "null",
    "dim_model": 32,
    "n_heads": 2,
    "dim_feedforward": 64,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "use_vae": "false",
    "chunk_size": 5,
    "n_action_steps": 5,
    "push_to_hub": "false",
}


@pytest.fixture(autouse=True)
def _lerobot_installed() -> None:
    """Asked for (LIBEROPRO_LEROBOT=1), the tier fails, never skips, without lerobot."""
    if importlib.util.find_spec("lerobot") is None:
        pytest.fail("the lerobot tier needs lerobot in this venv (docs/integrations.md, 'lerobot')")


def _cli(prefix: str, args: dict) -> list[str]:
    return [f"--{prefix}.{k}={v}" for k, v in args.items()]


def test_lerobot_eval_runs_an_instance(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    cmd = [
        str(Path(sys.executable).parent / "lerobot-eval"),
        "--env.discover_packages_path=liberopro.integrations.lerobot_env",
        "--env.type=LiberoPro",
        *_cli("env", ENV_ARGS | {"episode_length": STEPS}),
        *_cli("policy", ACT),
        "--eval.n_episodes=1",
        "--eval.batch_size=1",
        "--seed=0",
        f"--output_dir={out}",
    ]
    env = os.environ | {"HF_HUB_OFFLINE": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    info = json.loads((out / "eval_info.json").read_text())
    (task,) = info["per_task"]
    assert task["task_group"] == "LiberoPro" and task["task_id"] == 0
    assert task["metrics"]["successes"] == [False]  # 20 random steps do not put the bowl on the stove
    assert info["overall"]["n_episodes"] == 1 and info["overall"]["pc_success"] == 0.0
    (video,) = info["overall"]["video_paths"]
    import imageio.v2 as imageio

    with imageio.get_reader(video) as r:
        frames = [f for f in r]
    # the 64 px agentview image at the reset and after each step but the last (lerobot keeps the
    # frames up to its done index): all 20 steps ran (an invalid episode ends after one)
    assert len(frames) == STEPS and frames[0].shape == (64, 64, 3)
    assert frames[0].std() > 5, "a flat frame"


def test_lerobot_sees_the_policys_observation() -> None:
    import numpy as np
    import torch
    from lerobot.envs.factory import make_env, make_env_pre_post_processors
    from lerobot.envs.utils import add_envs_task, env_to_policy_features, preprocess_observation
    from lerobot.policies.act.configuration_act import ACTConfig
    from liberopro.integrations.lerobot_env.config import LiberoProEnv

    cfg = LiberoProEnv(**ENV_ARGS, episode_length=STEPS)
    assert set(env_to_policy_features(cfg)) == {
        "action",
        "observation.state",
        "observation.images.image",
        "observation.images.image2",
    }
    envs = make_env(cfg, n_envs=1)
    try:
        (vec,) = envs["LiberoPro"].values()
        assert vec.call("_max_episode_steps") == (STEPS,)
        obs, info = vec.reset(seed=[0])
        assert info["init_state"].tolist() == [0] and info["valid"].tolist() == [True]
        batch = add_envs_task(vec, preprocess_observation(obs))
        pre, _ = make_env_pre_post_processors(cfg, ACTConfig())
        batch = pre(batch)  # identity for this type (no LiberoProcessorStep: images are rotated already)
        assert batch["task"] == ["put the bowl on the stove"]
        for key in ("observation.images.image", "observation.images.image2"):
            img = batch[key]
            assert img.shape == (1, 3, 64, 64) and img.dtype == torch.float32 and 0 <= img.min() <= img.max() <= 1
        state = batch["observation.state"]
        assert state.shape == (1, 8) and state.dtype == torch.float32
        assert 0.8 < float(state[0, 2]) < 1.4  # eef height above the floor (m): a real scene's robot
        obs, reward, terminated, truncated, info = vec.step(np.zeros((1, 7), np.float32))
        assert info["steps"].tolist() == [1] and not terminated[0] and not truncated[0]
    finally:
        vec.close()
