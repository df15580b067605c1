"""Trial runs: the one rule deciding that a published result is a trial run, and the result as the
leaderboard lists it (:class:`ListedResult`: the public view plus that verdict).

A trial run is a result published with settings that do not run the evaluation protocol, such as
``docs/platform.md``'s "quick trial" (one task, nominal and S12, one episode of 10 steps). Its
numbers are real but not comparable with a full result's, so the leaderboard shows it with a
"trial" badge and its reasons, lists it after the full results and gives it no rank among them.

The rule (:func:`trial_reasons`) reads only the stored summary (``summary.json`` as the
platform's aggregation writes it): its header's run settings and which tasks its cases scored.
A result is a trial run when any of these holds, each one a reason in words:

* the horizon was capped: ``settings.max_steps`` is set (the platform's ``MAX_STEPS``, "trials
  only"): "horizon capped at 10 steps";
* fewer episodes per instance than the protocol's
  (:data:`liberopro.schema.manifest.EPISODES_PER_INSTANCE`): "1 episode per instance (protocol: 10)";
* the manifest did not cover the held-out split: fewer of the split's held-out tasks
  (:func:`liberopro.split.split_tasks`) scored than the split holds, "1 of 8 held-out tasks", or
  tasks outside it ran, "2 tasks outside the held-out split".

The manifest is judged by its tasks, not by its instance or shift count: the full evaluation
manifest comes from a secret seed and drops (task, shift) pairs that do not apply or do not
validate (``docs/instances.md``: 14 of the 336 shifted pairs by applicability alone), so a full
result's instance count is not known in advance, and a shift may be missing from a full result
too. Every held-out task keeps its nominal instance, so a full result scores all eight tasks. A
task counts as run when any case scored an episode on it (``per_task`` of the summary's cases;
the task names are never published). Settings the summary does not record (results of older
evaluators) give no reason.
"""

from __future__ import annotations

from typing import Any

from liberopro.schema.manifest import EPISODES_PER_INSTANCE
from liberopro.schema.public import PublicResult, public_result
from liberopro.schema.results import Summary
from liberopro.split import split_tasks
from pydantic import Field, computed_field

#: The rule in one sentence (the methodology page and ``docs/leaderboard.md`` say it).
TRIAL_RULE = (
    "A trial run is a result published with settings that do not run the evaluation protocol: a capped "
    f"horizon, fewer than {EPISODES_PER_INSTANCE} episodes per instance, or a manifest that leaves out any of "
    f"the {len(split_tasks('eval'))} held-out tasks (or adds others). It is listed after the full results "
    "with a 'trial' badge and its reasons, and never ranked among them: its numbers are not comparable "
    "with a full result's."
)


def tasks_run(summary: Summary) -> set[str]:
    """The tasks (``suite:index``) on which any case of ``summary`` scored an episode."""
    tasks: set[str] = set()
    for case in summary.cases:
        tasks.update(case.per_task)
    if summary.headline.nominal is not None:
        tasks.update(summary.headline.nominal.per_task)
    return tasks


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def trial_reasons(summary: Summary) -> list[str]:
    """Why the run of ``summary`` is a trial run, in words (empty: a full result). The rule and
    its reasons are in the module docstring; the reasons come in that order."""
    settings = summary.settings
    reasons = []
    if settings.max_steps is not None:
        reasons.append(f"horizon capped at {settings.max_steps} steps")
    episodes = settings.episodes_per_instance
    if episodes is not None and episodes < EPISODES_PER_INSTANCE:
        reasons.append(f"{_plural(episodes, 'episode')} per instance (protocol: {EPISODES_PER_INSTANCE})")
    held_out = {str(ref) for ref in split_tasks("eval")}
    ran = tasks_run(summary)
    if len(ran & held_out) < len(held_out):
        reasons.append(f"{len(ran & held_out)} of {len(held_out)} held-out tasks")
    if ran - held_out:
        reasons.append(f"{_plural(len(ran - held_out), 'task')} outside the held-out split")
    return reasons


class ListedResult(PublicResult):
    """A published result as the leaderboard lists it: its public view and whether it is a trial
    run (:func:`trial_reasons`)."""

    trial_reasons: list[str] = Field(
        [],
        description="Why this result is a trial run (horizon capped, fewer episodes per instance than the "
        "protocol's, not every held-out task); empty for a full result.",
    )

    @computed_field(description="A trial run: listed after the full results, never ranked among them.")  # type: ignore[prop-decorator]
    @property
    def trial(self) -> bool:
        return bool(self.trial_reasons)


def listed_result(row: Any) -> ListedResult:
    """The listed view of a :class:`~liberopro_platform.models.Result` row: :func:`public_result`
    of it, with :func:`trial_reasons` of its stored summary. Raises ``pydantic.ValidationError``
    for a summary that does not load (as :func:`public_result` does)."""
    summary = Summary.load(row.summary)  # read once, for both
    return ListedResult(**dict(public_result(row, summary)), trial_reasons=trial_reasons(summary))
