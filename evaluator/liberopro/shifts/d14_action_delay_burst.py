"""D14 action delay burst (Execution, runtime, trigger approach): for a window of
``duration_steps`` steps every action executes ``delay_steps`` control steps late
(``docs/definition.md``, "Runtime shifts": 2-5 steps late for a window).

Realisation: from the step the shift fires, the policy's commands go through a delay line of
``delay_steps`` commands (as S19, :class:`liberopro.shifts._signal.DelayLine`): during the first
``delay_steps`` steps of the window nothing commanded in the window is due yet and the robot
holds (zero arm delta, gripper command of the last executed action); afterwards the command of
``delay_steps`` steps before executes. When the window closes the channel is restored: the
commands still queued are dropped (recorded) and the current command executes at once.

Defaults: trigger ``approach``, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``delay_steps`` uniform in {2, ..., 5},
``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured on the executed actions over the window (window rule:
:mod:`liberopro.shifts._signal`): the first ``delay_steps`` are holds and every later one equals
the command given ``delay_steps`` commands before.
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.execution import DelayBurstParams
from liberopro.shifts._signal import GRIPPER, DelayLine, WindowShift
from liberopro.shifts.base import EpisodeContext
from liberopro.shifts.s19_action_latency import DelayCheck


class ActionDelayBurst(WindowShift[DelayBurstParams]):
    spec = SPECS["D14"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._line = DelayLine(self.params.delay_steps)
        self._check = DelayCheck(self.params.delay_steps)
        self._dropped: int | None = None

    def execute(self, action, step, ctx):
        if self.window is not None and step >= self.window[1] and self._dropped is None:
            self._dropped = self._line.flush()
        if not self.active(step):
            return action
        out, src = self._line.push(action, step, ctx)
        self._check.add(step, action, out, src, float(ctx.last_action[GRIPPER]))
        self.mark(step)
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        post = self._check.check(self.id)
        post["dropped_at_release"] = self._dropped if self._dropped is not None else len(self._line.queue)
        return post
