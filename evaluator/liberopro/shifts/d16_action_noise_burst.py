"""D16 action noise burst (Execution, runtime, trigger transport): Gaussian noise on the executed
arm actions for a window of ``duration_steps`` steps (``benchmark.md``, runtime table: noise on
executed actions for a window). The noise is S20's (:mod:`liberopro.shifts.s20_action_noise`):
standard deviation ``sigma_frac x 2`` action units (2 = the range of [-1, 1]) on each of the six
arm numbers, from ``ctx.rng``, clipped to [-1, 1]; the gripper is untouched.

Defaults: trigger ``transport``, fallback step 120, ``sigma_frac`` uniform in [0.05, 0.2] (S20's
range), ``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured on executed minus commanded arm numbers over the window (window rule:
:mod:`liberopro.shifts._signal`): censored-normal maximum-likelihood sigma within five standard
errors + 5% of the stated one; gripper exactly as commanded.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts._signal import ACTION_RANGE, WindowShift, add_action_noise
from liberopro.shifts.base import EpisodeContext, RuntimeParams, uniform
from liberopro.shifts.s20_action_noise import NoiseCheck


class ActionNoiseBurstParams(RuntimeParams):
    trigger: Literal["transport"] = "transport"
    fallback_step: int = Field(default=120, ge=0)
    sigma_frac: float = Field(gt=0, le=0.5)
    duration_steps: int = Field(ge=1, le=500)

    @property
    def sigma(self) -> float:
        return self.sigma_frac * ACTION_RANGE


@register
class ActionNoiseBurst(WindowShift):
    id = "D16"
    name = "action noise burst"
    category = "Execution"
    triggers = ("transport",)
    summary = "noise on executed actions for a window"
    post_condition = "sigma of executed minus commanded arm numbers in the window matches the stated one; gripper untouched"
    Params = ActionNoiseBurstParams

    def __init__(self, params) -> None:
        super().__init__(params)
        self._check = NoiseCheck(self.params.sigma)

    @classmethod
    def sample_params(cls, rng, ref, sem):
        return ActionNoiseBurstParams(sigma_frac=uniform(rng, 0.05, 0.2), duration_steps=int(rng.integers(10, 31)))

    @classmethod
    def default_params(cls):
        return {"trigger": "transport", "fallback_step": 120, "sigma_frac": [0.05, 0.2],
                "sigma_action_units": "sigma_frac x 2", "duration_steps": [10, 30]}

    def execute(self, action, step, ctx):
        if not self.active(step):
            return action
        self.mark(step)
        out = add_action_noise(action, self.params.sigma, ctx.rng)
        self._check.add(action, out)
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        return self._check.check(self.id)
