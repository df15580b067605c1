"""S06 object instance (Environment, static): the target replaced by another instance of its
category (``docs/definition.md``, "Static shifts"), e.g. the black bowl by a white, yellow or red
bowl, the alphabet soup by a red-labelled alphabet soup or a tomato sauce can, the cream cheese by a
butter or chocolate pudding box. The instruction names the new instance only where the old wording
would be false ("put the bowl on the plate" stays; "pick up the black bowl next to the ramekin"
becomes "pick up the white bowl next to the ramekin").

Realisation: a scene variant built from the task's BDDL with the target's *type* changed and its
*name* kept (:func:`liberopro.sim.variants.rewrite_bddl`), so LIBERO's own goal check refers to the
new instance. A free object replaces a free object: ``nq``/``nv`` stay those of the task and
LIBERO's stored init states (``[time, qpos, qvel]``) fit; the new instance starts at the stored
pose of the old one (stood upright the new type's way where the two differ: LIBERO's HOPE cans,
bottles and cartons stand with a 90 deg roll), lifted when its bottom would be below the surface
there. Candidates come
from :mod:`liberopro.shifts._objects` (same category, absent from the scene, largest horizontal
extent 0.5-1.25 x the target's).

Applicability: the target is a movable object with at least one candidate. Not applicable to
articulated targets (a fixture's joints and placement would change) or where every other
instance of the category is already in the scene (libero_10 task 4: both other mugs are there).
"""

from __future__ import annotations

import math

import numpy as np

from liberopro.catalog import SPECS
from liberopro.catalog.environment import InstanceParams
from liberopro.shifts._objects import CATALOGUE, SIZE_M, instance_instruction, instances, natural_quat, scene_types
from liberopro.shifts._placement import PENETRATION_TOL_M, is_ground, quat_mul
from liberopro.shifts._props import LIFT_M, body_geoms, geoms_aabb, surface_below
from liberopro.shifts.base import EpisodeContext, Shift, ShiftInvalid
from liberopro.sim import variants
from liberopro.sim.scene import SceneVariant
from liberopro.sim.tasks import task_info

#: The new instance may turn at most this much while settling (deg): more means it toppled.
MAX_TILT_DEG = 25.0
#: Largest speed after settling (m/s).
MAX_SPEED = 0.02


def _tilt_deg(q0: np.ndarray, q1: np.ndarray) -> float:
    """Angle between the z axes of two (w, x, y, z) orientations."""
    import mujoco

    m0, m1 = np.zeros(9), np.zeros(9)
    mujoco.mju_quat2Mat(m0, q0)
    mujoco.mju_quat2Mat(m1, q1)
    c = float(np.dot(m0.reshape(3, 3)[:, 2], m1.reshape(3, 3)[:, 2]))
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


class ObjectInstance(Shift[InstanceParams]):
    spec = SPECS["S06"]

    @classmethod
    def applicable(cls, ref, sem):
        if not sem.target_is_movable:
            return "the target is an articulated fixture: swapping it would change the model's joints"
        ttype = scene_types(ref).get(sem.target)
        if ttype not in CATALOGUE:
            return f"no catalogued instances of the target's type {ttype!r}"
        if not instances(ref, sem.target, task_info(ref).instruction):
            return (
                f"every other instance of the category '{CATALOGUE[ttype].category}' is already in the scene "
                f"or too different in size"
            )
        return None

    @classmethod
    def scene_variant(cls, params):
        return SceneVariant(object_swaps=((params.object, params.to_type),))

    def instruction(self, text: str, step: int) -> str:
        new = instance_instruction(text, self.params.from_type, self.params.to_type)
        return text if new is None else new

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        obj = scene.inner.objects_dict.get(p.object)
        if obj is None or obj.category_name != p.to_type:
            raise ShiftInvalid(self.id, f"{p.object} is not a {p.to_type} in this scene variant")
        try:
            variants.check_state_size(scene.model, scene.task.init_states())
        except ValueError as exc:
            raise ShiftInvalid(self.id, str(exc)) from exc
        if list(scene.inner.objects_dict) != variants.object_order(scene.task.bddl_path):
            raise ShiftInvalid(
                self.id,
                "the variant declares the objects in another order than the task (the init states' qpos would not fit)",
            )
        root = scene.root_body(p.object)
        pos, quat = scene.object_pose(p.object)
        # the stored pose stands the old type upright; stand the new one upright instead
        old_roll, new_roll = natural_quat(p.from_type), natural_quat(p.to_type)
        turned = not np.allclose(old_roll, new_roll)
        if turned:
            quat = quat_mul(quat_mul(quat, np.array([old_roll[0], *(-old_roll[1:])])), new_roll)
            scene.set_object_pose(p.object, pos, quat)
            scene.refresh()
        lo, _ = geoms_aabb(scene, body_geoms(scene, root))
        surface, _support = surface_below(scene, pos[:2], top_z=float(lo[2]) + 0.3, ignore={root})
        lift = 0.0
        if not math.isnan(surface) and lo[2] < surface + LIFT_M:
            lift = float(surface + 2 * LIFT_M - lo[2])
            scene.set_object_pose(p.object, pos + np.array([0, 0, lift]), quat)
            scene.refresh()
        self._start_quat = quat
        self.applied = {
            "object": p.object,
            "from_type": p.from_type,
            "to_type": p.to_type,
            "instruction": self.instruction(scene.task.instruction, 0),
            "nq": int(scene.model.nq),
            "nv": int(scene.model.nv),
            "init_state_columns": int(scene.task.init_states().shape[1]),
            "lifted_m": round(lift, 4),
            "stood_upright": turned,
        }

    def verify(self, ctx: EpisodeContext) -> None:
        scene, p = ctx.scene, self.params
        root = scene.root_body(p.object)
        lo, hi = geoms_aabb(scene, body_geoms(scene, root), frame_body=root)
        _pos, quat = scene.object_pose(p.object)
        qvel = scene.inner.sim.data.get_joint_qvel(scene.object_joint(p.object))
        speed = float(np.linalg.norm(qvel[:3]))
        tilt = _tilt_deg(self._start_quat, quat)
        extent, expected = (hi - lo).tolist(), SIZE_M[p.to_type]  # in the object's own frame
        size_err = max(abs(a - b) for a, b in zip(extent, expected, strict=True))
        bad = {}
        for a, b, dist, _ in scene.contacts():
            if (a == root) != (b == root):
                other = b if a == root else a
                if dist < -PENETRATION_TOL_M and not is_ground(scene, other):
                    bad[scene.entity_name(other)] = round(dist * 1000, 1)
        self.applied["post_condition"] = {
            "body_extent_m": [round(v, 4) for v in extent],
            "catalogue_extent_m": list(expected),
            "size_error_m": round(size_err, 4),
            "speed_m_s": round(speed, 4),
            "tilt_deg": round(tilt, 2),
            "support": scene.entity_name(scene.support_below(p.object)),
            "penetrations_mm": bad,
        }
        if self.applied["nq"] + self.applied["nv"] + 1 != self.applied["init_state_columns"]:
            raise ShiftInvalid(self.id, "init state does not fit the variant's model")
        if size_err > 0.005:
            raise ShiftInvalid(
                self.id,
                f"the target's body measures {np.round(extent, 3).tolist()}, not a {p.to_type} {list(expected)}",
            )
        if speed > MAX_SPEED or tilt > MAX_TILT_DEG:
            raise ShiftInvalid(
                self.id, f"the new instance does not rest (speed {speed:.3f} m/s, turned {tilt:.1f} deg)"
            )
        if bad:
            raise ShiftInvalid(self.id, f"the new instance interpenetrates {bad} (mm)")
