"""Episode videos and action logs (``liberopro evaluate --video``, ``--record-actions``; issue 13).

Both are written by the episode runner itself (:class:`liberopro.episode.runner.EpisodeRunner`), in the
process that runs the episode, straight into the run's output directory: ``videos/<name>.mp4`` and
``actions/<name>.npz``, named by :func:`episode_name` (task, case, diagnostic conditions, init
state, episode index). The episode record names them (``video``, ``actions``: paths relative to the
run directory). Neither changes anything else in the record nor what the policy receives
(``tests/evaluator/test_video.py``), except the work counted in ``renders``: a recorded episode
renders the recorded camera at every recorded step, which on-demand rendering
(:class:`liberopro.sim.scene.LiberoScene`) would otherwise skip.

A video frame, (B + S, 2S, 3) uint8, every :data:`RECORD_EVERY` policy-loop steps (10 fps, so
real time at LIBERO's 20 Hz control; a frame every step would double the renders recording adds
and show nothing a viewer sees at 10 fps): two S x S panels (S, the video size,
``RunSettings.video_size``, default :data:`DEFAULT_VIDEO_SIZE`), on the left the policy's view, on
the right the true third-person view (the clean ``agentview`` render, before any observation
shift), both upright, under a B-px strip (:func:`strip_height`) that holds every drawn word: the
step number, the panels' names and, while a runtime shift acts (from its firing step to the end
of its window, at least :data:`MIN_MARK_STEPS` steps for a one-off change), a red band naming the
shift and its firing step. Nothing is drawn over the scene: each panel is the render itself,
resized to S (nearest neighbour up, area average down), no new render at any size.
The policy's view is the image of :func:`policy_camera` as the policy last received it (after the
observation shifts, before its own orientation and resize; it changes at the steps the policy is
asked, every ``replan_steps``), or a grey panel saying so when the policy asks for no camera (the
privileged oracle). Taking the policy's image only when the policy reads it keeps the shifts' own
measurements (made on the images read) as they are without recording. The recorder keeps the
renders (render size) and composes frames only for a video it writes.

Actions are a sidecar ``.npz`` (``np.savez_compressed``), not base64 in the record: an episode of
520 steps holds two (520, 7) float64 arrays (~58 kB raw), which would make each JSON line ~10x
longer and every reader of ``episodes.jsonl`` slower, while ``np.load`` reads the sidecar as is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import cv2
import imageio.v2 as imageio
import numpy as np

if TYPE_CHECKING:
    from liberopro.instances.build import EpisodePlan
    from liberopro.shifts.base import Shift
    from submission_spec import PolicyMetadata

VideoMode = Literal["none", "failures", "all"]
VIDEO_MODES: tuple[str, ...] = ("none", "failures", "all")
#: Frames per second of the videos and of the review tool's clips.
FPS = 10
#: A video frame every this many policy-loop steps (20 Hz control -> 10 fps).
RECORD_EVERY = 2
#: The video's panel size (px) when none is given: each panel is the render resized to it.
DEFAULT_VIDEO_SIZE = 256
#: Video sizes accepted (px): a multiple of 16 (H.264 macro blocks, frame and strip) in this range.
VIDEO_SIZE_RANGE = (64, 1024)
#: The camera of the true third-person view.
TRUE_VIEW_CAMERA = "agentview"
#: A one-off runtime change is marked for this many steps from its firing step.
MIN_MARK_STEPS = 10
_RED = (255, 0, 0)


def write_mp4(path: Path, frames: list[np.ndarray], fps: int = FPS) -> str | None:
    """Write ``frames`` ((H, W, 3) uint8 each, H and W multiples of 16 best; others are padded by
    imageio-ffmpeg's macro-block rule) as an H.264 MP4 at ``fps``; returns the file name, or None
    (nothing written) for no frames. Creates the parent directory."""
    if not frames:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, [np.ascontiguousarray(f) for f in frames], fps=fps, macro_block_size=16)
    return path.name


def episode_name(plan: EpisodePlan) -> str:
    """A file stem unique within a run: ``<suite>-<task>_<case>[_<diagnostic>]_init<i>_ep<k>`` (case
    and diagnostic label with characters outside ``[A-Za-z0-9_.+-]`` replaced by ``-``). A
    replan-steps sweep runs each value into its own directory, so the stem need not name it."""
    inst, diag = plan.instance, plan.diagnostic
    parts = [f"{inst.task.suite}-{inst.task.index}", inst.case]
    if diag.label:
        parts.append(diag.label)
    parts += [f"init{plan.init_state_index}", f"ep{plan.episode_index}"]
    return "_".join(re.sub(r"[^A-Za-z0-9_.+-]", "-", p) for p in parts)


def policy_camera(meta: PolicyMetadata) -> str | None:
    """The camera shown as the policy's view: ``agentview`` if the policy asks for it, else its first
    camera, else None (a policy without images)."""
    names = [c.name for c in meta.cameras]
    if TRUE_VIEW_CAMERA in names:
        return TRUE_VIEW_CAMERA
    return names[0] if names else None


def recording_cameras(meta: PolicyMetadata, video: str) -> tuple[str, ...]:
    """The scene's cameras: the policy's, plus the true-view camera when videos are on."""
    cams: tuple[str, ...] = tuple(c.name for c in meta.cameras)
    if video != "none" and TRUE_VIEW_CAMERA not in cams:
        cams += (TRUE_VIEW_CAMERA,)
    return cams


def shift_marks(shifts: list[Shift], step: int) -> list[str]:
    """Labels of the runtime shifts acting at ``step``: fired at or before it and not released (the
    end of a window shift's window; else ``duration_steps`` + ``max_steps`` of its parameters),
    each at least :data:`MIN_MARK_STEPS` steps, e.g. ``"D12 fired at 40"``."""
    from liberopro.shifts.base import RuntimeShift

    marks = []
    for s in shifts:
        if not isinstance(s, RuntimeShift) or s.fired_at is None or step < s.fired_at:
            continue
        window = getattr(s, "window", None)
        if window is not None:
            end = window[1]
        else:
            p = s.params
            end = s.fired_at + int(getattr(p, "duration_steps", 0) or 0) + int(getattr(p, "max_steps", 0) or 0)
        if step < max(end, s.fired_at + MIN_MARK_STEPS):
            marks.append(f"{s.id} fired at {s.fired_at}")
    return marks


def _text(img: np.ndarray, text: str, org: tuple[int, int], scale: float, color=(255, 255, 255)) -> None:
    """Draw ``text`` on ``img`` in place, white (or ``color``) with a black outline."""
    th = max(1, round(scale * 2))
    cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), th + 2, cv2.LINE_AA)
    cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, color, th, cv2.LINE_AA)


def check_video_size(size: int) -> int:
    """``size`` (px) when it is a video panel size the encoder takes whole: a multiple of 16 in
    :data:`VIDEO_SIZE_RANGE`; ``ValueError`` naming the nearest ones otherwise."""
    lo, hi = VIDEO_SIZE_RANGE
    if not lo <= size <= hi or size % 16:
        near = min(max(lo, 16 * round(size / 16)), hi)
        raise ValueError(f"--video-size {size}: give a multiple of 16 from {lo} to {hi} px (e.g. {near})")
    return size


def strip_height(size: int) -> int:
    """Height (px) of the text strip above panels of ``size`` px: two text lines, a multiple of
    16 (so the frame's height is one too), at least 32."""
    return max(32, 16 * -(-size // 64))


def _panel(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` ((H, W, 3) uint8, upright) as a (size, size, 3) panel: as is at its own size,
    else resized (nearest neighbour up: no detail invented; area average down)."""
    if img.shape[:2] == (size, size):
        return img
    interp = cv2.INTER_NEAREST if size >= max(img.shape[:2]) else cv2.INTER_AREA
    return cv2.resize(np.ascontiguousarray(img), (size, size), interpolation=interp)


def compose_frame(
    policy_view: np.ndarray | None,
    true_view: np.ndarray,
    step: int,
    marks: list[str],
    policy_label: str = "policy",
    size: int | None = None,
) -> np.ndarray:
    """One video frame, (B + S, 2S, 3) uint8 (S = ``size``, default the render's height; B =
    :func:`strip_height` of S): rows B: hold ``policy_view`` | ``true_view`` (each (H, W, 3) uint8
    as rendered, upside down; shown upright and resized to S x S; a missing policy view is a grey
    panel), untouched; rows :B, the strip: ``t=<step>`` and the panel names (``policy_label``
    on the left) on dark grey, and below them a red band naming ``marks`` (the runtime shifts
    acting), dark grey without."""
    s = size or true_view.shape[0]
    left: np.ndarray
    if policy_view is None:
        left = np.full((s, s, 3), 64, np.uint8)
        _text(left, "policy gets", (4, s // 2 - 4), s / 400)
        _text(left, "no image", (4, s // 2 + max(8, s // 14)), s / 400)
    else:
        left = _panel(policy_view[::-1], s)
    b = strip_height(s)
    out = np.empty((b + s, 2 * s, 3), np.uint8)
    out[:b] = 32
    out[b:, :s], out[b:, s:] = left, _panel(true_view[::-1], s)
    half, scale = b // 2, b / 64
    _text(out, policy_label, (4, half - 5), scale * 0.8)
    _text(out, "true view", (s + 4, half - 5), scale * 0.8)
    if marks:
        out[half:b] = _RED
    _text(out, "   ".join([f"t={step}", *marks]), (4, b - 5), scale)
    return out


class EpisodeRecorder:
    """What one episode records, in the process that runs it.

    Args:
        out_dir: the run's output directory (files go to ``videos/`` and ``actions/`` under it).
        name: the episode's file stem (:func:`episode_name`).
        video: ``none``, ``failures`` (frames kept in memory until the outcome is known; written
            for an episode that did not succeed) or ``all``.
        record_actions: keep the executed and commanded actions of every step.
        policy_cam: the camera shown as the policy's view (:func:`policy_camera`), or None.
        video_size: the panels' size in the video (px, :func:`check_video_size`; None:
            :data:`DEFAULT_VIDEO_SIZE`). Frames are composed from the renders kept (render size)
            only when a video is written: ``failures`` keeps no more memory at a larger size.
    """

    def __init__(
        self,
        out_dir: Path,
        name: str,
        video: str,
        record_actions: bool,
        policy_cam: str | None,
        video_size: int | None = None,
    ) -> None:
        if video not in VIDEO_MODES:
            raise ValueError(f"video mode {video!r}: use one of {', '.join(VIDEO_MODES)}")
        self.out_dir, self.name, self.video, self.record_actions = Path(out_dir), name, video, record_actions
        self.policy_cam = policy_cam
        self.video_size = check_video_size(video_size or DEFAULT_VIDEO_SIZE)
        #: (policy's view or None, true view, step, marks) of each frame, the images as rendered
        self.frames: list[tuple[np.ndarray | None, np.ndarray, int, list[str]]] = []
        self.delivered: np.ndarray | None = None
        self.executed: list[np.ndarray] = []
        self.commanded: list[np.ndarray] = []

    def policy_asked(self, images) -> None:
        """The policy was just sent ``images`` (camera -> (H, W, 3) uint8 as rendered, after the
        observation shifts): keep its view's image (already read by the message, so reading it
        again renders and measures nothing)."""
        if self.video != "none" and self.policy_cam is not None:
            self.delivered = np.array(images[self.policy_cam])

    def step(self, step: int, raw_images, marks: list[str]) -> None:
        """Policy-loop step ``step``: a frame every :data:`RECORD_EVERY` steps, from the scene's
        clean ``raw_images`` (before the observation shifts) and the last delivered image. Call it
        before the env steps (the frame must be read before the scene moves on)."""
        if self.video == "none" or step % RECORD_EVERY:
            return
        self.frames.append((self.delivered, np.array(raw_images[TRUE_VIEW_CAMERA]), step, list(marks)))

    def action(self, executed: np.ndarray, commanded: np.ndarray | None) -> None:
        """The (7,) LIBERO action sent to the env, and the policy's (7,) row before any action layer
        (its own convention), or None when an intervention supplied the action."""
        if self.record_actions:
            self.executed.append(np.asarray(executed, np.float64).copy())
            self.commanded.append(
                np.full(7, np.nan) if commanded is None else np.asarray(commanded, np.float64).reshape(7).copy()
            )

    def finish(self, success: bool) -> tuple[str | None, str | None]:
        """Write what is due; returns the video's and the actions file's paths relative to the run
        directory (None for what was not written)."""
        video = None
        if self.frames and (self.video == "all" or (self.video == "failures" and not success)):
            label = "policy" if self.policy_cam is None else f"policy {self.policy_cam}"
            frames = [compose_frame(p, t, k, m, label, self.video_size) for p, t, k, m in self.frames]
            write_mp4(self.out_dir / "videos" / f"{self.name}.mp4", frames)
            video = f"videos/{self.name}.mp4"
        self.frames = []
        actions = None
        if self.record_actions:
            path = self.out_dir / "actions" / f"{self.name}.npz"
            path.parent.mkdir(parents=True, exist_ok=True)
            save_actions(path, self.executed, self.commanded)
            actions = f"actions/{self.name}.npz"
        return video, actions


def save_actions(path: Path, executed: list[np.ndarray], commanded: list[np.ndarray]) -> None:
    """``executed`` and ``commanded`` as (T, 7) float64 arrays in a compressed ``.npz``."""
    np.savez_compressed(
        path,
        executed=np.asarray(executed, np.float64).reshape(-1, 7),
        commanded=np.asarray(commanded, np.float64).reshape(-1, 7),
    )


def load_actions(path: Path) -> dict[str, np.ndarray]:
    """An actions file: ``executed`` (T, 7) float64, the LIBERO action sent to the env at each
    policy-loop step (after the action layers: gripper convention, clipping, action shifts; or an
    intervention's action), and ``commanded`` (T, 7) float64, the policy's own action of that step
    before any action layer (its gripper convention), NaN rows where an intervention (a shift's
    override, a recovery protocol) replaced the policy."""
    with np.load(path) as data:
        return {"executed": data["executed"], "commanded": data["commanded"]}


__all__ = [
    "DEFAULT_VIDEO_SIZE",
    "FPS",
    "RECORD_EVERY",
    "VIDEO_MODES",
    "EpisodeRecorder",
    "compose_frame",
    "episode_name",
    "load_actions",
    "policy_camera",
    "recording_cameras",
    "save_actions",
    "check_video_size",
    "shift_marks",
    "strip_height",
    "write_mp4",
]
