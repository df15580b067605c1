"""Shared realisation and measurement of the shifts that act on the policy's signals: pixel noise
and image degradation (S14, S16, D13), action delay, noise, drop and hold (S19-S21, D14-D17),
and the window bookkeeping of the runtime ones (D11-D17).

Conventions:

* Images are ``(H, W, 3) uint8`` RGB at the scene's render resolution, as rendered (upside down;
  see :class:`liberopro.sim.scene.RawFrame`). Image shifts act there, before the policy's own
  orientation and resize: they model the camera, not the policy's preprocessing. A policy that
  asks for a smaller image receives the shifted frame area-averaged (which lowers pixel noise).
  Image shifts transform, and measure, an image only when a consumer reads it (the policy's
  request, a shift keeping past frames; :func:`liberopro.sim.frames.map_images`): with on-demand
  rendering a frame nobody reads is never rendered (issue 12). Their randomness is keyed on
  (episode seed, step, camera) (:meth:`liberopro.shifts.base.EpisodeContext.frame_rng`), so
  skipping frames changes nothing delivered.
* Actions are LIBERO's 7-vectors ``[dx, dy, dz, droll, dpitch, dyaw, gripper]`` in ``[-1, 1]``
  after the policy's gripper convention was converted (``observation.to_libero_action``). The
  "arm" part is the first six numbers (translation and rotation deltas of OSC_POSE); the gripper
  is never touched by the execution shifts.
* "Hold" (a held or dropped command) is a zero arm delta with the gripper command of the last
  executed action: the OSC_POSE controller then holds the current end-effector pose.
* Execution post-conditions are measured on the action this shift hands on for execution (the
  executed action when it is the last execution layer; in a composition later layers act on
  top of it). Steps at which an evaluator override held control (D18/D19 interventions) are not
  policy commands: execution shifts neither see nor count them.

Window rule of the runtime shifts (:class:`WindowShift`): a shift fired at step ``s`` with
``duration_steps`` ``d`` is active at the steps ``s .. s + d - 1``; every step at which it acted is
recorded (``applied["active_steps"]``) and the post-condition is measured over those steps. When
the episode ends inside the window the record says ``truncated`` and the post-condition is
measured over the realised part. A shift that never acted (the episode ended before its
trigger phase and its fallback step, e.g. by an early success, or every step of its window was
held by an evaluator override) leaves the episode valid: the record says ``realised_steps: 0``
(and ``fired_at_step: null`` when it never fired) and the summary counts such episodes per row,
as for every runtime shift. Excluding them would drop exactly the episodes a policy finished
fastest.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

import cv2
import numpy as np

# LIBERO's action limits and the full range of one action number (action-noise sigmas are
# stated as fractions of it) are declared in the catalog.
from liberopro.catalog.execution import ACTION_HIGH, ACTION_LOW, ACTION_RANGE  # noqa: F401
from liberopro.shifts.base import RP, EpisodeContext, RuntimeShift, ShiftInvalid
from liberopro.sim.frames import map_images

if TYPE_CHECKING:
    from liberopro.sim.scene import RawFrame

ARM = slice(0, 6)
GRIPPER = 6
#: Render resolution (px) at which pixel-sized magnitudes (blur sigma) are stated; LIBERO's
#: standard evaluation renders 256 x 256. Other resolutions scale them proportionally.
REFERENCE_RENDER_PX = 256


def jsonable(x: Any) -> Any:
    """numpy scalars/arrays -> plain Python (records go to JSON)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


# --------------------------------------------------------------------------- pixel noise
def add_pixel_noise(img: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``img`` plus zero-mean Gaussian noise of standard deviation ``sigma`` grey levels (0-255
    scale), independent per pixel and channel, rounded and clipped to ``[0, 255]``."""
    noise = rng.standard_normal(img.shape, dtype=np.float32) * np.float32(sigma)
    return np.clip(np.rint(img.astype(np.float32) + noise), 0, 255).astype(np.uint8)


def estimate_noise_sigma(
    delivered: np.ndarray, clean: np.ndarray, stated: float, min_values: int = 100
) -> tuple[float | None, int]:
    """Noise level of ``delivered`` against ``clean`` (grey levels): the RMS of their difference
    over the values whose clean level lies at least 3 stated sigmas from both clipping limits
    (there clipping is negligible, and the selection does not depend on the noise), with the
    rounding variance (1/12) removed. Returns (sigma or None when fewer than ``min_values``
    values qualify, number of values used)."""
    c = clean.astype(np.float32)
    margin = 3.0 * stated
    sel = (c >= margin) & (c <= 255.0 - margin)
    n = int(sel.sum())
    if n < min_values:
        return None, n
    r = delivered.astype(np.float32)[sel] - c[sel]
    var = float(np.mean(r.astype(np.float64) ** 2)) - 1.0 / 12.0
    return math.sqrt(max(var, 0.0)), n


#: Relative and absolute tolerance of the measured noise level.
SIGMA_REL_TOL = 0.05
SIGMA_ABS_TOL = 0.5


class NoiseLevel:
    """Per-camera noise, and its measurements over the images delivered (shared by S14 and D13).

    The noise is added, and its post-condition measured, at the render resolution. Where the
    episode knows how the policy receives each camera (``received``, the evaluator's orientation
    and resize: :attr:`liberopro.shifts.base.EpisodeContext.received`), the level is also
    measured on the noisy and the clean image both passed through it: the noise the policy
    actually sees (``received_median_sigma``), lower after an area-averaging resize, which
    averages neighbouring pixels' independent noise. That measurement changes nothing the policy
    receives (copies, no generator call)."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma
        self.values: dict[str, list[float]] = {}
        self.unmeasured: dict[str, int] = {}
        self.received: dict[str, list[float]] = {}
        self.received_size: dict[str, list[int]] = {}

    def apply(self, frame: RawFrame, step: int, ctx: EpisodeContext) -> RawFrame:
        """``frame`` with noise on each camera image, added (and measured) when that image is
        first read (:func:`liberopro.sim.frames.map_images`): only the images a consumer reads are
        rendered, noised and measured. Each image's noise comes from
        :meth:`~liberopro.shifts.base.EpisodeContext.frame_rng` (``step``, camera), so what one
        image receives does not depend on which others were read."""

        def noisy(cam: str, img: np.ndarray) -> np.ndarray:
            out = add_pixel_noise(img, self.sigma, ctx.frame_rng(step, cam))
            self._measure(cam, out, img, ctx.received)
            return out

        return dataclasses.replace(frame, images=map_images(frame.images, noisy))

    def _measure(
        self,
        cam: str,
        noisy: np.ndarray,
        img: np.ndarray,
        received: Callable[[str, np.ndarray], np.ndarray | None] | None,
    ) -> None:
        est, _ = estimate_noise_sigma(noisy, img, self.sigma)
        if est is None:
            self.unmeasured[cam] = self.unmeasured.get(cam, 0) + 1
        else:
            self.values.setdefault(cam, []).append(est)
        if received is not None:
            got, clean = received(cam, noisy), received(cam, img)
            if got is not None and clean is not None:
                self.received_size[cam] = list(got.shape[:2])
                est_r, _ = estimate_noise_sigma(got, clean, self.sigma, min_values=25)
                if est_r is not None:
                    self.received.setdefault(cam, []).append(est_r)

    def check(self, shift_id: str) -> dict[str, dict[str, Any]]:
        """Measured level per camera (at render resolution: ``median_sigma``, ``min_sigma``,
        ``max_sigma``; as the policy receives it, where known: ``received_median_sigma`` and
        ``received_size`` [height, width]); raises :class:`ShiftInvalid` when a camera's median
        at render resolution is off (the post-condition is on the noise as added)."""
        out: dict[str, dict[str, Any]] = {}
        for cam in sorted(set(self.values) | set(self.unmeasured)):
            vals = self.values.get(cam, [])
            out[cam] = {
                "median_sigma": round(float(np.median(vals)), 3) if vals else None,
                "min_sigma": round(float(np.min(vals)), 3) if vals else None,
                "max_sigma": round(float(np.max(vals)), 3) if vals else None,
                "measured_steps": len(vals),
                "unmeasurable_steps": self.unmeasured.get(cam, 0),
            }
            if cam in self.received_size:
                got = self.received.get(cam, [])
                out[cam]["received_median_sigma"] = round(float(np.median(got)), 3) if got else None
                out[cam]["received_size"] = self.received_size[cam]
        if not out:
            raise ShiftInvalid(shift_id, "the policy received no camera image to add noise to")
        for cam, m in out.items():
            if m["median_sigma"] is None:
                raise ShiftInvalid(shift_id, f"{cam}: too few mid-grey pixels to measure the noise at any step")
            if abs(m["median_sigma"] - self.sigma) > max(SIGMA_REL_TOL * self.sigma, SIGMA_ABS_TOL):
                raise ShiftInvalid(
                    shift_id, f"{cam}: measured noise sigma {m['median_sigma']} grey levels, stated {self.sigma}"
                )
        return out


# --------------------------------------------------------------------------- image degradation
def jpeg(img: np.ndarray, quality: int) -> np.ndarray:
    """Encode and decode as baseline JPEG at ``quality`` (OpenCV/libjpeg, 4:2:0 chroma)."""
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    )
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def down_up(img: np.ndarray, factor: int) -> np.ndarray:
    """Resolution loss: shrink by ``factor`` (area averaging), enlarge back (bilinear)."""
    h, w = img.shape[:2]
    small = cv2.resize(
        np.ascontiguousarray(img), (max(1, round(w / factor)), max(1, round(h / factor))), interpolation=cv2.INTER_AREA
    )
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def gaussian_blur(img: np.ndarray, sigma_px: float) -> np.ndarray:
    """Gaussian blur of standard deviation ``sigma_px`` pixels (OpenCV's kernel size from sigma,
    reflected borders)."""
    return cv2.GaussianBlur(np.ascontiguousarray(img), (0, 0), float(sigma_px), borderType=cv2.BORDER_REFLECT_101)


def _grey(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2GRAY).astype(np.float64)


def hf_energy(img: np.ndarray) -> float:
    """High-frequency energy: mean squared 4-neighbour Laplacian of the grey image."""
    return float((cv2.Laplacian(_grey(img), cv2.CV_64F, ksize=1) ** 2).mean())


def blockiness(img: np.ndarray) -> float:
    """Mean absolute grey step across 8 x 8 block boundaries divided by the one inside blocks
    (about 1 for a natural image; JPEG at low quality raises it)."""
    g = _grey(img)
    dh, dv = np.abs(np.diff(g, axis=1)), np.abs(np.diff(g, axis=0))
    bh, bv = (np.arange(dh.shape[1]) % 8) == 7, (np.arange(dv.shape[0]) % 8) == 7
    across = np.concatenate([dh[:, bh].ravel(), dv[bv, :].ravel()])
    within = np.concatenate([dh[:, ~bh].ravel(), dv[~bv, :].ravel()])
    if not across.size or not within.size:
        return float("nan")
    return float(across.mean() / max(within.mean(), 1e-9))


def mean_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float32) - b.astype(np.float32)).mean())


# --------------------------------------------------------------------------- actions
def hold_action(ctx: EpisodeContext) -> np.ndarray:
    """Zero arm delta, gripper command of the last executed action."""
    a = np.zeros(7)
    a[GRIPPER] = float(ctx.last_action[GRIPPER])
    return a


def add_action_noise(action: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian noise of standard deviation ``sigma`` (action units) on the six arm numbers,
    clipped to LIBERO's limits; the gripper is unchanged."""
    out = np.asarray(action, dtype=np.float64).copy()
    out[ARM] = np.clip(out[ARM] + rng.normal(0.0, sigma, 6), ACTION_LOW, ACTION_HIGH)
    return out


def _log_sf(z: float) -> float:
    """log P(N(0,1) >= z), stable for large z."""
    if z < 5:
        return math.log(max(0.5 * math.erfc(z / math.sqrt(2)), 1e-300))
    return -0.5 * z * z - math.log(z * math.sqrt(2 * math.pi)) + math.log1p(-1 / (z * z))


def noise_sigma_mle(commanded: np.ndarray, executed: np.ndarray) -> float | None:
    """Maximum-likelihood standard deviation of zero-mean Gaussian noise from commanded and
    executed values clipped to ``[-1, 1]`` (a censored normal: an executed value at a limit only
    says the noise reached at least that far). None without samples."""
    c = np.asarray(commanded, dtype=np.float64).ravel()
    e = np.asarray(executed, dtype=np.float64).ravel()
    if not c.size:
        return None
    upper = e >= ACTION_HIGH - 1e-12
    lower = e <= ACTION_LOW + 1e-12
    free = ~(upper | lower)
    r2 = float(np.sum((e[free] - c[free]) ** 2))
    n_free = int(free.sum())
    b_up = ACTION_HIGH - c[upper]
    b_lo = c[lower] - ACTION_LOW  # P(noise <= -b) = P(noise >= b)

    def nll(log_s: float) -> float:
        s = math.exp(log_s)
        v = n_free * log_s + r2 / (2 * s * s)
        v -= sum(_log_sf(b / s) for b in b_up)
        v -= sum(_log_sf(b / s) for b in b_lo)
        return v

    # golden-section search on log sigma in [1e-4, 10]
    lo, hi = math.log(1e-4), math.log(10.0)
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = nll(x1), nll(x2)
    for _ in range(80):
        if f1 < f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = nll(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = nll(x2)
    return math.exp((lo + hi) / 2)


def sigma_tolerance(n: int) -> float:
    """Relative tolerance of a noise-sigma estimate from ``n`` samples: five standard errors of
    a standard-deviation estimate (1/sqrt(2n)) plus 5%."""
    return 5.0 / math.sqrt(2.0 * max(n, 1)) + 0.05


class DelayLine:
    """Executes each command ``delay`` executed steps late: while fewer than ``delay`` commands
    are queued (right after the start), the robot holds. Each call returns (executed action,
    step whose command it is, or None for a hold)."""

    def __init__(self, delay: int) -> None:
        self.delay = delay
        self.queue: deque[tuple[int, np.ndarray]] = deque()

    def push(self, action: np.ndarray, step: int, ctx: EpisodeContext) -> tuple[np.ndarray, int | None]:
        self.queue.append((step, np.asarray(action, dtype=np.float64).copy()))
        if len(self.queue) > self.delay:
            src, a = self.queue.popleft()
            return a, src
        return hold_action(ctx), None

    def flush(self) -> int:
        """Drop the queued commands (the channel is restored); returns how many were dropped."""
        n = len(self.queue)
        self.queue.clear()
        return n


# --------------------------------------------------------------------------- windows
class _Windowed(Protocol):
    """The parameters of a window shift (each declares ``duration_steps`` in its own place)."""

    duration_steps: int


class WindowShift(RuntimeShift[RP]):
    """A runtime shift that acts during a window of ``params.duration_steps`` steps from the step
    it fired (see the module docstring for the window rule). Subclasses call :meth:`active` in
    their hooks, :meth:`mark` at each step they acted, and implement :meth:`measure` (the
    post-condition over the realised window)."""

    def __init__(self, params: RP | Mapping[str, Any]) -> None:
        super().__init__(params)
        self.window: tuple[int, int] | None = None
        self.active_steps: list[int] = []
        self.last_step = -1

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self.window = (step, step + int(cast(_Windowed, self.params).duration_steps))
        self.applied = {"window_steps": list(self.window)}
        self.on_fire(ctx, step)

    def on_fire(self, ctx: EpisodeContext, step: int) -> None:
        """Extra set-up when the window opens."""

    def tick(self, step: int) -> None:
        """Note that the episode reached ``step`` (observe() is called at every step)."""
        self.last_step = max(self.last_step, step)

    def observe(self, frame, step: int, ctx: EpisodeContext):
        self.tick(step)
        return frame

    def active(self, step: int) -> bool:
        return self.window is not None and self.window[0] <= step < self.window[1]

    def mark(self, step: int) -> None:
        if not self.active_steps or self.active_steps[-1] != step:
            self.active_steps.append(step)

    def measure(self, ctx: EpisodeContext) -> dict[str, Any]:
        """The post-condition over the realised window; raise :class:`ShiftInvalid`."""
        return {}

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        if self.window is None:
            self.applied["realised_steps"] = 0
            return
        self.applied["active_steps"] = list(self.active_steps)
        self.applied["realised_steps"] = len(self.active_steps)
        self.applied["truncated"] = self.last_step + 1 < self.window[1]
        if self.active_steps:
            self.applied["post_condition"] = self.measure(ctx)
