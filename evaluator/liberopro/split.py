"""The held-out split of LIBERO-Pro2.0: 8 evaluation tasks and 32 training tasks.

Definition (``docs/definition.md``, "Tasks and split"; the study: random seed 142, two tasks
sampled from each suite): ``rng = random.Random(142)``; for each suite in the order goal,
spatial, object, 10: ``held_out[suite] = sorted(rng.sample(range(10), 2))``.
"""

from __future__ import annotations

import random
from typing import Literal

from liberopro.sim.tasks import SUITES, TASKS_PER_SUITE, TaskRef

SPLIT_SEED = 142
Split = Literal["train", "eval", "all"]
#: The splits by name.
SPLITS: tuple[Split, ...] = ("train", "eval", "all")


def as_split(name: str) -> Split:
    """``name`` as a :data:`Split`; ``ValueError`` for anything but train, eval or all."""
    for split in SPLITS:
        if split == name:
            return split
    raise ValueError(f"unknown split {name!r}; expected train, eval or all")


def held_out() -> dict[str, list[int]]:
    """Evaluation task indices per suite (two each)."""
    rng = random.Random(SPLIT_SEED)
    return {suite: sorted(rng.sample(range(TASKS_PER_SUITE), 2)) for suite in SUITES}


def split_tasks(split: Split) -> list[TaskRef]:
    """Tasks of ``split`` in benchmark order: ``eval`` (8), ``train`` (32) or ``all`` (40)."""
    ho = held_out()
    refs = [TaskRef(s, i) for s in SUITES for i in range(TASKS_PER_SUITE)]
    if split == "all":
        return refs
    if split == "eval":
        return [r for r in refs if r.index in ho[r.suite]]
    if split == "train":
        return [r for r in refs if r.index not in ho[r.suite]]
    raise ValueError(f"unknown split {split!r}; expected train, eval or all")


def tasks_in_split(split: Split, tasks: list[TaskRef] | None) -> list[TaskRef]:
    """The tasks of ``split`` (benchmark order) that are also in ``tasks`` (``None``: all of them);
    ``--tasks libero_goal --split eval`` is libero_goal's two evaluation tasks.

    Raises ``ValueError`` when that leaves nothing, naming the split each of ``tasks`` is in, so
    that a wrong combination is refused instead of selecting nothing (``docs/definition.md``,
    "Tasks and split")."""
    chosen = split_tasks(split)
    if tasks is None:
        return chosen
    both = [r for r in chosen if r in tasks]
    if not both:
        evals = split_tasks("eval")
        where = "; ".join(f"{t} is in the {'eval' if t in evals else 'train'} split" for t in tasks[:8])
        raise ValueError(
            f"--tasks and --split {split} have no task in common ({where}{'; ...' if len(tasks) > 8 else ''}): "
            f"drop --split, or choose tasks of the {split} split (`liberopro split` lists them)"
        )
    return both
