"""D10 observation freeze (Observation, runtime, trigger approach): the policy keeps receiving the
same stale frame for 10-30 steps (``benchmark.md``, runtime table). The scene goes on; only what
the policy sees stops. The step index and instruction stay current."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts.base import EpisodeContext, RuntimeParams, RuntimeShift


class FreezeParams(RuntimeParams):
    trigger: Literal["approach"] = "approach"
    fallback_step: int = Field(default=40, ge=0)
    duration_steps: int = Field(ge=1, le=500)


@register
class ObservationFreeze(RuntimeShift):
    id = "D10"
    name = "observation freeze"
    category = "Observation"
    triggers = ("approach",)
    summary = "the policy gets the same stale frame for 10-30 steps"
    post_condition = "every frame delivered inside the window equals the frame captured at the trigger"
    Params = FreezeParams

    def __init__(self, params) -> None:
        super().__init__(params)
        self._stale = None
        self._frozen_steps = 0

    @classmethod
    def sample_params(cls, rng, ref, sem):
        return FreezeParams(duration_steps=int(rng.integers(10, 31)))

    @classmethod
    def default_params(cls):
        return {"trigger": "approach", "fallback_step": 40, "duration_steps": [10, 30]}

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
