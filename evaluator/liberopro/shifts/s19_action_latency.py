"""S19 action latency (Execution, static): every action executes ``delay_steps`` control steps
late (``docs/definition.md``, "Static shifts": 1-3 steps), for the whole episode.

Realisation: the policy's actions go through a delay line of ``delay_steps`` commands
(:class:`liberopro.shifts._signal.DelayLine`): the action commanded at step ``t`` executes at step
``t + delay_steps``. Until the line has filled (the first ``delay_steps`` steps) the robot holds:
zero arm delta, gripper command of the last executed action (open after the settle steps). The
delay counts executed policy commands; steps at which an evaluator override (D18/D19) holds
control do not advance it. Commands still queued at the end of the episode never execute.

Default magnitude: ``delay_steps`` uniform in {1, 2, 3} (one control step is 50 ms at 20 Hz).

Post-condition, measured on the executed actions: the first ``delay_steps`` executed actions are
holds and every later one equals, exactly, the command given ``delay_steps`` commands before
(``applied["post_condition"]``: counts and the step lags seen).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.execution import LatencyParams
from liberopro.shifts._signal import ARM, GRIPPER, DelayLine
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid


class DelayCheck:
    """Commanded and executed actions of the steps a delay line acted on, and their check
    (shared by S19 and D14)."""

    def __init__(self, delay: int) -> None:
        self.delay = delay
        self.commanded: list[tuple[int, np.ndarray]] = []
        self.executed: list[tuple[int, np.ndarray, int | None, float]] = []

    def add(
        self, step: int, commanded: np.ndarray, executed: np.ndarray, src: int | None, gripper_before: float
    ) -> None:
        self.commanded.append((step, np.asarray(commanded, dtype=np.float64).copy()))
        self.executed.append((step, np.asarray(executed, dtype=np.float64).copy(), src, gripper_before))

    def check(self, shift_id: str) -> dict:
        cmd = dict(self.commanded)
        order = [s for s, _ in self.commanded]
        mismatches, holds, delayed = [], 0, 0
        lags: Counter[int] = Counter()
        for i, (step, a, src, grip) in enumerate(self.executed):
            if i < self.delay:
                if src is not None or np.any(a[ARM] != 0) or a[GRIPPER] != grip:
                    mismatches.append(step)
                holds += 1
                continue
            expected_src = order[i - self.delay]
            if src != expected_src or not np.array_equal(a, cmd[expected_src]):
                mismatches.append(step)
            delayed += 1
            lags[step - expected_src] += 1
        out = {
            "commands": len(self.commanded),
            "hold_steps": holds,
            "delayed_steps": delayed,
            "step_lags": {str(k): v for k, v in sorted(lags.items())},
            "mismatched_steps": mismatches[:20],
        }
        if mismatches:
            raise ShiftInvalid(
                shift_id,
                f"executed actions at steps {mismatches[:5]} are not the commands of {self.delay} steps before",
            )
        return out


class ActionLatency(Shift[LatencyParams]):
    spec = SPECS["S19"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._line = DelayLine(self.params.delay_steps)
        self._check = DelayCheck(self.params.delay_steps)

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self._line = DelayLine(self.params.delay_steps)
        self._check = DelayCheck(self.params.delay_steps)
        self.applied = {"delay_steps": self.params.delay_steps}

    def execute(self, action, step, ctx):
        out, src = self._line.push(action, step, ctx)
        self._check.add(step, action, out, src, float(ctx.last_action[GRIPPER]))
        return out

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        self.applied["never_executed_commands"] = len(self._line.queue)
        self.applied["post_condition"] = self._check.check(self.id)
