"""What a policy author implements: a :class:`Policy` that maps an :class:`Observation` to an
action chunk. :func:`submission_spec.server.serve` turns it into a conforming HTTP server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from submission_spec.arrays import NDArray
from submission_spec.models import (
    LIBERO_STATE8,
    PROPRIO_FIELDS,
    ObservationMessage,
    PolicyMetadata,
    ProprioValue,
)


@dataclass(frozen=True)
class Observation:
    """One observation with numpy arrays.

    Attributes:
        episode_id: opaque id of the episode (random; says nothing about the task).
        step: environment step of the policy loop, from 0.
        instruction: the language instruction for this step.
        images: camera name -> (H, W, 3) uint8 RGB, in the orientation and size the policy's
            metadata asked for.
        proprio: field name -> float64 vector, see ``PROPRIO_FIELDS`` for length, unit, frame.
    """

    episode_id: str
    step: int
    instruction: str
    images: dict[str, np.ndarray] = field(default_factory=dict)
    proprio: dict[str, np.ndarray] = field(default_factory=dict)

    def state(self, fields: Sequence[str] = LIBERO_STATE8) -> np.ndarray:
        """Concatenate proprioception fields, by default LIBERO's 8-number state
        (eef_pos 3 + eef_axis_angle 3 + gripper_qpos 2), float64. Raises ``KeyError`` if a field
        was not sent (ask for it in ``PolicyMetadata.state_fields``)."""
        return np.concatenate([np.asarray(self.proprio[f], dtype=np.float64) for f in fields])

    @classmethod
    def from_message(cls, msg: ObservationMessage) -> Observation:
        return cls(
            episode_id=msg.episode_id,
            step=msg.step,
            instruction=msg.instruction,
            images={k: v.to_numpy() for k, v in msg.images.items()},
            proprio={k: np.asarray(v.value, dtype=np.float64) for k, v in msg.proprio.items()},
        )

    def to_message(self) -> ObservationMessage:
        proprio = {}
        for name, value in self.proprio.items():
            _, unit, frame, _ = PROPRIO_FIELDS[name]
            proprio[name] = ProprioValue(value=[float(x) for x in np.asarray(value).ravel()], unit=unit, frame=frame)
        return ObservationMessage(
            episode_id=self.episode_id,
            step=self.step,
            instruction=self.instruction,
            images={k: NDArray.from_numpy(v) for k, v in self.images.items()},
            proprio=proprio,
        )


class ObservationBatch:
    """The observations of one batch (:class:`submission_spec.server.BatchConfig`), one per
    concurrent episode, in arrival order, with numpy-stacked views.

    Attributes:
        observations: the :class:`Observation` objects (``len(batch)`` of them).
        episode_ids, steps, instructions: per observation.
    """

    def __init__(self, observations: Sequence[Observation]) -> None:
        self.observations = list(observations)
        self.episode_ids = [o.episode_id for o in self.observations]
        self.steps = [o.step for o in self.observations]
        self.instructions = [o.instruction for o in self.observations]

    def __len__(self) -> int:
        return len(self.observations)

    def images(self, camera: str) -> np.ndarray:
        """(B, H, W, 3) uint8: ``camera``'s image of every observation (all the same size: the
        metadata's). Raises ``KeyError`` if a camera was not sent."""
        return np.stack([o.images[camera] for o in self.observations])

    def state(self, fields: Sequence[str] = LIBERO_STATE8) -> np.ndarray:
        """(B, D) float64: :meth:`Observation.state` of every observation (default D = 8)."""
        return np.stack([o.state(fields) for o in self.observations])


@runtime_checkable
class Policy(Protocol):
    """A policy as the SDK serves it.

    ``act`` returns an action chunk: a (T, 7) array (or a (7,) vector, taken as T = 1) of LIBERO
    delta end-effector actions in the policy's declared gripper convention.

    Optionally (batched serving, spec 1.1) ``act_batch(batch: ObservationBatch)`` returns one
    chunk per observation: a (B, T, 7) array or a list of B chunks. Policies serving concurrent
    episodes keep per-episode state by ``episode_id`` (``reset`` is called for each episode).
    """

    metadata: PolicyMetadata

    def reset(self, episode_id: str, instruction: str) -> None: ...

    def act(self, observation: Observation) -> np.ndarray: ...


class FunctionPolicy:
    """Adapts a plain callable ``fn(observation) -> actions`` to :class:`Policy`."""

    def __init__(
        self,
        fn: Callable[[Observation], np.ndarray],
        metadata: PolicyMetadata,
        reset: Callable[[str, str], None] | None = None,
    ) -> None:
        self._fn = fn
        self._reset = reset
        self.metadata = metadata

    def reset(self, episode_id: str, instruction: str) -> None:
        if self._reset is not None:
            self._reset(episode_id, instruction)

    def act(self, observation: Observation) -> np.ndarray:
        return self._fn(observation)


def as_policy(policy: Policy | Callable[[Observation], np.ndarray], metadata: PolicyMetadata | None = None) -> Policy:
    """Accept a :class:`Policy` or a callable (then ``metadata`` is required)."""
    if isinstance(policy, Policy):
        if metadata is not None:
            policy.metadata = metadata
        return policy
    if not callable(policy):
        raise TypeError(f"expected a Policy or a callable, got {type(policy).__name__}")
    if metadata is None:
        raise TypeError("serving a plain callable needs metadata=PolicyMetadata(...)")
    return FunctionPolicy(policy, metadata)


def as_action_chunk(actions: np.ndarray | Sequence[float]) -> np.ndarray:
    """Normalise a policy's output to a (T, 7) float32 array.

    Raises ``ValueError`` naming the problem when it is not (T, 7) / (7,), is empty or holds a
    non-finite value.
    """
    arr = np.asarray(actions)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"actions must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 7 or arr.shape[0] < 1:
        raise ValueError(f"actions must have shape (T, 7) with T >= 1, got {tuple(np.shape(actions))}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("actions contain NaN or infinity")
    return arr.astype(np.float32)
