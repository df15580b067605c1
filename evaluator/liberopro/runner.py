"""The episode runner: LIBERO's standard evaluation protocol with shifts layered on, against a
policy behind :class:`submission_spec.PolicyClient`.

Per episode: reseed, reset, set init state -> static model edits -> 10 settle steps -> static
edits of the settled scene (then 10 more settle steps if anything moved) -> static
post-conditions -> ``/reset`` -> policy loop. Each loop step: fire runtime shifts whose phase
was reached (or whose fallback step came) -> an override action if a shift holds control ->
once the shift's own intervention is over, the diagnostic recovery protocol if one is set
(hold, retry, restore) -> frame through the observation hooks (the first frame again under
frozen observations) -> else the next action of the current chunk (asking ``/act`` when the
chunk's ``replan_steps`` are used up) -> execution hooks -> one env step -> phase update. The loop ends on LIBERO's goal predicate, at the horizon, or on a policy failure,
which ends only this episode with its reason.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from liberopro.instances import EpisodePlan, semantics_of
from liberopro.observation import to_libero_action, to_message
from liberopro.phases import PhaseTracker
from liberopro.results import EpisodeRecord, LatencyStats
from liberopro.shifts import RuntimeShift, Shift, ShiftInvalid, get_shift
from liberopro.shifts.base import EpisodeContext, stable_seed
from liberopro.sim import LiberoScene, SceneVariant
from liberopro.tasks import TaskRef, task_info
from submission_spec import PolicyClient, PolicyError, PolicyMetadata

log = logging.getLogger("liberopro.runner")


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
    """

    render_size: int = 256
    max_steps: int | None = None
    episode_policy_budget_s: float = 600.0
    replan_steps: int | None = None
    recovery_hold_steps: int = 20
    recovery_extra_steps: int = 60
    stop_when_shifts_done: bool = False

    def horizon(self, ref: TaskRef) -> int:
        return min(ref.horizon, self.max_steps) if self.max_steps else ref.horizon


@dataclass
class _Latency:
    values: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)

    def stats(self) -> LatencyStats:
        if not self.values:
            return LatencyStats()
        v = np.asarray(self.values)
        return LatencyStats(
            requests=len(v), mean_ms=round(float(v.mean()), 3), p50_ms=round(float(np.percentile(v, 50)), 3),
            p95_ms=round(float(np.percentile(v, 95)), 3), max_ms=round(float(v.max()), 3),
            server_mean_ms=round(float(np.mean(self.server)), 3) if self.server else None,
        )


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

    def __init__(self, client: PolicyClient, metadata: PolicyMetadata, settings: RunSettings,
                 before_episode: Callable[[], None] | None = None,
                 scenes: dict | None = None) -> None:
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
        """The scene of ``ref`` (in ``variant``) for this policy's cameras; an owned cache keeps
        one scene at a time (a LIBERO scene holds 1.5-2.5 GB)."""
        cams = tuple(c.name for c in self.meta.cameras)
        key = (ref, cams, self.settings.render_size, variant)
        if key not in self._scenes:
            self.close()
            self._scenes[key] = LiberoScene(task_info(ref), cameras=cams, render_size=self.settings.render_size,
                                            variant=variant)
        return self._scenes[key]

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
        ref = plan.instance.task
        info = task_info(ref)
        sem = semantics_of(ref)
        horizon = self.settings.horizon(ref)
        shifts: list[Shift] = [get_shift(s.id)(s.params) for s in plan.instance.shifts]
        contexts: list[EpisodeContext] = []
        episode_id = uuid.uuid4().hex
        latency = _Latency()
        t_start = time.perf_counter()
        steps = 0
        success = False
        reason, detail, valid = "horizon", None, True
        tracker: PhaseTracker | None = None
        loop_s = 0.0
        instruction = info.instruction
        recovery: dict = {"protocol": plan.diagnostic.recovery}
        try:
            scene = self.current_scene = self.scene_for(ref, self.variant_of(shifts))
            contexts = [
                EpisodeContext(scene=scene, sem=sem, rng=np.random.default_rng(stable_seed(plan.seed, s.id, i)))
                for i, s in enumerate(shifts)
            ]
            # Static shifts wrap the scene first, runtime events act on top of them (so a D20
            # restatement overrides an S22 paraphrase, whatever order the case lists them in).
            layers = sorted(zip(shifts, contexts, strict=True), key=lambda sc: sc[0].kind != "static")
            scene.start_episode(info.init_states()[plan.init_state_index], plan.seed)
            for s, ctx in layers:
                if s.kind == "static":
                    s.on_episode_start(ctx)
            scene.settle()
            moved = [s.on_settled(ctx) for s, ctx in layers if s.kind == "static"]
            if any(moved):
                scene.settle()
            for s, ctx in layers:
                if s.kind == "static":
                    s.verify(ctx)
            tracker = PhaseTracker(scene, sem)
            for ctx in contexts:
                ctx.phases = tracker
            instruction = self._instruction(shifts, info.instruction, 0)
            used = 0.0
            t0 = time.perf_counter()
            self.client.reset(episode_id, instruction, deadline=time.monotonic() + self.settings.episode_policy_budget_s)
            used += time.perf_counter() - t0
            replan = self.settings.replan_steps or self.meta.replan_steps
            diag = plan.diagnostic
            chunk: list[np.ndarray] = []
            last_action = np.array([0, 0, 0, 0, 0, 0, -1.0])
            start_robot = scene.robot_state()
            first_frame = None
            recovery_pending, hold_left, limit = False, 0, horizon
            t_loop = time.perf_counter()
            t = 0
            while t < limit:
                for s, ctx in layers:
                    if isinstance(s, RuntimeShift):
                        why = s.should_fire(t, tracker.reached)
                        if why is not None:
                            s.fired_at, s.fired_by = t, why
                            s.fire(ctx, t)
                            if diag.recovery != "none" and "at_step" not in recovery:
                                recovery_pending = True
                action = None
                for s, ctx in layers:
                    ctx.last_action = last_action
                    action = s.override(ctx, t)
                    if action is not None:
                        chunk = []  # the policy gets a fresh start after an intervention
                        break
                if action is None and recovery_pending:
                    # The shift's own intervention is over: apply the recovery protocol now.
                    recovery_pending, chunk = False, []
                    recovery["at_step"] = t
                    if diag.recovery == "hold":
                        hold_left = recovery["hold_steps"] = self.settings.recovery_hold_steps
                    elif diag.recovery == "retry":
                        recovery["extra_steps"] = self.settings.recovery_extra_steps
                        limit += self.settings.recovery_extra_steps
                    elif diag.recovery == "restore":
                        scene.set_robot_state(start_robot)
                        recovery["restored_eef_m"] = np.round(scene.eef_pos(), 4).tolist()
                frame = scene.frame()
                for s, ctx in layers:
                    frame = s.observe(frame, t, ctx)
                if diag.observations == "frozen":
                    if first_frame is None:
                        first_frame = frame.copy()
                    frame = first_frame
                if action is None and hold_left > 0:
                    hold_left -= 1
                    action = np.array([0, 0, 0, 0, 0, 0, last_action[6]])
                if action is None:
                    if not chunk:
                        msg = to_message(frame, self.meta, episode_id, t, self._instruction(shifts, info.instruction, t))
                        deadline = time.monotonic() + self.settings.episode_policy_budget_s - used
                        t0 = time.perf_counter()
                        result = self.client.act(msg, self.meta.chunk_length, deadline=deadline)
                        used += time.perf_counter() - t0
                        latency.values.append(result.latency_ms)
                        if result.server_ms is not None:
                            latency.server.append(result.server_ms)
                        chunk = list(result.actions[:replan])
                    action = to_libero_action(chunk.pop(0), self.meta)
                    for s, ctx in layers:
                        action = s.execute(action, t, ctx)
                last_action = action
                done = scene.step(action)
                steps = t + 1
                tracker.update(t)
                t += 1
                if done:
                    success, reason = True, "success"
                    break
                if self.settings.stop_when_shifts_done:
                    ends = [s.done_after() for s in shifts if isinstance(s, RuntimeShift)]
                    if ends and None not in ends and t >= max(ends):
                        break
            loop_s = time.perf_counter() - t_loop
            for s, ctx in layers:
                s.on_episode_end(ctx)
        except PolicyError as exc:
            reason, detail = exc.reason, exc.detail
        except ShiftInvalid as exc:
            reason, detail, valid, success = "shift_invalid", str(exc), False, False
        except Exception as exc:  # an evaluator or simulator fault: record it, keep going
            log.exception("episode %s failed inside the evaluator", plan.instance.instance_id)
            reason, detail = "evaluator_error", f"{exc!r}\n{traceback.format_exc(limit=5)}"
            self._drop_scene(ref)  # a fresh scene for the next episode
        return EpisodeRecord(
            instance_id=plan.instance.instance_id,
            case=plan.instance.case,
            suite=ref.suite,
            task_index=ref.index,
            task_name=info.name,
            episode_index=plan.episode_index,
            init_state_id=plan.init_state_index,
            seed=plan.seed,
            shifts=[s.record() for s in shifts],
            success=success,
            valid=valid,
            steps=steps,
            horizon=horizon,
            termination_reason=reason,
            detail=detail,
            phases=dict(tracker.reached) if tracker is not None else {},
            instruction=instruction,
            observations=plan.diagnostic.observations,
            recovery=recovery,
            replan_steps=self.settings.replan_steps or self.meta.replan_steps,
            latency=latency.stats(),
            episode_id=episode_id,
            wall_s=round(time.perf_counter() - t_start, 3),
            loop_s=round(loop_s, 3),
        )

    @staticmethod
    def _instruction(shifts: list[Shift], text: str, step: int) -> str:
        for s in sorted(shifts, key=lambda s: s.kind != "static"):
            text = s.instruction(text, step)
        return text
