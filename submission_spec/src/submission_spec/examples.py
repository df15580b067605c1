"""Example policies: ``zero`` (holds still, gripper open) and ``random`` (uniform actions).

They exercise the whole evaluation path without a model. Serve one with
``python -m submission_spec.examples zero`` (port from env ``PORT``, default 8000) or
``liberopro serve-example zero``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from submission_spec.models import CameraSpec, PolicyMetadata
from submission_spec.policy import Observation, Policy


class ZeroPolicy:
    """Holds the arm still with the gripper open: every action is ``[0, 0, 0, 0, 0, 0, -1]``
    (LIBERO convention, -1 opens). Asks for both cameras at 128x128 so it costs little. Stateless,
    so it serves 16 episodes at once (spec 1.1)."""

    def __init__(self) -> None:
        self.metadata = PolicyMetadata(
            policy_name="example-zero",
            cameras=[
                CameraSpec(name="agentview", height=128, width=128),
                CameraSpec(name="wrist", height=128, width=128),
            ],
            chunk_length=1,
            replan_steps=1,
            max_concurrent_episodes=16,
        )

    def reset(self, episode_id: str, instruction: str) -> None:
        pass

    def act(self, observation: Observation) -> np.ndarray:
        return np.array([[0, 0, 0, 0, 0, 0, -1]], dtype=np.float32)


class RandomPolicy:
    """Uniform random actions in [-1, 1]^7, chunks of 8 executed 4 at a time. Each episode has
    its own generator seeded with 0 at its reset, so every episode gets the same action sequence
    whatever the order in which episodes run, and up to 16 run at once (spec 1.1)."""

    def __init__(self) -> None:
        self.metadata = PolicyMetadata(
            policy_name="example-random",
            cameras=[CameraSpec(name="agentview", height=128, width=128)],
            chunk_length=8,
            replan_steps=4,
            max_concurrent_episodes=16,
        )
        self._rngs: dict[str, np.random.Generator] = {}

    def reset(self, episode_id: str, instruction: str) -> None:
        self._rngs.pop(episode_id, None)
        self._rngs[episode_id] = np.random.default_rng(0)
        while len(self._rngs) > self.metadata.concurrent_episodes:  # the oldest episode is over
            del self._rngs[next(iter(self._rngs))]

    def act(self, observation: Observation) -> np.ndarray:
        return self._rngs[observation.episode_id].uniform(-1.0, 1.0, size=(8, 7)).astype(np.float32)


EXAMPLES: dict[str, Callable[[], Policy]] = {"zero": ZeroPolicy, "random": RandomPolicy}


def main(argv: list[str] | None = None) -> None:
    """``python -m submission_spec.examples {zero,random}``: serve that example policy
    (:func:`submission_spec.server.serve`; port from ``PORT``). Exit code 2 for another name."""
    import typer

    def serve_example(
        name: str = typer.Argument(..., metavar="NAME", help=f"The example policy to serve: {', '.join(EXAMPLES)}."),
    ) -> None:
        from submission_spec.server import serve

        if name not in EXAMPLES:
            raise typer.BadParameter(f"{name!r} is not one of: {', '.join(EXAMPLES)}", param_hint="NAME")
        serve(EXAMPLES[name]())

    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help="Serve an example policy (port from $PORT, default 8000).")(serve_example)
    app(args=argv, prog_name="python -m submission_spec.examples")


if __name__ == "__main__":
    main()
