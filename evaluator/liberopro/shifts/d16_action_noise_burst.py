"""D16 action noise burst (Execution, runtime, trigger transport): Gaussian noise on the executed
arm actions for a window of ``duration_steps`` steps (``docs/definition.md``, "Runtime shifts":
noise on executed actions for a window). The noise is S20's
(:mod:`liberopro.shifts.s20_action_noise`): standard deviation ``sigma_frac x 2`` action units (2 =
the range of [-1, 1]) on each of the six arm numbers, from ``ctx.rng``, clipped to [-1, 1]; the
gripper is untouched.

Defaults: trigger ``transport``, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``sigma_frac`` uniform in [0.05, 0.2] (S20's
range), ``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured on executed minus commanded arm numbers over the window (window rule:
:mod:`liberopro.shifts._signal`): censored-normal maximum-likelihood sigma within five standard
errors + 5% of the stated one; gripper exactly as commanded.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.execution import ActionNoiseBurstParams
from liberopro.shifts._signal import WindowShift, add_action_noise
from liberopro.shifts.base import EpisodeContext
from liberopro.shifts.s20_action_noise import NoiseCheck


class ActionNoiseBurst(WindowShift[ActionNoiseBurstParams]):
    spec = SPECS["D16"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._check = NoiseCheck(self.params.sigma)

    def execute(self, action, step, ctx):
        if not self.active(step):
            return action
        self.mark(step)
        out = add_action_noise(action, self.params.sigma, ctx.rng)
        self._check.add(action, out)
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        return self._check.check(self.id)
