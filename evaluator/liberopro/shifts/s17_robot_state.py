"""S17 robot state (Robot, static): the arm starts from another joint configuration: offsets of
0.1-0.3 rad on some of its joints, collision-free (``docs/definition.md``, "Static shifts").

Realisation: after ``set_init_state`` and before the settle steps, the stated offsets are added
to the Panda's arm joint positions (``robot0_joint1..7``, indices 0-6 here; radians), joint
velocities are zeroed, and the OSC_POSE controller's nullspace reference posture
(``controller.initial_joint``) is offset by the same amounts, so that the controller holds the
new configuration instead of drifting back towards the nominal one (OSC_POSE holds the current
end-effector pose under a zero delta; the nullspace term otherwise pulls the redundant elbow
towards the reference). Both are re-created by LIBERO's next reset (``Robot.reset`` reloads the
controller), so nothing leaks into the next episode.

Default magnitudes: 2 or 3 distinct joints out of 7, each offset uniform in [0.1, 0.3] rad with
a random sign.

Post-condition (``ShiftInvalid`` otherwise):

* before settling: every shifted joint stays >= 0.05 rad inside its limits, and the robot touches
  nothing it did not touch at the stored init state (no penetrating contact, dist < 0, between a
  robot geom and an object, fixture, the table or another robot link);
* after settling: every arm joint differs from the stored init by its stated offset (0 for the
  others) within 0.03 rad (measured drift during the settle steps ~0.006 rad), there is still no
  new robot contact, and the end effector is in the workspace: 0.05-0.65 m above the table
  surface (``workspace_offset`` z of the LIBERO arena) and 0.20-0.80 m horizontally from the
  robot base (Panda reach ~0.855 m), with every joint >= 0.05 rad from its limits, so that the
  arm can still move in every direction.
"""

from __future__ import annotations

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.robot import RobotStateParams
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid

JOINT_LIMIT_MARGIN_RAD = 0.05
JOINT_TOL_RAD = 0.03
EEF_HEIGHT_RANGE_M = (0.05, 0.65)
EEF_REACH_RANGE_M = (0.20, 0.80)


def robot_collisions(scene) -> set[tuple[int, int]]:
    """Penetrating contacts (geom pairs) that involve a robot geom."""
    robot = scene.robot_root()
    out = set()
    for i in range(scene.data.ncon):
        c = scene.data.contact[i]
        if c.dist < 0 and robot in (scene.entity_of_geom(c.geom1), scene.entity_of_geom(c.geom2)):
            out.add((int(min(c.geom1, c.geom2)), int(max(c.geom1, c.geom2))))
    return out


def _describe(scene, pairs: set[tuple[int, int]]) -> list[str]:
    robot = scene.robot_root()
    names = []
    for g1, g2 in sorted(pairs):
        r1, r2 = scene.entity_of_geom(g1), scene.entity_of_geom(g2)
        other = r2 if r1 == robot else r1
        names.append("robot (self)" if other == robot else scene.entity_name(other))
    return sorted(set(names))


class RobotState(Shift[RobotStateParams]):
    spec = SPECS["S17"]

    @staticmethod
    def _robot(ctx: EpisodeContext):
        robot = ctx.scene.inner.robots[0]
        qidx = np.asarray(robot._ref_joint_pos_indexes)
        vidx = np.asarray(robot._ref_joint_vel_indexes)
        limits = np.asarray(ctx.scene.model.jnt_range[robot.joint_indexes])
        return robot, qidx, vidx, limits

    def _limit_problem(self, q: np.ndarray, limits: np.ndarray) -> str | None:
        room = np.minimum(q - limits[:, 0], limits[:, 1] - q)
        bad = [int(j) for j in np.flatnonzero(room < JOINT_LIMIT_MARGIN_RAD)]
        if bad:
            return f"joints {bad} within {JOINT_LIMIT_MARGIN_RAD} rad of their limits ({np.round(q[bad], 3).tolist()})"
        return None

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene = ctx.scene
        robot, qidx, vidx, limits = self._robot(ctx)
        offsets = self.params.offset_vector()
        self._q_init = np.array(scene.data.qpos[qidx])
        self._baseline = robot_collisions(scene)
        eef_init = scene.eef_pos()
        q_new = self._q_init + offsets
        self.applied = {
            "joints": list(self.params.joints),
            "offsets_rad": list(self.params.offsets_rad),
            "q_init_rad": np.round(self._q_init, 5).tolist(),
        }
        problem = self._limit_problem(q_new, limits)
        if problem:
            raise ShiftInvalid(self.id, f"offset configuration leaves no room: {problem}")
        scene.data.qpos[qidx] = q_new
        scene.data.qvel[vidx] = 0.0
        robot.controller.update_initial_joints(np.asarray(robot.controller.initial_joint) + offsets)
        scene.refresh()
        robot.controller.update(force=True)  # its cached end-effector pose is the old one
        robot.controller.reset_goal()
        new = robot_collisions(scene) - self._baseline
        self.applied["eef_moved_at_start_m"] = round(float(np.linalg.norm(scene.eef_pos() - eef_init)), 4)
        if new:
            raise ShiftInvalid(self.id, f"offset configuration collides with {', '.join(_describe(scene, new))}")

    def verify(self, ctx: EpisodeContext) -> None:
        scene = ctx.scene
        _, qidx, _, limits = self._robot(ctx)
        q = np.array(scene.data.qpos[qidx])
        measured = q - self._q_init
        err = measured - self.params.offset_vector()
        eef = scene.eef_pos()
        table_z = float(scene.inner.workspace_offset[2])
        base = scene.body_pos(scene.robot_root())
        height = float(eef[2] - table_z)
        reach = float(np.linalg.norm(eef[:2] - base[:2]))
        new = robot_collisions(scene) - self._baseline
        self.applied["post_condition"] = {
            "measured_offsets_rad": np.round(measured, 4).tolist(),
            "max_joint_error_rad": round(float(np.max(np.abs(err))), 4),
            "eef_m": np.round(eef, 4).tolist(),
            "eef_height_above_table_m": round(height, 4),
            "eef_reach_m": round(reach, 4),
            "new_robot_contacts": _describe(scene, new),
        }
        if np.max(np.abs(err)) > JOINT_TOL_RAD:
            raise ShiftInvalid(
                self.id, f"after settling the joints are off the stated offsets by {np.round(err, 3).tolist()} rad"
            )
        if new:
            raise ShiftInvalid(self.id, f"after settling the robot touches {', '.join(_describe(scene, new))}")
        if not EEF_HEIGHT_RANGE_M[0] <= height <= EEF_HEIGHT_RANGE_M[1]:
            raise ShiftInvalid(self.id, f"end effector {height:.3f} m above the table, outside {EEF_HEIGHT_RANGE_M}")
        if not EEF_REACH_RANGE_M[0] <= reach <= EEF_REACH_RANGE_M[1]:
            raise ShiftInvalid(self.id, f"end effector {reach:.3f} m from the robot base, outside {EEF_REACH_RANGE_M}")
        problem = self._limit_problem(q, limits)
        if problem:
            raise ShiftInvalid(self.id, f"after settling {problem}")
