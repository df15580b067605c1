"""Task phases computed from simulator state, never told to the policy.

Definitions (``shared/reference/benchmark.md``, "A task under a shift"):

* ``approach``: end effector within :data:`APPROACH_RADIUS_M` of the target, before first contact,
  having closed in on it by at least :data:`APPROACH_PROGRESS_M` since the policy loop began (a
  gripper that merely starts near the target has not approached it).
* ``grasp``: first contact of a gripper geom with the target (for an articulated target, with
  any of the fixture's geoms, i.e. its handle or knob).
* ``transport``: target lifted :data:`LIFT_M` above its height at episode start (pick and place),
  moved :data:`PUSH_M` horizontally while touched (push), or its articulation moved by
  :data:`ARTICULATION_DELTA` (joint units: m or rad).
* ``placement``: target within :data:`PLACEMENT_RADIUS_M` (horizontal) of the goal region.

The tracker records the first step at which each phase was reached; phases are not required
to occur in order (a policy may bump the target before "approaching" it by this definition).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from liberopro.semantics import TaskSemantics
from liberopro.sim import LiberoScene

Phase = Literal["approach", "grasp", "transport", "placement"]
PHASES: tuple[Phase, ...] = ("approach", "grasp", "transport", "placement")

APPROACH_RADIUS_M = 0.15
APPROACH_PROGRESS_M = 0.02
LIFT_M = 0.03
PUSH_M = 0.02
ARTICULATION_DELTA = 0.01
PLACEMENT_RADIUS_M = 0.08


class PhaseTracker:
    """Follows one episode and reports the step at which each phase was first reached."""

    def __init__(self, scene: LiberoScene, sem: TaskSemantics) -> None:
        self.scene = scene
        self.sem = sem
        self.reached: dict[Phase, int] = {}
        self._contact_seen = False
        inner = scene.inner
        self._target_body = scene.root_body(sem.target)
        self._target_geoms = {g for g in range(scene.model.ngeom) if scene.entity_of_geom(g) == self._target_body}
        self._gripper_geoms = scene.gripper_geoms()
        self._site = self._site_name(sem, inner)
        self._start_pos = self.target_pos().copy()
        self._joint_addrs = self._articulation_qpos(scene, sem)
        self._start_joints = scene.data.qpos[self._joint_addrs].copy() if self._joint_addrs else None
        self._start_eef_dist = float(np.linalg.norm(scene.eef_pos() - self._start_pos))

    @staticmethod
    def _site_name(sem: TaskSemantics, inner) -> str | None:
        region = sem.receiver_region
        if region and region in inner.object_sites_dict:
            return region
        return None

    @staticmethod
    def _articulation_qpos(scene: LiberoScene, sem: TaskSemantics) -> list[int]:
        if sem.target_is_movable:
            return []
        fixture = scene.inner.fixtures_dict.get(sem.target) or scene.inner.objects_dict.get(sem.target)
        joints = getattr(fixture, "joints", []) or []
        addrs = []
        for j in joints:
            try:
                addrs.append(scene.inner.sim.model.get_joint_qpos_addr(j))
            except Exception:  # a joint named in the object model but not in this scene
                continue
        return [a for a in addrs if isinstance(a, (int, np.integer))]

    def target_pos(self) -> np.ndarray:
        """Target position (metres, world): its root body for an object, else the fixture body."""
        return self.scene.body_pos(self._target_body)

    def goal_pos(self) -> np.ndarray | None:
        """Goal region position (metres, world) when the goal names a site, else the receiver body."""
        if self._site is not None:
            sid = self.scene.inner.sim.model.site_name2id(self._site)
            return np.array(self.scene.data.site_xpos[sid])
        if self.sem.receiver is not None and self.sem.receiver in self.scene.inner.obj_body_id:
            return self.scene.body_pos(self.scene.root_body(self.sem.receiver))
        return None

    def _gripper_touches_target(self) -> bool:
        for g1, g2 in self.scene.contact_geoms():
            if (g1 in self._gripper_geoms and g2 in self._target_geoms) or (
                g2 in self._gripper_geoms and g1 in self._target_geoms
            ):
                return True
        return False

    def update(self, step: int) -> list[Phase]:
        """Evaluate the state after ``step``; returns the phases newly reached at this step."""
        new: list[Phase] = []
        touching = self._gripper_touches_target()
        eef = self.scene.eef_pos()
        pos = self.target_pos()
        if "approach" not in self.reached and not self._contact_seen:
            dist = float(np.linalg.norm(eef - pos))
            if dist <= APPROACH_RADIUS_M and dist <= self._start_eef_dist - APPROACH_PROGRESS_M and not touching:
                new.append("approach")
        if touching:
            self._contact_seen = True
            if "grasp" not in self.reached:
                new.append("grasp")
        if "transport" not in self.reached:
            moved = False
            if self._joint_addrs:
                moved = bool(np.max(np.abs(self.scene.data.qpos[self._joint_addrs] - self._start_joints)) >= ARTICULATION_DELTA)
            elif self.sem.kind == "push":
                moved = touching and np.linalg.norm(pos[:2] - self._start_pos[:2]) >= PUSH_M
            else:
                moved = pos[2] - self._start_pos[2] >= LIFT_M
            if moved:
                new.append("transport")
        if "placement" not in self.reached:
            goal = self.goal_pos()
            if goal is not None and np.linalg.norm(pos[:2] - goal[:2]) <= PLACEMENT_RADIUS_M and (
                "transport" in self.reached or "transport" in new
            ):
                new.append("placement")
        for p in new:
            self.reached[p] = step
        return new
