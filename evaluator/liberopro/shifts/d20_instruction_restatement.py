"""D20 instruction restatement (Language, runtime, trigger approach): from the step the shift
fires on, the policy receives a same-meaning rewording of its instruction (``docs/definition.md``,
"Runtime shifts"), as when an operator restates the command mid-task. The rewording is one of the
task's curated paraphrases (:mod:`liberopro.catalog.paraphrases`, the same list S22 draws from; no
model at run time).

Composition with S22 (instruction paraphrase): when the instruction D20 receives before its
trigger is already its drawn paraphrase (S22 drew the same one, and S22 precedes D20 in the
instance's shift list), the restatement is the next paraphrase of the list that differs from it,
so the policy always sees a change. Runner order matters: a language shift listed after D20
rewrites D20's text.

Defaults: trigger ``approach``, the fallback step of the one rule for every runtime shift
(:mod:`liberopro.catalog.fallbacks`), ``index`` uniform over the task's paraphrases.

Post-condition, measured on the instructions the policy receives: every instruction delivered
from the firing step on is the restatement and it differs from the one delivered before.
An episode that ended before the shift fired, or before the policy was asked again after it
fired (``deliveries`` 0), is valid like an unfired episode of any runtime shift: it ended before
the shift could act, which the fallback rule allows only for a failure, and it counts with its
outcome (``docs/evaluator.md``, "Phases and triggers"; issue 11 item 4: one rule for every
runtime shift).
"""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.language import RestatementParams
from liberopro.catalog.paraphrases import paraphrases_for
from liberopro.shifts.base import EpisodeContext, RuntimeShift, ShiftInvalid
from liberopro.sim.tasks import task_info


class InstructionRestatement(RuntimeShift[RestatementParams]):
    spec = SPECS["D20"]

    def __init__(self, params) -> None:
        super().__init__(params)
        self._options: tuple[str, ...] = ()
        self._text: str | None = None
        self._before: str | None = None
        self._delivered: list[int] = []
        self._last_step = -1

    @classmethod
    def applicable(cls, ref, sem):
        try:
            paraphrases_for(task_info(ref).instruction)
        except KeyError as exc:
            return str(exc)
        return None

    def fire(self, ctx: EpisodeContext, step: int) -> None:
        self._options = paraphrases_for(ctx.scene.task.instruction)
        self.applied = {"instruction_before": self._before}

    def observe(self, frame, step, ctx):
        self._last_step = max(self._last_step, step)
        return frame

    def _restatement(self, incoming: str) -> str:
        if self.params.text != incoming:
            return self.params.text
        n = len(self._options)
        for j in range(1, n + 1):
            alt = self._options[(self.params.index + j) % n]
            if alt != incoming:
                return alt
        raise ShiftInvalid(self.id, "no paraphrase differs from the instruction already delivered")

    def instruction(self, text: str, step: int) -> str:
        if self.fired_at is None or step < self.fired_at:
            self._before = text
            return text
        if self._text is None:
            self._text = self._restatement(self._before if self._before is not None else text)
            self.applied.update(
                instruction_before=self._before,
                restated_as=self._text,
                changed_from_drawn=self._text != self.params.text,
            )
        self._delivered.append(step)
        return self._text

    def on_episode_end(self, ctx: EpisodeContext) -> None:
        if self.fired_at is None:  # ended before the phase and the fallback step: valid, counted
            return
        self.applied["post_condition"] = {
            "delivered_at_steps": self._delivered[:50],
            "deliveries": len(self._delivered),
            "differs_from_before": self._text is not None and self._text != self._before,
        }
        if self._delivered and self._text == self._before:
            raise ShiftInvalid(self.id, "the restatement equals the instruction delivered before it")
