"""D08 lighting change (Environment, runtime, trigger approach): the lights dim to x0.3 and stay
dim, or flicker between x0.3 and full for a window (``docs/definition.md``, "Runtime shifts").

Realisation (as S12, :mod:`liberopro.shifts.s12_lighting`): the diffuse, specular and ambient
terms of every light and of the headlight are multiplied by ``scale`` (relative to their values
at the trigger, so a composition with S12 dims S12's lights). At the trigger the observations are
re-sampled at once (:meth:`liberopro.sim.scene.LiberoScene.refresh_view`: no ``mj_forward``, so the
physics and the proprioception stay the nominal ones), and the frame of the trigger step is
already dim. While flickering, the
level for the next step is set after the current frame is delivered (in ``observe``): the frame
of step ``t`` shows the level of step ``t``; after the window the lights return to full. The
light fields are registered model fields, restored at the next episode.

Levels: ``dim`` mode keeps ``scale`` to the end of the episode. ``flicker`` mode: for
``duration_steps`` from the trigger, step ``t`` is dim when ``(t - trigger) % period_steps <
ceil(period_steps / 2)``, else full; then full.

Post-condition: at the trigger, the light fields equal their former values times ``scale`` and
the third-person view (rendered at 128 px) loses at least :data:`MIN_DARKENING` of its mean
brightness; for ``flicker``, every delivered third-person frame in the window is recorded with
its level and mean brightness, and the episode end checks that the dim ones were darker.

Defaults: mode dim or flicker (even odds), scale 0.3, flicker window 10-30 steps, period 2-6
steps, the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`).
"""

from __future__ import annotations

import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import MIN_DARKENING, LightingChangeParams
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid

LIGHT_FIELDS = (
    "light_diffuse",
    "light_specular",
    "light_ambient",
    "vis.headlight.diffuse",
    "vis.headlight.ambient",
    "vis.headlight.specular",
)
#: The third-person view must lose at least this fraction of its mean brightness when dimmed.
MEASURE_PX = 128


class LightingChange(RuntimeShift[LightingChangeParams]):
    spec = SPECS["D08"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._base: dict[str, np.ndarray] = {}
        self._level = 1.0

    def level_at(self, step: int) -> float:
        """Light level (multiplier of the pre-trigger values) of the frame of ``step``."""
        p = self.params
        if self.fired_at is None or step < self.fired_at:
            return 1.0
        if p.mode == "dim":
            return p.scale
        k = step - self.fired_at
        if k >= p.duration_steps:
            return 1.0
        return p.scale if k % p.period_steps < math.ceil(p.period_steps / 2) else 1.0

    def _set(self, ctx: EpisodeContext, level: float) -> None:
        for name in LIGHT_FIELDS:
            ctx.scene.model_field(name)[:] = self._base[name] * level
        self._level = level

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene = ctx.scene
        self._base = {name: np.array(scene.model_field(name), copy=True) for name in LIGHT_FIELDS}
        before = scene.render("agentview", MEASURE_PX).astype(np.float32).mean()
        self._set(ctx, self.level_at(step))
        scene.refresh_view()  # no mj_forward: the lights must not move the physics
        after = scene.render("agentview", MEASURE_PX).astype(np.float32).mean()
        exact = all(np.allclose(scene.model_field(n), self._base[n] * self.params.scale) for n in LIGHT_FIELDS)
        ratio = float(after / max(before, 1e-6))
        self.applied = {
            "mode": self.params.mode,
            "light_diffuse": np.round(scene.model_field("light_diffuse"), 4).tolist(),
            "post_condition": {"brightness_ratio": round(ratio, 3), "fields_scaled": exact},
        }
        if self.params.mode == "flicker":
            self.applied["frames"] = []
        if not exact:
            raise ShiftInvalid(self.id, "the light fields do not hold the stated scale")
        if ratio > 1 - MIN_DARKENING:
            raise ShiftInvalid(self.id, f"the third-person view kept {ratio:.0%} of its brightness")

    def observe(self, frame, step, ctx):
        if self.fired_at is None or self.params.mode != "flicker":
            return frame
        k = step - self.fired_at
        if k < self.params.duration_steps:
            image = frame.images.get("agentview")
            if image is None and frame.images:
                image = next(iter(frame.images.values()))
            self.applied["frames"].append(
                {
                    "step": step,
                    "level": self.level_at(step),
                    "brightness": round(float(image.mean()), 2) if image is not None else None,
                }
            )
        nxt = self.level_at(step + 1)
        if nxt != self._level:
            self._set(ctx, nxt)
        return frame

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        frames = self.applied.get("frames") if self.applied else None
        if not frames:
            return
        dim = [f["brightness"] for f in frames if f["level"] < 1 and f["brightness"] is not None]
        full = [f["brightness"] for f in frames if f["level"] == 1 and f["brightness"] is not None]
        if dim and full:
            ratio = float(np.mean(dim) / max(float(np.mean(full)), 1e-6))
            self.applied["post_condition"]["flicker_dim_over_full"] = round(ratio, 3)
            if ratio >= 1.0:
                raise ShiftInvalid(self.id, f"dim frames were not darker than full ones (ratio {ratio:.3f})")
