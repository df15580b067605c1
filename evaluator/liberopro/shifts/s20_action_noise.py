"""S20 action noise (Execution, static): Gaussian noise on the executed arm actions for the whole
episode (``docs/definition.md``, "Static shifts": sigma 0.05-0.2 of the action range).

Interpretation of "of the action range": LIBERO's action numbers range over [-1, 1], a range of
2, so the noise standard deviation is ``sigma_frac * 2`` action units: 0.1-0.4, i.e. 5-20 mm of
commanded end-effector translation per step (OSC_POSE maps 1.0 to 0.05 m) and 0.05-0.2 rad of
commanded rotation per step (1.0 maps to 0.5 rad).

Realisation: at every executed policy step, independent zero-mean Gaussian noise of that sigma
is added to each of the six arm numbers (translation and rotation deltas), drawn from the
episode's own generator (``ctx.rng``); the result is clipped to [-1, 1] (the controller would
clip it anyway); the gripper command is untouched.

Default magnitude: ``sigma_frac`` uniform in [0.05, 0.2].

Post-condition, measured on executed minus commanded arm numbers over the episode: the
maximum-likelihood sigma of a zero-mean normal censored at the action limits
(:func:`liberopro.shifts._signal.noise_sigma_mle`) within five standard errors + 5% of the stated
sigma (:func:`liberopro.shifts._signal.sigma_tolerance`), and the gripper exactly as commanded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.execution import ActionNoiseParams
from liberopro.shifts._signal import ARM, GRIPPER, add_action_noise, noise_sigma_mle, sigma_tolerance
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid


class NoiseCheck:
    """Commanded and executed actions of the noised steps, and their check (S20 and D16)."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma
        self.commanded: list[np.ndarray] = []
        self.executed: list[np.ndarray] = []

    def add(self, commanded: np.ndarray, executed: np.ndarray) -> None:
        self.commanded.append(np.asarray(commanded, dtype=np.float64).copy())
        self.executed.append(np.asarray(executed, dtype=np.float64).copy())

    def check(self, shift_id: str) -> dict[str, Any]:
        if not self.commanded:
            raise ShiftInvalid(shift_id, "no policy action was executed: no noise applied")
        c, e = np.array(self.commanded), np.array(self.executed)
        n = c[:, ARM].size
        est = noise_sigma_mle(c[:, ARM], e[:, ARM])
        if est is None:  # not reached: commanded is not empty
            raise ShiftInvalid(shift_id, "no arm sample to measure the noise on")
        clipped = int(np.sum(np.abs(e[:, ARM]) >= 1.0 - 1e-12))
        tol = sigma_tolerance(n)
        grip_changed = int(np.sum(c[:, GRIPPER] != e[:, GRIPPER]))
        out = {
            "steps": len(c),
            "samples": n,
            "sigma_measured": round(est, 4),
            "sigma_stated": round(self.sigma, 4),
            "relative_tolerance": round(tol, 3),
            "clipped_samples": clipped,
            "residual_mean": round(float(np.mean(e[:, ARM] - c[:, ARM])), 4),
            "gripper_changed_steps": grip_changed,
        }
        if grip_changed:
            raise ShiftInvalid(shift_id, f"the gripper command changed at {grip_changed} steps")
        if abs(est / self.sigma - 1) > tol:
            raise ShiftInvalid(
                shift_id,
                f"measured action noise sigma {est:.4f}, stated {self.sigma:.4f} ({n} samples, tolerance {tol:.0%})",
            )
        return out


class ActionNoise(Shift[ActionNoiseParams]):
    spec = SPECS["S20"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._check = NoiseCheck(self.params.sigma)

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self._check = NoiseCheck(self.params.sigma)
        self.applied = {"sigma_action_units": round(self.params.sigma, 6)}

    def execute(self, action, step, ctx):
        out = add_action_noise(action, self.params.sigma, ctx.rng)
        self._check.add(action, out)
        return out

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        self.applied["post_condition"] = self._check.check(self.id)
