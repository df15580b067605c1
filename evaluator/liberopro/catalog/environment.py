"""Environment shifts: object instances, clutter, distractors, occlusion, the appearance of
objects, support surface and scene, camera motion and lighting (S06-S13, D06-D09).

Units: metres, degrees, fractions in [0, 1], grey levels on the 0-255 scale, policy-loop steps.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from liberopro.catalog import task_options as task
from liberopro.catalog.sampling import (
    Coin,
    Direction,
    Draw,
    Fixed,
    Integers,
    Repeat,
    TaskChoice,
    TaskSubset,
    TaskValue,
    Uniform,
    uniform,
)
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

# ------------------------------------------------------------------ appearance (S10, S11, S13)
#: Square resolution of the appearance shifts' measurement renders (px), whatever the policy's.
MEASURE_PX = 128
#: A pixel counts as changed when it moves by more than this (grey levels, mean over R, G, B).
PIXEL_CHANGED = 8.0
#: Post-conditions: at least this fraction of the edited region's pixels change ...
MIN_REGION_CHANGED = 0.5
#: ... and at most this fraction of the other pixels (mirrors and the one-pixel border left out).
MAX_OTHERS_CHANGED = 0.01
#: S10: least mean change of the target's pixels (grey levels).
MIN_TARGET_CHANGE = 15.0
#: S11: least mean change of the support's pixels (grey levels), and its least share of the view.
MIN_SUPPORT_CHANGE = 20.0
MIN_SUPPORT_SHARE = 0.05
#: S13: least mean change of the floor and wall pixels (grey levels), and their least share of the view.
MIN_SCENE_CHANGE = 20.0
MIN_SCENE_SHARE = 0.03

TextureName = Literal["none", "planks", "wood", "plaster"]
#: Look textures: a flat colour, or one of the arena textures every LIBERO scene loads
#: (:mod:`liberopro.shifts._appearance`).
TEXTURE_NAMES: tuple[str, ...] = ("none", "planks", "wood", "plaster")


class Look(BaseModel):
    """A texture preference order and a colour (r, g, b in [0, 1]; the flat colour, or the tint
    multiplying the texture)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    textures: tuple[TextureName, ...] = Field(min_length=1)
    rgb: tuple[float, float, float]


@dataclass(frozen=True)
class LookDraw(Draw):
    """A :class:`Look`: the four textures in random order, a colour of uniform hue and the given
    saturation/value ranges (3 decimals). Calls: ``rng.permutation(4)``, then ``rng.uniform`` for
    hue in [0, 1], saturation, value."""

    sat: tuple[float, float]
    val: tuple[float, float]

    def draw(self, rng, ctx):
        order = tuple(TEXTURE_NAMES[i] for i in rng.permutation(len(TEXTURE_NAMES)))
        h = uniform(rng, 0.0, 1.0, 3)
        rgb = colorsys.hsv_to_rgb(h, uniform(rng, *self.sat, 3), uniform(rng, *self.val, 3))
        return Look(textures=order, rgb=tuple(round(c, 3) for c in rgb))

    def contains(self, value, ctx):
        look = value if isinstance(value, Look) else Look.model_validate(value)
        if sorted(look.textures) != sorted(TEXTURE_NAMES):
            return False
        h, s, v = colorsys.rgb_to_hsv(*look.rgb)
        tol = 5e-3  # the rgb numbers are rounded to 3 decimals
        return self.sat[0] - tol <= s <= self.sat[1] + tol and self.val[0] - tol <= v <= self.val[1] + tol

    def describe(self):
        return {
            "textures": "permutation of " + ", ".join(TEXTURE_NAMES) + " (first usable one applies)",
            "rgb": f"uniform hue, saturation {list(self.sat)}, value {list(self.val)}",
        }


_SURFACE_LOOK = LookDraw(sat=(0.35, 0.75), val=(0.6, 1.0))


# ------------------------------------------------------------------------------ S06
class InstanceParams(ShiftParams):
    """``object``: BDDL name of the target; ``from_type``/``to_type``: LIBERO object types
    (``libero.libero.envs.objects``)."""

    object: Annotated[str, Field(min_length=1), TaskValue(task.target, "the target (BDDL name)")]
    from_type: Annotated[str, TaskValue(task.target_type, "the target's LIBERO object type")]
    to_type: Annotated[
        str,
        TaskChoice(
            task.other_instances, "same category, absent from the scene, size ratio 0.5-1.25 (see shifts/_objects.py)"
        ),
    ]


S06 = ShiftSpec(
    id="S06",
    name="object instance",
    category="Environment",
    summary=(
        "target replaced by another instance of its category; instruction names the new instance only "
        "where the old wording would be false"
    ),
    post_condition=(
        "the target's simulated body is the new type (LIBERO object type and measured size, +-5 mm), "
        "the init state fits the model (1 + nq + nv columns), the new instance rests after settling "
        "(speed < 2 cm/s, turned < 25 deg from its start), interpenetrates nothing (> 3 mm)"
    ),
    Params=InstanceParams,
    resources=("instance:target",),
    entry_point="liberopro.shifts.s06_object_instance:ObjectInstance",
)


# ------------------------------------------------------------------------------ S07
class ClutterParams(ShiftParams):
    """``objects``: LIBERO object types (2-4); ``path_clearance_m``: least distance between an
    object's footprint and the task path."""

    objects: Annotated[
        list[str],
        Field(min_length=1, max_length=6),
        TaskSubset(
            task.clutter_pool, Integers(2, 4), "2-4 types from shifts/_objects.CLUTTER_TYPES absent from the scene"
        ),
    ]
    path_clearance_m: float = Field(default=0.06, ge=0.0, le=0.3)


S07 = ShiftSpec(
    id="S07",
    name="clutter",
    category="Environment",
    summary="2-4 unrelated objects in free table space, clear of the task path",
    post_condition=(
        "every clutter object stands on the table/floor (+-3 mm) inside the workspace box and reach, "
        ">= path clearance from the task path; after re-settling nothing touches it and no object "
        "moved (> 3 mm)"
    ),
    Params=ClutterParams,
    resources=("space:free",),
    entry_point="liberopro.shifts.s07_clutter:Clutter",
)


# ------------------------------------------------------------------------------ S08 / D06
_LOOKALIKE = TaskChoice(
    task.lookalikes, "same category, another type (shifts/_objects.py), absent from the scene where possible"
)
_TARGET_TYPE = TaskValue(task.target_type, "the target's LIBERO object type")


class LookalikeParams(ShiftParams):
    """``lookalike``/``target_type``: LIBERO object types; ``gap_m``: edge-to-edge distance
    from the target's stack; ``direction_deg``: preferred world direction; ``yaw_deg``: turn of
    the look-alike about z from its natural pose."""

    lookalike: Annotated[str, _LOOKALIKE]
    target_type: Annotated[str, _TARGET_TYPE]
    gap_m: Annotated[float, Field(ge=0.0, le=0.3), Uniform(0.05, 0.15)]
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-45, 45, 1)]


S08 = ShiftSpec(
    id="S08",
    name="distractor",
    category="Environment",
    summary=(
        "a look-alike of the target (same category, other attribute) 5-15 cm from it; the instruction stays unambiguous"
    ),
    post_condition=(
        "look-alike of the target's category stands on the target's support (+-3 mm) at the stated "
        "edge-to-edge gap (+-5 mm, from its simulated pose, within 5-15 cm), wholly in the "
        "third-person view; no catalogue phrase of the delivered "
        "instruction fits it; after re-settling nothing touches it and no object moved (> 3 mm)"
    ),
    Params=LookalikeParams,
    resources=("space:near-target",),
    entry_point="liberopro.shifts.s08_distractor:Distractor",
)


class RuntimeLookalikeParams(RuntimeParams):
    """As :class:`LookalikeParams`, plus the trigger."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    lookalike: Annotated[str, _LOOKALIKE]
    target_type: Annotated[str, _TARGET_TYPE]
    gap_m: Annotated[float, Field(ge=0.0, le=0.3), Uniform(0.05, 0.15)]
    direction_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]
    yaw_deg: Annotated[float, Field(ge=-180.0, le=180.0), Uniform(-45, 45, 1)]


D06 = ShiftSpec(
    id="D06",
    name="distractor appears",
    category="Environment",
    summary="a look-alike appears near the target (not applicable where no free space exists)",
    post_condition=(
        "at the firing step the look-alike stands on the target's support (+-3 mm) at the stated "
        "edge-to-edge gap (+-5 mm, 5-15 cm), wholly in the third-person view, >= 2 cm from the robot, "
        "touching nothing; the instruction fits the target only"
    ),
    Params=RuntimeLookalikeParams,
    resources=("space:near-target",),
    entry_point="liberopro.shifts.d06_distractor_appears:DistractorAppears",
)


# ------------------------------------------------------------------------------ S09 / D09
class OcclusionParams(ShiftParams):
    """``fraction`` of the target's third-person pixels to hide; ``depth_ratio``: where the board
    stands between the camera and the target; ``side_deg``: from which side it slides in."""

    fraction: Annotated[float, Field(ge=0.05, le=0.95), Uniform(0.2, 0.5, 3)]
    depth_ratio: Annotated[float, Field(ge=0.1, le=0.8), Uniform(0.2, 0.35, 3)]
    side_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]


S09 = ShiftSpec(
    id="S09",
    name="occlusion",
    category="Environment",
    summary="a static occluder hides 20-50% of the target in the third-person view, not in the robot's path",
    post_condition=(
        "hidden fraction of the target's pixels (segmentation renders, agentview) within 0.05 of the "
        "stated one and in 0.2-0.5; occluder > 0.9 m from the robot base, without collisions"
    ),
    Params=OcclusionParams,
    resources=("view:occluder",),
    entry_point="liberopro.shifts.s09_occlusion:Occlusion",
)


class RuntimeOcclusionParams(RuntimeParams):
    """As :class:`OcclusionParams`, plus the trigger."""

    fallback: ClassVar[FallbackRule] = phase_fallback("grasp")
    trigger: Literal["grasp"] = "grasp"
    fraction: Annotated[float, Field(ge=0.05, le=0.95), Uniform(0.2, 0.5, 3)]
    depth_ratio: Annotated[float, Field(ge=0.1, le=0.8), Uniform(0.2, 0.35, 3)]
    side_deg: Annotated[float, Field(ge=0.0, lt=360.0), Direction(1)]


D09 = ShiftSpec(
    id="D09",
    name="occluder appears",
    category="Environment",
    summary="an occluder enters the third-person line of sight",
    post_condition=(
        "at the firing step the board hides the stated fraction (+-0.05, within 0.2-0.5) of the "
        "target's pixels then, measured with the robot out of the picture (segmentation renders, "
        "agentview: where the arm stands does not matter); > 0.9 m from the robot base, without collisions"
    ),
    Params=RuntimeOcclusionParams,
    resources=("view:occluder",),
    entry_point="liberopro.shifts.d09_occluder_appears:OccluderAppears",
)


# ------------------------------------------------------------------------------ S10, S11, S13
class ObjectAppearanceParams(ShiftParams):
    """``look``: the texture preference order and colour given to the target."""

    look: Annotated[Look, LookDraw(sat=(0.45, 0.85), val=(0.55, 1.0))]


S10 = ShiftSpec(
    id="S10",
    name="object appearance",
    category="Environment",
    summary="target colour / texture changed",
    post_condition=(
        f"in a segmented third-person render ({MEASURE_PX} px) the pixels of the target (and its "
        f"look-alikes) change by >= {MIN_TARGET_CHANGE:.0f} grey levels on average, >= "
        f"{MIN_REGION_CHANGED:.0%} of them by > {PIXEL_CHANGED:.0f}; <= {MAX_OTHERS_CHANGED:.0%} of the "
        f"other pixels change"
    ),
    Params=ObjectAppearanceParams,
    resources=("appearance:target",),
    entry_point="liberopro.shifts.s10_object_appearance:ObjectAppearance",
)


class SupportAppearanceParams(ShiftParams):
    """``look``: the texture preference order and colour given to the support surface."""

    look: Annotated[Look, _SURFACE_LOOK]


S11 = ShiftSpec(
    id="S11",
    name="support appearance",
    category="Environment",
    summary="table texture / material changed",
    post_condition=(
        f"in a segmented third-person render ({MEASURE_PX} px) the support's pixels (>= "
        f"{MIN_SUPPORT_SHARE:.0%} of the view) change by >= {MIN_SUPPORT_CHANGE:.0f} grey levels on "
        f"average, >= {MIN_REGION_CHANGED:.0%} of them by > {PIXEL_CHANGED:.0f}; <= "
        f"{MAX_OTHERS_CHANGED:.0%} of the other pixels change"
    ),
    Params=SupportAppearanceParams,
    resources=("appearance:table",),
    entry_point="liberopro.shifts.s11_support_appearance:SupportAppearance",
)


class SceneAppearanceParams(ShiftParams):
    """``floor``, ``walls``: the looks of the two surfaces."""

    floor: Annotated[Look, _SURFACE_LOOK]
    walls: Annotated[Look, _SURFACE_LOOK]


S13 = ShiftSpec(
    id="S13",
    name="scene appearance",
    category="Environment",
    summary="floor and wall textures changed",
    post_condition=(
        f"in a segmented third-person render ({MEASURE_PX} px) the floor and wall pixels (>= "
        f"{MIN_SCENE_SHARE:.0%} of the view) change by >= {MIN_SCENE_CHANGE:.0f} grey levels on "
        f"average, >= {MIN_REGION_CHANGED:.0%} of them by > {PIXEL_CHANGED:.0f}; <= "
        f"{MAX_OTHERS_CHANGED:.0%} of the other pixels change (reflections)"
    ),
    Params=SceneAppearanceParams,
    resources=("appearance:scene",),
    entry_point="liberopro.shifts.s13_scene_appearance:SceneAppearance",
)


# ------------------------------------------------------------------------------ S12
class LightingParams(ShiftParams):
    """``intensity_scale`` multiplies every light's diffuse, specular and ambient terms and the
    headlight; ``colour`` multiplies (r, g, b) of the diffuse terms; ``azimuth_deg``/``tilt_deg``
    turn the light directions about world z and tilt them away from vertical (fields in draw
    order)."""

    intensity_scale: Annotated[float, Field(ge=0.1, le=3.0), Coin(Uniform(0.3, 0.8, 3), Uniform(1.25, 1.8, 3))]
    colour: Annotated[tuple[float, float, float], Repeat(3, Uniform(0.8, 1.2, 3), "each of r, g, b")]
    azimuth_deg: Annotated[float, Field(ge=-180, le=180), Uniform(-60, 60, 1)]
    tilt_deg: Annotated[float, Field(ge=-45, le=45), Uniform(-20, 20, 1)]


S12 = ShiftSpec(
    id="S12",
    name="lighting",
    category="Environment",
    summary="light intensity x0.3-1.8, direction and colour changed",
    post_condition="light values in the model are the stated ones and the third-person image changes visibly",
    Params=LightingParams,
    resources=("lights",),
    entry_point="liberopro.shifts.s12_lighting:Lighting",
    differs_from_definition={
        "intensity_scale": "the definition's x0.3-1.8 without the near-unit band (0.8, 1.25): dimmer or brighter, "
        "never a scale too close to 1 to be a shift"
    },
)


# ------------------------------------------------------------------------------ D07
class CameraMotionParams(RuntimeParams):
    """As S15's :class:`~liberopro.catalog.observation.CameraParams`, plus the trigger."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach", "transport")
    trigger: Annotated[Literal["approach", "transport"], Coin("approach", "transport")] = "approach"
    shift_m: Annotated[float, Field(ge=0, le=0.3), Uniform(0.03, 0.08)]
    shift_azimuth_deg: Annotated[float, Uniform(-180, 180, 1)]
    shift_elevation_deg: Annotated[float, Field(ge=-90, le=90), Uniform(-30, 30, 1)]
    turn_deg: Annotated[float, Field(ge=0, le=45), Uniform(5, 10, 2)]
    axis_azimuth_deg: Annotated[float, Uniform(-180, 180, 1)]
    axis_elevation_deg: Annotated[float, Field(ge=-90, le=90), Uniform(-60, 60, 1)]


D07 = ShiftSpec(
    id="D07",
    name="camera motion",
    category="Environment",
    summary="third-person camera bumped 3-8 cm, 5-10 deg; stays",
    post_condition=(
        "at the bump, the camera's world pose moved by the stated distance and angle (measured from "
        "cam_xpos/cam_xmat); the target keeps >= 20% of its pixels in view"
    ),
    Params=CameraMotionParams,
    resources=("camera:agentview",),
    entry_point="liberopro.shifts.d07_camera_motion:CameraMotion",
)


# ------------------------------------------------------------------------------ D08
#: D08: the third-person view must lose at least this fraction of its brightness at the trigger.
MIN_DARKENING = 0.25


class LightingChangeParams(RuntimeParams):
    """``mode``: ``dim`` (lights x ``scale`` for the rest of the episode) or ``flicker`` (x
    ``scale`` and back every ``period_steps`` for ``duration_steps``)."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    mode: Annotated[Literal["dim", "flicker"], Coin("dim", "flicker")]
    scale: Annotated[float, Fixed(0.3)] = Field(default=0.3, ge=0.05, le=0.9)
    duration_steps: Annotated[int, Integers(10, 30)] = Field(default=20, ge=1, le=500)
    period_steps: Annotated[int, Integers(2, 6)] = Field(default=4, ge=2, le=20)


D08 = ShiftSpec(
    id="D08",
    name="lighting change",
    category="Environment",
    summary="lights dim to x0.3, or flicker for a window",
    post_condition=(
        f"at the trigger the light fields are x scale and the third-person view loses >= "
        f"{MIN_DARKENING:.0%} of its brightness; flicker: dim delivered frames darker than full ones"
    ),
    Params=LightingChangeParams,
    resources=("lights",),
    entry_point="liberopro.shifts.d08_lighting_change:LightingChange",
)

SPECS: tuple[ShiftSpec, ...] = (S06, S07, S08, S09, S10, S11, S12, S13, D06, D07, D08, D09)
