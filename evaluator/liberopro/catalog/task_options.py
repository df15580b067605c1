"""What the task-dependent draws choose from, as functions ``(TaskRef, TaskSemantics) -> options``.

Importing this module is light; calling a function reads the task's BDDL file through LIBERO's
parser (``libero.libero.envs.bddl_utils``) and the object catalogue of
:mod:`liberopro.shifts._objects` / the swap rules of :mod:`liberopro.shifts._swap` (no scene is
built). The rules themselves are documented there. Results are cached per task (tuples: the
draws index them, nothing may change them).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liberopro.semantics import TaskSemantics
    from liberopro.sim.tasks import TaskRef


def target(ref: TaskRef, sem: TaskSemantics) -> str:
    """The target's BDDL name."""
    return sem.target


def target_type(ref: TaskRef, sem: TaskSemantics) -> str:
    """The target's LIBERO object type (``KeyError`` for a fixture target)."""
    from liberopro.shifts._objects import scene_types

    return scene_types(ref)[sem.target]


@functools.cache
def swap_partners(ref: TaskRef, sem: TaskSemantics) -> tuple[str, ...]:
    """Objects the target may swap places with, in BDDL order (S03, D03)."""
    from liberopro.shifts._swap import swap_partners as partners

    return tuple(partners(ref, sem))


@functools.cache
def other_instances(ref: TaskRef, sem: TaskSemantics) -> tuple[str, ...]:
    """Other instances of the target's category for S06 (absent from the scene, comparable size)."""
    from liberopro.shifts._objects import instances
    from liberopro.sim.tasks import task_info

    return tuple(instances(ref, sem.target, task_info(ref).instruction))


@functools.cache
def lookalikes(ref: TaskRef, sem: TaskSemantics) -> tuple[str, ...]:
    """Look-alike types for S08/D06 that keep the instruction unambiguous: those absent from the
    scene where there are any, else all of them."""
    from liberopro.shifts._objects import lookalikes as candidates
    from liberopro.shifts._objects import scene_types
    from liberopro.sim.tasks import task_info

    cands = candidates(ref, sem.target, task_info(ref).instruction)
    present = set(scene_types(ref).values())
    return tuple([c for c in cands if c not in present] or cands)


@functools.cache
def clutter_pool(ref: TaskRef, sem: TaskSemantics) -> tuple[str, ...]:
    """Object types for S07's clutter: categories absent from the scene and the instruction."""
    from liberopro.shifts._objects import clutter_pool as pool

    return tuple(pool(ref))


@functools.cache
def paraphrases(ref: TaskRef, sem: TaskSemantics) -> tuple[str, ...]:
    """The task's curated paraphrases (S22, D20; ``KeyError`` when it has none)."""
    from liberopro.catalog.paraphrases import paraphrases_for
    from liberopro.sim.tasks import task_info

    return paraphrases_for(task_info(ref).instruction)
