"""Observation shifts: the formation, quality, availability or synchronisation of the policy's
inputs (S14-S16, D10-D13).

Units: grey levels on the 0-255 scale, metres, degrees, pixels, policy-loop steps.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from liberopro.catalog.sampling import Choice, Coin, Integers, Uniform, When
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

_WINDOW = Integers(10, 30)


# ------------------------------------------------------------------------------ S14 / D13
class SensorNoiseParams(ShiftParams):
    """``sigma``: standard deviation of the pixel noise, grey levels on the 0-255 scale."""

    sigma: Annotated[float, Field(gt=0, le=64), Uniform(5.0, 25.0, 2)]


S14 = ShiftSpec(
    id="S14",
    name="sensor noise",
    category="Observation",
    summary="pixel noise (Gaussian sigma 5-25 of 255) on both cameras",
    post_condition=(
        "noise sigma measured on every delivered camera image against the clean frame "
        "(values >= 3 sigma from the clipping limits), median over steps within 5% / 0.5 grey levels"
    ),
    Params=SensorNoiseParams,
    resources=("pixels:noise",),
    entry_point="liberopro.shifts.s14_sensor_noise:SensorNoise",
    notes={"unit": "grey levels (0-255)", "cameras": "every camera the policy receives"},
)


class NoiseBurstParams(RuntimeParams):
    """``sigma`` (grey levels, 0-255) of the pixel noise for ``duration_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    sigma: Annotated[float, Field(gt=0, le=64), Uniform(10.0, 25.0, 2)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D13 = ShiftSpec(
    id="D13",
    name="sensor noise burst",
    category="Observation",
    summary="pixel noise for a window",
    post_condition="noise sigma measured on every delivered camera image in the window matches the stated sigma",
    Params=NoiseBurstParams,
    resources=("pixels:noise",),
    entry_point="liberopro.shifts.d13_sensor_noise_burst:SensorNoiseBurst",
)


# ------------------------------------------------------------------------------ S15
class CameraParams(ShiftParams):
    """``shift_m`` along the unit vector given by ``shift_azimuth_deg``/``shift_elevation_deg``
    (camera parent frame, the world for agentview); ``turn_deg`` about the axis given by
    ``axis_azimuth_deg``/``axis_elevation_deg`` in the camera's own frame."""

    shift_m: Annotated[float, Field(ge=0, le=0.3), Uniform(0.03, 0.10)]
    shift_azimuth_deg: Annotated[float, Uniform(-180, 180, 1)]
    shift_elevation_deg: Annotated[float, Field(ge=-90, le=90), Uniform(-30, 30, 1)]
    turn_deg: Annotated[float, Field(ge=0, le=45), Uniform(5, 15, 2)]
    axis_azimuth_deg: Annotated[float, Uniform(-180, 180, 1)]
    axis_elevation_deg: Annotated[float, Field(ge=-90, le=90), Uniform(-60, 60, 1)]


S15 = ShiftSpec(
    id="S15",
    name="camera calibration",
    category="Observation",
    summary="third-person camera moved 3-10 cm and turned 5-15 deg",
    post_condition=(
        "camera world pose moved by the stated distance and angle (measured from "
        "cam_xpos/cam_xmat); the target keeps >= 20% of its pixels in view"
    ),
    Params=CameraParams,
    resources=("camera:agentview",),
    entry_point="liberopro.shifts.s15_camera_calibration:CameraCalibration",
)


# ------------------------------------------------------------------------------ S16
Mode = Literal["jpeg", "downsample", "blur"]
MODES: tuple[Mode, ...] = ("jpeg", "downsample", "blur")


class DegradationParams(ShiftParams):
    """``mode`` and its one magnitude; the other two magnitudes stay None."""

    mode: Annotated[Mode, Choice(MODES)]
    jpeg_quality: Annotated[int | None, When("mode", "jpeg", Integers(10, 30))] = Field(default=None, ge=1, le=100)
    downsample_factor: Annotated[int | None, When("mode", "downsample", Integers(2, 4))] = Field(
        default=None, ge=2, le=16
    )
    blur_sigma_px: Annotated[float | None, When("mode", "blur", Uniform(1.5, 3.0, 3))] = Field(
        default=None, gt=0, le=20
    )

    @model_validator(mode="after")
    def _one_magnitude(self) -> DegradationParams:
        given = {"jpeg": self.jpeg_quality, "downsample": self.downsample_factor, "blur": self.blur_sigma_px}
        if given[self.mode] is None:
            raise ValueError(f"mode {self.mode!r} needs its magnitude")
        extra = [m for m, v in given.items() if m != self.mode and v is not None]
        if extra:
            raise ValueError(f"mode {self.mode!r} takes no magnitude for {extra}")
        return self


S16 = ShiftSpec(
    id="S16",
    name="image degradation",
    category="Observation",
    summary="JPEG quality 10-30, or resolution loss (down x2-4, up again), or blur",
    post_condition=(
        "measured on every delivered camera image against the clean frame: jpeg: a JPEG fixed "
        "point at the stated quality that differs from the clean frame; downsample / blur: "
        "high-frequency energy ratio <= 0.5 / 0.9 (median over steps)"
    ),
    Params=DegradationParams,
    resources=("pixels:degradation",),
    entry_point="liberopro.shifts.s16_image_degradation:ImageDegradation",
    notes={"scaling": "blur_sigma_px is for 256 px renders, scaled with the render size"},
)


# ------------------------------------------------------------------------------ D10, D11, D12
class FreezeParams(RuntimeParams):
    """``duration_steps``: policy steps the frame captured at the trigger is delivered."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D10 = ShiftSpec(
    id="D10",
    name="observation freeze",
    category="Observation",
    summary="the policy gets the same stale frame for 10-30 steps",
    post_condition="every frame delivered inside the window equals the frame captured at the trigger",
    Params=FreezeParams,
    resources=("stream:timing",),
    entry_point="liberopro.shifts.d10_observation_freeze:ObservationFreeze",
)


class DropoutParams(RuntimeParams):
    """``camera`` whose images are blank (all zeros) for ``duration_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("grasp")
    trigger: Literal["grasp"] = "grasp"
    camera: Annotated[Literal["agentview", "wrist"], Coin("agentview", "wrist")]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D11 = ShiftSpec(
    id="D11",
    name="camera dropout",
    category="Observation",
    summary="one camera stream is blank for 10-30 steps",
    post_condition="every delivered image of the dropped camera in the window is all zeros; other cameras untouched",
    Params=DropoutParams,
    resources=("stream:dropout",),
    entry_point="liberopro.shifts.d11_camera_dropout:CameraDropout",
)


class ObsLatencyParams(RuntimeParams):
    """Observations ``delay_steps`` policy steps old for ``duration_steps`` steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    delay_steps: Annotated[int, Field(ge=1, le=50), Integers(3, 8)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D12 = ShiftSpec(
    id="D12",
    name="observation latency",
    category="Observation",
    summary="observations arrive 3-8 steps late for a window",
    post_condition="every frame delivered in the window is the frame captured delay_steps steps earlier",
    Params=ObsLatencyParams,
    resources=("stream:timing",),
    entry_point="liberopro.shifts.d12_observation_latency:ObservationLatency",
)

SPECS: tuple[ShiftSpec, ...] = (S14, S15, S16, D10, D11, D12, D13)
