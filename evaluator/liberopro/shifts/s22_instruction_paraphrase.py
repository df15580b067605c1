"""S22 instruction paraphrase (Language, static): a curated same-meaning rewording replaces the
instruction for the whole episode (``docs/definition.md``, "Static shifts"; at least 3 per task, no
model at run time: :mod:`liberopro.catalog.paraphrases`)."""

from __future__ import annotations

from liberopro.catalog import SPECS
from liberopro.catalog.language import ParaphraseParams
from liberopro.shifts.base import EpisodeContext, Shift


class InstructionParaphrase(Shift[ParaphraseParams]):
    spec = SPECS["S22"]

    def on_episode_start(self, ctx: EpisodeContext) -> None:
        self.applied = {"instruction": self.params.text}

    def instruction(self, text: str, step: int) -> str:
        return self.params.text
