"""Condition shifts: the task-relevant object or receiver configuration, the relative layout, the
geometric constraints on approach and placement (S01-S05, D01-D05).

Units: metres, degrees (world frame, about z), policy-loop steps.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from liberopro.catalog import task_options as task
from liberopro.catalog.sampling import Choice, Direction, TaskPermutation, Uniform
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

#: D02: least distance (m) from the robot and the carried target to the receiver when it moves.
RECEIVER_ROBOT_CLEARANCE_M = 0.02
#: D03: least distance (m) from the robot to both swapped units at the swap.
SWAP_ROBOT_CLEARANCE_M = 0.01

_PARTNERS = TaskPermutation(
    task.swap_partners, "the task's candidates (same support, not the receiver, no look-alike) in random order"
)


# ------------------------------------------------------------------------------ S01 / D01
class ObjectPoseParams(ShiftParams):
    """``distance_m``: horizontal move (m); ``direction_deg``: preferred direction in the world
    xy plane (the realisation tries it first, then its neighbours in 30 deg steps);
    ``yaw_deg``: turn about world z."""

    distance_m: Annotated[float, Field(ge=0.0, le=0.5), Uniform(0.08, 0.15)]
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-45, 45, 1)]


S01 = ShiftSpec(
    id="S01",
    name="object pose",
    category="Condition",
    summary="target object moved 8-15 cm and turned up to 45 deg about z",
    post_condition=(
        "target moved >= the stated distance - 1 cm, rests at its height (+-1 cm) on its "
        "support after settling, interpenetrates nothing (> 3 mm)"
    ),
    Params=ObjectPoseParams,
    resources=("pose:target",),
    entry_point="liberopro.shifts.s01_object_pose:ObjectPose",
)


class RuntimeObjectPoseParams(RuntimeParams):
    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    distance_m: Annotated[float, Field(ge=0.0, le=0.5), Uniform(0.05, 0.12)]
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-30, 30, 1)]


D01 = ShiftSpec(
    id="D01",
    name="object pose",
    category="Condition",
    summary="target moved 5-12 cm and turned, before contact",
    post_condition=(
        "target displaced by the stated distance (measured), resting at its height, "
        "touching neither the robot nor other objects at the moment of the move"
    ),
    Params=RuntimeObjectPoseParams,
    resources=("pose:target",),
    entry_point="liberopro.shifts.d01_object_pose:RuntimeObjectPose",
)


# ------------------------------------------------------------------------------ S02 / D02
class ReceiverPoseParams(ShiftParams):
    """``distance_m``: preferred horizontal move (m); ``min_distance_m``: the shortest move
    accepted when no direction fits at ``distance_m`` (tried in 1 cm steps); ``direction_deg``:
    preferred direction in the world xy plane (tried first, then its neighbours, see
    :data:`~liberopro.shifts._placement.DIRECTION_STEPS_DEG`); ``yaw_deg``: turn about world z,
    about the receiver's origin."""

    distance_m: Annotated[float, Field(ge=0.0, le=0.5), Uniform(0.08, 0.15)]
    min_distance_m: float = Field(default=0.08, ge=0.0, le=0.5)
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-30, 30, 1)]


S02 = ShiftSpec(
    id="S02",
    name="receiver pose",
    category="Condition",
    summary="receiver / goal object or fixture moved 8-15 cm, turned up to 30 deg",
    post_condition=(
        "receiver moved >= the realised distance (the stated one, or down to the stated minimum "
        "where it does not fit) - 1 cm, rests at its height (+-1 cm) after settling, "
        "interpenetrates nothing (> 3 mm); the target and every other object moved < 1 cm; a goal "
        "region named after the receiver moved with it"
    ),
    Params=ReceiverPoseParams,
    resources=("pose:receiver",),
    entry_point="liberopro.shifts.s02_receiver_pose:ReceiverPose",
)


class RuntimeReceiverPoseParams(RuntimeParams):
    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    distance_m: Annotated[float, Field(ge=0.0, le=0.5), Uniform(0.05, 0.12)]
    min_distance_m: float = Field(default=0.05, ge=0.0, le=0.5)
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-20, 20, 1)]


D02 = ShiftSpec(
    id="D02",
    name="receiver pose",
    category="Condition",
    summary="receiver moved 5-12 cm while the target is carried",
    post_condition=(
        f"receiver displaced by the stated distance (measured), at its height, nothing "
        f"interpenetrating; >= {RECEIVER_ROBOT_CLEARANCE_M * 100:.0f} cm from the robot and the carried "
        f"target at the moment of the move; the target itself not moved"
    ),
    Params=RuntimeReceiverPoseParams,
    resources=("pose:receiver",),
    entry_point="liberopro.shifts.d02_receiver_pose:RuntimeReceiverPose",
)


# ------------------------------------------------------------------------------ S03 / D03
class RelativeLayoutParams(ShiftParams):
    """``partners``: candidate objects (BDDL names) in the order they are tried."""

    partners: Annotated[tuple[str, ...], Field(min_length=1), _PARTNERS]


S03 = ShiftSpec(
    id="S03",
    name="relative layout",
    category="Condition",
    summary="target swaps places with a non-target object",
    post_condition=(
        "after settling, the target's unit and the partner's each lie within 2 cm of the other's former "
        "place, within 1 cm of their own height, on the same support; no interpenetration (> 3 mm); no "
        "other object moved > 1 cm"
    ),
    Params=RelativeLayoutParams,
    resources=("pose:target", "pose:others"),
    entry_point="liberopro.shifts.s03_relative_layout:RelativeLayout",
)


class RuntimeRelativeLayoutParams(RuntimeParams):
    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    partners: Annotated[tuple[str, ...], Field(min_length=1), _PARTNERS]


D03 = ShiftSpec(
    id="D03",
    name="relative layout",
    category="Condition",
    summary="target swaps places with a non-target object, before contact",
    post_condition=(
        f"at the moment of the swap each unit is at the other's former place (1 mm), nothing "
        f"interpenetrates, both >= {SWAP_ROBOT_CLEARANCE_M * 100:.0f} cm from the robot"
    ),
    Params=RuntimeRelativeLayoutParams,
    resources=("pose:target", "pose:others"),
    entry_point="liberopro.shifts.d03_relative_layout:RuntimeRelativeLayout",
)


# ------------------------------------------------------------------------------ S04
#: Sides of the target, named from the robot.
SIDES = ("near", "far", "left", "right")


class ApproachParams(ShiftParams):
    """``side`` of the target's stack the blocker closes (named from the robot); ``gap_m`` from
    the stack's bounding box; ``height_m``, ``thickness_m`` of the blocker; ``overhang_m`` beyond
    the stack at both ends."""

    side: Annotated[Literal["near", "far", "left", "right"], Choice(SIDES)]
    gap_m: Annotated[float, Field(ge=0.005, le=0.06), Uniform(0.01, 0.03)]
    height_m: Annotated[float, Field(ge=0.01, le=0.10), Uniform(0.03, 0.05)]
    thickness_m: float = Field(default=0.02, ge=0.005, le=0.05)
    overhang_m: Annotated[float, Field(ge=0.0, le=0.08), Uniform(0.0, 0.02)]


S04 = ShiftSpec(
    id="S04",
    name="approach constraint",
    category="Condition",
    summary="a low blocker beside the target closes one approach side; a top grasp stays possible",
    post_condition=(
        "blocker stands on the target's support (+-3 mm) beside the stated side at the stated gap "
        "(+-5 mm), the space above the target free for 15 cm (top grasp); after "
        "re-settling nothing touches it and no object moved (> 3 mm)"
    ),
    Params=ApproachParams,
    resources=("space:beside-target",),
    entry_point="liberopro.shifts.s04_approach_constraint:ApproachConstraint",
)


# ------------------------------------------------------------------------------ S05 / D05
class PathObstacleParams(ShiftParams):
    """A box ``thickness_m`` along the target-goal path, ``width_m`` across it, ``height_m``
    high, at ``fraction`` of the path's length."""

    fraction: Annotated[float, Field(ge=0.1, le=0.9), Uniform(0.4, 0.6, 3)]
    height_m: Annotated[float, Field(ge=0.02, le=0.12), Uniform(0.06, 0.12)]
    width_m: Annotated[float, Field(ge=0.02, le=0.25), Uniform(0.08, 0.14)]
    thickness_m: Annotated[float, Field(ge=0.01, le=0.10), Uniform(0.03, 0.05)]


S05 = ShiftSpec(
    id="S05",
    name="path obstacle",
    category="Condition",
    summary="an obstacle on the straight path between target and goal; going over or around stays possible",
    post_condition=(
        "obstacle stands on the table/floor (+-3 mm) across the target-goal segment (segment passes "
        "within 1 mm of its centre), <= 12 cm high with 35 cm free above it; a 10 cm lane beside it "
        "recorded; after re-settling nothing touches it and no object moved (> 3 mm)"
    ),
    Params=PathObstacleParams,
    resources=("space:path",),
    entry_point="liberopro.shifts.s05_path_obstacle:PathObstacle",
)


class RuntimePathObstacleParams(RuntimeParams):
    """As :class:`PathObstacleParams`, plus the trigger."""

    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    fraction: Annotated[float, Field(ge=0.1, le=0.9), Uniform(0.4, 0.6, 3)]
    height_m: Annotated[float, Field(ge=0.02, le=0.12), Uniform(0.06, 0.12)]
    width_m: Annotated[float, Field(ge=0.02, le=0.25), Uniform(0.08, 0.14)]
    thickness_m: Annotated[float, Field(ge=0.01, le=0.10), Uniform(0.03, 0.05)]


D05 = ShiftSpec(
    id="D05",
    name="path obstacle",
    category="Condition",
    summary="an obstacle appears on the path ahead",
    post_condition=(
        "at the firing step the obstacle stands on the table/floor across the remaining target-goal "
        "segment (within 1 mm), >= 3 cm from the target and the gripper, >= 2 cm from the robot, "
        "<= 12 cm high with 35 cm free above; no contact"
    ),
    Params=RuntimePathObstacleParams,
    resources=("space:path",),
    entry_point="liberopro.shifts.d05_path_obstacle:RuntimePathObstacle",
)


# ------------------------------------------------------------------------------ D04
class ObstructionParams(RuntimeParams):
    """``cover``: fraction of the goal region's area the block covers; ``height_m`` of the block."""

    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    cover: Annotated[float, Field(ge=0.05, le=0.5), Uniform(0.15, 0.3, 3)]
    height_m: Annotated[float, Field(ge=0.01, le=0.06), Uniform(0.02, 0.03)]


D04 = ShiftSpec(
    id="D04",
    name="placement obstruction",
    category="Condition",
    summary="a small object lands on part of the goal region",
    post_condition=(
        "at the firing step the block rests on the goal region's owner (+-3 mm) inside the region, "
        "covers 10-50% of its area and leaves free at least the target's footprint (where that fits on the region), "
        "touches nothing, "
        ">= 2 cm from the robot and >= 1 cm from the target"
    ),
    Params=ObstructionParams,
    resources=("space:goal",),
    entry_point="liberopro.shifts.d04_placement_obstruction:PlacementObstruction",
    differs_from_definition={
        "trigger": "fires at transport (the target lifted and carried), not at placement: once the target is over "
        "the goal region there is no free spot on most tasks' regions, so the shift was invalid on most tasks and "
        'measured only on slow or failing episodes (docs/instances.md, "Known limits of this run")'
    },
)

SPECS: tuple[ShiftSpec, ...] = (S01, S02, S03, S04, S05, D01, D02, D03, D04, D05)
