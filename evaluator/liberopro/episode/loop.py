"""The parts the episode loop is composed of (:meth:`liberopro.episode.runner.EpisodeRunner.run_episode`).

Each part is small, imports no simulator and runs without one (``tests/evaluator/test_loop_layers.py`` tests
them on fakes). Per policy-loop step ``t`` (0-based), in this order (``docs/evaluator.md``, "An
episode"):

1. *Triggers*: runtime shifts whose phase was reached, or whose fallback step came, fire
   (:meth:`liberopro.shifts.base.RuntimeShift.maybe_fire`); the first firing arms the
   :class:`Recovery` protocol.
2. *Interventions* (:class:`Intervention`), in order, the first that returns an action supplies
   the step's action: each shift's ``override`` (a bounded intervention such as D19's push), then
   the recovery protocol (:class:`Hold`, :class:`Retry`, :class:`Restore`), which is applied at
   the first step no shift holds control. When an intervention acts, or a recovery is applied,
   the :class:`ChunkedPolicy` drops its chunk.
3. *Observation layers* (:class:`ObservationLayer`) transform the raw frame, every step, whether
   or not the policy is asked: each shift's ``observe``, then :class:`FrozenObservations` under
   the frozen diagnostic.
4. Unless an intervention supplied the action: the :class:`ChunkedPolicy`'s next action (asking
   ``/act`` through :class:`liberopro.episode.runner.PolicySession` when its chunk is used up), through
   the *action layers* (:class:`ActionLayer`): :class:`liberopro.episode.runner.LiberoActions` (the
   policy's convention -> LIBERO's), then each shift's ``execute``.
5. One env step with that action (outside this module).

Conventions. A frame is a :class:`liberopro.sim.scene.RawFrame`: camera name -> (H, W, 3) uint8 image
as rendered (upside down), proprioception fields -> float64 vectors in the world frame
(``evaluator/liberopro/sim/scene.py``). A LIBERO action is a (7,) float64 vector in [-1, 1]: arm
position and rotation deltas (0:6), gripper (6: -1 opens, +1 closes); one action is one 20 Hz
control step (``evaluator/liberopro/sim/scene.py``, ``evaluator/liberopro/sim/observation.py``). A policy
action is a (7,) row of the policy's chunk in its own declared gripper convention
(``submission_spec.client.ActResult``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from liberopro.runs.summary import LatencyStats

if TYPE_CHECKING:
    from liberopro.sim.scene import LiberoScene, RawFrame


def start_action() -> np.ndarray:
    """The "last executed action" before the first policy-loop step: (7,) float64, arm still,
    gripper open (``[0, 0, 0, 0, 0, 0, -1]``, LIBERO's settle action, ``evaluator/liberopro/sim/scene.py``)."""
    return np.array([0, 0, 0, 0, 0, 0, -1.0])


# --------------------------------------------------------------------------- protocols
class ObservationLayer(Protocol):
    """Transforms what the policy sees. Runs every step, after the interventions, on the frame the
    scene rendered after the previous env step (or the previous layer's output); it may keep
    state across steps (delays, frozen frames). It must not change the frame it is given in
    place when it keeps it."""

    def observe(self, frame: RawFrame, step: int) -> RawFrame:
        """The frame as this layer passes it on (a :class:`liberopro.sim.scene.RawFrame`)."""
        ...


class ActionLayer(Protocol):
    """Transforms the policy's action before the env steps with it. Runs only on steps at which
    the policy supplies the action (never on an intervention's action)."""

    def execute(self, action: np.ndarray, step: int) -> np.ndarray:
        """The (7,) float64 action passed on."""
        ...


class Intervention(Protocol):
    """Something done to the simulation or to the control of the robot. Runs every step before
    the frame is taken, in order, until one returns an action; the rest are not called that step.
    An action returned is executed as is (no action layer), and the policy's chunk is dropped."""

    def intervene(self, step: int, last_action: np.ndarray) -> np.ndarray | None:
        """A (7,) float64 LIBERO action that replaces the policy's this step, or None.
        ``last_action``: the action executed at the previous step (:func:`start_action` at step 0)."""
        ...


def observe(layers: Iterable[ObservationLayer], frame: RawFrame, step: int) -> RawFrame:
    """``frame`` through every observation layer, in order."""
    for layer in layers:
        frame = layer.observe(frame, step)
    return frame


def execute(layers: Iterable[ActionLayer], action: np.ndarray, step: int) -> np.ndarray:
    """``action`` through every action layer, in order."""
    for layer in layers:
        action = layer.execute(action, step)
    return action


def intervene(interventions: Iterable[Intervention], step: int, last_action: np.ndarray) -> np.ndarray | None:
    """The action of the first intervention that supplies one (later ones are not asked), or None."""
    for item in interventions:
        action = item.intervene(step, last_action)
        if action is not None:
            return action
    return None


# --------------------------------------------------------------------------- observation layers
class FrozenObservations:
    """The frozen-observations diagnostic (``Diagnostic.observations == "frozen"``,
    ``evaluator/liberopro/instances/build.py``): the policy receives, at every step, a copy of the frame
    it was given at the first step (after the shifts' observation layers; the same object every
    step). Step index and instruction stay current (they are not part of the frame). The layers
    before it still run every step."""

    def __init__(self) -> None:
        self.first: RawFrame | None = None

    def observe(self, frame: RawFrame, step: int) -> RawFrame:
        if self.first is None:
            self.first = frame.copy()
        return self.first


# --------------------------------------------------------------------------- the policy
@dataclass
class Latency:
    """The ``/act`` round trips of one episode: evaluator-side latency and the server's own
    inference time, in milliseconds."""

    values: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)

    def add(self, latency_ms: float, server_ms: float | None) -> None:
        self.values.append(latency_ms)
        if server_ms is not None:
            self.server.append(server_ms)

    def stats(self) -> LatencyStats:
        """Count, mean, p50, p95, max (ms, 3 decimals); empty stats when no request was made."""
        if not self.values:
            return LatencyStats()
        v = np.asarray(self.values)
        return LatencyStats(
            requests=len(v),
            mean_ms=round(float(v.mean()), 3),
            p50_ms=round(float(np.percentile(v, 50)), 3),
            p95_ms=round(float(np.percentile(v, 95)), 3),
            max_ms=round(float(v.max()), 3),
            server_mean_ms=round(float(np.mean(self.server)), 3) if self.server else None,
        )


class ChunkedPolicy:
    """The policy one action at a time, from action chunks (like openpi's action-chunk broker):
    ask for a chunk, execute its first ``replan_steps`` (K) actions, one per step, then ask again.
    A chunk shorter than K is used up and the policy is asked again at the next step. An
    intervention or a recovery drops the rest of the chunk (:meth:`flush`); so does the end of the
    episode (one instance per episode, never reused).

    Args:
        request: ``(frame, step) -> chunk``, (T, 7) array (:meth:`liberopro.episode.runner.PolicySession.act`).
        replan_steps: K >= 1, actions of each chunk executed before asking again (the policy's
            ``replan_steps``, or the evaluator's override).
    """

    def __init__(self, request: Callable[[RawFrame, int], np.ndarray], replan_steps: int) -> None:
        self.request, self.replan_steps = request, replan_steps
        self.chunk: list[np.ndarray] = []

    def next(self, frame: RawFrame, step: int) -> np.ndarray:
        """The policy's action for ``step``, a (7,) row of its chunk; ``frame`` is sent only when a
        new chunk is asked for."""
        if not self.chunk:
            self.chunk = list(self.request(frame, step)[: self.replan_steps])
        return self.chunk.pop(0)

    def flush(self) -> None:
        """Drop the actions left in the chunk: the policy is asked at the next step it acts."""
        self.chunk = []


# --------------------------------------------------------------------------- recovery protocols
class Recovery:
    """A recovery protocol of the diagnostic study (``Diagnostic.recovery``,
    ``evaluator/liberopro/instances/build.py``); this base class is ``none`` (nothing happens). An
    :class:`Intervention`, last in the loop's list: it runs only at steps no shift holds control.

    Bookkeeping: :meth:`arm` when a runtime shift fires (only before the protocol was applied);
    at the first step it is asked while armed it applies (:meth:`_apply`, once per episode),
    records ``at_step`` and sets :attr:`applied_at`; the runner drops the policy's chunk then.
    :attr:`record` is the episode record's ``recovery`` (``{"protocol": ..., "at_step": ...}``
    plus the protocol's own fields, in the order they were set).
    """

    protocol: ClassVar[str] = "none"

    def __init__(self) -> None:
        self.record: dict[str, Any] = {"protocol": self.protocol}
        self.pending = False
        self.applied_at: int | None = None
        self.extra_steps = 0

    def begin(self, scene: LiberoScene) -> None:
        """Called once when the policy loop starts (after settling and ``/reset``)."""

    def arm(self) -> None:
        """A runtime shift fired: apply the protocol at the next step no shift holds control."""
        if self.protocol != "none" and self.applied_at is None:
            self.pending = True

    def limit(self, horizon: int) -> int:
        """The episode's step limit: ``horizon`` plus any extra steps granted."""
        return horizon + self.extra_steps

    def intervene(self, step: int, last_action: np.ndarray) -> np.ndarray | None:
        if self.pending:
            self.pending = False
            self.applied_at = self.record["at_step"] = step
            self._apply()
        return self._action(last_action)

    def _apply(self) -> None:
        """The protocol's one-time effect."""

    def _action(self, last_action: np.ndarray) -> np.ndarray | None:
        """An action that replaces the policy's at this step, or None."""
        return None


class Hold(Recovery):
    """``hold``: the robot holds still for ``steps`` steps (arm delta 0, the gripper command of the
    last executed action, (7,) float64), then the policy resumes with a fresh chunk. Records
    ``hold_steps``."""

    protocol = "hold"

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.left = 0

    def _apply(self) -> None:
        self.left = self.record["hold_steps"] = self.steps

    def _action(self, last_action: np.ndarray) -> np.ndarray | None:
        if self.left <= 0:
            return None
        self.left -= 1
        return np.array([0, 0, 0, 0, 0, 0, last_action[6]])


class Retry(Recovery):
    """``retry``: the policy's chunk is dropped (it starts its chunking afresh) and the episode
    gets ``steps`` extra steps beyond its horizon. Records ``extra_steps``."""

    protocol = "retry"

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def _apply(self) -> None:
        self.record["extra_steps"] = self.extra_steps = self.steps


class Restore(Recovery):
    """``restore``: the arm and gripper joints are put back where they were when the policy loop
    started (:meth:`liberopro.sim.scene.LiberoScene.set_robot_state`, zero velocity: an injected state,
    not a motion), before the frame of that step is taken; the policy resumes with a fresh chunk.
    Records ``restored_eef_m``: the end-effector position after the restore (metres, world frame,
    4 decimals)."""

    protocol = "restore"

    def __init__(self) -> None:
        super().__init__()
        self.scene: LiberoScene | None = None
        self.start: np.ndarray | None = None

    def begin(self, scene: LiberoScene) -> None:
        self.scene, self.start = scene, scene.robot_state()

    def _apply(self) -> None:
        assert self.scene is not None and self.start is not None, "begin() first"
        self.scene.set_robot_state(self.start)
        self.record["restored_eef_m"] = np.round(self.scene.eef_pos(), 4).tolist()


def recovery_for(protocol: str, hold_steps: int, extra_steps: int) -> Recovery:
    """The recovery layer of ``protocol`` (``none``, ``hold``, ``retry``, ``restore``); ``hold_steps``
    and ``extra_steps`` from :class:`liberopro.episode.runner.RunSettings`. ``KeyError`` for another name."""
    makers: dict[str, Callable[[], Recovery]] = {
        "none": Recovery,
        "hold": lambda: Hold(hold_steps),
        "retry": lambda: Retry(extra_steps),
        "restore": Restore,
    }
    return makers[protocol]()


def observation_layers(shift_layers: Sequence[ObservationLayer], observations: str) -> list[ObservationLayer]:
    """The observation layers of an episode: the shifts', then :class:`FrozenObservations` when
    ``observations == "frozen"`` (``live``: none more)."""
    return [*shift_layers, *([FrozenObservations()] if observations == "frozen" else [])]


__all__ = [
    "ActionLayer",
    "ChunkedPolicy",
    "FrozenObservations",
    "Hold",
    "Intervention",
    "Latency",
    "ObservationLayer",
    "Recovery",
    "Restore",
    "Retry",
    "execute",
    "intervene",
    "observation_layers",
    "observe",
    "recovery_for",
    "start_action",
]
