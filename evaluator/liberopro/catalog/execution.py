"""Execution shifts: control timing and action execution (S19-S21, D14-D17).

Actions are LIBERO's 7 numbers in [-1, 1] (OSC_POSE: 6 arm deltas, then the gripper); one
control step is 50 ms (20 Hz). Durations are policy-loop steps.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from liberopro.catalog.sampling import Coin, Integers, Uniform
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

#: LIBERO's action limits, and the full range of one action number: action-noise sigmas are
#: fractions of it (``docs/shifts.md``, S20).
ACTION_LOW, ACTION_HIGH = -1.0, 1.0
ACTION_RANGE = ACTION_HIGH - ACTION_LOW

_WINDOW = Integers(10, 30)


# ------------------------------------------------------------------------------ S19 / D14
class LatencyParams(ShiftParams):
    """``delay_steps``: how many control steps (50 ms each) every action executes late."""

    delay_steps: Annotated[int, Field(ge=1, le=20), Integers(1, 3)]


S19 = ShiftSpec(
    id="S19",
    name="action latency",
    category="Execution",
    summary="every action executes 1-3 control steps late",
    post_condition=(
        "executed actions: the first delay_steps are holds, every later one equals the command "
        "given delay_steps commands before"
    ),
    Params=LatencyParams,
    resources=("actions:timing",),
    entry_point="liberopro.shifts.s19_action_latency:ActionLatency",
    notes={"control_period_s": 0.05},
)


class DelayBurstParams(RuntimeParams):
    """Actions ``delay_steps`` control steps late for ``duration_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    delay_steps: Annotated[int, Field(ge=1, le=20), Integers(2, 5)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D14 = ShiftSpec(
    id="D14",
    name="action delay burst",
    category="Execution",
    summary="actions execute 2-5 steps late for a window",
    post_condition=(
        "executed actions in the window: delay_steps holds, then each command delay_steps "
        "commands late; queued commands dropped at release"
    ),
    Params=DelayBurstParams,
    resources=("actions:timing",),
    entry_point="liberopro.shifts.d14_action_delay_burst:ActionDelayBurst",
)


# ------------------------------------------------------------------------------ S20 / D16
class ActionNoiseParams(ShiftParams):
    """``sigma_frac``: noise standard deviation as a fraction of the action range (2)."""

    sigma_frac: Annotated[float, Field(gt=0, le=0.5), Uniform(0.05, 0.2)]

    @property
    def sigma(self) -> float:
        """Standard deviation in action units."""
        return self.sigma_frac * ACTION_RANGE


S20 = ShiftSpec(
    id="S20",
    name="action noise",
    category="Execution",
    summary="Gaussian noise on executed arm actions (sigma 0.05-0.2 of the action range)",
    post_condition=(
        "sigma of executed minus commanded arm numbers (censored-normal MLE) matches the stated "
        "sigma_frac x 2; gripper untouched"
    ),
    Params=ActionNoiseParams,
    resources=("actions:noise",),
    entry_point="liberopro.shifts.s20_action_noise:ActionNoise",
    notes={"sigma_action_units": "sigma_frac x 2 (range of [-1, 1])", "dims": "6 arm numbers; gripper untouched"},
)


class ActionNoiseBurstParams(RuntimeParams):
    """As :class:`ActionNoiseParams` for ``duration_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("transport")
    trigger: Literal["transport"] = "transport"
    sigma_frac: Annotated[float, Field(gt=0, le=0.5), Uniform(0.05, 0.2)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]

    @property
    def sigma(self) -> float:
        """Standard deviation in action units."""
        return self.sigma_frac * ACTION_RANGE


D16 = ShiftSpec(
    id="D16",
    name="action noise burst",
    category="Execution",
    summary="noise on executed actions for a window",
    post_condition=(
        "sigma of executed minus commanded arm numbers in the window matches the stated one; gripper untouched"
    ),
    Params=ActionNoiseBurstParams,
    resources=("actions:noise",),
    entry_point="liberopro.shifts.d16_action_noise_burst:ActionNoiseBurst",
    notes={"sigma_action_units": "sigma_frac x 2"},
)


# ------------------------------------------------------------------------------ S21
class GainParams(ShiftParams):
    """``gain``: factor on the six arm numbers of every executed action."""

    gain: Annotated[float, Field(gt=0, le=3), Coin(Uniform(0.5, 0.8, 3), Uniform(1.2, 1.5, 3))]


S21 = ShiftSpec(
    id="S21",
    name="actuation gain",
    category="Execution",
    summary="executed arm delta scaled x0.5-0.8 or x1.2-1.5",
    post_condition="executed arm numbers = clip(gain x commanded, -1, 1); gripper untouched; saturation recorded",
    Params=GainParams,
    resources=("actions:gain",),
    entry_point="liberopro.shifts.s21_actuation_gain:ActuationGain",
    notes={"dims": "6 arm numbers; gripper untouched", "clipping": "to [-1, 1], recorded"},
)


# ------------------------------------------------------------------------------ D15, D17
class DropParams(RuntimeParams):
    """``drop_fraction`` of the commands in ``duration_steps`` policy steps replaced by a hold."""

    fallback: ClassVar[FallbackRule] = phase_fallback("grasp")
    trigger: Literal["grasp"] = "grasp"
    drop_fraction: Annotated[float, Field(gt=0, le=1), Uniform(0.3, 0.7, 3)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D15 = ShiftSpec(
    id="D15",
    name="action drop",
    category="Execution",
    summary="30-70% of commands replaced by hold for a window",
    post_condition="dropped steps executed a hold, others the command; realised drop fraction = stated (rounded)",
    Params=DropParams,
    resources=("actions:drop",),
    entry_point="liberopro.shifts.d15_action_drop:ActionDrop",
)


class ControlRateParams(RuntimeParams):
    """Each action held for ``hold_periods`` control periods for ``duration_steps`` policy steps."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    hold_periods: Annotated[int, Field(ge=2, le=10), Integers(2, 3)]
    duration_steps: Annotated[int, Field(ge=1, le=500), _WINDOW]


D17 = ShiftSpec(
    id="D17",
    name="control-rate change",
    category="Execution",
    summary="each action held for 2-3 control periods for a window",
    post_condition="executed actions in the window are piecewise constant in blocks of hold_periods steps",
    Params=ControlRateParams,
    resources=("actions:rate",),
    entry_point="liberopro.shifts.d17_control_rate:ControlRateChange",
)

SPECS: tuple[ShiftSpec, ...] = (S19, S20, S21, D14, D15, D16, D17)
