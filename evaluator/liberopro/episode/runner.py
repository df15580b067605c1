"""The episode runner: LIBERO's standard evaluation protocol with shifts layered on, against a
policy behind :class:`submission_spec.PolicyClient` (``docs/evaluator.md``, "An episode").

Per episode (:meth:`EpisodeRunner.run_episode`): reseed, reset, set init state -> static model
edits -> 10 settle steps -> static edits of the settled scene (then 10 more settle steps if
anything moved) -> static post-conditions (:meth:`liberopro.shifts.adapter.ShiftStack.prepare`)
-> ``/reset`` -> the policy loop (:meth:`EpisodeRunner._policy_loop`). Each loop step, composed of
the layers of :mod:`liberopro.episode.loop`:

1. runtime shifts whose phase was reached, or whose fallback step came, fire (and arm the
   recovery protocol);
2. interventions, first to supply an action wins: a shift that holds control (its ``override``),
   then, once that is over, the diagnostic recovery protocol (Hold, Retry, Restore); the policy's
   chunk is dropped when one acts;
3. the frame through the observation layers (the shifts' ``observe``, then the first frame again
   under frozen observations);
4. unless an intervention acted: the next action of the policy's chunk (:class:`ChunkedPolicy`,
   asking ``/act`` when its ``replan_steps`` are used up) through the action layers (the
   policy's convention -> LIBERO's, then the shifts' ``execute``);
5. one env step, then the phase update.

The loop ends on LIBERO's goal predicate, at the horizon (plus Retry's extra steps), or on a
policy failure, which ends only this episode with its reason. A fault (an exception of the
evaluator or the simulator, MuJoCo's instability included) ends it too; who is charged with it is
decided by replaying the episode without the policy (:mod:`liberopro.episode.blame`,
:meth:`EpisodeRunner._replay`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from liberopro.episode import video as recording
from liberopro.episode.blame import Fault, ReplayDiverged, charge
from liberopro.episode.loop import (
    ActionLayer,
    ChunkedPolicy,
    Intervention,
    Latency,
    Recovery,
    execute,
    intervene,
    observation_layers,
    observe,
    recovery_for,
    start_action,
)
from liberopro.episode.phases import PhaseTracker
from liberopro.instances.build import EpisodePlan
from liberopro.runs.summary import EpisodeRecord, LatencyStats
from liberopro.schema.reasons import TerminationReason, unrealised
from liberopro.semantics import semantics_of
from liberopro.shifts import Shift, ShiftInvalid
from liberopro.shifts.adapter import ShiftStack
from liberopro.sim.frames import LazyImages
from liberopro.sim.observation import neutral_action, received_image, to_libero_action, to_message
from liberopro.sim.scene import LiberoScene, RawFrame, SceneVariant
from liberopro.sim.tasks import TaskRef, task_info
from submission_spec import ActResult, ObservationMessage, PolicyError, PolicyMetadata

log = logging.getLogger("liberopro.episode.runner")


@dataclass
class RunSettings:
    """Evaluator settings recorded with every result.

    Attributes:
        render_size: square render resolution (px); images are resized to what the policy asks.
        max_steps: cap on the suite horizon (None: the suite's horizon).
        episode_policy_budget_s: total seconds the policy may spend answering within one episode.
        replan_steps: override of the policy's replan steps (None: the policy's own; the
            closed-loop update-frequency diagnostic sets it).
        recovery_hold_steps: steps the robot holds still under the Hold recovery protocol.
        recovery_extra_steps: steps added to the horizon under the Retry protocol.
        stop_when_shifts_done: end the episode once every runtime shift has fired and finished
            acting (instance validation only: it needs the shifts realised, not the task).
        on_demand_render: render a camera only when something reads its image (the policy's
            request, a shift keeping past frames, a recording); False renders every camera at
            every step, settle step and reset. Records and delivered images are the same either
            way; only the work (each record's ``renders``) differs (:class:`liberopro.sim.scene.LiberoScene`,
            issue 12; ``tests/evaluator/test_determinism.py``, ``test_shifts_props.py``). On by default.
        video: episode videos, ``none``, ``failures`` or ``all`` (:mod:`liberopro.episode.video`: written by
            the runner into ``output_dir/videos``; the scene gets the ``agentview`` camera if the
            policy does not ask for it, and renders it at every recorded step).
        video_size: the video's panel size (px; None: 256), each panel the render resized to it:
            no render more or larger (:func:`liberopro.episode.video.check_video_size`).
        record_actions: write each episode's executed and commanded actions
            (``output_dir/actions/<episode>.npz``, :func:`liberopro.episode.video.load_actions`).
        output_dir: the run directory videos and actions are written under (required by either;
            :func:`liberopro.runs.evaluation.run_evaluation` sets it).
    """

    render_size: int = 256
    max_steps: int | None = None
    episode_policy_budget_s: float = 600.0
    replan_steps: int | None = None
    recovery_hold_steps: int = 20
    recovery_extra_steps: int = 60
    stop_when_shifts_done: bool = False
    on_demand_render: bool = True
    video: str = "none"
    video_size: int | None = None
    record_actions: bool = False
    output_dir: str | None = None

    def horizon(self, ref: TaskRef) -> int:
        return min(ref.horizon, self.max_steps) if self.max_steps else ref.horizon


def only_cameras(frame: RawFrame, cameras: tuple[str, ...]) -> RawFrame:
    """``frame`` itself when it holds exactly ``cameras``, else a frame with only those images (lazy
    when the frame's are: nothing is rendered by dropping a camera). The scene may render a camera
    for a video that the policy does not ask for: the shifts must not see it."""
    if tuple(frame.images) == cameras:
        return frame
    images = frame.images
    kept: Mapping[str, np.ndarray] = (
        LazyImages(cameras, lambda c: images[c]) if isinstance(images, LazyImages) else {c: images[c] for c in cameras}
    )
    return dataclasses.replace(frame, images=kept)


class LiberoActions:
    """The first action layer: a policy action (7,) in the policy's gripper convention -> LIBERO's
    (7,) float64, arm clipped to [-1, 1], gripper -1 open / +1 close
    (:func:`liberopro.sim.observation.to_libero_action`, conventions from the policy's ``/metadata``)."""

    def __init__(self, meta: PolicyMetadata) -> None:
        self.meta = meta

    def execute(self, action: np.ndarray, step: int) -> np.ndarray:
        return to_libero_action(action, self.meta)


class EpisodeClient(Protocol):
    """What an episode asks of a policy client: :class:`submission_spec.PolicyClient` (HTTP) or
    :class:`liberopro.episode.local_policy.LocalPolicyClient` (in process, evaluator tooling)."""

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None: ...

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult: ...


class PolicySession:
    """One episode's conversation with the policy server (:class:`submission_spec.PolicyClient`):
    ``/reset`` and ``/act`` within the episode's policy time budget, latency recorded, and every
    chunk the policy returned kept with its step (:attr:`chunks`, for a replay of the episode,
    :class:`ReplaySession`).

    Args:
        client: the policy's client.
        meta: its ``/metadata`` (cameras, state fields, chunk length, conventions).
        episode_id: the episode id sent with every request (hex).
        budget_s: seconds the policy may spend answering within the episode, all requests
            together (measured with ``time.perf_counter``; each request's deadline is
            ``time.monotonic()`` plus what is left).
        instruction: the instruction the policy receives at a step (shift hooks may change it;
            called only when the policy is asked).

    :class:`submission_spec.PolicyError` from the client propagates (it ends the episode).
    """

    def __init__(
        self,
        client: EpisodeClient,
        meta: PolicyMetadata,
        episode_id: str,
        budget_s: float,
        instruction: Callable[[int], str],
    ) -> None:
        self.client, self.meta, self.episode_id, self.budget_s = client, meta, episode_id, budget_s
        self.instruction = instruction
        self.used = 0.0
        self.latency = Latency()
        #: step -> the chunk the policy returned when asked at that step, (T, 7) float64 in its
        #: own convention, in the order asked.
        self.chunks: dict[int, np.ndarray] = {}

    def reset(self, instruction: str) -> None:
        """``POST /reset`` with ``instruction`` (the one of step 0)."""
        t0 = time.perf_counter()
        self.client.reset(self.episode_id, instruction, deadline=time.monotonic() + self.budget_s)
        self.used += time.perf_counter() - t0

    def act(self, frame: RawFrame, step: int) -> np.ndarray:
        """``POST /act`` with ``frame`` converted to what the policy asked for
        (:func:`liberopro.sim.observation.to_message`) and the instruction of ``step``; the chunk,
        (T, 7) float64 in the policy's convention, 1 <= T <= ``meta.chunk_length``."""
        msg = to_message(frame, self.meta, self.episode_id, step, self.instruction(step))
        chunk = self.chunks[step] = self._answer(msg)
        return chunk

    def _answer(self, msg: ObservationMessage) -> np.ndarray:
        """The policy's chunk for ``msg`` (``POST /act`` within what is left of the budget)."""
        deadline = time.monotonic() + self.budget_s - self.used
        t0 = time.perf_counter()
        result = self.client.act(msg, self.meta.chunk_length, deadline=deadline)
        self.used += time.perf_counter() - t0
        self.latency.add(result.latency_ms, result.server_ms)
        return result.actions


class ReplaySession(PolicySession):
    """A :class:`PolicySession` that asks no server, for replaying an episode
    (:meth:`EpisodeRunner._replay`): ``/reset`` does nothing, and ``/act`` builds the message as
    the episode did (:func:`liberopro.sim.observation.to_message`: a fault in it recurs) and answers
    it with ``chunks[step]``, the chunk the policy returned at that step; with ``chunks`` None,
    with the neutral chunk at every step (``chunk_length`` rows of
    :func:`liberopro.sim.observation.neutral_action`: arm still, gripper open). No budget, no latency.
    Raises :class:`liberopro.episode.blame.ReplayDiverged` when asked at a step the policy was not."""

    def __init__(
        self,
        meta: PolicyMetadata,
        episode_id: str,
        instruction: Callable[[int], str],
        chunks: Mapping[int, np.ndarray] | None,
    ) -> None:
        super().__init__(None, meta, episode_id, math.inf, instruction)  # type: ignore[arg-type]  # no server
        self.recorded = chunks

    def reset(self, instruction: str) -> None:
        return None

    def _answer(self, msg: ObservationMessage) -> np.ndarray:
        if self.recorded is None:
            return np.tile(neutral_action(self.meta), (self.meta.chunk_length, 1))
        if msg.step not in self.recorded:
            raise ReplayDiverged(f"the replay asked the policy at step {msg.step}, where the episode did not")
        return self.recorded[msg.step]


@dataclass
class _Outcome:
    """What an episode's record says about how it went, filled in as it runs (the defaults are
    those of an episode that ends before its policy loop)."""

    recovery: Recovery
    instruction: str
    steps: int = 0
    #: The policy-loop step in progress (-1 before the loop; its last step after it).
    at: int = -1
    #: The policy supplied an action (its first chunk's first action reached the action layers).
    acted: bool = False
    success: bool = False
    reason: str = "horizon"
    detail: str | None = None
    tracker: PhaseTracker | None = None
    loop_s: float = 0.0
    renders: dict[str, int] | None = None
    video: str | None = None
    actions: str | None = None


class EpisodeRunner:
    """Runs episode plans against one policy, one LIBERO scene per task at a time.

    Args:
        client: the policy's HTTP client.
        metadata: the policy's ``/metadata`` (cameras, conventions, chunking).
        settings: evaluator settings.
        before_episode: called before each episode (the CLI uses it to restart a dead policy
            process); may raise nothing.
        scenes: a shared scene cache keyed by (task, cameras, render size); when given, the
            runner leaves closing the scenes to its owner (tests share scenes across policies).
    """

    def __init__(
        self,
        client: EpisodeClient,
        metadata: PolicyMetadata,
        settings: RunSettings,
        before_episode: Callable[[], None] | None = None,
        scenes: dict | None = None,
    ) -> None:
        self.client = client
        self.meta = metadata
        self.settings = settings
        self.before_episode = before_episode
        self._shared = scenes is not None
        self._scenes: dict = scenes if scenes is not None else {}
        #: The scene of the episode being run (its variant included), for privileged tooling
        #: (the validation and review controllers); None between episodes.
        self.current_scene: LiberoScene | None = None

    def close(self) -> None:
        """Close the scenes this runner owns (none when the cache is shared)."""
        if self._shared:
            return
        for scene in self._scenes.values():
            scene.close()
        self._scenes.clear()

    def scene_for(self, ref: TaskRef, variant: SceneVariant = SceneVariant()) -> LiberoScene:
        """The scene of ``ref`` (in ``variant``) for this policy's cameras, rendering on demand or
        not as the settings say; an owned cache keeps one scene at a time (a LIBERO scene holds
        1.5-2.5 GB)."""
        cams = recording.recording_cameras(self.meta, self.settings.video)
        key = (ref, cams, self.settings.render_size, variant)
        if key not in self._scenes:
            self.close()
            self._scenes[key] = LiberoScene(
                task_info(ref),
                cameras=cams,
                render_size=self.settings.render_size,
                variant=variant,
                on_demand=self.settings.on_demand_render,
            )
        scene = self._scenes[key]
        scene.on_demand = self.settings.on_demand_render  # a shared scene may come from another runner
        return scene

    @staticmethod
    def variant_of(shifts: list[Shift]) -> SceneVariant:
        """The scene variant an instance's shifts need together."""
        variant = SceneVariant()
        for s in shifts:
            v = type(s).scene_variant(s.params)
            if v is not None:
                variant = variant.merged(v)
        return variant

    def _drop_scene(self, ref: TaskRef) -> None:
        for key in [k for k in self._scenes if k[0] == ref]:
            self._scenes.pop(key).close()

    def run(self, plans: Iterable[EpisodePlan], on_record: Callable[[EpisodeRecord], None]) -> None:
        """Run ``plans`` grouped by task (order within a task kept); ``on_record`` gets each
        record as it finishes. Results do not depend on the order (episodes are pure functions
        of their plan and the policy's outputs)."""
        plans = list(plans)
        order = {p.instance.task: i for i, p in reversed(list(enumerate(plans)))}
        for plan in sorted(plans, key=lambda p: order[p.instance.task]):
            if self.before_episode is not None:
                self.before_episode()
            on_record(self.run_episode(plan))
        self.close()

    # ------------------------------------------------------------------ one episode
    def run_episode(self, plan: EpisodePlan) -> EpisodeRecord:
        """One episode of ``plan``, as the module docstring says; its record. A policy failure,
        a shift that cannot be realised (the episode is invalid) or a fault ends the episode
        with its reason in the record; a fault is charged by :func:`liberopro.episode.blame.charge`,
        which may replay the episode twice (:meth:`_replay`). Nothing is raised, except by
        building the shifts (an unknown shift id: ``KeyError``) or the task's semantics."""
        t_start = time.perf_counter()
        stack, out = _fresh(plan, self.settings)
        info = task_info(plan.instance.task)
        session = PolicySession(
            self.client,
            self.meta,
            uuid.uuid4().hex,
            self.settings.episode_policy_budget_s,
            lambda step: stack.instruction(info.instruction, step),
        )
        recorder = self._recorder(plan)
        fault = self._play(plan, stack, session, out, recorder)
        if fault is not None:
            log.warning("episode %s: %s", plan.instance.instance_id, fault.text)
            t_charge = time.perf_counter()
            out.reason, out.detail = charge(
                fault,
                replay=lambda: self._replay(plan, session, fault.step + 1),  # through the fault's step
                neutral=lambda: self._replay(plan, session, None),
            )
            replays_s = time.perf_counter() - t_charge
            t_start += replays_s  # the record's wall_s is the episode's own, not its replays'
            log.warning(
                "episode %s charged (replays: %.1f s): %s",
                plan.instance.instance_id,
                replays_s,
                out.detail.splitlines()[0],
            )
        if recorder is not None:
            out.video, out.actions = recorder.finish(out.success)
        return self._record(plan, stack, session, out, t_start)

    def _play(
        self,
        plan: EpisodePlan,
        stack: ShiftStack,
        session: PolicySession,
        out: _Outcome,
        recorder: recording.EpisodeRecorder | None = None,
        until: int | None = None,
    ) -> Fault | None:
        """Run ``plan`` with ``stack`` and ``session`` in the task's scene: reset, init state,
        static shifts and settle steps, ``/reset``, the policy loop (stopped before step
        ``until`` when given), the shifts' end; ``out`` filled in as it goes (a policy failure or
        an unrealisable shift set its reason). Returns the fault that ended it (its scene is
        dropped: the next episode gets a fresh one), or None."""
        ref = plan.instance.task
        scene: LiberoScene | None = None
        fault = None
        try:
            scene = self._begin(plan, stack, out)
            session.reset(out.instruction)
            t_loop = time.perf_counter()
            self._policy_loop(scene, stack, session, plan, out, recorder, until)
            out.loop_s = time.perf_counter() - t_loop
            stack.end()
        except PolicyError as exc:
            out.reason, out.detail = exc.reason, exc.detail
        except ShiftInvalid as exc:  # the policy's failure once it acted (shift_blocked), else invalid
            out.reason, out.detail, out.success = unrealised(out.acted), str(exc), False
        except Exception as exc:  # an evaluator or simulator fault: record it, keep going
            fault = Fault.of(exc, out.at, out.acted)
            out.reason, out.success = TerminationReason.evaluator_error, False  # until charged
            self._drop_scene(ref)  # a fresh scene for the next episode
        if scene is not None:
            out.renders = dict(scene.render_count)
        return fault

    def _begin(self, plan: EpisodePlan, stack: ShiftStack, out: _Outcome) -> LiberoScene:
        """An episode's start up to its policy loop: the task's scene (the runner's current one),
        ``stack`` bound to it, reset and init state, static shifts and settle steps (with their
        post-conditions: :class:`liberopro.shifts.ShiftInvalid` when one fails), the phase
        tracker and the instruction of step 0 in ``out``. Returns the scene."""
        ref = plan.instance.task
        info, sem = task_info(ref), semantics_of(ref)
        scene = self.current_scene = self.scene_for(ref, self.variant_of(stack.shifts))
        stack.bind(scene, sem, plan.seed, received=functools.partial(received_image, self.meta))
        scene.start_episode(info.init_states()[plan.init_state_index], plan.seed)
        stack.prepare(scene)  # static edits, settle steps, static post-conditions
        out.tracker = PhaseTracker(scene, sem)
        stack.track(out.tracker)
        out.instruction = stack.instruction(info.instruction, 0)
        return scene

    def begin_episode(self, plan: EpisodePlan) -> EpisodeSteps:
        """Begin one episode of ``plan`` to be stepped from outside the runner (an external
        policy, :mod:`liberopro.integrations`): the same start as :meth:`run_episode`'s (scene,
        static shifts, settle steps) without asking any policy server; the returned
        :class:`EpisodeSteps` runs the policy loop one step at a time. A static shift that cannot
        be realised ends the episode before its first step: the steps' ``out.reason`` is
        ``shift_invalid`` (``out.detail`` says why) and none may be run. Evaluator and simulator
        faults are raised (nothing is charged or replayed)."""
        stack, out = _fresh(plan, self.settings)
        try:
            scene = self._begin(plan, stack, out)
        except ShiftInvalid as exc:
            if self.current_scene is None:
                raise
            scene = self.current_scene
            out.reason, out.detail, out.success = TerminationReason.shift_invalid, str(exc), False
        return EpisodeSteps(self, scene, stack, plan, out)

    def _replay(self, plan: EpisodePlan, session: PolicySession, until: int | None) -> Fault | None:
        """Run ``plan`` again in a fresh scene without the policy (no request, no budget, no video
        or actions written; the runner's current scene is the replay's afterwards): with the
        chunks ``session`` recorded, at the steps it recorded them, through step ``until - 1``;
        with ``until`` None, with the neutral policy to the horizon (:class:`ReplaySession`).
        Returns the replay's fault, or None when none occurred (a policy failure or an
        unrealisable shift is none). Costs a scene build, the reset and settle steps and the
        replayed steps (each step as the episode's: renders and ``/act`` messages included)."""
        self._drop_scene(plan.instance.task)
        stack, out = _fresh(plan, self.settings)
        info = task_info(plan.instance.task)
        chunks = session.chunks if until is not None else None
        replay = ReplaySession(
            self.meta, session.episode_id, lambda step: stack.instruction(info.instruction, step), chunks
        )
        t0 = time.perf_counter()
        fault = self._play(plan, stack, replay, out, None, until)
        log.info(
            "episode %s replayed (%s): %d steps in %.1f s, %s",
            plan.instance.instance_id,
            "recorded actions" if chunks is not None else "held still",
            out.steps,
            time.perf_counter() - t0,
            fault.short() if fault else "no fault",
        )
        return fault

    def _recorder(self, plan: EpisodePlan) -> recording.EpisodeRecorder | None:
        """The episode's recorder when videos or actions are recorded, else None; ``ValueError``
        when they are asked for without ``settings.output_dir``."""
        s = self.settings
        if s.video == "none" and not s.record_actions:
            return None
        if s.output_dir is None:
            raise ValueError("RunSettings.output_dir is needed to record videos or actions")
        return recording.EpisodeRecorder(
            Path(s.output_dir),
            recording.episode_name(plan),
            s.video,
            s.record_actions,
            recording.policy_camera(self.meta),
            s.video_size,
        )

    def _policy_loop(
        self,
        scene: LiberoScene,
        stack: ShiftStack,
        session: PolicySession,
        plan: EpisodePlan,
        out: _Outcome,
        recorder: recording.EpisodeRecorder | None = None,
        until: int | None = None,
    ) -> None:
        """The policy loop (the module docstring's steps; the layers in :mod:`liberopro.episode.loop`),
        until LIBERO's goal predicate holds (success), the step limit (the horizon, plus the
        Retry protocol's extra steps), every runtime shift is done (``stop_when_shifts_done``), or
        step ``until`` (a replay's end, excluded). Sets ``out.at`` at the start of every step,
        ``out.steps`` after every env step and ``out.acted`` once the policy supplied an action.
        A ``recorder`` (:mod:`liberopro.episode.video`) sees the clean frame, the images sent to the
        policy and the actions; the frame the observation layers get holds the policy's cameras
        only (not a camera added for the video)."""
        steps = EpisodeSteps(self, scene, stack, plan, out, recorder)
        request = session.act
        if recorder is not None:

            def request(frame: RawFrame, step: int) -> np.ndarray:
                chunk = session.act(frame, step)
                recorder.policy_asked(frame.images)
                return chunk

        policy = ChunkedPolicy(request, self.settings.replan_steps or self.meta.replan_steps)
        while steps.t < min(steps.limit, math.inf if until is None else until):
            t = steps.t
            action, frame = steps.begin_step()
            if action is not None or out.recovery.applied_at == t:
                policy.flush()  # the policy starts a fresh chunk after an intervention
            commanded = None
            if action is None:
                commanded = policy.next(frame, t)
                action = steps.policy_action(commanded)
            if steps.end_step(action, commanded):
                return
            if self.settings.stop_when_shifts_done and stack.done(steps.t):
                return

    def _record(
        self, plan: EpisodePlan, stack: ShiftStack, session: PolicySession, out: _Outcome, t_start: float
    ) -> EpisodeRecord:
        """The episode's record from its plan, shifts, policy session and outcome
        (:func:`episode_record`)."""
        return episode_record(
            plan,
            self.settings,
            self.meta,
            stack,
            out,
            t_start,
            latency=session.latency.stats(),
            episode_id=session.episode_id,
        )


def _fresh(plan: EpisodePlan, settings: RunSettings) -> tuple[ShiftStack, _Outcome]:
    """A fresh shift stack of ``plan``'s instance and the outcome of an episode not run yet."""
    recovery = recovery_for(plan.diagnostic.recovery, settings.recovery_hold_steps, settings.recovery_extra_steps)
    return ShiftStack.of(plan.instance.shifts), _Outcome(recovery, task_info(plan.instance.task).instruction)


def episode_record(
    plan: EpisodePlan,
    settings: RunSettings,
    meta: PolicyMetadata,
    stack: ShiftStack,
    out: _Outcome,
    t_start: float,
    *,
    latency: LatencyStats,
    episode_id: str,
) -> EpisodeRecord:
    """The episode's record (:class:`liberopro.runs.summary.EpisodeRecord`) from its plan, the
    run's settings, the policy's metadata, the episode's shifts and outcome, the policy's
    ``latency`` statistics (:meth:`Latency.stats`) and the ``episode_id`` it was sent;
    ``wall_s`` counts from ``t_start`` (``time.perf_counter``)."""
    ref = plan.instance.task
    return EpisodeRecord(
        instance_id=plan.instance.instance_id,
        case=plan.instance.case,
        suite=ref.suite,
        task_index=ref.index,
        task_name=task_info(ref).name,
        episode_index=plan.episode_index,
        init_state_id=plan.init_state_index,
        seed=plan.seed,
        shifts=stack.records(),
        success=out.success,
        valid=TerminationReason(out.reason).scored,
        steps=out.steps,
        horizon=settings.horizon(ref),
        termination_reason=TerminationReason(out.reason),
        detail=out.detail,
        phases=dict(out.tracker.reached) if out.tracker is not None else {},
        instruction=out.instruction,
        observations=plan.diagnostic.observations,
        recovery=out.recovery.record,
        replan_steps=settings.replan_steps or meta.replan_steps,
        latency=latency,
        episode_id=episode_id,
        wall_s=round(time.perf_counter() - t_start, 3),
        loop_s=round(out.loop_s, 3),
        renders=out.renders,
        video=out.video,
        actions=out.actions,
        proof=plan.instance.oracle.kind if plan.instance.oracle is not None else None,
    )


def failed_record(
    plan: EpisodePlan, meta: PolicyMetadata, settings: RunSettings, reason: str, detail: str
) -> EpisodeRecord:
    """The record of an episode of ``plan`` that could not run (e.g. its worker process died,
    :mod:`liberopro.runs.workers`): not a success, no steps, ``termination_reason`` ``reason`` (a
    :class:`~liberopro.schema.reasons.TerminationReason` value; ``valid`` as its side says) and
    ``detail``; builds no scene and asks nothing of the policy (``meta``: its metadata)."""
    stack, out = _fresh(plan, settings)
    out.reason, out.detail = reason, detail
    return episode_record(
        plan, settings, meta, stack, out, time.perf_counter(), latency=Latency().stats(), episode_id=uuid.uuid4().hex
    )


class CurrentScene:
    """The scene of the episode a runner is running, for an in-process privileged policy that is
    built before its runner (the oracle, instance validation, review pages, demonstrations)::

        scene = CurrentScene()
        runner = scene.bind(EpisodeRunner(LocalPolicyClient(OraclePolicy(scene)), meta, settings))

    Calling it gives the bound runner's :attr:`EpisodeRunner.current_scene` (None before
    :meth:`bind` and between episodes)."""

    def __init__(self) -> None:
        self._runner: EpisodeRunner | None = None

    def __call__(self) -> LiberoScene | None:
        return None if self._runner is None else self._runner.current_scene

    def bind(self, runner: EpisodeRunner) -> EpisodeRunner:
        """Follow ``runner``'s current scene from now on; returns ``runner``."""
        self._runner = runner
        return runner


class EpisodeSteps:
    """One episode's policy loop, one step at a time (the module docstring's steps 1-5, the
    layers of :mod:`liberopro.episode.loop`), for :meth:`EpisodeRunner._policy_loop` and for a
    policy outside the runner (:meth:`EpisodeRunner.begin_episode`). A step is
    :meth:`begin_step` (triggers, interventions, the observed frame), then, unless an
    intervention supplied the action, :meth:`policy_action`, then :meth:`end_step` (one env step).

    Attributes:
        t: the policy-loop step to run next (0-based).
        scene, stack, plan, out: the episode's scene, shift stack, plan and outcome
            (``out.steps``, ``out.success``, ``out.reason``, ``out.tracker`` as the runner fills them).
    """

    def __init__(
        self,
        runner: EpisodeRunner,
        scene: LiberoScene,
        stack: ShiftStack,
        plan: EpisodePlan,
        out: _Outcome,
        recorder: recording.EpisodeRecorder | None = None,
    ) -> None:
        self.scene, self.stack, self.plan, self.out, self.recorder = scene, stack, plan, out, recorder
        self.meta = runner.meta
        out.recovery.begin(scene)
        self.interventions: list[Intervention] = [*stack.layers, out.recovery]
        self.observations = observation_layers(stack.layers, plan.diagnostic.observations)
        self.actions: list[ActionLayer] = [LiberoActions(runner.meta), *stack.layers]
        self.policy_cams = tuple(c.name for c in runner.meta.cameras)
        self.horizon = runner.settings.horizon(plan.instance.task)
        self.last_action = start_action()
        self.t = 0
        self._raw: RawFrame | None = None

    @property
    def limit(self) -> int:
        """The step limit: the horizon, plus the Retry protocol's extra steps once armed."""
        return self.out.recovery.limit(self.horizon)

    def begin_step(self) -> tuple[np.ndarray | None, RawFrame]:
        """Steps 1-3 of step :attr:`t`: runtime shifts due fire (arming the recovery protocol),
        the interventions run, the frame passes the observation layers. Returns the
        intervention's LIBERO action ((7,) float64; None when none acted: the policy supplies
        it) and the frame the policy sees (its cameras only)."""
        t, out = self.t, self.out
        assert out.tracker is not None
        out.at = t
        if self.stack.fire_due(t, out.tracker.reached):
            out.recovery.arm()
        action = intervene(self.interventions, t, self.last_action)
        self._raw = raw = self.scene.frame()
        return action, observe(self.observations, only_cameras(raw, self.policy_cams), t)

    def policy_action(self, commanded: np.ndarray) -> np.ndarray:
        """Step 4: the policy's action ((7,) in its gripper convention) through the action
        layers; the LIBERO action (7,) float64. From here on a fault may be of the policy's making."""
        self.out.acted = True
        return execute(self.actions, commanded, self.t)

    def end_step(self, action: np.ndarray, commanded: np.ndarray | None) -> bool:
        """Step 5: one env step with LIBERO ``action`` ((7,); ``commanded``, the policy's own
        action, or None on an intervention's step, is for the recorder), the phase update;
        :attr:`t` advances. True when LIBERO's goal predicate holds (the outcome says success)."""
        raw, t, out = self._raw, self.t, self.out
        assert raw is not None and out.tracker is not None, "end_step before begin_step"
        if self.recorder is not None:
            marks = recording.shift_marks(self.stack.shifts, t) if self.recorder.video != "none" else []
            self.recorder.step(t, raw.images, marks)
            self.recorder.action(action, commanded)
        self.last_action = action
        done = self.scene.step(action)
        out.steps = t + 1
        out.tracker.update(t)
        self.t = t + 1
        self._raw = None
        if done:
            out.success, out.reason = True, TerminationReason.success
        return bool(done)
