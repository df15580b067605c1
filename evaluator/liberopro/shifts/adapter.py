"""The shifts as layers of the episode loop: a thin adapter over the hooks of
:class:`liberopro.shifts.base.Shift`, so that the loop (:mod:`liberopro.episode.loop`,
:meth:`liberopro.episode.runner.EpisodeRunner.run_episode`) composes them with its own layers and the
42 shift modules keep their hooks unchanged.

:class:`ShiftLayer` binds one shift to its :class:`~liberopro.shifts.base.EpisodeContext`;
:class:`ShiftStack` holds an episode's shifts in the order the loop applies them (static first,
then runtime, each kind in the instance's order: so a D20 restatement overrides an S22
paraphrase, whatever order the case lists them in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from liberopro.catalog import shift_class
from liberopro.shifts.base import EpisodeContext, RuntimeShift, Shift, stable_seed

if TYPE_CHECKING:
    from liberopro.episode.phases import Phase
    from liberopro.schema.manifest import ShiftEntry
    from liberopro.semantics import TaskSemantics
    from liberopro.sim.scene import LiberoScene, RawFrame


class ShiftLayer:
    """One shift bound to its episode context, as every kind of loop layer at once (each call is
    the shift's hook of the same name, :mod:`liberopro.shifts.base`; a shift that does not
    override a hook passes through):

    * observation layer (:meth:`observe`): ``Shift.observe`` on the frame, every step;
    * action layer (:meth:`execute`): ``Shift.execute`` on the policy's LIBERO action;
    * intervention (:meth:`intervene`): first stores the last executed action in
      ``ctx.last_action`` (shifts read it: hold the gripper, measure a drop), then
      ``Shift.override``;
    * trigger (:meth:`maybe_fire`): ``Shift.maybe_fire`` (runtime shifts fire and record when).
    """

    def __init__(self, shift: Shift, ctx: EpisodeContext) -> None:
        self.shift, self.ctx = shift, ctx

    def observe(self, frame: RawFrame, step: int) -> RawFrame:
        return self.shift.observe(frame, step, self.ctx)

    def execute(self, action: np.ndarray, step: int) -> np.ndarray:
        return self.shift.execute(action, step, self.ctx)

    def intervene(self, step: int, last_action: np.ndarray) -> np.ndarray | None:
        self.ctx.last_action = last_action
        return self.shift.override(self.ctx, step)

    def maybe_fire(self, step: int, reached: dict[Phase, int]) -> Literal["phase", "fallback"] | None:
        return self.shift.maybe_fire(self.ctx, step, reached)


class ShiftStack:
    """An episode's shifts: built from the instance (:meth:`of`), bound to the scene
    (:meth:`bind`), then driven by the runner through the static phase (:meth:`prepare`), the
    instruction (:meth:`instruction`), the triggers (:meth:`fire_due`) and the end
    (:meth:`end`); :attr:`layers` are the loop's shift layers, static first.

    Attributes:
        shifts: in the instance's order (records, scene variant).
        ordered: static first, then runtime, each kind in the instance's order.
        layers: :class:`ShiftLayer` of each of ``ordered`` (empty until :meth:`bind`).
    """

    def __init__(self, shifts: list[Shift]) -> None:
        self.shifts = shifts
        self.ordered = sorted(shifts, key=lambda s: s.kind != "static")
        self.layers: list[ShiftLayer] = []

    @classmethod
    def of(cls, entries: Iterable[ShiftEntry]) -> ShiftStack:
        """The shifts of an instance's entries (``id``, ``params``), each class imported by id."""
        return cls([shift_class(e.id)(e.params) for e in entries])

    def bind(
        self,
        scene: LiberoScene,
        sem: TaskSemantics,
        seed: int,
        received: Callable[[str, np.ndarray], np.ndarray | None] | None = None,
    ) -> None:
        """One context per shift: the scene, the task's semantics and the shift's own generator,
        seeded from (episode seed, shift id, index in the instance) (:func:`stable_seed`, also
        :attr:`EpisodeContext.seed`);
        ``received`` (camera, image) -> the image as the policy receives it
        (:attr:`EpisodeContext.received`, measurements only)."""
        seeds = [stable_seed(seed, s.id, i) for i, s in enumerate(self.shifts)]
        contexts = [
            EpisodeContext(scene=scene, sem=sem, rng=np.random.default_rng(k), received=received, seed=k) for k in seeds
        ]
        pairs = sorted(zip(self.shifts, contexts, strict=True), key=lambda sc: sc[0].kind != "static")
        self.layers = [ShiftLayer(s, ctx) for s, ctx in pairs]

    def prepare(self, scene: LiberoScene) -> None:
        """The static phase, after ``set_init_state``: static model edits, 10 settle steps, static
        edits of the settled scene (10 more settle steps if one moved something), static
        post-conditions, then each runtime shift's reset-time check of its draw
        (:meth:`~liberopro.shifts.base.RuntimeShift.check_at_reset`); any of them raises
        :class:`~liberopro.shifts.base.ShiftInvalid` when it fails (before the policy acts)."""
        static = [layer for layer in self.layers if layer.shift.kind == "static"]
        for layer in static:
            layer.shift.on_episode_start(layer.ctx)
        scene.settle()
        moved = [layer.shift.on_settled(layer.ctx) for layer in static]
        if any(moved):
            scene.settle()
        for layer in static:
            layer.shift.verify(layer.ctx)
        for layer in self.layers:
            if isinstance(layer.shift, RuntimeShift):
                layer.shift.check_at_reset(layer.ctx)

    def track(self, phases: Any) -> None:
        """Give every shift the episode's :class:`liberopro.episode.phases.PhaseTracker` (``ctx.phases``)."""
        for layer in self.layers:
            layer.ctx.phases = phases

    def instruction(self, text: str, step: int) -> str:
        """The instruction the policy receives at ``step``: ``text`` through every shift's
        ``instruction`` hook, static first (hooks may record what they delivered: call it only
        when the policy receives it)."""
        for s in self.ordered:
            text = s.instruction(text, step)
        return text

    def fire_due(self, step: int, reached: dict[Phase, int]) -> bool:
        """Fire every runtime shift due at ``step`` (all of them, in order); True if one fired."""
        fired = [layer.maybe_fire(step, reached) for layer in self.layers]
        return any(why is not None for why in fired)

    def done(self, step: int) -> bool:
        """Every runtime shift has fired and finished acting by ``step``
        (:meth:`~liberopro.shifts.base.RuntimeShift.done_after`); False without runtime shifts."""
        ends = [s.done_after() for s in self.shifts if isinstance(s, RuntimeShift)]
        done = [e for e in ends if e is not None]
        return bool(ends) and len(done) == len(ends) and step >= max(done)

    def end(self) -> None:
        """After the last step: every shift finishes its measurements (``on_episode_end``)."""
        for layer in self.layers:
            layer.shift.on_episode_end(layer.ctx)

    def records(self) -> list[dict[str, Any]]:
        """Each shift's record for ``episodes.jsonl``, in the instance's order."""
        return [s.record() for s in self.shifts]
