"""S21 actuation gain (Execution, static): the executed arm delta is the commanded one scaled by a
constant gain (``docs/definition.md``, "Static shifts": x0.5-0.8 or x1.2-1.5), as from a
mis-calibrated actuator.

Realisation: at every executed policy step the six arm numbers (translation and rotation deltas
of OSC_POSE) are multiplied by ``gain`` and clipped to LIBERO's limits [-1, 1]; the gripper is
untouched. Clipping is part of the actuator: with a gain above 1 a command beyond ``1 / gain``
saturates (the controller would clip it anyway). Saturation is recorded (clipped fraction and the
effective gain sum|executed| / sum|commanded|) and never invalidates the episode: a policy could
otherwise void the shift by saturating its commands.

Default magnitude: ``gain`` uniform in [0.5, 0.8] or in [1.2, 1.5] (each with probability 1/2).

Post-condition, measured on the executed actions: every executed arm number equals
``clip(gain x commanded, -1, 1)`` (1e-12) and the gripper equals the command; the realised gain
(median executed / commanded over the unclipped non-zero numbers) is recorded.
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.execution import GainParams
from liberopro.shifts._signal import ACTION_HIGH, ACTION_LOW, ARM, GRIPPER
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

TOL = 1e-12


class ActuationGain(Shift[GainParams]):
    spec = SPECS["S21"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._log: list[tuple[np.ndarray, np.ndarray]] = []

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self._log = []
        self.applied = {"gain": self.params.gain}

    def execute(self, action, step, ctx):
        out = np.asarray(action, dtype=np.float64).copy()
        out[ARM] = np.clip(out[ARM] * self.params.gain, ACTION_LOW, ACTION_HIGH)
        self._log.append((np.asarray(action, dtype=np.float64).copy(), out.copy()))
        return out

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        g = self.params.gain
        if not self._log:
            raise ShiftInvalid(self.id, "no policy action was executed: the gain was never applied")
        c = np.array([a for a, _ in self._log])
        e = np.array([b for _, b in self._log])
        expected = np.clip(c[:, ARM] * g, ACTION_LOW, ACTION_HIGH)
        err = float(np.max(np.abs(e[:, ARM] - expected)))
        grip = int(np.sum(e[:, GRIPPER] != c[:, GRIPPER]))
        clipped = np.abs(c[:, ARM] * g) > ACTION_HIGH
        free = (~clipped) & (np.abs(c[:, ARM]) > 1e-9)
        total = float(np.abs(c[:, ARM]).sum())
        self.applied["post_condition"] = {
            "steps": len(c),
            "max_error": float(f"{err:.3g}"),
            "gripper_changed_steps": grip,
            "realised_gain_unclipped": round(float(np.median(e[:, ARM][free] / c[:, ARM][free])), 6)
            if free.any()
            else None,
            "effective_gain": round(float(np.abs(e[:, ARM]).sum()) / total, 4) if total > 0 else None,
            "clipped_fraction": round(float(clipped.mean()), 4),
            "nonzero_commands": int((np.abs(c[:, ARM]) > 1e-9).sum()),
        }
        if err > TOL or grip:
            raise ShiftInvalid(
                self.id,
                f"executed arm numbers differ from clip(gain x command) by {err:.3g}, gripper changed at {grip} steps",
            )
