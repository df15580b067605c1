"""S18 proprioception bias (Robot, static): the reported end-effector pose carries a constant
offset (``docs/definition.md``, "Static shifts": 2-5 cm, 5-10 deg), as from a mis-calibrated robot.

Realisation, at every step, on the proprioception the policy receives (world frame, metres,
quaternions ``(x, y, z, w)`` as robosuite reports ``robot0_eef_quat``):

* ``eef_pos`` + ``d``, where ``d`` has length ``pos_offset_m`` along the unit vector of
  ``pos_azimuth_deg`` (from +x towards +y) and ``pos_elevation_deg`` (above the horizontal);
* ``eef_quat`` -> ``q_off * q`` (Hamilton product): the reported orientation is the true one
  turned by ``rot_deg`` about the world-frame axis of ``axis_azimuth_deg``/``axis_elevation_deg``
  (a left-multiplied, world-frame rotation offset, the same for every pose); ``q_off`` has a
  positive scalar part, but the product's scalar part can change sign where the true one is near
  0, as for LIBERO's downward-pointing gripper (``eef_quat`` near (1, 0, 0, 0), x, y, z, w): the
  rotation is the same either way, only a policy that reads the raw sign sees the flip;
* ``eef_axis_angle`` recomputed from the biased quaternion with robosuite's ``quat2axisangle``
  (the function behind the nominal field), so the three fields stay consistent.

Joint positions and velocities, the gripper and the images are unbiased: only the reported end
effector pose is mis-calibrated. The robot itself is not moved.

Default magnitudes: ``pos_offset_m`` uniform in [0.02, 0.05], ``rot_deg`` uniform in [5, 10],
directions uniform on the sphere.

Post-condition, measured on the delivered proprioception at every step against the true one:
delivered minus true position equals the stated vector, the rotation from the true to the
delivered quaternion is the stated angle about the stated axis, and the delivered axis-angle is
the delivered quaternion's (all within 1e-6).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.robot import ProprioBiasParams
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.shifts.s15_camera_calibration import unit

TOL = 1e-6


# The quaternion helpers here and the offset quaternion in ``offsets`` stay hand-written, not
# scipy.spatial.transform.Rotation: scipy's composition sums the products in another order and
# from_quat/from_rotvec renormalise, so on random inputs it differs in the last bits from
# quat_mul_xyzw on ~91% (up to 2176 ulp, 4.4e-16), from quat_conj_xyzw on ~33% (<= 3 ulp), from
# the offset quaternion on ~64% (<= 2 ulp) and from rotation_between on ~96% (4.3e-14). The biased
# quaternion is what the policy receives (its actions follow from it) and rotation_between's
# errors are recorded in ``applied`` (3 significant digits of values ~1e-16). tests/evaluator/
# test_rotations.py checks them against scipy within tolerance and pins the difference.
def quat_mul_xyzw(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of (x, y, z, w) quaternions (robosuite's order), shape (4,)."""
    x1, y1, z1, w1 = a
    x2, y2, z2, w2 = b
    return np.array(
        [
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        ]
    )


def quat_conj_xyzw(q: np.ndarray) -> np.ndarray:
    """Conjugate (inverse of a unit quaternion), (x, y, z, w), shape (4,)."""
    return np.array([-q[0], -q[1], -q[2], q[3]])


def rotation_between(q_true: np.ndarray, q_rep: np.ndarray) -> tuple[float, np.ndarray]:
    """(angle deg, world axis) of the rotation r with q_rep = r * q_true (x, y, z, w)."""
    r = quat_mul_xyzw(q_rep, quat_conj_xyzw(q_true))
    if r[3] < 0:
        r = -r
    s = float(np.linalg.norm(r[:3]))
    angle = math.degrees(2 * math.atan2(s, r[3]))
    return angle, (r[:3] / s if s > 0 else np.zeros(3))


class ProprioceptionBias(Shift[ProprioBiasParams]):
    spec = SPECS["S18"]

    def offsets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position offset (3,) m, rotation offset quaternion (x, y, z, w), unit axis)."""
        p = self.params
        d = unit(p.pos_azimuth_deg, p.pos_elevation_deg) * p.pos_offset_m
        axis = unit(p.axis_azimuth_deg, p.axis_elevation_deg)
        h = math.radians(p.rot_deg) / 2
        return d, np.array([*(math.sin(h) * axis), math.cos(h)]), axis

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        d, q_off, axis = self.offsets()
        self._err = {"pos_m": 0.0, "rot_deg": 0.0, "axis": 0.0, "axis_angle": 0.0}
        self._steps = 0
        self.applied = {
            "pos_offset_m": np.round(d, 6).tolist(),
            "rot_quat_xyzw": np.round(q_off, 6).tolist(),
            "rot_axis": np.round(axis, 6).tolist(),
            "rot_deg": self.params.rot_deg,
        }

    def observe(self, frame, step, ctx):
        from robosuite.utils import transform_utils as T

        d, q_off, axis = self.offsets()
        proprio = {k: v.copy() for k, v in frame.proprio.items()}
        proprio["eef_pos"] = frame.proprio["eef_pos"] + d
        quat = quat_mul_xyzw(q_off, frame.proprio["eef_quat"])
        proprio["eef_quat"] = quat
        proprio["eef_axis_angle"] = np.asarray(T.quat2axisangle(quat.copy()), dtype=np.float64)
        # measured on what is delivered, against the true values
        angle, measured_axis = rotation_between(frame.proprio["eef_quat"], quat)
        back = np.asarray(T.axisangle2quat(proprio["eef_axis_angle"].copy()))
        e = self._err
        e["pos_m"] = max(e["pos_m"], float(np.max(np.abs(proprio["eef_pos"] - frame.proprio["eef_pos"] - d))))
        e["rot_deg"] = max(e["rot_deg"], abs(angle - self.params.rot_deg))
        e["axis"] = max(e["axis"], float(np.max(np.abs(measured_axis - axis))) if self.params.rot_deg else 0.0)
        e["axis_angle"] = max(
            e["axis_angle"], min(float(np.max(np.abs(back - quat))), float(np.max(np.abs(back + quat))))
        )
        self._steps += 1
        return dataclasses.replace(frame, proprio=proprio)

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        self.applied["post_condition"] = {
            "steps": self._steps,
            **{f"max_error_{k}": float(f"{v:.3g}") for k, v in self._err.items()},
        }
        bad = {k: v for k, v in self._err.items() if v > TOL}
        if bad:
            raise ShiftInvalid(self.id, f"delivered pose differs from the stated bias: {bad}")
