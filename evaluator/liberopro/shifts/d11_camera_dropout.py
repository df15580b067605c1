"""D11 camera dropout (Observation, runtime, trigger grasp): one camera stream is blank (all zeros,
black) for ``duration_steps`` steps (``docs/definition.md``, "Runtime shifts": 10-30 steps). The
scene goes on; proprioception and the other camera are delivered as usual. The stream returns
afterwards.

``camera`` names the stream (``agentview`` third-person or ``wrist``). A policy that receives
only one camera, not the named one, loses the one it receives (``applied["camera"]`` says which
and ``substituted`` marks it): every policy experiences a dropout.

Defaults: trigger ``grasp`` (first gripper contact with the target), the fallback step of the per-task rule
(:mod:`liberopro.catalog.fallbacks`), ``camera`` either with probability 1/2,
``duration_steps`` uniform in {10, ..., 30}.

Post-condition, measured on the delivered frames over the window (window rule:
:mod:`liberopro.shifts._signal`): every delivered image of the dropped camera inside the window
is all zeros, and every other delivered camera image equals its input.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.observation import DropoutParams
from liberopro.shifts._signal import WindowShift
from liberopro.shifts.base import EpisodeContext, ShiftInvalid


class CameraDropout(WindowShift[DropoutParams]):
    spec = SPECS["D11"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._blank = 0
        self._others_changed = 0
        self._camera: str | None = None

    def observe(self, frame, step, ctx):
        self.tick(step)
        if not self.active(step) or not frame.images:
            return frame
        cam = self.params.camera if self.params.camera in frame.images else sorted(frame.images)[0]
        if self._camera is None:
            self._camera = cam
            self.applied.update(camera=cam, substituted=cam != self.params.camera)
        images = dict(frame.images)
        images[cam] = np.zeros_like(frame.images[cam])
        out = dataclasses.replace(frame, images=images)
        self.mark(step)
        # measured on what is delivered
        self._blank += int(not out.images[cam].any())
        self._others_changed += sum(not np.array_equal(out.images[c], frame.images[c]) for c in out.images if c != cam)
        return out

    def measure(self, ctx: EpisodeContext) -> dict:
        n = len(self.active_steps)
        post = {"blank_frames": self._blank, "window_frames": n, "other_camera_frames_changed": self._others_changed}
        if self._blank != n or self._others_changed:
            raise ShiftInvalid(
                self.id,
                f"{self._blank} of {n} frames of {self._camera} were blank, "
                f"{self._others_changed} other-camera frames changed",
            )
        return post
