"""D19 robot displacement (Robot, runtime, trigger approach or transport): the end effector is
pushed 3-8 cm by a bounded control intervention (``docs/definition.md``, "Runtime shifts";
"Constraints on a shifted task": "grasp loss and robot displacement are injected outcome states or
bounded control interventions, not simulated impacts"). During the push the evaluator, not the
policy, commands the arm (at most ``max_steps`` steps of at most full-scale delta actions, gripper
command unchanged); then control returns to the policy, which is asked for a fresh chunk.

Robust to where the policy left the arm (issue 22, item 5): at the firing step the push direction
is re-checked against the scene as it is then: the drawn ``direction_deg`` first, then its
neighbours in 45 degree steps (+45, -45, +90, ..., 180: a fixed, deterministic order), the first
whose sweep is free is used (``direction_used_deg`` in the record, with the refused ones); a
direction along which the grip site stalls (less than :data:`STALL_M` over its last
:data:`STALL_STEPS` push steps: a joint limit, something in the way, a pose the controller
cannot follow) gives way to the next free one, from where the grip site then is (``directions_stalled``), all within
``max_steps``; the post-condition is measured along the direction finally used. A
sweep is free when horizontal rays (:data:`SWEEP_POINTS`: the grip site, 4 cm to either side of
it and 4 cm below it) travel ``distance_m`` + :data:`SWEEP_MARGIN_M` without meeting anything but
the robot and what the gripper touches (it moves with it), and the end point stays within
:data:`REACH_M` of the robot base horizontally. When no direction is free the drawn one is
pushed; a push that then falls short is ``shift_blocked`` (the policy's failure: the arm stands
where the policy put it)."""

from __future__ import annotations

import math

import mujoco
import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.robot import DisplacementParams
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid

#: OSC_POSE position scale: an action of 1.0 asks for 0.05 m per step (robosuite osc_pose.json).
OSC_POS_SCALE_M = 0.05
#: Candidate push directions, relative to the drawn one (degrees), in the order tried.
DIRECTION_STEPS_DEG = (0, 45, -45, 90, -90, 135, -135, 180)
#: Ray origins relative to the grip site (m): (sideways, up), sideways perpendicular to the push.
SWEEP_POINTS = ((0.0, 0.0), (0.04, 0.0), (-0.04, 0.0), (0.0, -0.04))
#: Free length beyond the push distance a sweep needs (m): the fingers reach ahead of the grip site.
SWEEP_MARGIN_M = 0.04
#: Largest horizontal distance of the pushed grip site from the robot base (m; the Panda reaches 0.855 m).
REACH_M = 0.8
#: A direction stalls when over its last this many push steps the grip site has moved less than
#: :data:`STALL_M` along it (the arm at a joint limit, against something, or in a pose the
#: controller cannot follow, where the policy left it): the push goes on along the next candidate.
STALL_STEPS = 4
STALL_M = 0.005


def _sweep_problem(scene, start: np.ndarray, direction: np.ndarray, length: float, moving: set[int]) -> str | None:
    """Why a horizontal push of the grip site from ``start`` ((3,) m, world) along ``direction``
    ((2,) unit, world xy) over ``length`` m is not free (None: it is): a geom (not of a body in
    ``moving``, root body ids) within ``length`` + :data:`SWEEP_MARGIN_M` of a sweep point, or an
    end point beyond :data:`REACH_M` from the robot base."""
    m, d = scene.model, scene.data
    end = start[:2] + direction * length
    base = scene.body_pos(scene.robot_root())[:2]
    if np.linalg.norm(end - base) > REACH_M:
        return f"end {np.linalg.norm(end - base):.3f} m from the robot base"
    vec = np.array([direction[0], direction[1], 0.0])
    side = np.array([-direction[1], direction[0], 0.0])
    geom = np.zeros(1, dtype=np.int32)
    for lateral, up in SWEEP_POINTS:
        pnt = start + lateral * side + np.array([0.0, 0.0, up])
        left = length + SWEEP_MARGIN_M
        while left > 0:
            dist = mujoco.mj_ray(m, d, pnt, vec, None, 1, -1, geom)
            if dist < 0 or dist > left:
                break
            root = int(m.body_rootid[m.geom_bodyid[geom[0]]])
            if root not in moving:
                return f"{scene.entity_name(root)} {dist:.3f} m ahead"
            pnt, left = pnt + vec * (dist + 1e-4), left - dist - 1e-4
    return None


class RobotDisplacement(RuntimeShift[DisplacementParams]):
    spec = SPECS["D19"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._start: np.ndarray | None = None
        self._done = False
        self._steps = 0
        self._progress: list[float] = []  # displacement along the current direction before each of its push steps
        self._next: list[float] = []  # the candidate directions not tried yet (degrees), in order

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        scene = ctx.scene
        self._start = scene.eef_pos()
        touched_now = getattr(ctx.phases, "touched_now", None)  # PhaseTracker once the policy loop runs
        touched = touched_now() if touched_now is not None else set()
        objects = scene.inner.obj_body_id  # touched_now also names regions (sites), which have no body
        moving = {scene.robot_root()} | {objects[n] for n in touched if n in objects}
        refused: dict[str, str] = {}
        free: list[float] = []
        for offset in DIRECTION_STEPS_DEG:
            deg = (self.params.direction_deg + offset) % 360
            a = math.radians(deg)
            why = _sweep_problem(
                scene, self._start, np.array([math.cos(a), math.sin(a)]), self.params.distance_m, moving
            )
            if why is None:
                free.append(deg)
            else:
                refused[f"{deg:g}"] = why
        candidates = free or [self.params.direction_deg]
        used, self._next = candidates[0], candidates[1:]
        self._set_direction(used)
        self.applied = {
            "start_eef_m": np.round(self._start, 4).tolist(),
            "direction_used_deg": round(used, 2),
            **({"directions_refused": refused} if refused else {}),
        }

    def _set_direction(self, deg: float) -> None:
        a = math.radians(deg)
        self._dir = np.array([math.cos(a), math.sin(a)])
        self._progress = []

    def override(self, ctx: EpisodeContext, step: int) -> np.ndarray | None:
        if self._start is None or self._done:
            return None
        moved = float(np.dot(ctx.scene.eef_pos()[:2] - self._start[:2], self._dir))
        remaining = self.params.distance_m - moved
        if remaining <= 0.002 or self._steps >= self.params.max_steps:
            self._finish(ctx, moved)
            return None
        stalled_now = len(self._progress) >= STALL_STEPS and moved - self._progress[-STALL_STEPS] < STALL_M
        if stalled_now and self._next:
            # stalled: go on along the next free direction, measured from where the grip site is now
            stalled = self.applied.setdefault("directions_stalled", {})
            stalled[f"{self.applied['direction_used_deg']:g}"] = round(moved, 4)
            deg = self._next.pop(0)
            self._set_direction(deg)
            self._start = ctx.scene.eef_pos()
            self.applied["direction_used_deg"] = round(deg, 2)
            self.applied["push_start_eef_m"] = np.round(self._start, 4).tolist()
            moved, remaining = 0.0, self.params.distance_m
        self._steps += 1
        self._progress.append(moved)
        mag = min(1.0, remaining / OSC_POS_SCALE_M)
        action = np.zeros(7)
        action[:2] = self._dir * mag
        action[6] = ctx.last_action[6]
        return action

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        if self._start is not None and not self._done:  # the episode ended during the push
            self._finish(ctx, float(np.dot(ctx.scene.eef_pos()[:2] - self._start[:2], self._dir)))

    def _finish(self, ctx: EpisodeContext, moved: float) -> None:
        self._done = True
        self.applied.update(
            {
                "push_steps": self._steps,
                "end_eef_m": np.round(ctx.scene.eef_pos(), 4).tolist(),
                "post_condition": {"displaced_m": round(moved, 4)},
            }
        )
        if moved < 0.8 * self.params.distance_m:
            raise ShiftInvalid(
                self.id,
                f"end effector moved {moved:.3f} m of the stated "
                f"{self.params.distance_m:.3f} m in {self._steps} steps (blocked)",
            )
