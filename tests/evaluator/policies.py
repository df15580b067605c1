"""Policies for tests, served with the real SDK over real sockets.

``Recorder`` keeps every request it receives. ``Toward`` is a scripted controller that uses
privileged state (a callable giving a world position, e.g. the target object's, read from the
scene the test holds): fine in tests, never a leaderboard entry.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from submission_spec import CameraSpec, Observation, PolicyMetadata


def metadata(name: str, cameras=("agentview",), size: int = 64, chunk: int = 1, replan: int = 1) -> PolicyMetadata:
    return PolicyMetadata(
        policy_name=name,
        cameras=[CameraSpec(name=c, height=size, width=size) for c in cameras],
        chunk_length=chunk,
        replan_steps=replan,
        state_fields=["eef_pos", "eef_axis_angle", "gripper_qpos", "joint_pos"],
    )


class Recorder:
    """Records (reset and act) requests; acts with ``fn(obs)`` (default: hold still, open)."""

    def __init__(self, meta: PolicyMetadata, fn: Callable[[Observation], np.ndarray] | None = None) -> None:
        self.metadata = meta
        self.fn = fn or (lambda obs: np.array([[0, 0, 0, 0, 0, 0, -1.0]]))
        self.resets: list[tuple[str, str]] = []
        self.observations: list[Observation] = []

    def reset(self, episode_id: str, instruction: str) -> None:
        self.resets.append((episode_id, instruction))

    def act(self, observation: Observation) -> np.ndarray:
        self.observations.append(observation)
        return self.fn(observation)


def toward(
    goal: Callable[[], np.ndarray], offset=(0.0, 0.0, 0.06), gain: float = 0.6
) -> Callable[[Observation], np.ndarray]:
    """Move the end effector toward ``goal() + offset`` (metres, world) with the gripper open."""

    def act(obs: Observation) -> np.ndarray:
        err = goal() + np.asarray(offset) - obs.proprio["eef_pos"]
        a = np.zeros(7)
        a[:3] = np.clip(err / 0.05 * gain, -1, 1)
        a[6] = -1.0
        return a[None]

    return act


def sweep(direction=(0.0, 1.0, 0.0), speed: float = 0.5) -> Callable[[Observation], np.ndarray]:
    """Constant end-effector velocity (so consecutive frames differ)."""

    def act(obs: Observation) -> np.ndarray:
        a = np.zeros(7)
        a[:3] = np.asarray(direction) * speed
        a[6] = -1.0
        return a[None]

    return act
