"""Language shifts: the instruction's wording, same meaning (S22, D20). Paraphrases are curated,
at least three per task, no model at run time (:mod:`liberopro.catalog.paraphrases`)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from liberopro.catalog import task_options as task
from liberopro.catalog.sampling import TaskIndex, TaskIndexed
from liberopro.catalog.spec import FallbackRule, RuntimeParams, ShiftParams, ShiftSpec, phase_fallback

_INDEX = TaskIndex(task.paraphrases, "uniform over the task's curated paraphrases (>= 3)")
_TEXT = TaskIndexed(task.paraphrases, "index", "the paraphrase at index")


class ParaphraseParams(ShiftParams):
    """``index`` into the task's curated paraphrases; ``text`` is the chosen wording."""

    index: Annotated[int, Field(ge=0), _INDEX]
    text: Annotated[str, _TEXT]


S22 = ShiftSpec(
    id="S22",
    name="instruction paraphrase",
    category="Language",
    summary="a curated same-meaning rewording (at least 3 per task, no model at run time)",
    post_condition="the instruction the policy receives is the paraphrase at every step",
    Params=ParaphraseParams,
    resources=("instruction",),
    entry_point="liberopro.shifts.s22_instruction_paraphrase:InstructionParaphrase",
)


class RestatementParams(RuntimeParams):
    """``index`` into the task's curated paraphrases; ``text`` is that paraphrase."""

    fallback: ClassVar[FallbackRule] = phase_fallback("approach")
    trigger: Literal["approach"] = "approach"
    index: Annotated[int, Field(ge=0), _INDEX]
    text: Annotated[str, _TEXT]


D20 = ShiftSpec(
    id="D20",
    name="instruction restatement",
    category="Language",
    summary="the instruction is replaced by a same-meaning paraphrase",
    post_condition=("every instruction delivered from the trigger on is the paraphrase, different from the one before"),
    Params=RestatementParams,
    resources=("instruction",),
    entry_point="liberopro.shifts.d20_instruction_restatement:InstructionRestatement",
)

SPECS: tuple[ShiftSpec, ...] = (S22, D20)
