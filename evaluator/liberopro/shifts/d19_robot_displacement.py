"""D19 robot displacement (Robot, runtime, trigger approach or transport): the end effector is
pushed 3-8 cm by a bounded control intervention (``docs/definition.md``, "Runtime shifts";
"Constraints on a shifted task": "grasp loss and robot displacement are injected outcome states or
bounded control interventions, not simulated impacts"). During the push the evaluator, not the
policy, commands the arm (at most ``max_steps`` steps of at most full-scale delta actions, gripper
command unchanged); then control returns to the policy, which is asked for a fresh chunk."""

from __future__ import annotations

import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.robot import DisplacementParams
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid

#: OSC_POSE position scale: an action of 1.0 asks for 0.05 m per step (robosuite osc_pose.json).
OSC_POS_SCALE_M = 0.05


class RobotDisplacement(RuntimeShift[DisplacementParams]):
    spec = SPECS["D19"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._start: np.ndarray | None = None
        self._done = False
        self._steps = 0

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self._start = ctx.scene.eef_pos()
        a = math.radians(self.params.direction_deg)
        self._dir = np.array([math.cos(a), math.sin(a)])
        self.applied = {"start_eef_m": np.round(self._start, 4).tolist()}

    def override(self, ctx: EpisodeContext, step: int) -> np.ndarray | None:
        if self._start is None or self._done:
            return None
        moved = float(np.dot(ctx.scene.eef_pos()[:2] - self._start[:2], self._dir))
        remaining = self.params.distance_m - moved
        if remaining <= 0.002 or self._steps >= self.params.max_steps:
            self._finish(ctx, moved)
            return None
        self._steps += 1
        mag = min(1.0, remaining / OSC_POS_SCALE_M)
        action = np.zeros(7)
        action[:2] = self._dir * mag
        action[6] = ctx.last_action[6]
        return action

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        if self._start is not None and not self._done:  # the episode ended during the push
            self._finish(ctx, float(np.dot(ctx.scene.eef_pos()[:2] - self._start[:2], self._dir)))

    def _finish(self, ctx: EpisodeContext, moved: float) -> None:
        self._done = True
        self.applied.update(
            {
                "push_steps": self._steps,
                "end_eef_m": np.round(ctx.scene.eef_pos(), 4).tolist(),
                "post_condition": {"displaced_m": round(moved, 4)},
            }
        )
        if moved < 0.8 * self.params.distance_m:
            raise ShiftInvalid(
                self.id,
                f"end effector moved {moved:.3f} m of the stated "
                f"{self.params.distance_m:.3f} m in {self._steps} steps (blocked)",
            )
