"""S22 instruction paraphrase (Language, static): a curated same-meaning rewording replaces the
instruction for the whole episode (``benchmark.md``, static table; at least 3 per task, no
model at run time: :mod:`liberopro.paraphrases`)."""

from __future__ import annotations

from pydantic import Field

from liberopro.paraphrases import paraphrases_for
from liberopro.shifts import register
from liberopro.shifts.base import EpisodeContext, Shift, ShiftParams
from liberopro.tasks import task_info


class ParaphraseParams(ShiftParams):
    """``index`` into the task's curated paraphrases; ``text`` is the chosen wording."""

    index: int = Field(ge=0)
    text: str


@register
class InstructionParaphrase(Shift):
    id = "S22"
    name = "instruction paraphrase"
    category = "Language"
    kind = "static"
    summary = "a curated same-meaning rewording (at least 3 per task, no model at run time)"
    post_condition = "the instruction the policy receives is the paraphrase at every step"
    Params = ParaphraseParams

    @classmethod
    def sample_params(cls, rng, ref, sem):
        options = paraphrases_for(task_info(ref).instruction)
        i = int(rng.integers(len(options)))
        return ParaphraseParams(index=i, text=options[i])

    @classmethod
    def default_params(cls):
        return {"index": "uniform over the task's curated paraphrases (>= 3)"}

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self.applied = {"instruction": self.params.text}

    def instruction(self, text: str, step: int) -> str:
        return self.params.text
