"""S16 image degradation (Observation, static): every camera image the policy receives is
degraded in one of three modes, one mode per instance (``docs/definition.md``, "Static shifts": JPEG
quality 10-30, or resolution loss (down x2-4, up again), or blur).

Modes and default magnitudes (each drawn with probability 1/3):

* ``jpeg``: baseline JPEG encode/decode at ``jpeg_quality`` (integer, uniform in [10, 30];
  OpenCV/libjpeg quality scale, 4:2:0 chroma subsampling).
* ``downsample``: shrink by ``downsample_factor`` (integer 2, 3 or 4) with area averaging, then
  enlarge back with bilinear interpolation.
* ``blur``: Gaussian blur of ``blur_sigma_px`` (uniform in [1.5, 3.0]) pixels at a 256 px render
  (LIBERO's evaluation size), scaled with the render size so that the blur covers the same
  fraction of the field of view at any resolution (0.375-0.75 px at 64 px).

Applied at the render resolution, before the policy's orientation and resize, to every image read
(the policy's requests, a shift keeping past frames), when it is read: a frame between two replans
is neither rendered nor degraded (:func:`liberopro.sim.frames.map_images`).

Post-condition, measured on the delivered images against the clean frames of the same steps
(median over the images degraded whose clean frame has any structure, per camera; ``steps``
counts the images degraded):

* ``jpeg``: the delivered image is a fixed point of JPEG at the stated quality (re-encoding it
  changes it by <= 20% of what separates it from the clean frame; measured <= 1% on LIBERO
  frames) and it differs from the clean frame by >= 0.5 grey levels on average; the 8 x 8
  blockiness ratio (delivered / clean) is recorded (measured 1.35-2.6 at quality 10-30).
* ``downsample``: high-frequency energy (mean squared Laplacian) ratio delivered / clean <= 0.5
  (measured 0.01-0.08 for factors 2-4).
* ``blur``: the same ratio <= 0.9 (measured <= 0.79 with the mildest blur at 64 px, <= 0.12 at
  128 px and above).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.observation import DegradationParams
from liberopro.shifts._signal import (
    REFERENCE_RENDER_PX,
    blockiness,
    down_up,
    gaussian_blur,
    hf_energy,
    jpeg,
    mean_abs_diff,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.frames import map_images

#: Post-condition thresholds (see the module docstring).
JPEG_FIXED_POINT_MAX = 0.2
JPEG_MIN_CHANGE = 0.5
HF_RATIO_MAX = {"downsample": 0.5, "blur": 0.9}
#: Clean frames with less high-frequency energy than this are not measured (a blank frame).
MIN_CLEAN_HF = 1.0


def degrade(img: np.ndarray, p: DegradationParams) -> np.ndarray:
    """One image degraded as ``p`` states (blur sigma scaled to the image's width). ``ValueError``
    when the mode's magnitude is None (the model refuses such parameters)."""
    quality, factor, sigma = p.jpeg_quality, p.downsample_factor, p.blur_sigma_px
    if p.mode == "jpeg" and quality is not None:
        return jpeg(img, quality)
    if p.mode == "downsample" and factor is not None:
        return down_up(img, factor)
    if p.mode != "blur" or sigma is None:
        raise ValueError(f"mode {p.mode!r} needs its magnitude")
    return gaussian_blur(img, sigma * img.shape[1] / REFERENCE_RENDER_PX)


class ImageDegradation(Shift[DegradationParams]):
    spec = SPECS["S16"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._measures: dict[str, list[dict]] = {}

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self._measures = {}
        self.applied = {"mode": self.params.mode}

    def observe(self, frame, step, ctx):
        def degraded(cam: str, img: np.ndarray) -> np.ndarray:
            out = degrade(img, self.params)
            self._measures.setdefault(cam, []).append(self._measure(out, img))
            return out

        return dataclasses.replace(frame, images=map_images(frame.images, degraded))

    def _measure(self, out: np.ndarray, clean: np.ndarray) -> dict[str, float | None]:
        change = mean_abs_diff(out, clean)
        m: dict[str, float | None] = {"change": change}
        hf_clean = hf_energy(clean)
        m["hf_ratio"] = hf_energy(out) / hf_clean if hf_clean >= MIN_CLEAN_HF else None
        quality = self.params.jpeg_quality
        if self.params.mode == "jpeg" and quality is not None:
            m["fixed_point"] = mean_abs_diff(jpeg(out, quality), out) / max(change, 1e-9)
            b = blockiness(clean)
            m["blockiness_ratio"] = blockiness(out) / b if b > 0 else None
        return m

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        p = self.params
        post: dict[str, dict[str, Any]] = {}
        for cam, ms in sorted(self._measures.items()):
            entry: dict[str, Any] = {"steps": len(ms), "mean_abs_change": _median([m["change"] for m in ms])}
            if p.mode == "jpeg":
                entry["jpeg_fixed_point_ratio"] = _median([m["fixed_point"] for m in ms])
                entry["blockiness_ratio"] = _median([m["blockiness_ratio"] for m in ms])
            else:
                entry["hf_energy_ratio"] = _median([m["hf_ratio"] for m in ms])
            post[cam] = entry
        self.applied["post_condition"] = post
        if not post:
            raise ShiftInvalid(self.id, "the policy received no camera image to degrade")
        for cam, e in post.items():
            if p.mode == "jpeg":
                if e["mean_abs_change"] < JPEG_MIN_CHANGE or e["jpeg_fixed_point_ratio"] > JPEG_FIXED_POINT_MAX:
                    raise ShiftInvalid(
                        self.id,
                        f"{cam}: the delivered image is not JPEG at quality "
                        f"{p.jpeg_quality} (change {e['mean_abs_change']}, re-encode "
                        f"ratio {e['jpeg_fixed_point_ratio']})",
                    )
            elif e["hf_energy_ratio"] is None or e["hf_energy_ratio"] > HF_RATIO_MAX[p.mode]:
                raise ShiftInvalid(
                    self.id,
                    f"{cam}: high-frequency energy ratio {e['hf_energy_ratio']} > {HF_RATIO_MAX[p.mode]} for {p.mode}",
                )


def _median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(np.median(vals)), 4) if vals else None
