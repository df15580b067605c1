"""D17 control-rate change (Execution, runtime, trigger approach): for a window of
``duration_steps`` steps the controller accepts a new command only every ``hold_periods`` control
periods and holds it in between (``docs/definition.md``, "Runtime shifts": each action held for 2-3
control periods for a window), as from a control loop slowed to 20 / ``hold_periods`` Hz with
zero-order hold.

Realisation: inside the window, at steps ``s, s + m, s + 2m, ...`` (``m = hold_periods``, ``s``
the firing step) the policy's command is latched and it executes at that step and the next
``m - 1`` steps; the commands given in between are discarded. OSC_POSE commands are deltas, so
a held command moves the end effector ``m`` times as far as the single command asked. The
policy keeps being asked as usual.

Defaults: trigger ``approach``, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`), ``hold_periods`` 2 or 3, ``duration_steps``
uniform in {10, ..., 30}.

Post-condition, measured on the executed actions over the window (window rule:
:mod:`liberopro.shifts._signal`): every executed action equals the command latched at the start
of its block (the first step of the block it executed); block sizes are recorded (every block
but a truncated last one lasts ``hold_periods`` steps unless an evaluator override took some of
its steps: ``interrupted_blocks``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.execution import ControlRateParams
from liberopro.shifts._signal import WindowShift
from liberopro.shifts.base import EpisodeContext, ShiftInvalid


class ControlRateChange(WindowShift[ControlRateParams]):
    spec = SPECS["D17"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._latched: tuple[int, np.ndarray] | None = None
        self._log: list[tuple[int, int, bool]] = []  # step, block start step, executed == latched

    def execute(self, action, step, ctx):
        if not self.active(step):
            return action
        self.mark(step)
        block = self.window[0] + (step - self.window[0]) // self.params.hold_periods * self.params.hold_periods
        if self._latched is None or self._latched[0] != block:
            self._latched = (block, np.asarray(action, dtype=np.float64).copy())
        out = self._latched[1].copy()
        self._log.append((step, block, bool(np.array_equal(out, self._latched[1]))))
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        sizes = Counter(b for _, b, _ in self._log)
        blocks = sorted(sizes)
        m = self.params.hold_periods
        short = [b for b in blocks[:-1] if sizes[b] != m]
        wrong = [s for s, _, ok in self._log if not ok]
        post = {
            "blocks": len(blocks),
            "block_sizes": [sizes[b] for b in blocks],
            "block_starts": blocks,
            "interrupted_blocks": short,
            "wrong_steps": wrong,
        }
        if wrong:
            raise ShiftInvalid(self.id, f"steps {wrong[:5]} did not execute the command latched for their block")
        return post
