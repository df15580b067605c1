"""S14 sensor noise (Observation, static): Gaussian pixel noise on every camera the policy
receives (``docs/definition.md``, "Static shifts": sigma 5-25 of 255, both cameras).

Realisation: each delivered image gets zero-mean Gaussian noise of ``sigma`` grey levels (0-255
scale), drawn afresh at every step, independently per pixel and colour channel, from a generator
seeded from (the shift's episode seed, step, camera) (``ctx.frame_rng``: the noise of an image
does not depend on which other frames were read); values are rounded and clipped to
``[0, 255]``. Noise is added to the images the policy (or a shift keeping past frames) reads,
when it reads them: a frame between two replans is neither rendered nor noised. It is
applied at the render resolution, to BOTH cameras whenever the policy receives both (LIBERO-plus
noised one camera only on some code paths). A policy that asks for a smaller image receives the
noisy frame area-averaged by the evaluator's resize, which lowers the noise it sees.

Default magnitude: ``sigma`` uniform in [5, 25] grey levels.

Post-condition, measured on the delivered images against the clean frames of the same steps: the
noise level (RMS difference over the values whose clean level lies >= 3 sigma from 0 and 255,
rounding variance removed; :func:`liberopro.shifts._signal.estimate_noise_sigma`) of every
camera, median over the images noised (``measured_steps`` of them), within max(5%, 0.5 grey levels) of ``sigma``. The
record also gives, per camera, the level measured the same way on the image as the policy
receives it (``received_median_sigma``, at ``received_size``: after the evaluator's orientation
and resize, which area-averages and so lowers the noise; e.g. ``sigma`` 7.5 added at 256 px
reaches a policy asking for 224 px at about 4.7). ``sigma`` stays the level added at render
resolution: what the definition's 5-25 grey levels state.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.observation import SensorNoiseParams
from liberopro.shifts._signal import NoiseLevel
from liberopro.shifts.base import EpisodeContext, Shift


class SensorNoise(Shift[SensorNoiseParams]):
    spec = SPECS["S14"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._level = NoiseLevel(self.params.sigma)

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self._level = NoiseLevel(self.params.sigma)
        self.applied = {"sigma": self.params.sigma}

    def observe(self, frame, step, ctx):
        return self._level.apply(frame, step, ctx)

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        self.applied["cameras"] = sorted(set(self._level.values) | set(self._level.unmeasured))
        self.applied["post_condition"] = self._level.check(self.id)
