"""The golden run's recording policy: seeded random actions, and a hash of every observation it
receives.

Served with the real SDK (``python -m tests.golden.policy``, port from ``$PORT``). Every
``/reset`` re-seeds the action generator with 0, so every episode gets the same action sequence
whatever order episodes run in (as :class:`submission_spec.examples.RandomPolicy`). Every
``/act`` appends one JSON line to the file named by ``$GOLDEN_OBS_LOG``: the episode id, the step,
SHA-256 digests of each image's bytes (with its shape and its 4 x 4 block means) and of the
instruction, and each proprioception field's values rounded to 1e-7. MuJoCo's last bits differ
between CPUs (seen between an AMD EPYC and the machine the fixture was first recorded on): the
proprioception then differs by ~1e-15 and the wrist camera, which rides on the arm, now and then
flips a pixel at an edge; the test compares those within tolerances, everything else exactly. The golden test joins these lines with ``episodes.jsonl`` on the
episode id, so the log is independent of the random episode ids.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from submission_spec import CameraSpec, Observation, PolicyMetadata, serve

#: Both cameras at 64 px (cheap), every proprioception field, chunks of 4 executed 2 at a time
#: (so the loop's chunking is part of what the golden run pins).
METADATA = PolicyMetadata(
    policy_name="golden-recorder",
    cameras=[CameraSpec(name="agentview", height=64, width=64), CameraSpec(name="wrist", height=64, width=64)],
    state_fields=["eef_pos", "eef_quat", "eef_axis_angle", "gripper_qpos", "joint_pos", "joint_vel"],
    chunk_length=4,
    replan_steps=2,
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _blocks(image: np.ndarray) -> list:
    """(H, W, 3) uint8 -> (4, 4, 3) means of its 4 x 4 grid of blocks, rounded to 0.1."""
    h, w, c = image.shape
    means = image[: h - h % 4, : w - w % 4].reshape(4, h // 4, 4, w // 4, c).mean(axis=(1, 3))
    return np.round(means, 1).tolist()


def observation_digest(obs: Observation) -> dict:
    """One observation, reduced: per image ``[shape, digest of the bytes, 4 x 4 x 3 block means]``
    (grey levels 0-255, rounded to 0.1), the instruction's digest, and the proprioception values
    (float64, rounded to 1e-7: metres, radians, rad/s as the spec defines them)."""
    return {
        "episode_id": obs.episode_id,
        "step": obs.step,
        "instruction": _digest(obs.instruction.encode()),
        "images": {
            k: [list(v.shape), _digest(np.ascontiguousarray(v).tobytes()), _blocks(v)]
            for k, v in sorted(obs.images.items())
        },
        "proprio": {k: np.round(np.asarray(v, dtype=np.float64), 7).tolist() for k, v in sorted(obs.proprio.items())},
    }


class GoldenPolicy:
    """Uniform random (4, 7) chunks in [-1, 1] from a generator re-seeded with 0 at each reset."""

    def __init__(self, log_path: str) -> None:
        self.metadata = METADATA
        self.log_path = log_path
        self._rng = np.random.default_rng(0)

    def reset(self, episode_id: str, instruction: str) -> None:
        self._rng = np.random.default_rng(0)

    def act(self, observation: Observation) -> np.ndarray:
        with open(self.log_path, "a") as fh:
            fh.write(json.dumps(observation_digest(observation), sort_keys=True) + "\n")
        return self._rng.uniform(-1.0, 1.0, size=(4, 7))


if __name__ == "__main__":
    serve(GoldenPolicy(os.environ["GOLDEN_OBS_LOG"]))
