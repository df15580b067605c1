"""A LIBERO scene in MuJoCo, driven the way the standard LIBERO evaluation drives it, with the
hooks shifts need (object poses, model fields, contacts, rendering).

Protocol of one episode (``docs/libero-facts.md``, "Episode protocol"):
``env.seed(seed)`` -> ``env.reset()`` -> ``env.set_init_state(s)`` -> shifts applied ->
10 settle steps of ``[0, 0, 0, 0, 0, 0, -1]`` -> policy loop until LIBERO's goal predicate holds
or the horizon ends.

Reset: the scene uses robosuite's soft reset (``hard_reset=False``: ~0.1 s instead of 6-8 s on
our CPU machines). A soft reset keeps model edits, so every model field a shift edits is
registered through :meth:`LiberoScene.model_field` and restored at the start of every episode;
fixture placement is re-drawn from the freshly seeded RNG as in a hard reset. The test suite
checks that soft and hard resets give the same episode.

Observation timing: observations (camera images and proprioception) are sampled once per
control step, at its end, after the 25th physics substep, and after every direct state edit
(:meth:`LiberoScene.refresh`). robosuite's own timed sampling (each observable at its sampling
rate, here 20 Hz, counted in 2 ms substeps) is switched off: it sampled at substep 24 of 25 and
every forced update moved that phase by about 2 substeps, so a shift that only edited state also
changed when the following frames were taken (~1.25 grey levels on average after one refresh).
See ``docs/libero-facts.md``, "Observation timing".

On-demand rendering (``on_demand=True``, the default; issue 12): a sample takes the
proprioception at once but renders no camera. robosuite's camera sensor (``camera_rgb`` of
``robosuite/environments/robot_env.py``, ``_create_camera_sensors``) is wrapped so that sampling
only marks the camera stale; :meth:`LiberoScene.frame` hands out images that call robosuite's own
sensor when first read, before anything can change the scene (the next step or refresh makes
the frame stale: reading it then raises), so the pixels are those an eager sample would have
taken. Wrapping the sensor, not toggling the observable: ``Observable.set_enabled`` resets
robosuite's sampling timer. ``on_demand=False`` renders every camera at every sample (the
behaviour before issue 12). :attr:`LiberoScene.render_count` counts the camera renders of the
episode either way.

A scene with props rebuilds its simulation (:func:`liberopro.sim.variants.add_props`), which puts
robosuite's own sensors back: the wrapping is done after that. Done before it (as until
2026-12-03), the sensors of a prop scene rendered eagerly while the scene never saw a new sample,
so every read returned the first image of the episode (~6% of pixels off after four steps,
``tests/evaluator/test_shifts_props.py``). Reading an image now checks that the sensor is still
the wrapper and raises ``RuntimeError`` otherwise.
"""

from __future__ import annotations

import contextlib
import io
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from liberopro.episode.blame import PhysicsUnstable
from liberopro.sim import variants
from liberopro.sim.frames import LazyImages
from liberopro.sim.tasks import SETTLE_STEPS, TaskInfo
from liberopro.sim.variants import PropSpec
from liberopro.stack import configure_rendering

configure_rendering()

import mujoco  # noqa: E402
from robosuite.utils import transform_utils as T  # noqa: E402

#: robosuite's ``__del__`` methods that free a render context (``utils/binding_utils.py``,
#: ``renderers/context/egl_context.py``), by qualified name.
_RENDER_DELS = ("MjRenderContext.__del__", "EGLGLContext.__del__")
#: EGL's error code for a display already terminated (``EGL_NOT_INITIALIZED``).
_EGL_NOT_INITIALIZED = 0x3001


def is_interrupted_render_teardown(unraisable: sys.UnraisableHookArgs) -> bool:
    """Whether ``unraisable`` (what :data:`sys.unraisablehook` receives) is one of the two errors
    robosuite's render contexts raise in ``__del__`` when a run is interrupted (Ctrl-C, SIGTERM) while
    a scene is being built, which Python printed as ``Exception ignored in ...`` tracebacks at exit:
    ``MjRenderContext.__del__``'s ``AttributeError`` (its ``__init__`` was interrupted before it set
    ``con``), and an ``EGLError`` ``EGL_NOT_INITIALIZED`` from either ``__del__`` (the context of that
    half-built scene, collected at exit after robosuite's ``atexit`` terminated the EGL display). The
    process is ending; the driver frees what it holds. Nothing else matches."""
    obj = unraisable.object
    name = getattr(obj, "__qualname__", None)
    if not str(getattr(obj, "__module__", "")).startswith("robosuite.") or name not in _RENDER_DELS:
        return False
    exc = unraisable.exc_value
    if isinstance(exc, AttributeError):
        return name == _RENDER_DELS[0]
    # the raw code: PyOpenGL's ``err`` property imports to name it, which fails late in the shutdown
    return type(exc).__name__ == "EGLError" and getattr(exc, "__dict__", {}).get("err") == _EGL_NOT_INITIALIZED


def _quiet_interrupted_render_teardown() -> None:
    """Have :data:`sys.unraisablehook` drop :func:`is_interrupted_render_teardown`'s errors and hand
    every other one to the hook in place before."""
    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not is_interrupted_render_teardown(unraisable):
            previous(unraisable)

    sys.unraisablehook = hook


_quiet_interrupted_render_teardown()

#: Spec camera name -> robosuite camera name.
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}

#: The settle action: hold still, gripper open (LIBERO: -1 opens).
SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)

#: MuJoCo's warnings of an unstable simulation (NaN, infinite or huge qpos, qvel, qacc), after
#: which it resets mjData (``LiberoScene.step``).
_BAD_STATE = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC)

#: What a camera observable holds after an on-demand sample (nothing rendered yet).
_NOT_RENDERED = np.zeros(0, dtype=np.uint8)


def _sample_only_when_forced(env) -> None:
    """Switch off robosuite's timed observable sampling on ``env`` (a robosuite ``MujocoEnv``).

    robosuite calls ``env._update_observables()`` after every physics substep and each
    observable samples when its timer says so (``robosuite/utils/observables.py``,
    ``Observable.update``); forced updates (``force=True``: reset, set_init_state,
    ``_get_observations(force_update=True)``) sample every observable at once. After this only
    forced updates sample, so the scene decides when observations are taken: at the end of each
    control step and after each state edit. The instance attribute shadows the method; a hard
    reset keeps the env object and so keeps it."""
    sample = env._update_observables

    def update_observables(force: bool = False) -> None:
        if force:
            sample(force=True)

    env._update_observables = update_observables


@dataclass
class RawFrame:
    """What the simulator produced at one step, before any observation shift or conversion.

    Attributes:
        images: spec camera name -> (H, W, 3) uint8 as rendered (upside down; row 0 is the bottom
            of the picture), H = W = the scene's render size. A plain dict, or with on-demand
            rendering a :class:`liberopro.sim.frames.LazyImages` that renders a camera at its first
            read (:meth:`LiberoScene.frame`).
        proprio: field name -> float64 vector, world frame (see ``submission_spec.PROPRIO_FIELDS``).
    """

    images: Mapping[str, np.ndarray]
    proprio: dict[str, np.ndarray]

    def copy(self) -> RawFrame:
        """A deep copy with plain dicts: reads (so renders) every camera of a lazy frame."""
        return RawFrame({k: v.copy() for k, v in self.images.items()}, {k: v.copy() for k, v in self.proprio.items()})


def proprio_from_obs(obs: dict) -> dict[str, np.ndarray]:
    """LIBERO observation dict -> proprioception fields (metres, radians, world frame)."""
    quat = np.asarray(obs["robot0_eef_quat"], dtype=np.float64)
    return {
        "eef_pos": np.asarray(obs["robot0_eef_pos"], dtype=np.float64).copy(),
        "eef_quat": quat.copy(),
        "eef_axis_angle": np.asarray(T.quat2axisangle(quat.copy()), dtype=np.float64),
        "gripper_qpos": np.asarray(obs["robot0_gripper_qpos"], dtype=np.float64).copy(),
        "joint_pos": np.asarray(obs["robot0_joint_pos"], dtype=np.float64).copy(),
        "joint_vel": np.asarray(obs["robot0_joint_vel"], dtype=np.float64).copy(),
    }


@dataclass(frozen=True)
class SceneVariant:
    """How a scene's model differs from the task's own: extra props, objects of another
    category under the same BDDL name (S06). Hashable: scenes are cached per variant. The
    empty variant is the task's own scene."""

    props: tuple[PropSpec, ...] = ()
    object_swaps: tuple[tuple[str, str], ...] = ()

    def merged(self, other: SceneVariant) -> SceneVariant:
        props = tuple(dict.fromkeys(self.props + other.props))
        swaps = tuple(dict.fromkeys(self.object_swaps + other.object_swaps))
        return SceneVariant(props=props, object_swaps=swaps)


class LiberoScene:
    """One LIBERO task environment, reused across its episodes.

    Args:
        task: the task.
        cameras: spec camera names to render every step (``agentview``, ``wrist``).
        render_size: square render resolution in pixels (LIBERO's evaluation renders 256).
        hard_reset: rebuild the MuJoCo model at every reset (LIBERO's default; slow on CPU).
        variant: model changes some shifts need (see :class:`SceneVariant`).
        on_demand: render a camera only when its image is read (see the module docstring);
            False renders every camera at every sample (every step, settle step, reset, refresh).
            An attribute of the same name; it may be switched between episodes.

    Attributes:
        render_count: spec camera name -> camera renders for observations since the episode
            started (:meth:`start_episode`); renders through :meth:`render` are not counted.

    Raises ``RuntimeError`` if the environment cannot be built (missing assets, no EGL).
    """

    def __init__(
        self,
        task: TaskInfo,
        cameras: tuple[str, ...] = ("agentview", "wrist"),
        render_size: int = 256,
        hard_reset: bool = False,
        variant: SceneVariant = SceneVariant(),
        on_demand: bool = True,
    ) -> None:
        from libero.libero.envs import OffScreenRenderEnv

        self.task = task
        self.variant = variant
        self.cameras = tuple(cameras)
        self.render_size = render_size
        self.hard_reset = hard_reset
        self.on_demand = on_demand
        self.render_count: dict[str, int] = dict.fromkeys(self.cameras, 0)
        #: Id of the current observation sample (raised at every sample of a camera).
        self._sample = 0
        #: On demand: the images of the current sample rendered so far.
        self._rendered: dict[str, np.ndarray] = {}
        #: The sample whose frame was last handed out (its images may still be read).
        self._handed_out = -1
        #: spec camera -> (robosuite's own rgb sensor, its observable).
        self._sensors: dict[str, tuple] = {}
        cam_names = [CAMERAS[c] for c in self.cameras] or ["agentview"]
        bddl = task.bddl_path
        if variant.object_swaps:
            bddl = variants.rewrite_bddl(bddl, variant.object_swaps)
        with contextlib.redirect_stdout(io.StringIO()):
            self.env = OffScreenRenderEnv(
                bddl_file_name=bddl,
                camera_heights=render_size,
                camera_widths=render_size,
                camera_names=cam_names,
                use_camera_obs=bool(self.cameras),
                hard_reset=hard_reset,
            )
        _sample_only_when_forced(self.inner)
        self._snapshots: dict[str, np.ndarray] = {}
        self._obs: dict | None = None
        #: Prop name -> body id (empty for a scene without props).
        self.props: dict[str, int] = variants.add_props(self.inner, variant.props) if variant.props else {}
        # After the props: adding them rebuilds the simulation and puts robosuite's own camera
        # sensors back in place of the wrapped ones (variants.add_props).
        self._wrap_camera_sensors()

    # ----------------------------------------------------------------- raw handles
    @property
    def inner(self):
        """The LIBERO problem environment (``Libero_Tabletop_Manipulation`` etc.)."""
        return self.env.env

    @property
    def model(self) -> mujoco.MjModel:
        return self.inner.sim.model._model

    @property
    def data(self) -> mujoco.MjData:
        return self.inner.sim.data._data

    def close(self) -> None:
        """Close the environment and free its rendering resources now, in its own GL context.

        robosuite frees a render context in ``__del__`` (``binding_utils.MjRenderContext``):
        ``mjr_freeContext`` deletes the context's textures, buffers and framebuffers by id in
        whatever GL context is current, then ``eglReleaseThread`` unbinds the current context.
        The render context sits in a reference cycle, so the garbage collector runs that at a
        random later moment, with another scene's context current: it deletes that scene's
        objects of the same ids, or unbinds it mid-render, and its renders return noise or the
        previous pixels (measured: five review scenes rendered as coloured noise, and D08 saw
        100% of the brightness after dimming, after earlier scenes had been closed). Here both
        are freed at once, with this scene's context current; the later ``__del__`` finds
        nothing left to free (``mjr_freeContext`` resets the context; ``free`` skips a freed
        EGL context). Every render entry point makes its own context current again."""
        sim = getattr(getattr(self.env, "env", None), "sim", None)
        ctx = getattr(sim, "_render_context_offscreen", None)
        if ctx is not None:
            with contextlib.suppress(Exception):
                ctx.gl_ctx.make_current()
                ctx.con.free()
            with contextlib.suppress(Exception):
                ctx.gl_ctx.free()
        with contextlib.suppress(Exception):
            self.env.close()

    def make_gl_current(self) -> None:
        """Make this scene's OpenGL context current. robosuite's offscreen renderer does not do it
        before rendering, so with two scenes in one process the second one's context stays current
        and the first one renders through foreign GL state (measured: a black band over ~13% of
        libero_goal:8's agentview after libero_object:0 was built)."""
        ctx = getattr(self.inner.sim, "_render_context_offscreen", None)
        if ctx is not None:
            ctx.gl_ctx.make_current()

    # ----------------------------------------------------------------- observation rendering
    def _wrap_camera_sensors(self) -> None:
        """Put :meth:`_camera_sampled` in place of robosuite's rgb sensor of each camera
        (``<camera>_image`` observables; a hard reset re-creates them, so this runs after every
        reset). The wrapper holds the scene weakly (no reference cycle through the env)."""
        scene = weakref.ref(self)
        for cam in self.cameras:
            observable = self.inner._observables.get(f"{CAMERAS[cam]}_image")
            if observable is None or getattr(observable._sensor, "_liberopro_camera", None):
                continue
            original = observable._sensor
            self._sensors[cam] = (original, observable)

            def sensor(obs_cache, cam=cam, original=original):
                s = scene()
                return original(obs_cache) if s is None else s._camera_sampled(cam, original, obs_cache)

            sensor.__modality__ = getattr(original, "__modality__", "image")  # type: ignore[attr-defined]
            sensor._liberopro_camera = cam  # type: ignore[attr-defined]
            observable._sensor = sensor  # not set_sensor(): its validity check would render once

    def _camera_sampled(self, cam: str, original, obs_cache: dict) -> np.ndarray:
        """robosuite samples ``cam``: eager, render now (robosuite's own sensor); on demand, mark
        it stale and hand robosuite an empty placeholder."""
        self._sample += 1
        self._rendered.pop(cam, None)
        if not self.on_demand:
            self.render_count[cam] += 1
            return original(obs_cache)
        return _NOT_RENDERED

    def _observed_image(self, cam: str, sample: int) -> np.ndarray:
        """The (H, W, 3) uint8 image of ``cam`` at observation sample ``sample``, rendered now by
        robosuite's own sensor (then through the observable's corrupter and filter, as
        ``Observable.update`` does) if not yet. Raises ``RuntimeError`` when the scene has sampled
        again since (a frame read after the step it belongs to)."""
        if sample != self._sample:
            raise RuntimeError(
                f"the {cam} image of an earlier observation was read after the scene moved on "
                "(on-demand rendering: read a frame before the next step or refresh, or copy it)"
            )
        img = self._rendered.get(cam)
        if img is None:
            original, observable = self._sensors[cam]
            if getattr(observable._sensor, "_liberopro_camera", None) != cam:
                raise RuntimeError(
                    f"the {cam} camera sensor is not the scene's on-demand wrapper any more (the "
                    "simulation was rebuilt without LiberoScene._wrap_camera_sensors): its images would be stale"
                )
            self.make_gl_current()
            img = np.array(observable._filter(observable._corrupter(original(self.inner._obs_cache))))
            self.render_count[cam] += 1
            self._rendered[cam] = img
        return img

    def _render_handed_out(self) -> None:
        """Render every camera of the frame handed out for the current sample that was not read
        yet: called before the model is edited, so that a later read still shows the scene as
        sampled (D08 changes the lights inside its observation hook)."""
        if self.on_demand and self._handed_out == self._sample:
            for cam in self.cameras:
                self._observed_image(cam, self._sample)

    # ----------------------------------------------------------------- episode protocol
    def start_episode(self, init_state: np.ndarray, seed: int) -> None:
        """Reseed, reset, restore every edited model field, set the init state.

        After this the scene is exactly LIBERO's for (task, init state, seed), before settling.
        """
        self.make_gl_current()
        self.render_count = dict.fromkeys(self.cameras, 0)
        self.env.seed(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            self.env.reset()
        if self.hard_reset:
            self._wrap_camera_sensors()
        # robosuite's gripper model integrates its command across steps (PandaGripper
        # ``current_action``) and a soft reset does not clear it: without this line an episode
        # depends on the one before it.
        for robot in self.inner.robots:
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        # Soft reset keeps model edits: put back what shifts changed (fixture body poses were
        # re-drawn by the reset itself and are not in the snapshot).
        for name, original in self._snapshots.items():
            self._model_array(name)[...] = original
        if self.props:  # static props: LIBERO's reset leaves their model pose alone
            variants.park_props(self.model, self.props)
        self._obs = self.env.set_init_state(init_state)

    def settle(self, steps: int = SETTLE_STEPS) -> None:
        """Run ``steps`` steps of the settle action (10 in the standard protocol)."""
        for _ in range(steps):
            self.step(SETTLE_ACTION)

    def step(self, action: np.ndarray) -> bool:
        """One 20 Hz control step (25 physics substeps of 2 ms) with a LIBERO action (7,) in
        [-1, 1]. Returns True when LIBERO's goal predicate holds.

        Raises :class:`liberopro.episode.blame.PhysicsUnstable` when MuJoCo found the simulation unstable
        during the step: its ``mjWARN_BADQPOS``, ``mjWARN_BADQVEL`` or ``mjWARN_BADQACC`` counter,
        zeroed before the step, is not zero after it (read through robosuite's sim binding, which
        a rebuild of the simulation replaces). MuJoCo 2.3.7 raises nothing then: it resets
        ``mjData`` (the model's default pose) and goes on, and the reset zeroes every warning
        counter before it counts the new one, so counters are zeroed here rather than compared."""
        self.make_gl_current()
        data = self.inner.sim.data._data
        for w in _BAD_STATE:
            data.warning[w].number = 0  # diagnostics only: nothing in the physics reads them
        _, _, done, _ = self.env.step(np.asarray(action, dtype=np.float64))
        data = self.inner.sim.data._data
        bad = {w.name: (data.warning[w].number, data.warning[w].lastinfo) for w in _BAD_STATE if data.warning[w].number}
        if bad:
            what = ", ".join(f"{name[7:]} x{n} (last at DOF {dof})" for name, (n, dof) in bad.items())
            raise PhysicsUnstable(f"MuJoCo found the simulation unstable during this step ({what}); it reset mjData")
        # Sampled here, at the end of the step (robosuite's step returns the previous samples:
        # its timed sampling is off, see the module docstring).
        self._obs = self.inner._get_observations(force_update=True)
        return bool(done)

    def success(self) -> bool:
        """LIBERO's own BDDL goal check, nothing re-implemented."""
        return bool(self.env.check_success())

    def refresh(self) -> None:
        """Recompute derived quantities and observations after a direct state edit. Sampling
        happens only at the end of a step and here, so a refresh (even a no-op one) changes
        nothing about when later frames are taken."""
        self.make_gl_current()
        self.inner.sim.forward()
        self.inner._update_observables(force=True)
        self._obs = self.inner._get_observations(force_update=True)

    def refresh_view(self) -> None:
        """Re-sample the observations after an edit of what is only rendered (lights, materials,
        textures, a camera's pose in the model), leaving the physics as the last step left it.

        Only the cameras' and lights' world poses are recomputed (``mj_camlight``: from the
        bodies' poses as the last step left them; it writes ``cam_x*`` and ``light_x*`` only),
        then the observations are sampled as :meth:`refresh` samples them. :meth:`refresh` runs
        ``mj_forward``, which recomputes every derived quantity (the bodies' poses for the state
        the step reached, where the step left them one physics substep behind: 0.56 mm at the
        gripper mid-reach) and the constraint solver's warm start (``qacc_warmstart``): after a
        refresh a policy reads other proprioception at that step, and the following steps
        differ in the last bits (issue 22, item 6: the state-reading oracle took 133 steps
        instead of 83 on libero_goal:1, init state 1, under D08). Appearance shifts (S12, S15,
        D07, D08) use this method, so their episodes are physically the nominal ones
        (``tests/evaluator/test_appearance_physics.py``)."""
        self.make_gl_current()
        mujoco.mj_camlight(self.model, self.data)
        self.inner._update_observables(force=True)
        self._obs = self.inner._get_observations(force_update=True)

    def frame(self) -> RawFrame:
        """The current raw frame (images as sampled at the end of this step, proprioception).

        Eager: the images rendered at sampling, a dict. On demand: a
        :class:`liberopro.sim.frames.LazyImages` that renders a camera at its first read (once per
        sample, however many frames are taken); read it before the next :meth:`step` or
        :meth:`refresh` (``RuntimeError`` after)."""
        assert self._obs is not None, "start_episode() first"
        images: Mapping[str, np.ndarray]
        if self.on_demand:
            sample = self._handed_out = self._sample
            images = LazyImages(self.cameras, lambda cam: self._observed_image(cam, sample))
        else:
            images = {c: self._obs[f"{CAMERAS[c]}_image"] for c in self.cameras}
        return RawFrame(images=images, proprio=proprio_from_obs(self._obs))

    # ----------------------------------------------------------------- model edits
    def _model_array(self, name: str) -> np.ndarray:
        obj = self.model
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj

    def model_field(self, name: str) -> np.ndarray:
        """The model array ``name`` (e.g. ``cam_pos``, ``light_diffuse``,
        ``vis.headlight.diffuse``), registered so that its values from before the first edit
        are restored at the start of every later episode. Edit it in place. With on-demand
        rendering the frame already handed out for this step is rendered first (an edit must not
        show in it)."""
        self._render_handed_out()
        arr = self._model_array(name)
        if name not in self._snapshots:
            self._snapshots[name] = np.array(arr, copy=True)
        return arr

    # ----------------------------------------------------------------- objects
    def body_id(self, name: str) -> int:
        return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)

    def object_names(self) -> list[str]:
        """Movable objects (free joint), in BDDL order."""
        return list(self.inner.objects_dict)

    def fixture_names(self) -> list[str]:
        return list(self.inner.fixtures_dict)

    def root_body(self, name: str) -> int:
        """Body id of an object's or fixture's root body."""
        return self.inner.obj_body_id[name]

    def object_joint(self, name: str) -> str:
        return self.inner.objects_dict[name].joints[-1]

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,) metres, quaternion (4,) w x y z), world frame, of a movable object."""
        qpos = self.inner.sim.data.get_joint_qpos(self.object_joint(name))
        return np.array(qpos[:3]), np.array(qpos[3:7])

    def set_object_pose(self, name: str, pos: np.ndarray, quat_wxyz: np.ndarray) -> None:
        """Teleport a movable object (zero velocity); call :meth:`refresh` after a batch."""
        joint = self.object_joint(name)
        self.inner.sim.data.set_joint_qpos(joint, np.concatenate([pos, quat_wxyz]))
        self.inner.sim.data.set_joint_qvel(joint, np.zeros(6))

    def body_pos(self, body_id: int) -> np.ndarray:
        return np.array(self.data.xpos[body_id])

    def entity_of_geom(self, geom_id: int) -> int:
        """Root body id owning a geom (an object, a fixture, the robot, the table or world)."""
        return int(self.model.body_rootid[self.model.geom_bodyid[geom_id]])

    def eef_pos(self) -> np.ndarray:
        """End-effector (grip site) position, metres, world frame."""
        return np.array(self.inner.robots[0].sim.data.site_xpos[self.inner.robots[0].eef_site_id])

    def robot_state(self) -> np.ndarray:
        """Arm and gripper joint positions (rad, m), concatenated."""
        robot = self.inner.robots[0]
        idx = list(robot._ref_joint_pos_indexes) + list(robot._ref_gripper_joint_pos_indexes)
        return np.array(self.data.qpos[idx])

    def set_robot_state(self, qpos: np.ndarray) -> None:
        """Put the arm and gripper joints at ``qpos`` (from :meth:`robot_state`) with zero
        velocity: an injected state, not a motion (the Restore recovery protocol)."""
        robot = self.inner.robots[0]
        idx = list(robot._ref_joint_pos_indexes) + list(robot._ref_gripper_joint_pos_indexes)
        vel = list(robot._ref_joint_vel_indexes) + list(robot._ref_gripper_joint_vel_indexes)
        self.data.qpos[idx] = qpos
        self.data.qvel[vel] = 0.0
        self.refresh()
        robot.controller.update(force=True)  # the controller's cached pose is now stale
        robot.controller.reset_goal()

    def robot_root(self) -> int:
        return self.body_id(self.inner.robots[0].robot_model.root_body)

    def gripper_geoms(self) -> set[int]:
        """Geom ids of the gripper (fingers and pads)."""
        gripper = self.inner.robots[0].gripper
        names = set()
        for group in gripper.important_geoms.values():
            names.update(group)
        return {mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names} - {-1}

    def contacts(self) -> list[tuple[int, int, float, np.ndarray]]:
        """Active contacts as (root body a, root body b, distance m (negative = penetration),
        world position (3,))."""
        out = []
        d = self.data
        for i in range(d.ncon):
            c = d.contact[i]
            out.append((self.entity_of_geom(c.geom1), self.entity_of_geom(c.geom2), float(c.dist), np.array(c.pos)))
        return out

    def contact_geoms(self) -> list[tuple[int, int]]:
        d = self.data
        return [(int(d.contact[i].geom1), int(d.contact[i].geom2)) for i in range(d.ncon)]

    def support_below(self, name: str) -> int:
        """Root body directly below a movable object (ray cast straight down from its centre,
        ignoring its own geoms): the table, a fixture, or another object."""
        pos, _ = self.object_pose(name)
        own = self.root_body(name)
        start = np.array(pos, dtype=np.float64) + np.array([0, 0, 0.02])
        geomid = np.array([-1], dtype=np.int32)
        for _ in range(20):
            dist = mujoco.mj_ray(self.model, self.data, start, np.array([0, 0, -1.0]), None, 1, -1, geomid)
            if dist < 0 or geomid[0] < 0:
                return -1
            root = self.entity_of_geom(int(geomid[0]))
            if root != own:
                return root
            start = start - np.array([0, 0, dist + 1e-4])
        return -1

    def body_name(self, body_id: int) -> str:
        return mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, body_id) or f"body{body_id}"

    def entity_name(self, root_body: int) -> str:
        """The BDDL name of the object/fixture whose root body this is, else the body name."""
        for name, bid in self.inner.obj_body_id.items():
            if bid == root_body:
                return name
        return self.body_name(root_body)

    # ----------------------------------------------------------------- rendering
    def render(self, camera: str, size: int | None = None, segmentation: bool = False) -> np.ndarray:
        """Render a camera now, through the same offscreen context as the observations.

        Returns (H, W, 3) uint8 as rendered (upside down, like LIBERO's observations), or with
        ``segmentation=True`` (H, W) int32 geom ids, upside down too (-1 = background or a
        non-geom element).
        """
        size = size or self.render_size
        self.make_gl_current()
        out = self.inner.sim.render(
            width=size, height=size, camera_name=CAMERAS.get(camera, camera), segmentation=segmentation
        )
        if segmentation:
            return np.where(out[..., 0] == int(mujoco.mjtObj.mjOBJ_GEOM), out[..., 1], -1).astype(np.int32)
        return out
