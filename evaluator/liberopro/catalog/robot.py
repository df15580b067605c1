"""Robot shifts: robot initialisation, calibration, robot state and manipulation outcomes (S17,
S18, D18, D19).

Units: radians (joints), metres, degrees, policy-loop steps. The arm is LIBERO's Panda (7 joints).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from liberopro.catalog.sampling import (
    Coin,
    Direction,
    DistinctSorted,
    Integers,
    PerItem,
    SignedUniform,
    SphereElevation,
    Uniform,
)
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

#: Arm joints of LIBERO's Panda (0 = base yaw ... 6 = flange rotation).
N_ARM_JOINTS = 7


# ------------------------------------------------------------------------------ S17
class RobotStateParams(ShiftParams):
    """``joints``: arm joint indices (0 = base yaw ... 6 = flange rotation), distinct;
    ``offsets_rad``: the offset added to each, radians, same order."""

    joints: Annotated[
        tuple[int, ...], Field(min_length=1, max_length=N_ARM_JOINTS), DistinctSorted(N_ARM_JOINTS, Integers(2, 3))
    ]
    offsets_rad: Annotated[
        tuple[float, ...], Field(min_length=1, max_length=N_ARM_JOINTS), PerItem("joints", SignedUniform(0.1, 0.3))
    ]

    @model_validator(mode="after")
    def _consistent(self) -> RobotStateParams:
        if len(self.joints) != len(self.offsets_rad):
            raise ValueError("joints and offsets_rad differ in length")
        if len(set(self.joints)) != len(self.joints) or not all(0 <= j < N_ARM_JOINTS for j in self.joints):
            raise ValueError(f"joints must be distinct indices in 0-{N_ARM_JOINTS - 1}")
        if any(abs(o) > 0.6 for o in self.offsets_rad):
            raise ValueError("offsets above 0.6 rad are not a robot-state shift")
        return self

    def offset_vector(self) -> np.ndarray:
        """(7,) float64 offsets (rad), zero on the joints not offset."""
        v = np.zeros(N_ARM_JOINTS)
        v[list(self.joints)] = self.offsets_rad
        return v


S17 = ShiftSpec(
    id="S17",
    name="robot state",
    category="Robot",
    summary="initial joint configuration offset (0.1-0.3 rad on some joints), collision-free",
    post_condition=(
        "after settling the arm joints differ from the stored init by the stated offsets "
        "(0.03 rad), the robot touches nothing new, the end effector is in the workspace"
    ),
    Params=RobotStateParams,
    resources=("robot:joints",),
    entry_point="liberopro.shifts.s17_robot_state:RobotState",
)


# ------------------------------------------------------------------------------ S18
class ProprioBiasParams(ShiftParams):
    """A constant offset on the reported end-effector pose: ``pos_offset_m`` along the direction
    ``pos_azimuth_deg``/``pos_elevation_deg`` (world frame), and a turn of ``rot_deg`` about the
    axis ``axis_azimuth_deg``/``axis_elevation_deg``."""

    pos_offset_m: Annotated[float, Field(ge=0, le=0.2), Uniform(0.02, 0.05)]
    pos_azimuth_deg: Annotated[float, Field(ge=-180, le=180), Uniform(-180, 180, 1)]
    pos_elevation_deg: Annotated[float, Field(ge=-90, le=90), SphereElevation(1)]
    rot_deg: Annotated[float, Field(ge=0, le=45), Uniform(5, 10, 2)]
    axis_azimuth_deg: Annotated[float, Field(ge=-180, le=180), Uniform(-180, 180, 1)]
    axis_elevation_deg: Annotated[float, Field(ge=-90, le=90), SphereElevation(1)]


S18 = ShiftSpec(
    id="S18",
    name="proprioception bias",
    category="Robot",
    summary="constant offset on the reported end-effector pose (2-5 cm, 5-10 deg)",
    post_condition=(
        "delivered minus true eef_pos is the stated vector, delivered eef_quat is the true one "
        "turned by the stated angle/axis, eef_axis_angle matches eef_quat (1e-6, every step)"
    ),
    Params=ProprioBiasParams,
    resources=("proprio",),
    entry_point="liberopro.shifts.s18_proprioception_bias:ProprioceptionBias",
    notes={"fields": ["eef_pos", "eef_quat", "eef_axis_angle"]},
)


# ------------------------------------------------------------------------------ D18
class GraspLossParams(RuntimeParams):
    """The gripper forced open for ``open_steps`` policy steps, extended by at most
    ``release_timeout_steps`` until no finger touches what it held."""

    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    open_steps: Annotated[int, Field(ge=1, le=40), Integers(10, 14)]
    release_timeout_steps: int = Field(default=10, ge=0, le=40)


D18 = ShiftSpec(
    id="D18",
    name="grasp loss",
    category="Robot",
    summary="gripper forced open for a few steps: the object drops, then control returns",
    post_condition=(
        "no gripper finger touches what it held at the trigger once the window ends "
        "(window extended by at most release_timeout_steps until it does)"
    ),
    Params=GraspLossParams,
    resources=("robot:gripper",),
    entry_point="liberopro.shifts.d18_grasp_loss:GraspLoss",
)


# ------------------------------------------------------------------------------ D19
class DisplacementParams(RuntimeParams):
    """The end effector pushed ``distance_m`` horizontally toward ``direction_deg`` (world) by a
    bounded intervention of at most ``max_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach", "transport")
    trigger: Annotated[Literal["approach", "transport"], Coin("approach", "transport")] = "approach"
    distance_m: Annotated[float, Field(ge=0.0, le=0.2), Uniform(0.03, 0.08)]
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    max_steps: int = Field(default=15, ge=1, le=50)


D19 = ShiftSpec(
    id="D19",
    name="robot displacement",
    category="Robot",
    summary="end effector pushed 3-8 cm by a bounded intervention",
    post_condition=(
        "end effector displaced horizontally by >= 80% of the stated distance within max_steps; the push "
        "goes the drawn direction or, where the scene blocks its sweep at the firing step, the first free "
        "of its neighbours in 45 degree steps (recorded)"
    ),
    Params=DisplacementParams,
    resources=("robot:control",),
    entry_point="liberopro.shifts.d19_robot_displacement:RobotDisplacement",
)

SPECS: tuple[ShiftSpec, ...] = (S17, S18, D18, D19)
