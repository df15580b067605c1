"""S12 lighting (Environment, static): light intensity x0.3-1.8, direction and colour changed
(``benchmark.md``, static table)."""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from liberopro.shifts import register
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid, ShiftParams, uniform

#: Smallest mean absolute change of the third-person image (grey levels, 0-255) that counts as
#: a visible lighting change.
MIN_VISIBLE_CHANGE = 2.0


class LightingParams(ShiftParams):
    """``intensity_scale`` multiplies every light's diffuse, specular and ambient terms and the
    headlight; ``azimuth_deg``/``tilt_deg`` turn the light directions about world z and tilt them
    away from vertical; ``colour`` multiplies (r, g, b) of the diffuse terms."""

    intensity_scale: float = Field(ge=0.1, le=3.0)
    azimuth_deg: float = Field(ge=-180, le=180)
    tilt_deg: float = Field(ge=-45, le=45)
    colour: tuple[float, float, float]


def _rotate_dir(v: np.ndarray, azimuth_deg: float, tilt_deg: float) -> np.ndarray:
    a, t = math.radians(azimuth_deg), math.radians(tilt_deg)
    rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, math.cos(t), -math.sin(t)], [0, math.sin(t), math.cos(t)]])
    out = rz @ rx @ v
    return out / np.linalg.norm(out)


@register
class Lighting(Shift):
    id = "S12"
    name = "lighting"
    category = "Environment"
    kind = "static"
    summary = "light intensity x0.3-1.8, direction and colour changed"
    post_condition = "light values in the model are the stated ones and the third-person image changes visibly"
    Params = LightingParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        # Dimmer or brighter, never a near-unit scale that would not be a shift.
        scale = uniform(rng, 0.3, 0.8, 3) if rng.random() < 0.5 else uniform(rng, 1.25, 1.8, 3)
        colour = tuple(uniform(rng, 0.8, 1.2, 3) for _ in range(3))
        return LightingParams(intensity_scale=scale, azimuth_deg=uniform(rng, -60, 60, 1),
                              tilt_deg=uniform(rng, -20, 20, 1), colour=colour)

    @classmethod
    def default_params(cls):
        return {"intensity_scale": "[0.3, 0.8] or [1.25, 1.8]", "azimuth_deg": [-60, 60],
                "tilt_deg": [-20, 20], "colour": "each of r, g, b in [0.8, 1.2]"}

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        before = scene.render("agentview").astype(np.float32)
        colour = np.asarray(p.colour)
        diffuse = scene.model_field("light_diffuse")
        specular = scene.model_field("light_specular")
        ambient = scene.model_field("light_ambient")
        direction = scene.model_field("light_dir")
        diffuse[:] = np.clip(diffuse * p.intensity_scale * colour, 0, None)
        specular[:] = specular * p.intensity_scale
        ambient[:] = ambient * p.intensity_scale
        for i in range(direction.shape[0]):
            direction[i] = _rotate_dir(np.asarray(direction[i]), p.azimuth_deg, p.tilt_deg)
        for field in ("vis.headlight.diffuse", "vis.headlight.ambient", "vis.headlight.specular"):
            arr = scene.model_field(field)
            arr[:] = arr * p.intensity_scale
        after = scene.render("agentview").astype(np.float32)
        change = float(np.abs(after - before).mean())
        ratio = float(after.mean() / max(before.mean(), 1e-6))
        self.applied = {
            "lights": int(direction.shape[0]),
            "light_diffuse": np.round(diffuse, 4).tolist(),
            "light_dir": np.round(direction, 4).tolist(),
            "headlight_diffuse": np.round(scene.model_field("vis.headlight.diffuse"), 4).tolist(),
            "post_condition": {"image_mean_abs_change": round(change, 2), "image_brightness_ratio": round(ratio, 3)},
        }
        if change < MIN_VISIBLE_CHANGE:
            raise ShiftInvalid(self.id, f"the third-person image changed by only {change:.2f} grey levels")
