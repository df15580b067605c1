"""D12 observation latency (Observation, runtime, trigger approach): for a window of
``duration_steps`` steps the policy receives the observation of ``delay_steps`` steps earlier
(``docs/definition.md``, "Runtime shifts": 3-8 steps late for a window). The whole observation is
late: both camera images and the proprioception, as from a lagging sensor pipeline. The step index
and instruction stay current. When the window closes, the current observation is delivered again
(the frames in between are skipped).

Realisation: until its window is over the shift keeps the last ``delay_steps + 1`` incoming
frames at every step (``observe`` is called at every step, whether or not the policy is asked; the
trigger phase can come at any step, so every frame is kept until then: with on-demand rendering
these are the renders a history shift costs); inside the window it delivers the frame of step
``t - delay_steps`` (or the oldest one kept, if the episode is younger than the delay). After the
window it keeps nothing (no frame is rendered for it).

Defaults: trigger ``approach``, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``delay_steps`` uniform in {3, ..., 8}, ``duration_steps`` uniform
in {10, ..., 30}.

Post-condition, measured over the window (window rule: :mod:`liberopro.shifts._signal`): every
delivered frame is the frame captured ``delay_steps`` steps before (``min(delay_steps, t)`` at
step ``t``), images and proprioception identical to it.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.observation import ObsLatencyParams
from liberopro.shifts._signal import WindowShift
from liberopro.shifts.base import EpisodeContext, ShiftInvalid


def frames_equal(a, b) -> bool:
    return (
        a.images.keys() == b.images.keys()
        and a.proprio.keys() == b.proprio.keys()
        and all(np.array_equal(a.images[k], b.images[k]) for k in a.images)
        and all(np.array_equal(a.proprio[k], b.proprio[k]) for k in a.proprio)
    )


class ObservationLatency(WindowShift[ObsLatencyParams]):
    spec = SPECS["D12"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._buffer: deque = deque(maxlen=self.params.delay_steps + 1)
        self._lags: Counter[int] = Counter()
        self._wrong: list[int] = []

    def observe(self, frame, step, ctx):
        self.tick(step)
        if self.window is not None and step >= self.window[1]:
            self._buffer.clear()
            return frame
        self._buffer.append((step, frame.copy()))
        if not self.active(step):
            return frame
        want = step - self.params.delay_steps
        src, old = next(((s, f) for s, f in self._buffer if s == want), self._buffer[0])
        out = old.copy()
        self.mark(step)
        lag = step - src
        self._lags[lag] += 1
        if lag != min(self.params.delay_steps, step) or not frames_equal(out, old):
            self._wrong.append(step)
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        post = {"delivered_lags": {str(k): v for k, v in sorted(self._lags.items())}, "wrong_steps": self._wrong[:20]}
        if self._wrong:
            raise ShiftInvalid(
                self.id, f"frames at steps {self._wrong[:5]} were not {self.params.delay_steps} steps old"
            )
        return post
