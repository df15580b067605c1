"""D13 sensor noise burst (Observation, runtime, trigger transport): Gaussian pixel noise on every
camera the policy receives, for a window of ``duration_steps`` steps (``docs/definition.md``,
"Runtime shifts": pixel noise for a window). The noise is S14's
(:mod:`liberopro.shifts.s14_sensor_noise`): ``sigma`` grey levels (0-255), independent per pixel,
channel and step, from ``ctx.frame_rng(step, camera)``, at the render resolution, on the images
read (the policy's requests).

Defaults: trigger ``transport`` (target lifted, or the articulation moving), the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``sigma`` uniform in [10, 25] grey levels (the
upper part of S14's range: a burst is a disturbance, not a steady sensor property),
``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured over the window (window rule: :mod:`liberopro.shifts._signal`): the
noise sigma of every camera measured on the delivered images against the clean ones (median over
the window's images read) within max(5%, 0.5 grey levels) of ``sigma``; frames outside the window are
delivered untouched.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.observation import NoiseBurstParams
from liberopro.shifts._signal import NoiseLevel, WindowShift
from liberopro.shifts.base import EpisodeContext


class SensorNoiseBurst(WindowShift[NoiseBurstParams]):
    spec = SPECS["D13"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._level = NoiseLevel(self.params.sigma)

    def observe(self, frame, step, ctx):
        self.tick(step)
        if not self.active(step):
            return frame
        self.mark(step)
        return self._level.apply(frame, step, ctx)

    def measure(self, ctx: EpisodeContext) -> dict:
        return self._level.check(self.id)
