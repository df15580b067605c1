"""Opt-in: the real ``lerobot`` package reads a dataset made by ``liberopro demos collect``
with ``LeRobotDataset``: episode and frame counts, shapes and dtypes of one item, the task string,
and a frame decoded from the video. The v3.0 layout with lerobot 0.4 (``pip install lerobot``),
the v2.1 layout (``--format v2.1``) with lerobot 0.3.x (``pip install 'lerobot==0.3.3'``), the
version openpi's and GR00T's loaders use.

lerobot is no dependency of this project (it pulls torch): run this in its own venv, offline,
on a dataset collected beforehand (``docs/demos.md``, "Reading it with lerobot")::

    python -m venv /tmp/lerobot-venv && /tmp/lerobot-venv/bin/pip install lerobot pytest
    LIBEROPRO_LEROBOT=1 LIBEROPRO_LEROBOT_DATASET=/path/to/dataset HF_HUB_OFFLINE=1 \\
        /tmp/lerobot-venv/bin/python -m pytest -q -s -p no:cacheprovider tests/evaluator/test_demos_lerobot.py

Imports nothing of the project, so that it runs where only lerobot is installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DATASET = os.environ.get("LIBEROPRO_LEROBOT_DATASET")
pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.skipif(
        os.environ.get("LIBEROPRO_LEROBOT") != "1" or not DATASET,
        reason="opt-in: set LIBEROPRO_LEROBOT=1 and LIBEROPRO_LEROBOT_DATASET=<a v3.0 dataset from "
        "`liberopro demos collect`>, in a venv with lerobot installed (docs/demos.md)",
    ),
]


def _lerobot_dataset():
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ModuleNotFoundError:  # lerobot before its datasets moved out of lerobot.common
        from lerobot.common.datasets.lerobot_dataset import LeRobotDataset
    return LeRobotDataset


def test_lerobot_reads_the_dataset() -> None:
    """v3.0 with lerobot 0.4 (which refuses v2.1), v2.1 with lerobot 0.3.x (openpi's and GR00T's)."""
    root = Path(DATASET or "")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] in ("v3.0", "v2.1")
    # pyav bundles its own FFmpeg; lerobot's default, torchcodec, needs the system's FFmpeg libraries
    backend = os.environ.get("LIBEROPRO_LEROBOT_VIDEO_BACKEND", "pyav")
    ds = _lerobot_dataset()("liberopro/demos", root=root, video_backend=backend)
    size = info["features"]["image"]["shape"][0]
    assert ds.num_episodes == info["total_episodes"] and ds.num_frames == info["total_frames"] == len(ds)
    assert ds.fps == info["fps"] == 20
    first, last = ds[0], ds[len(ds) - 1]
    for item in (first, last):
        for key in ("image", "wrist_image"):
            assert tuple(item[key].shape) == (3, size, size), key  # channel-first float in [0, 1]
            assert 0.0 <= float(item[key].min()) and float(item[key].max()) <= 1.0
            assert float(item[key].std()) > 0.01, f"{key}: a flat frame"
        assert tuple(item["state"].shape) == (8,) and tuple(item["actions"].shape) == (7,)
        assert tuple(item["executed_actions"].shape) == (7,)
        assert isinstance(item["task"], str) and item["task"]
    assert int(last["episode_index"]) == info["total_episodes"] - 1
    lengths = [int(ds.meta.episodes[i]["length"]) for i in range(ds.num_episodes)]
    assert sum(lengths) == ds.num_frames
    # lerobot seeks each episode's frames by its from_timestamp: the first frame of the last
    # episode is the frame at that index of the whole video, decoded here without lerobot
    import imageio.v2 as imageio
    import numpy as np

    start = sum(lengths[:-1])
    if info["codebase_version"] == "v3.0":  # one video per camera, episodes packed
        video, index = root / "videos/image/chunk-000/file-000.mp4", start
    else:  # one video per camera and episode
        video, index = root / f"videos/chunk-000/image/episode_{ds.num_episodes - 1:06d}.mp4", 0
    with imageio.get_reader(video) as r:
        expected = r.get_data(index).astype(np.float32) / 255.0
    got = ds[start]["image"].numpy().transpose(1, 2, 0)
    assert np.abs(got - expected).mean() < 0.01, "lerobot decoded another frame than the episode's first"
    print(
        f"\nlerobot read {root} ({info['codebase_version']}): {ds.num_episodes} episodes, {ds.num_frames} frames (lengths {lengths}), "
        f"fps {ds.fps}, video backend {backend}; image {tuple(first['image'].shape)} {first['image'].dtype}, "
        f"wrist_image {tuple(first['wrist_image'].shape)}, state {tuple(first['state'].shape)} {first['state'].dtype}, "
        f"actions {tuple(first['actions'].shape)}, task {first['task']!r}"
    )
