"""Submission spec v1: the messages between the evaluator and a policy server.

Endpoints (see ``openapi.json`` beside this package, generated from these models):

* ``GET /health`` -> :class:`Health`
* ``GET /metadata`` -> :class:`PolicyMetadata`: what the policy wants (cameras, image size and
  orientation, proprioception fields, action conventions, chunking).
* ``POST /reset`` :class:`ResetRequest` -> :class:`ResetResponse`, once before every episode.
* ``POST /act`` :class:`ObservationMessage` -> :class:`ActResponse`: one observation in, one action
  chunk out. The response echoes ``episode_id`` and ``step``; the evaluator rejects a response
  whose echo does not match, so a late answer can never be applied at a later step.

Both ``POST`` bodies may be JSON (``application/json``) or msgpack (``application/msgpack``); the
server answers in the encoding of the request. Arrays travel as :class:`~submission_spec.arrays.NDArray`.

Conventions (LIBERO facts; see ``docs/libero-facts.md``, "Actions and observations", in the
repository):

* Actions are LIBERO's OSC_POSE delta end-effector commands at 20 Hz:
  ``[dx, dy, dz, droll, dpitch, dyaw, gripper]``, each in [-1, 1]. Position deltas scale to at
  most 0.05 m per step, rotation deltas to at most 0.5 rad per step (robosuite 1.4
  ``osc_pose.json``: ``output_max``).
* Proprioception is in the world frame of the LIBERO scene, metres and radians.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from submission_spec.arrays import NDArray

#: The spec version this package implements. 1.1 adds ``max_concurrent_episodes`` to
#: :class:`PolicyMetadata`; a 1.0 policy (no such field) is served one episode at a time, as before.
SPEC_VERSION: Literal["1.1"] = "1.1"
SpecVersion = Literal["1.0", "1.1"]

CameraName = Literal["agentview", "wrist"]
"""``agentview``: LIBERO's fixed third-person camera; ``wrist``: ``robot0_eye_in_hand``."""

ImageOrientation = Literal["rotate_180", "upright", "as_rendered"]
"""How images are delivered.

* ``as_rendered``: MuJoCo's offscreen buffer as LIBERO returns it (upside down: row 0 is the
  bottom of the picture).
* ``rotate_180``: ``img[::-1, ::-1]`` of the rendered buffer. The public LIBERO datasets (and
  openpi's and OpenVLA's LIBERO clients) use this; pick it for policies trained on them.
* ``upright``: ``img[::-1]``, the picture as a person would see it.
"""

ResizeMode = Literal["resize_with_pad", "stretch"]
"""How a rendered image is brought to the requested size: keep the aspect ratio and pad with
black (``resize_with_pad``), or stretch. Square to square is the same for both."""

ProprioName = Literal[
    "eef_pos",
    "eef_quat",
    "eef_axis_angle",
    "gripper_qpos",
    "joint_pos",
    "joint_vel",
]

#: (length, unit, frame, description) of every proprioception field the evaluator can send.
PROPRIO_FIELDS: dict[str, tuple[int, str, str, str]] = {
    "eef_pos": (3, "m", "world", "end-effector (grip site) position, robot0_eef_pos"),
    "eef_quat": (4, "quaternion xyzw", "world", "end-effector orientation, robot0_eef_quat"),
    "eef_axis_angle": (3, "rad", "world", "end-effector orientation as an axis-angle vector"),
    "gripper_qpos": (2, "m", "joint", "finger joint positions (opposite signs), robot0_gripper_qpos"),
    "joint_pos": (7, "rad", "joint", "arm joint angles, robot0_joint_pos"),
    "joint_vel": (7, "rad/s", "joint", "arm joint velocities, robot0_joint_vel"),
}

#: The 8-number state most LIBERO policies use (openpi, OpenVLA-OFT).
LIBERO_STATE8: tuple[ProprioName, ...] = ("eef_pos", "eef_axis_angle", "gripper_qpos")

GripperConvention = Literal["libero", "open_positive", "unit_open_is_one", "unit_close_is_one"]
"""What the policy's 7th action number means.

* ``libero``: -1 opens, +1 closes (LIBERO's own, passed through).
* ``open_positive``: +1 opens, -1 closes (negated).
* ``unit_open_is_one``: 0 closes, 1 opens (OpenVLA); mapped to ``1 - 2 g``.
* ``unit_close_is_one``: 0 opens, 1 closes; mapped to ``2 g - 1``.
"""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Health(_Model):
    """Answer of ``GET /health``: ``{"status": "ok"}`` once the policy can act."""

    status: Literal["ok"] = "ok"


class CameraSpec(_Model):
    """One camera the policy wants, at the size it wants it (pixels)."""

    name: CameraName
    height: Annotated[int, Field(ge=16, le=1024)] = 224
    width: Annotated[int, Field(ge=16, le=1024)] = 224


class ActionSpace(_Model):
    """The action space: LIBERO's delta end-effector control. Fixed in spec v1."""

    type: Literal["delta_eef"] = "delta_eef"
    dim: Literal[7] = 7
    controller: Literal["OSC_POSE"] = "OSC_POSE"
    control_frequency_hz: Literal[20] = 20
    layout: list[str] = Field(default_factory=lambda: ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"])
    low: float = -1.0
    high: float = 1.0


class PolicyMetadata(_Model):
    """Answer of ``GET /metadata``: what the policy wants to receive and what it sends.

    ``chunk_length`` is the number of actions per ``/act`` answer (H); the evaluator executes
    the first ``replan_steps`` of each chunk, then asks again (openpi's LIBERO client: H=10,
    replan 5 for pi0.5). A chunk may be shorter than ``chunk_length`` but never empty.

    ``max_concurrent_episodes`` (spec 1.1): how many episodes the server serves at once, each
    with its own ``episode_id`` from its ``/reset`` to its last ``/act``. Absent or 1: one at a
    time (spec 1.0's behaviour; the SDK answers 409 to an ``/act`` of an episode that a later
    ``/reset`` replaced). More: the evaluator may run that many simulator streams against this
    one server (``liberopro evaluate --workers``; the SDK can batch their ``/act`` calls:
    :class:`submission_spec.server.BatchConfig`).
    """

    spec_version: SpecVersion = SPEC_VERSION
    policy_name: Annotated[str, Field(min_length=1, max_length=200)]
    cameras: list[CameraSpec] = Field(default_factory=lambda: [CameraSpec(name="agentview"), CameraSpec(name="wrist")])
    image_orientation: ImageOrientation = "rotate_180"
    resize_mode: ResizeMode = "resize_with_pad"
    state_fields: list[ProprioName] = Field(default_factory=lambda: list(LIBERO_STATE8))
    action_space: ActionSpace = Field(default_factory=ActionSpace)
    gripper_convention: GripperConvention = "libero"
    binarize_gripper: bool = False
    chunk_length: Annotated[int, Field(ge=1, le=1000)] = 1
    replan_steps: Annotated[int, Field(ge=1, le=1000)] = 1
    max_concurrent_episodes: Annotated[int, Field(ge=1, le=256)] | None = None

    @property
    def concurrent_episodes(self) -> int:
        """Episodes the server serves at once: ``max_concurrent_episodes``, 1 when absent."""
        return self.max_concurrent_episodes or 1

    @model_validator(mode="after")
    def _check(self) -> PolicyMetadata:
        if self.concurrent_episodes > 1 and self.spec_version == "1.0":
            raise ValueError(
                "max_concurrent_episodes above 1 is a spec 1.1 field: declare spec_version '1.1' "
                "(or leave max_concurrent_episodes out to be served one episode at a time)"
            )
        if self.replan_steps > self.chunk_length:
            raise ValueError(
                f"replan_steps ({self.replan_steps}) exceeds chunk_length ({self.chunk_length}): "
                "a policy cannot execute more actions than it returns"
            )
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"camera names repeat: {names}")
        if len(set(self.state_fields)) != len(self.state_fields):
            raise ValueError(f"state fields repeat: {self.state_fields}")
        return self


class ResetRequest(_Model):
    """Body of ``POST /reset``, sent before every episode.

    ``episode_id`` is opaque and random: it says nothing about the task, the shift or the init
    state.
    """

    episode_id: Annotated[str, Field(min_length=1, max_length=100)]
    instruction: str


class ResetResponse(_Model):
    """Answer of ``POST /reset``."""

    ok: Literal[True] = True


class ProprioValue(_Model):
    """One proprioception field: values with their unit and frame (see ``PROPRIO_FIELDS``)."""

    value: list[float]
    unit: str
    frame: str


class ObservationMessage(_Model):
    """Body of ``POST /act``: what the policy sees at one step.

    ``images`` maps camera name to an (H, W, 3) uint8 RGB array at the size and orientation the
    metadata asked for; ``proprio`` maps field name to :class:`ProprioValue`. ``step`` counts
    environment steps of the policy loop from 0 (settle steps excluded).
    """

    episode_id: str
    step: Annotated[int, Field(ge=0)]
    instruction: str
    images: dict[str, NDArray]
    proprio: dict[str, ProprioValue]


class ServerTiming(_Model):
    """Optional timing the server reports, in milliseconds."""

    infer_ms: float | None = None


class ActResponse(_Model):
    """Answer of ``POST /act``: an action chunk.

    ``actions`` is a (T, 7) float32 or float64 array, 1 <= T <= ``chunk_length``, every value
    finite. ``episode_id`` and ``step`` echo the request.
    """

    episode_id: str
    step: int
    actions: NDArray
    server_timing: ServerTiming | None = None


class ErrorResponse(_Model):
    """Body of a 4xx/5xx answer."""

    error: str
    detail: str | None = None
