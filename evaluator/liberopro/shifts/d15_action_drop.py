"""D15 action drop (Execution, runtime, trigger grasp): for a window of ``duration_steps`` steps, a
fraction ``drop_fraction`` of the policy's commands are lost and replaced by a hold (zero arm delta,
gripper command of the last executed action) (``docs/definition.md``, "Runtime shifts": 30-70% of
commands for a window).

Realisation: when the shift fires, exactly ``round(drop_fraction x duration_steps)`` of the
window's steps are drawn without replacement from the episode's generator (``ctx.rng``) and
recorded; at those steps the command is replaced by a hold, at the others it executes unchanged.

Defaults: trigger ``grasp``, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``drop_fraction`` uniform in [0.3, 0.7],
``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured on the executed actions over the window (window rule:
:mod:`liberopro.shifts._signal`): every dropped step executed a hold, every other step the
command itself; over a complete window the realised drop fraction is within ``0.5 /
duration_steps`` of ``drop_fraction`` (rounding). Over a truncated window the realised fraction
is recorded, not checked.
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.execution import DropParams
from liberopro.shifts._signal import ARM, GRIPPER, WindowShift, hold_action
from liberopro.shifts.base import EpisodeContext, ShiftInvalid


class ActionDrop(WindowShift[DropParams]):
    spec = SPECS["D15"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._drop: set[int] = set()
        self._log: list[tuple[int, bool, bool]] = []  # step, dropped, executed as intended

    def on_fire(self, ctx: EpisodeContext, step: int) -> None:
        d = self.params.duration_steps
        n = int(round(self.params.drop_fraction * d))
        offsets = sorted(int(i) for i in ctx.rng.choice(d, size=n, replace=False))
        self._drop = {step + i for i in offsets}
        self.applied["drop_steps"] = sorted(self._drop)

    def execute(self, action, step, ctx):
        if not self.active(step):
            return action
        self.mark(step)
        dropped = step in self._drop
        out = hold_action(ctx) if dropped else action
        if dropped:
            ok = not np.any(out[ARM]) and out[GRIPPER] == ctx.last_action[GRIPPER]
        else:
            ok = np.array_equal(out, action)
        self._log.append((step, dropped, bool(ok)))
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        n = len(self._log)
        dropped = sum(d for _, d, _ in self._log)
        wrong = [s for s, _, ok in self._log if not ok]
        complete = n == self.params.duration_steps
        realised = dropped / n
        post = {
            "executed_steps": n,
            "dropped_steps": dropped,
            "realised_fraction": round(realised, 4),
            "stated_fraction": self.params.drop_fraction,
            "complete_window": complete,
            "wrong_steps": wrong,
        }
        if wrong:
            raise ShiftInvalid(self.id, f"steps {wrong[:5]} did not execute as planned")
        if complete and abs(realised - self.params.drop_fraction) > 0.5 / n + 1e-9:
            raise ShiftInvalid(self.id, f"realised drop fraction {realised:.3f}, stated {self.params.drop_fraction}")
        return post
