"""Example policies: ``zero`` (holds still, gripper open) and ``random`` (uniform actions).

They exercise the whole evaluation path without a model. Serve one with
``python -m submission_spec.examples zero`` (port from env ``PORT``, default 8000) or
``liberopro serve-example zero``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from submission_spec.models import CameraSpec, PolicyMetadata
from submission_spec.policy import Observation, Policy


class ZeroPolicy:
    """Holds the arm still with the gripper open: every action is ``[0, 0, 0, 0, 0, 0, -1]``
    (LIBERO convention, -1 opens). Asks for both cameras at 128x128 so it costs little."""

    def __init__(self) -> None:
        self.metadata = PolicyMetadata(
            policy_name="example-zero",
            cameras=[
                CameraSpec(name="agentview", height=128, width=128),
                CameraSpec(name="wrist", height=128, width=128),
            ],
            chunk_length=1,
            replan_steps=1,
        )

    def reset(self, episode_id: str, instruction: str) -> None:
        pass

    def act(self, observation: Observation) -> np.ndarray:
        return np.array([[0, 0, 0, 0, 0, 0, -1]], dtype=np.float32)


class RandomPolicy:
    """Uniform random actions in [-1, 1]^7, chunks of 8 executed 4 at a time. The generator is
    re-seeded with 0 at every reset, so every episode gets the same action sequence whatever
    the order in which episodes run."""

    def __init__(self) -> None:
        self.metadata = PolicyMetadata(
            policy_name="example-random",
            cameras=[CameraSpec(name="agentview", height=128, width=128)],
            chunk_length=8,
            replan_steps=4,
        )
        self._rng = np.random.default_rng(0)

    def reset(self, episode_id: str, instruction: str) -> None:
        self._rng = np.random.default_rng(0)

    def act(self, observation: Observation) -> np.ndarray:
        return self._rng.uniform(-1.0, 1.0, size=(8, 7)).astype(np.float32)


EXAMPLES: dict[str, Callable[[], Policy]] = {"zero": ZeroPolicy, "random": RandomPolicy}


def main(argv: list[str] | None = None) -> None:
    from submission_spec.server import serve

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in EXAMPLES:
        raise SystemExit(f"usage: python -m submission_spec.examples {{{','.join(EXAMPLES)}}}")
    serve(EXAMPLES[args[0]]())


if __name__ == "__main__":
    main()
