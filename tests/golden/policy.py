"""The golden run's recording policy: seeded random actions, and a hash of every observation it
receives.

Served with the real SDK (``python -m tests.golden.policy``, port from ``$PORT``). Every
``/reset`` re-seeds the action generator with 0, so every episode gets the same action sequence
whatever order episodes run in (as :class:`submission_spec.examples.RandomPolicy`). Every
``/act`` appends one JSON line to the file named by ``$GOLDEN_OBS_LOG``: the episode id, the step,
and SHA-256 digests of each image's bytes (with its shape), each proprioception field's float64
bytes and the instruction. The golden test joins these lines with ``episodes.jsonl`` on the
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


def observation_digest(obs: Observation) -> dict:
    """The hashes of one observation (images: bytes and shape; proprio: float64 bytes)."""
    return {
        "episode_id": obs.episode_id,
        "step": obs.step,
        "instruction": _digest(obs.instruction.encode()),
        "images": {k: [list(v.shape), _digest(np.ascontiguousarray(v).tobytes())] for k, v in sorted(obs.images.items())},
        "proprio": {k: _digest(np.asarray(v, dtype=np.float64).tobytes()) for k, v in sorted(obs.proprio.items())},
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
