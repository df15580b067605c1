"""From a raw simulator frame to what the policy asked for (its metadata), and from the policy's
action back to LIBERO's convention."""

from __future__ import annotations

import cv2
import numpy as np
from submission_spec.models import PROPRIO_FIELDS, ProprioValue

from liberopro.sim.scene import RawFrame
from submission_spec import NDArray, ObservationMessage, PolicyMetadata


def orient(img: np.ndarray, orientation: str) -> np.ndarray:
    """Rendered buffer (upside down) -> the requested orientation.

    ``rotate_180``: ``img[::-1, ::-1]`` (the LIBERO datasets' convention); ``upright``:
    ``img[::-1]``; ``as_rendered``: unchanged.
    """
    if orientation == "rotate_180":
        return img[::-1, ::-1]
    if orientation == "upright":
        return img[::-1]
    if orientation == "as_rendered":
        return img
    raise ValueError(f"unknown image orientation {orientation!r}")


def resize(img: np.ndarray, height: int, width: int, mode: str) -> np.ndarray:
    """(H, W, 3) uint8 -> (height, width, 3) uint8. ``resize_with_pad`` keeps the aspect ratio and
    pads with black, centred; ``stretch`` does not. Area interpolation when shrinking, bilinear
    when enlarging (OpenCV)."""
    h, w = img.shape[:2]
    if (h, w) == (height, width):
        return np.ascontiguousarray(img)
    if mode == "resize_with_pad":
        scale = min(height / h, width / w)
        nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    else:
        nh, nw = height, width
    interp = cv2.INTER_AREA if nh < h or nw < w else cv2.INTER_LINEAR
    small = cv2.resize(np.ascontiguousarray(img), (nw, nh), interpolation=interp)
    if (nh, nw) == (height, width):
        return small
    out = np.zeros((height, width, 3), dtype=np.uint8)
    top, left = (height - nh) // 2, (width - nw) // 2
    out[top : top + nh, left : left + nw] = small
    return out


def received_image(meta: PolicyMetadata, camera: str, img: np.ndarray) -> np.ndarray | None:
    """Camera ``camera``'s rendered image ``img`` ((H, W, 3) uint8, as rendered) as the policy
    receives it: oriented and resized as :func:`to_message` does (same functions, same order).
    None when the policy does not ask for that camera. Used to measure what a shift's change
    amounts to after the resize (S14, D13), never to build the message."""
    for cam in meta.cameras:
        if cam.name == camera:
            return resize(orient(img, meta.image_orientation), cam.height, cam.width, meta.resize_mode)
    return None


def to_message(
    frame: RawFrame, meta: PolicyMetadata, episode_id: str, step: int, instruction: str
) -> ObservationMessage:
    """Build the ``/act`` body: the cameras and proprioception fields ``meta`` asks for."""
    images = {}
    for cam in meta.cameras:
        img = orient(frame.images[cam.name], meta.image_orientation)
        images[cam.name] = NDArray.from_numpy(resize(img, cam.height, cam.width, meta.resize_mode))
    proprio = {}
    for name in meta.state_fields:
        _, unit, fr, _ = PROPRIO_FIELDS[name]
        proprio[name] = ProprioValue(value=[float(x) for x in frame.proprio[name]], unit=unit, frame=fr)
    return ObservationMessage(episode_id=episode_id, step=step, instruction=instruction, images=images, proprio=proprio)


#: The gripper value that opens in each convention (``to_libero_action`` makes it LIBERO's -1).
_GRIPPER_OPEN = {"libero": -1.0, "open_positive": 1.0, "unit_open_is_one": 1.0, "unit_close_is_one": 0.0}


def neutral_action(meta: PolicyMetadata) -> np.ndarray:
    """The neutral policy's action in ``meta``'s gripper convention: arm still, gripper open,
    (7,) float64, which :func:`to_libero_action` makes LIBERO's ``[0, 0, 0, 0, 0, 0, -1]`` (the
    settle action). ``KeyError`` for a convention :func:`to_libero_action` does not know."""
    return np.array([0, 0, 0, 0, 0, 0, _GRIPPER_OPEN[meta.gripper_convention]], dtype=np.float64)


def to_libero_action(action: np.ndarray, meta: PolicyMetadata) -> np.ndarray:
    """The policy's 7-vector -> LIBERO's (-1 opens, +1 closes), arm part clipped to [-1, 1].

    Gripper conventions: ``libero`` g; ``open_positive`` -g; ``unit_open_is_one`` 1 - 2g;
    ``unit_close_is_one`` 2g - 1; then, with ``binarize_gripper``, +1 if > 0 else -1.
    """
    a = np.asarray(action, dtype=np.float64).copy()
    g = a[6]
    conv = meta.gripper_convention
    if conv == "open_positive":
        g = -g
    elif conv == "unit_open_is_one":
        g = 1.0 - 2.0 * g
    elif conv == "unit_close_is_one":
        g = 2.0 * g - 1.0
    if meta.binarize_gripper:
        g = 1.0 if g > 0 else -1.0
    a[6] = g
    return np.clip(a, -1.0, 1.0)
