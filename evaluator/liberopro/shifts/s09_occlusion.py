"""S09 occlusion (Environment, static): a static occluder hides 20-50% of the target in the
third-person view, not in the robot's path (``docs/definition.md``, "Static shifts").

Realisation: a thin flat board (a static box without collisions, so it can never touch the
robot or an object) facing the third-person camera (``agentview``), between the camera and the
target at ``depth_ratio`` of the target's depth from the camera: far outside the workspace and
the robot's reach. Its size is set from the target's projected size (1.2 x its half-extent in
the image, at the board's depth); it slides in from the image direction ``side_deg`` (0 = from
the right of the picture, 90 = from the top, as seen) and is placed by bisection so that it
hides ``fraction`` of the target's pixels, measured with segmentation renders (target visual
geoms) at max(128, render size) px, doubled up to 512 px while the target covers fewer than 600
px.

Post-condition: the hidden fraction, re-measured on the settled scene, is within 0.05 of the
stated one and inside 0.2-0.5; the board is farther than 0.9 m from the robot base (the Panda
reaches 0.855 m) and collides with nothing (contype/conaffinity 0).

Defaults: fraction 0.2-0.5; depth ratio 0.2-0.35; side uniform. Applies to every task (for an
articulated target the fixture is the target: the cabinet, the stove).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import mujoco
import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import OcclusionParams
from liberopro.shifts._placement import Blocked
from liberopro.shifts._props import (
    entity_aabb,
    hidden_fraction,
    project,
    prop_body,
    prop_record,
    resize_primitive,
    target_pixels,
)
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim.scene import PropSpec, SceneVariant

PROP = "liberopro_prop_s09_occluder"
CAMERA = "agentview"
#: Least distance between the occluder and the robot base (m): beyond the Panda's 0.855 m reach.
MIN_ROBOT_DISTANCE_M = 0.9
#: The target must show at least this many pixels (at the measuring size) to be occluded.
MIN_TARGET_PIXELS = 20
#: Bisection stops within this much of the stated fraction.
TOLERANCE = 0.015
#: Post-condition tolerance on the re-measured fraction.
POST_TOLERANCE = 0.05


def occluder_variant(prop: str) -> SceneVariant:
    return SceneVariant(props=(PropSpec(prop, "box", (0.02, 0.02, 0.002), (0.22, 0.24, 0.27, 1.0), collide=False),))


#: The target should cover at least this many pixels in the measuring render (finer steps).
GOOD_TARGET_PIXELS = 600


def measure_size(scene, sem) -> int:
    """Render size (px) for measuring: at least 128 and the scene's own, larger for a small
    target (up to 512) so that one pixel column is a small step of the hidden fraction."""
    size = max(128, scene.render_size)
    while size < 512 and target_pixels(scene, sem, CAMERA, size).sum() < GOOD_TARGET_PIXELS:
        size *= 2
    return size


def target_in_frame(scene, sem) -> bool:
    """Whether the corners of the target's bounding box (world frame) all project inside the
    :data:`CAMERA` picture, in front of the camera."""
    lo, hi = entity_aabb(scene, [sem.target])
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    uv = project(scene, CAMERA, corners)
    return bool(np.all(np.isfinite(uv)) and np.all((uv > 0) & (uv < 1)))


#: How far :func:`robot_out_of_view` moves the robot (m, down): far below the table, out of every camera's view.
ROBOT_PARK_M = 50.0


@contextlib.contextmanager
def robot_out_of_view(scene, active: bool = True) -> Iterator[None]:
    """Within the block, the robot (its root body and so the whole arm and gripper) is moved
    :data:`ROBOT_PARK_M` below the world for kinematics and renders only (``mj_kinematics``; no
    physics step, no contact); on exit it is put back and the kinematics recomputed from the same
    ``qpos``, so the state is as before (bit for bit: kinematics are a function of ``qpos`` and the
    model). For measurements that must not depend on where the arm stands (D09's occlusion at run
    time). ``active`` False: does nothing."""
    if not active:
        yield
        return
    m, d = scene.model, scene.data
    root = scene.robot_root()
    pos = m.body_pos[root].copy()
    m.body_pos[root] = pos + np.array([0.0, 0.0, -ROBOT_PARK_M])
    mujoco.mj_kinematics(m, d)
    try:
        yield
    finally:
        m.body_pos[root] = pos
        mujoco.mj_kinematics(m, d)


def place_occluder(
    scene, prop: str, sem, fraction: float, depth_ratio: float, side_deg: float, without_robot: bool = False
) -> dict:
    """Put the occluder ``prop`` so that it hides ``fraction`` of the target's pixels now; returns the
    measurements. ``without_robot``: the target's pixels are measured with the robot out of the
    picture (:func:`robot_out_of_view`: the arm in front of the target neither counts as hiding it
    nor blocks the placement; D09). Raises ``ValueError`` when the target is not visible enough or
    the fraction cannot be reached: :class:`~liberopro.shifts._placement.Blocked` when it is hardly
    visible although inside the picture (hidden by something in front of it: at run time the arm,
    or with ``without_robot`` what it carries)."""
    with robot_out_of_view(scene, without_robot):
        placed = _place_occluder(scene, prop, sem, fraction, depth_ratio, side_deg)
    scene.refresh()
    return {**placed, **({"robot_excluded": True} if without_robot else {})}


def _place_occluder(scene, prop: str, sem, fraction: float, depth_ratio: float, side_deg: float) -> dict:
    """:func:`place_occluder` in the scene as it is (the caller refreshes it)."""
    size = measure_size(scene, sem)
    m, d = scene.model, scene.data
    cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, CAMERA)
    rot = d.cam_xmat[cid].reshape(3, 3).copy()
    cam = d.cam_xpos[cid].copy()
    f = 0.5 / math.tan(math.radians(m.cam_fovy[cid]) / 2)
    before = target_pixels(scene, sem, CAMERA, size)
    n = int(before.sum())
    if n < MIN_TARGET_PIXELS:
        # inside the picture's frame yet hardly visible: something in front of it hides it (at run
        # time the arm or what it carries, which move on); outside the frame: it left the view
        framed = target_in_frame(scene, sem)
        raise (Blocked if framed else ValueError)(
            f"the target shows {n} px in the {CAMERA} view ({size} px): too few to occlude"
            + (" (it is inside the picture: something in front hides it)" if framed else "")
        )
    rows, cols = np.nonzero(before)
    # picture coordinates (fractions, origin top left) of the target's pixels (render is upside down)
    xs, ys = (cols + 0.5) / size, (size - rows - 0.5) / size
    cx, cy = float(xs.mean()), float(ys.mean())
    half_img = 0.5 * max(xs.max() - xs.min(), ys.max() - ys.min()) + 1.0 / size
    tpos = scene.body_pos(scene.root_body(sem.target))
    depth = float(-((tpos - cam) @ rot)[2])  # along the camera's viewing axis
    z = depth_ratio * depth
    metres_per_frac = z / f
    half = 1.2 * half_img * metres_per_frac
    resize_primitive(scene, prop, (half, half, 0.002))
    centre = cam + rot @ np.array([(cx - 0.5) / f * z, -(cy - 0.5) / f * z, -z])
    e = rot @ np.array([math.cos(math.radians(side_deg)), math.sin(math.radians(side_deg)), 0.0])
    bid = prop_body(scene, prop)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rot.flatten())
    m.body_quat[bid] = quat

    def hidden_at(offset: float) -> float:
        m.body_pos[bid] = centre + offset * e
        mujoco.mj_kinematics(m, d)
        return hidden_fraction(before, target_pixels(scene, sem, CAMERA, size))

    lo, hi = 0.0, half + 2 * half_img * metres_per_frac  # hidden ~1 at lo, 0 at hi
    h_lo, h_hi = hidden_at(lo), hidden_at(hi)
    if not h_hi <= fraction <= h_lo:
        raise ValueError(f"the occluder hides {h_hi:.2f}-{h_lo:.2f} of the target, not {fraction:.2f}")
    best = (abs(h_lo - fraction), lo, h_lo)
    for _ in range(16):
        offset = (lo + hi) / 2
        hidden = hidden_at(offset)
        best = min(best, (abs(hidden - fraction), offset, hidden))
        if abs(hidden - fraction) <= TOLERANCE:
            break
        lo, hi = (offset, hi) if hidden > fraction else (lo, offset)
    _, offset, hidden = best
    hidden_at(offset)
    return {
        "camera": CAMERA,
        "measure_px": size,
        "target_pixels": n,
        "depth_m": round(z, 4),
        "board_m": round(2 * half, 4),
        "offset_m": round(offset, 4),
        "hidden_fraction": round(hidden, 4),
    }


def occluder_post(scene, prop: str, sem, before_mask: np.ndarray | None = None, without_robot: bool = False) -> dict:
    """Re-measure: hidden fraction now (the occluder parked for the reference render and put
    back; ``without_robot``: both renders with the robot out of the picture,
    :func:`robot_out_of_view`), distance to the robot base, collisions disabled."""
    with robot_out_of_view(scene, without_robot):
        post = _occluder_post(scene, prop, sem, before_mask)
    base = scene.body_pos(scene.robot_root())
    bid = prop_body(scene, prop)
    post["robot_base_distance_m"] = round(float(np.linalg.norm(scene.data.xpos[bid] - base)), 4)
    return post


def _occluder_post(scene, prop: str, sem, before_mask: np.ndarray | None) -> dict:
    """:func:`occluder_post`'s renders (the robot's distance is measured by the caller)."""
    bid = prop_body(scene, prop)
    m, d = scene.model, scene.data
    pos = m.body_pos[bid].copy()
    m.body_pos[bid] = pos + np.array([0, 0, -50.0])
    mujoco.mj_kinematics(m, d)
    size = measure_size(scene, sem)
    if before_mask is None:
        before_mask = target_pixels(scene, sem, CAMERA, size)
    m.body_pos[bid] = pos
    mujoco.mj_kinematics(m, d)
    with_occ = target_pixels(scene, sem, CAMERA, size)
    geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == bid]
    seg = scene.render(CAMERA, size=size, segmentation=True)
    return {
        "measure_px": size,
        "hidden_fraction": round(hidden_fraction(before_mask, with_occ), 4),
        "image_fraction": round(float(np.isin(seg, geoms).mean()), 4),
        "collides": bool(any(m.geom_contype[g] or m.geom_conaffinity[g] for g in geoms)),
    }


def check_occluder_post(shift_id: str, post: dict, fraction: float) -> None:
    h = post["hidden_fraction"]
    if abs(h - fraction) > POST_TOLERANCE or not 0.2 - POST_TOLERANCE <= h <= 0.5 + POST_TOLERANCE:
        raise ShiftInvalid(shift_id, f"the occluder hides {h:.3f} of the target, stated {fraction:.3f} (0.2-0.5)")
    if post["robot_base_distance_m"] < MIN_ROBOT_DISTANCE_M or post["collides"]:
        raise ShiftInvalid(
            shift_id, f"the occluder is within the robot's reach ({post['robot_base_distance_m']} m) or collides"
        )


class Occlusion(Shift[OcclusionParams]):
    spec = SPECS["S09"]

    @classmethod
    def scene_variant(cls, params):
        return occluder_variant(PROP)

    def on_settled(self, ctx: EpisodeContext) -> bool:
        p = self.params
        try:
            placed = place_occluder(ctx.scene, PROP, ctx.sem, p.fraction, p.depth_ratio, p.side_deg)
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        self.applied = {**placed, **prop_record(ctx.scene, PROP)}
        return False  # nothing that moves was touched

    def verify(self, ctx: EpisodeContext) -> None:
        post = occluder_post(ctx.scene, PROP, ctx.sem)
        self.applied["post_condition"] = post
        check_occluder_post(self.id, post, self.params.fraction)
