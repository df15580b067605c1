"""The shift mechanism: one class per shift, each a small layer over the episode (in the spirit of
Gymnasium wrappers: a shift overrides only the hooks it needs).

Hooks, in the order the runner calls them:

* :meth:`Shift.on_episode_start` (static): edit the model (lights, cameras, ...) after
  ``set_init_state``, before the settle steps. Re-applied at every episode, so scene edits
  survive LIBERO's resets.
* :meth:`Shift.on_settled` (static): edit the settled scene (object poses: LIBERO's stored init
  states hold objects a few centimetres above their support, and the 10 settle steps drop
  them). Returns True when it moved something; the runner then runs another 10 settle steps.
* :meth:`Shift.verify` (static): measure the post-condition on the final settled scene; raise
  :class:`ShiftInvalid` when it fails (the episode is then invalid, never run unshifted).
* :meth:`RuntimeShift.check_at_reset` (runtime): on the same settled scene, before the policy
  acts, refuse a draw that could never be realised on this init state wherever the robot goes
  (a block too large for its region): the episode is invalid (``shift_invalid``) and generation
  redraws, rather than charging the policy with ``shift_blocked`` at the firing step.
* :meth:`Shift.instruction`: the instruction the policy receives at a step.
* :meth:`Shift.observe`: the raw frame the policy receives at a step (called every step).
* :meth:`Shift.override`: an action that replaces the policy's (a bounded intervention).
* :meth:`Shift.execute`: the action actually executed, from the one the policy chose.
* :meth:`Shift.on_episode_end`: after the last step, to finish measurements.
* Runtime shifts: :meth:`RuntimeShift.fire` once, at the first step at which their trigger
  phase is reached or at ``fallback_step``, whichever comes first
  (:meth:`RuntimeShift.maybe_fire` decides, fires and records ``fired_at``/``fired_by``). A
  fire that finds no free placement only because of the robot or the carried object *at this
  moment* raises :class:`ShiftDeferred`; the shift then retries at every following step, at
  most :data:`MAX_DELAY_STEPS` steps after it came due (the bounded delay of issue 11, item 3),
  and records the delay.

The runner does not call these hooks one by one: :class:`liberopro.shifts.adapter.ShiftLayer`
presents a shift bound to its :class:`EpisodeContext` as the loop's observation layer, action
layer, intervention and trigger (:mod:`liberopro.episode.loop`), and
:class:`liberopro.shifts.adapter.ShiftStack` orders an episode's shifts (static first).

Every shift records what it applied (``self.applied``), with measured values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

import numpy as np

from liberopro.catalog.sampling import uniform
from liberopro.catalog.spec import CATEGORIES, Category, RuntimeParams, ShiftKind, ShiftParams, ShiftSpec

if TYPE_CHECKING:
    from liberopro.episode.phases import Phase
    from liberopro.semantics import TaskSemantics
    from liberopro.sim.scene import LiberoScene, RawFrame, SceneVariant
    from liberopro.sim.tasks import TaskRef


#: Bound of a runtime shift's delay (policy steps, 0.1 s each at LIBERO's 10 Hz control): a
#: shift whose fire is deferred (:class:`ShiftDeferred`) retries at each following step, and
#: the episode becomes invalid when it still cannot act this many steps after it came due. 25
#: steps: the arm moves at most 0.05 m per step under OSC_POSE at full scale (robosuite
#: ``osc_pose.json``), so within the bound a policy that keeps moving clears any 2 cm
#: clearance many times over; a policy that hovers over the spot for 2.5 s keeps it blocked.
MAX_DELAY_STEPS = 25


class ShiftInvalid(Exception):
    """A shift could not be realised as specified on this episode (``reason`` says why)."""

    def __init__(self, shift_id: str, reason: str) -> None:
        super().__init__(f"{shift_id}: {reason}")
        self.shift_id = shift_id
        self.reason = reason


class ShiftDeferred(ShiftInvalid):
    """Raised by :meth:`RuntimeShift.fire` when the shift cannot act *now* for a transient reason:
    every candidate placement was refused, and at least one only because of the robot or the
    carried object (too close, touching), which move. The fire must leave the scene as it found
    it. :meth:`RuntimeShift.maybe_fire` catches it and retries at the next step, within
    :data:`MAX_DELAY_STEPS`; past the bound it raises :class:`ShiftInvalid` with the reasons.
    A permanent failure (a goal region too small, no partner, nothing but fixtures in the way)
    raises :class:`ShiftInvalid` itself."""


@dataclass
class EpisodeContext:
    """What a shift may touch during one episode.

    ``rng`` is the shift's own generator for this episode, seeded from (episode seed, shift id):
    a shift never draws from numpy's global RNG, which LIBERO reseeds. ``received`` maps (camera
    name, rendered (H, W, 3) uint8 image) to that image as the policy receives it (orientation
    and resize, :func:`liberopro.sim.observation.received_image`; None for a camera it does not ask
    for), for measurements only; None where no policy is known (validation on fakes, tests).
    ``seed`` is the seed of ``rng`` (:meth:`frame_rng` keys per-image draws on it).
    """

    scene: LiberoScene
    sem: TaskSemantics
    rng: np.random.Generator
    phases: Any = None  # PhaseTracker, once the policy loop has started
    last_action: np.ndarray = field(default_factory=lambda: np.array([0, 0, 0, 0, 0, 0, -1.0]))
    received: Callable[[str, np.ndarray], np.ndarray | None] | None = None
    seed: int = 0

    def frame_rng(self, step: int, camera: str) -> np.random.Generator:
        """A generator for one image: seeded from (:attr:`seed`, ``step``, ``camera``)
        (:func:`stable_seed`), so its draws do not depend on which other images were drawn
        for: image shifts (S14, D13) act only on the images a consumer reads (issue 12)."""
        return np.random.default_rng(stable_seed(self.seed, "frame", step, camera))


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, identical across processes and Python versions."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


#: A shift's parameters model (``Shift[GainParams]``: ``self.params`` is a ``GainParams``).
P = TypeVar("P", bound=ShiftParams)
#: A runtime shift's parameters model.
RP = TypeVar("RP", bound=RuntimeParams)


class Shift(Generic[P]):
    """Base of every shift. A subclass names its catalog entry (``spec = SPECS["S01"]``, a
    :class:`~liberopro.catalog.ShiftSpec`) and its parameters model (``class ActuationGain(
    Shift[GainParams])``), and overrides hooks; its metadata comes from the spec.

    Class attributes (set from ``spec``):
        id: ``S01``...``S22``, ``D01``...``D20``.
        name, category, kind, summary, post_condition: catalog entries (``docs/shifts.md``).
        Params: the :class:`ShiftParams` subclass.
        triggers: runtime shifts only: phases allowed as trigger.
    """

    spec: ClassVar[ShiftSpec]
    id: ClassVar[str]
    name: ClassVar[str]
    category: ClassVar[Category]
    kind: ClassVar[ShiftKind]
    summary: ClassVar[str]
    Params: ClassVar[type[ShiftParams]]
    triggers: ClassVar[tuple[str, ...]] = ()
    #: What the post-condition measures (for the catalog and the docs).
    post_condition: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is None:
            return
        if spec.kind != ("runtime" if issubclass(cls, RuntimeShift) else "static"):
            raise TypeError(f"{cls.__name__}: spec {spec.id} is {spec.kind}, the class is not")
        cls.id, cls.name, cls.category, cls.kind = spec.id, spec.name, spec.category, spec.kind
        cls.summary, cls.post_condition, cls.Params, cls.triggers = (
            spec.summary,
            spec.post_condition,
            spec.Params,
            spec.triggers,
        )

    def __init__(self, params: P | Mapping[str, Any]) -> None:
        """``params``: the shift's ``Params`` model, or a mapping validated against it
        (``pydantic.ValidationError`` names a bad field)."""
        # spec.Params is the class's P (the catalog's entry point names a class declaring both)
        self.params: P = cast(P, params if isinstance(params, self.Params) else self.Params.model_validate(params))
        self.applied: dict[str, Any] = {}

    # ----------------------------------------------------------------- catalog side
    @classmethod
    def applicable(cls, ref: TaskRef, sem: TaskSemantics) -> str | None:
        """None when the shift applies to the task, else the reason it does not."""
        return None

    @classmethod
    def sample_params(cls, rng: np.random.Generator, ref: TaskRef, sem: TaskSemantics) -> ShiftParams:
        """Draw parameters within the default magnitudes (:meth:`ShiftSpec.sample_params`)."""
        return cls.spec.sample_params(rng, ref, sem)

    @classmethod
    def scene_variant(cls, params: ShiftParams) -> SceneVariant | None:
        """Model changes this shift needs (props, object swaps); None for the task's own scene."""
        return None

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        """Default values/ranges for the catalog listing (:meth:`ShiftSpec.default_params`)."""
        return cls.spec.default_params()

    # ----------------------------------------------------------------- episode hooks
    def on_episode_start(self, ctx: EpisodeContext) -> None:
        """Static scene edits (after set_init_state, before settling)."""

    def on_settled(self, ctx: EpisodeContext) -> bool:
        """Static edits of the settled scene; True when something moved (re-settle)."""
        return False

    def verify(self, ctx: EpisodeContext) -> None:
        """Static post-conditions on the final settled scene; raise :class:`ShiftInvalid`."""

    def instruction(self, text: str, step: int) -> str:
        return text

    def observe(self, frame: RawFrame, step: int, ctx: EpisodeContext) -> RawFrame:
        return frame

    def override(self, ctx: EpisodeContext, step: int) -> np.ndarray | None:
        return None

    def execute(self, action: np.ndarray, step: int, ctx: EpisodeContext) -> np.ndarray:
        return action

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        """Called once after the last step (also at the horizon): finish measurements."""

    def maybe_fire(
        self, ctx: EpisodeContext, step: int, reached: dict[Phase, int]
    ) -> Literal["phase", "fallback"] | None:
        """Fire now if due (runtime shifts, :meth:`RuntimeShift.maybe_fire`); a static shift never
        fires: None."""
        return None

    def record(self) -> dict[str, Any]:
        """The record of this shift for ``episodes.jsonl``."""
        return {
            "id": self.id,
            "name": self.name,
            "category": self.category,
            "kind": self.kind,
            "params": self.params.model_dump(mode="json"),
            "applied": self.applied,
        }


class RuntimeShift(Shift[RP]):
    """A shift fired during the episode by a phase of the task (or its fallback step)."""

    kind: ClassVar[ShiftKind] = "runtime"

    def __init__(self, params: RP | Mapping[str, Any]) -> None:
        super().__init__(params)
        self.fired_at: int | None = None
        self.fired_by: Literal["phase", "fallback"] | None = None
        #: The step at which the shift came due and why (phase or fallback), kept while deferred.
        self.due_at: int | None = None
        self._due_by: Literal["phase", "fallback"] | None = None
        #: Steps between coming due and firing (0: fired when due); ``deferrals`` counts the
        #: deferred attempts, ``deferred_reason`` is the first deferral's reason.
        self.delay_steps = 0
        self.deferrals = 0
        self.deferred_reason: str | None = None

    @property
    def trigger(self) -> str:
        return self.params.trigger

    def should_fire(self, step: int, reached: dict[Phase, int]) -> Literal["phase", "fallback"] | None:
        """Why the shift fires at ``step`` (None: not yet, or already fired)."""
        if self.fired_at is not None:
            return None
        if self.trigger in reached:
            return "phase"
        if step >= self.params.fallback_step:
            return "fallback"
        return None

    def maybe_fire(
        self, ctx: EpisodeContext, step: int, reached: dict[Phase, int]
    ) -> Literal["phase", "fallback"] | None:
        """Fire at ``step`` if due, and own the record of it: the shift comes due at the first step
        at which the trigger phase is in ``reached`` (phase -> first step reached,
        :class:`liberopro.episode.phases.PhaseTracker`) or ``step >= fallback_step``, whichever comes
        first, and fires only once. Sets :attr:`fired_at` (the policy-loop step, 0-based, at which
        it acted) and :attr:`fired_by` (``"phase"`` or ``"fallback"``: what made it due) *before*
        calling :meth:`fire` (which may read them). Returns why it fired now, or None (not due,
        fired already, or deferred).

        When :meth:`fire` raises :class:`ShiftDeferred` the shift has not acted: ``fired_at`` and
        ``fired_by`` are reset, and it is tried again at each following step (still "due by" its
        first cause, whatever the phases do meanwhile) until it fires, recording
        :attr:`delay_steps` = firing step - :attr:`due_at`. Past :data:`MAX_DELAY_STEPS` steps
        of delay it raises :class:`ShiftInvalid` (the episode is invalid) with the first and the
        last deferral's reasons. Any other :class:`ShiftInvalid` from :meth:`fire` propagates."""
        if self.fired_at is not None:
            return None
        why, due_at = self._due_by, self.due_at  # set together, when the shift came due
        if why is None or due_at is None:
            why = self.should_fire(step, reached)
            if why is None:
                return None
            due_at = self.due_at = step
            self._due_by = why
        self.fired_at, self.fired_by = step, why
        self.delay_steps = step - due_at
        try:
            self.fire(ctx, step)
        except ShiftDeferred as exc:
            self.fired_at = self.fired_by = None
            self.applied = {}
            self.deferrals += 1
            if self.deferred_reason is None:
                self.deferred_reason = exc.reason
            if step - due_at >= MAX_DELAY_STEPS:
                raise ShiftInvalid(
                    self.id,
                    f"could not act within {MAX_DELAY_STEPS} steps of coming due at step {self.due_at} "
                    f"(by {why}): first: {self.deferred_reason}; last: {exc.reason}",
                ) from exc
            return None
        return why

    def check_at_reset(self, ctx: EpisodeContext) -> None:
        """Check, on the settled scene before the policy's first step, what makes the drawn
        parameters unrealisable whatever the robot does; raise :class:`ShiftInvalid` (the episode
        is invalid at reset, ``shift_invalid``, and generation redraws). Only facts the policy
        cannot change belong here: a failure at :meth:`fire`, after the policy acted, is charged to
        it (``shift_blocked``, :func:`liberopro.schema.reasons.unrealised`). Default: nothing."""

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        """Apply the runtime change; raise :class:`ShiftInvalid` when it cannot be realised."""
        raise NotImplementedError

    def done_after(self) -> int | None:
        """The step after which this shift has finished acting (its window or intervention
        over, with a few steps to measure), or None before it fired. Instance validation stops
        an episode once every runtime shift is done."""
        if self.fired_at is None:
            return None
        p = self.params
        span = int(getattr(p, "duration_steps", 0) or 0) + int(getattr(p, "max_steps", 0) or 0)
        return self.fired_at + span + 5

    def record(self) -> dict[str, Any]:
        rec = super().record()
        rec["fired_at_step"] = self.fired_at
        rec["fired_by"] = self.fired_by
        if self.deferrals:  # written only when the shift was deferred: other records keep their bytes
            rec["due_at_step"] = self.due_at
            rec["delay_steps"] = self.delay_steps
            rec["deferred_reason"] = self.deferred_reason
        return rec


__all__ = [
    "CATEGORIES",
    "Category",
    "MAX_DELAY_STEPS",
    "EpisodeContext",
    "RuntimeParams",
    "RuntimeShift",
    "Shift",
    "ShiftDeferred",
    "ShiftInvalid",
    "ShiftKind",
    "ShiftParams",
    "stable_seed",
    "uniform",
]
