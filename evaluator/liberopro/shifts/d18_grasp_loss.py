"""D18 grasp loss (Robot, runtime, trigger transport): the gripper is forced open for a few steps,
so what it carries drops, then control returns to the policy (``docs/definition.md``, "Runtime
shifts"; "Constraints on a shifted task": "grasp loss and robot displacement are injected outcome
states or bounded control interventions, not simulated impacts or falling forces").

Realisation: from the firing step the evaluator, not the policy, commands the robot (an
override, like D19's push): gripper command -1 (open), arm held (zero OSC_POSE delta: the
controller holds the current end-effector pose). What the gripper holds falls out under gravity
alone; nothing pushes it. When the window ends control returns and the policy is asked for a
fresh chunk (the runner discards the rest of its chunk after any intervention).

Window: ``open_steps`` steps (default 10-14). LIBERO's Panda gripper moves its command by 0.25
per step (robosuite ``PandaGripper.speed`` 0.01 per 2 ms substep), so from fully closed it needs 8
steps to be fully open; fingers closed on a 6.3 cm can let go after ~6 steps and the can lands
~2 steps later, a bowl held by its rim is free after 1-2 steps and lands after ~3. The default
window is therefore the 8 steps of opening plus 2-6 steps in which the object falls clear, and
control returns with the object out of the hand. If the held thing still touches a finger when the window
ends (still sliding out, or a knob still turning into an open finger), the window is extended,
at most ``release_timeout_steps`` steps, until it does not. For an articulated part (a drawer
handle, the stove knob: the "object" of an articulated task) the hand also backs off along its
own approach axis, from the third step of the window on, by at most :data:`BACKOFF_M` in all: a
handle, unlike a carried object, does not fall away from open fingers.

What is held: the task's actors (:class:`liberopro.episode.phases.PhaseTracker`) that a gripper finger
touches at the firing step (normally the one whose transport fired it). When the shift fires at
its fallback step with nothing held, the gripper is still forced open for the window (the
record says ``held_at_fire: []``): the stated intervention happened; there was nothing to drop.

Post-condition (measured in the simulator at the end of the window): no gripper finger touches
anything that was held at the firing step. Recorded with it: the window actually used, the
finger opening (m) at fire and at release, and for each held object how far it dropped (m,
its height at the end of the window minus at fire) and whether it still rests on nothing but
air. Raises :class:`ShiftInvalid` if a held thing is still in contact with the gripper after the
extension (e.g. a policy pushing a door with its hand: opening the fingers drops nothing).

Applicability: every task except pushing (libero_goal 5): a pushed plate is never held.

Defaults: trigger ``transport``; the fallback step of the per-task rule (:mod:`liberopro.catalog.fallbacks`);
``open_steps`` uniform in {10, ..., 14}; ``release_timeout_steps`` 10.
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.robot import GraspLossParams
from liberopro.episode.phases import PhaseTracker
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid

#: Largest back-off of the hand from a released articulated part (m, along its approach axis).
BACKOFF_M = 0.04
#: Back-off speed: OSC_POSE action magnitude along the approach axis (x 0.05 m target offset).
BACKOFF_ACTION = 0.3


class GraspLoss(RuntimeShift[GraspLossParams]):
    spec = SPECS["D18"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._start: int | None = None
        self._done = False
        self._tracker: PhaseTracker | None = None
        self._held: list[str] = []
        self._z0: dict[str, float] = {}
        self._backoff_start: np.ndarray | None = None

    @classmethod
    def applicable(cls, ref, sem):
        if sem.kind == "push":
            return "the target is pushed, never held: there is nothing to drop"
        return None

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _opening(ctx: EpisodeContext) -> float:
        robot = ctx.scene.inner.robots[0]
        q = ctx.scene.data.qpos[robot._ref_gripper_joint_pos_indexes]
        return float(abs(q[0]) + abs(q[1]))

    def _is_part(self, name: str) -> bool:
        return self._tracker is not None and self._tracker.actor(name).part is not None

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self._tracker = ctx.phases if isinstance(ctx.phases, PhaseTracker) else PhaseTracker(ctx.scene, ctx.sem)
        touched = self._tracker.touched_now()
        self._held = [a.name for a in self._tracker.actors if a.name in touched]
        self._z0 = {n: float(ctx.scene.body_pos(self._tracker.actor(n).body)[2]) for n in self._held}
        self._start = step
        self.applied = {
            "held_at_fire": list(self._held),
            "opening_at_fire_m": round(self._opening(ctx), 4),
            "eef_at_fire_m": np.round(ctx.scene.eef_pos(), 4).tolist(),
        }

    def override(self, ctx: EpisodeContext, step: int) -> np.ndarray | None:
        if self._start is None or self._done or self._tracker is None:  # the tracker is set at fire
            return None
        k = step - self._start  # steps of the window already executed
        if k >= self.params.open_steps:
            still = sorted(set(self._held) & self._tracker.touched_now())
            if not still or k >= self.params.open_steps + self.params.release_timeout_steps:
                self._finish(ctx, self._tracker, self._start, k, still)
                return None
        action = np.zeros(7)
        action[6] = -1.0
        if k >= 2 and any(self._is_part(n) for n in self._held):
            eef = ctx.scene.eef_pos()
            if self._backoff_start is None:
                self._backoff_start = eef
            rot = np.array(ctx.scene.data.site_xmat[ctx.scene.inner.robots[0].eef_site_id]).reshape(3, 3)
            back = -rot[:, 2]  # the grip site's z axis points along the fingers
            if float(np.dot(eef - self._backoff_start, back)) < BACKOFF_M:
                action[:3] = back * BACKOFF_ACTION
        return action

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        if self._start is not None and self._tracker is not None and not self._done:  # ended inside the window
            self.applied["truncated"] = True
            still = sorted(set(self._held) & self._tracker.touched_now())
            self._finish(ctx, self._tracker, self._start, None, still, raise_invalid=False)

    def _finish(
        self,
        ctx: EpisodeContext,
        tracker: PhaseTracker,
        start: int,
        k: int | None,
        still: list[str],
        raise_invalid: bool = True,
    ) -> None:
        """Record the window (fired at ``start``, ``k`` steps open; None: cut by the episode's
        end) and what the gripper still touches (``still``); raise :class:`ShiftInvalid` when
        something is still held and ``raise_invalid``."""
        self._done = True
        drops = {}
        for n in self._held:
            if self._is_part(n):
                continue
            drops[n] = round(float(ctx.scene.body_pos(tracker.actor(n).body)[2]) - self._z0[n], 4)
        self.applied.update(
            {
                "window_steps": [start, start + k] if k is not None else [start, None],
                "open_steps_realised": k,
                "opening_at_release_m": round(self._opening(ctx), 4),
                "post_condition": {"in_gripper_after": still, "released": not still, "dropped_m": drops},
            }
        )
        if self._backoff_start is not None:
            self.applied["backoff_m"] = round(float(np.linalg.norm(ctx.scene.eef_pos() - self._backoff_start)), 4)
        if still and raise_invalid:
            raise ShiftInvalid(
                self.id,
                f"{', '.join(still)} still touches the gripper {k} steps after it was forced open: nothing was dropped",
            )
