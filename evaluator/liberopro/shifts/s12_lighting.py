"""S12 lighting (Environment, static): light intensity x0.3-1.8, direction and colour changed
(``docs/definition.md``, "Static shifts")."""

from __future__ import annotations

import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import LightingParams
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

#: Smallest mean absolute change of the third-person image (grey levels, 0-255) that counts as
#: a visible lighting change.
MIN_VISIBLE_CHANGE = 2.0


def _rotate_dir(v: np.ndarray, azimuth_deg: float, tilt_deg: float) -> np.ndarray:
    """``v`` turned ``tilt_deg`` about x, then ``azimuth_deg`` about z (world frame), unit length.

    Hand-written on purpose: scipy's ``Rotation.from_euler("ZX", ...).apply`` goes through a
    quaternion and differs in the last bits on ~88% of random inputs (<= 3.3e-16); the result is
    the lights' direction in the model, so it reaches every rendered image (and ``applied``).
    ``tests/evaluator/test_rotations.py`` checks it against scipy and pins the difference.
    """
    a, t = math.radians(azimuth_deg), math.radians(tilt_deg)
    rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, math.cos(t), -math.sin(t)], [0, math.sin(t), math.cos(t)]])
    out = rz @ rx @ v
    return out / np.linalg.norm(out)


class Lighting(Shift[LightingParams]):
    spec = SPECS["S12"]

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
