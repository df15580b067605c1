"""A demonstration dataset (``liberopro demos collect``, LeRobot v3.0; docs/demos.md) as training
arrays: one sample per frame (one policy query of the recording oracle).

Images. Both cameras are resized to ``image_size`` x ``image_size`` with OpenCV's area
interpolation, the resize the evaluator applies to the render when a policy asks for that size
(``liberopro.sim.observation.resize``). The default, 84 px, is what the CPU budget affords: the
network trained 1.8-3.6 times as many samples per second at 84 px as at 128 px on our 2 shared
cores (94-158 vs 43-53 samples/s at batch 64, docs/baselines.md, "Throughput"), and 84 px is the image size of DrQ and of many visuomotor BC
baselines; the served policy asks the evaluator for exactly this size, so training and serving
see the same resize.

Targets. For the frame at step t of an episode of n frames, the action chunk is the commanded
actions of frames t .. t+K-1 (``actions``, never ``executed_actions``: docs/demos.md), padded
past the episode's end with its last action; ``mask`` is 1 for real actions and 0 for the padding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from liberopro_baselines.tokens import token_ids

CAMERA_KEYS = {"image": "agentview", "wrist_image": "wrist"}


class DatasetError(ValueError):
    """The folder is not a dataset this reader understands; the message says what to do."""


@dataclass
class Arrays:
    """Training samples, N = frames of the dataset.

    Attributes:
        agentview, wrist: (N, S, S, 3) uint8 RGB, in the dataset's orientation.
        state: (N, 8) float32 LIBERO state (m, rad, m).
        tokens: (N, L) int32 hashed instruction ids (0 = padding).
        actions: (N, K, 7) float32 action chunk targets (LIBERO's convention).
        mask: (N, K) float32, 1 where the target is a real action, 0 where padded.
        episode: (N,) int64 episode index of each frame.
        instructions: the dataset's distinct instructions (``meta/tasks``).
    """

    agentview: np.ndarray
    wrist: np.ndarray
    state: np.ndarray
    tokens: np.ndarray
    actions: np.ndarray
    mask: np.ndarray
    episode: np.ndarray
    instructions: list[str]

    def __len__(self) -> int:
        return len(self.state)


def concatenate(parts: list[Arrays]) -> Arrays:
    """The samples of several datasets as one :class:`Arrays`, in the order given: each part's
    episode indices are offset past the previous parts' (so an episode stays one episode and no
    two datasets share an index); instructions are the union, first seen first. The parts must
    share the image size and K (as :func:`load` with one ``image_size`` and ``chunk_length`` gives
    them). ``ValueError`` on no part or parts of different shapes."""
    if not parts:
        raise ValueError("no dataset to concatenate")
    shapes = {(p.agentview.shape[1:], p.actions.shape[1:], p.tokens.shape[1:]) for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"datasets of different image sizes, chunk lengths or token lengths: {sorted(shapes)}")
    offsets, total = [], 0
    for p in parts:
        offsets.append(total)
        total += int(p.episode.max()) + 1 if len(p) else 0
    instructions = list(dict.fromkeys(i for p in parts for i in p.instructions))
    return Arrays(
        agentview=np.concatenate([p.agentview for p in parts]),
        wrist=np.concatenate([p.wrist for p in parts]),
        state=np.concatenate([p.state for p in parts]),
        tokens=np.concatenate([p.tokens for p in parts]),
        actions=np.concatenate([p.actions for p in parts]),
        mask=np.concatenate([p.mask for p in parts]),
        episode=np.concatenate([p.episode + o for p, o in zip(parts, offsets, strict=True)]),
        instructions=instructions,
    )


def chunk_targets(actions: np.ndarray, episode: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """((N, K, 7) float32, (N, K) float32): each frame's next ``k`` actions within its episode,
    padded with the episode's last action, and the mask of real ones. ``actions`` (N, 7) and
    ``episode`` (N,) in dataset order (each episode's frames contiguous)."""
    n = len(actions)
    idx = np.arange(n)[:, None] + np.arange(k)[None, :]  # (N, K)
    ends = np.empty(n, dtype=np.int64)  # last frame index of each frame's episode
    for e in np.unique(episode):
        rows = np.flatnonzero(episode == e)
        ends[rows] = rows[-1]
    mask = idx <= ends[:, None]
    idx = np.minimum(idx, ends[:, None])
    return actions[idx].astype(np.float32), mask.astype(np.float32)


def _decode_video(path: Path, size: int) -> np.ndarray:
    """(F, size, size, 3) uint8: every frame of an mp4, area-resized."""
    import cv2
    import imageio.v2 as imageio

    frames = []
    reader: Any = imageio.get_reader(path, format="FFMPEG")  # imageio's stubs: the base reader, not iterable
    with reader:
        for f in reader:
            frames.append(cv2.resize(np.ascontiguousarray(f), (size, size), interpolation=cv2.INTER_AREA))
    if not frames:
        raise DatasetError(f"{path} has no frame")
    return np.stack(frames)


def _read_parquets(folder: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(folder.glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetError(f"no parquet file under {folder}")
    return pa.concat_tables([pq.read_table(f) for f in files])


def _check_info(root: Path) -> dict:
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise DatasetError(f"{info_path} does not exist: {root} is not a LeRobot dataset (liberopro demos collect)")
    info = json.loads(info_path.read_text())
    if info.get("codebase_version") != "v3.0":
        raise DatasetError(
            f"{root} is a LeRobot {info.get('codebase_version')} dataset; this reader takes v3.0 "
            "(liberopro demos collect writes it by default: rerun without --format, which re-assembles from .progress/)"
        )
    missing = [k for k in ("image", "wrist_image", "state", "actions") if k not in info.get("features", {})]
    if missing:
        raise DatasetError(f"{root}: features {missing} missing from meta/info.json (docs/demos.md lists them)")
    return info


def _video_frames(root: Path, info: dict, episodes, key: str, size: int) -> np.ndarray:
    """One camera's frames of every episode, in dataset order (each episode's frame range of its
    packed video file, from ``meta/episodes``)."""
    fps = float(info["fps"])
    cache: dict[tuple[int, int], np.ndarray] = {}
    parts = []
    for row in episodes:
        where = (int(row[f"videos/{key}/chunk_index"]), int(row[f"videos/{key}/file_index"]))
        if where not in cache:
            path = root / info["video_path"].format(video_key=key, chunk_index=where[0], file_index=where[1])
            cache[where] = _decode_video(path, size)
        start = round(float(row[f"videos/{key}/from_timestamp"]) * fps)
        frames = cache[where][start : start + int(row["length"])]
        if len(frames) != int(row["length"]):
            raise DatasetError(
                f"episode {row['episode_index']}: {key} video has {len(frames)} of {row['length']} frames"
            )
        parts.append(frames)
    return np.concatenate(parts)


def load(
    root: Path, image_size: int = 84, chunk_length: int = 8, vocab_size: int = 4096, max_tokens: int = 32
) -> Arrays:
    """Read the v3.0 dataset at ``root`` into :class:`Arrays` (see the module docstring).
    ``DatasetError`` when ``root`` is not such a dataset or its videos and rows disagree."""
    root = Path(root)
    info = _check_info(root)
    table = _read_parquets(root / "data")
    episodes = _read_parquets(root / "meta" / "episodes").sort_by("episode_index").to_pylist()
    tasks = _read_parquets_flat(root / "meta" / "tasks.parquet")
    rows = table.sort_by("index")
    state = np.asarray(rows.column("state").to_pylist(), np.float32).reshape(-1, 8)
    actions = np.asarray(rows.column("actions").to_pylist(), np.float32).reshape(-1, 7)
    episode = np.asarray(rows.column("episode_index").to_pylist(), np.int64)
    task_index = np.asarray(rows.column("task_index").to_pylist(), np.int64)
    by_task = {int(i): str(t) for i, t in zip(tasks["task_index"], tasks["task"], strict=True)}
    vocab = {i: token_ids(t, vocab_size, max_tokens) for i, t in by_task.items()}
    tokens = np.stack([vocab[int(i)] for i in task_index])
    targets, mask = chunk_targets(actions, episode, chunk_length)
    images = {cam: _video_frames(root, info, episodes, key, image_size) for key, cam in CAMERA_KEYS.items()}
    for cam, frames in images.items():
        if len(frames) != len(state):
            raise DatasetError(f"{root}: {len(frames)} {cam} frames for {len(state)} rows")
    return Arrays(
        agentview=images["agentview"],
        wrist=images["wrist"],
        state=state,
        tokens=tokens,
        actions=targets,
        mask=mask,
        episode=episode,
        instructions=list(by_task.values()),
    )


def _read_parquets_flat(path: Path) -> dict[str, list]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pydict()
