"""D10 observation freeze (Observation, runtime, trigger approach): the policy keeps receiving the
same stale frame for 10-30 steps (``docs/definition.md``, "Runtime shifts"). The scene goes on; only
what the policy sees stops. The step index and instruction stay current."""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.observation import FreezeParams
from liberopro.shifts.base import EpisodeContext, RuntimeShift


class ObservationFreeze(RuntimeShift[FreezeParams]):
    spec = SPECS["D10"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._stale = None
        self._frozen_steps = 0

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self._window = (step, step + self.params.duration_steps)
        self.applied = {"window_steps": list(self._window)}

    def observe(self, frame, step, ctx):
        if self.fired_at is None or not (self._window[0] <= step < self._window[1]):
            return frame
        if self._stale is None:
            self._stale = frame.copy()
        self._frozen_steps += 1
        self.applied["frozen_steps"] = self._frozen_steps
        return self._stale.copy()
