"""What a task is about, read from its BDDL goal: the target the robot must act on first, the
receiver it goes to, and how the instruction refers to the target.

Rules (derived from LIBERO's BDDL goals, ``parsed_problem["goal_state"]``):

* ``target``: the first argument of the first ``on``/``in`` goal predicate whose argument is a
  movable object; if the goal has none (open a drawer, turn on the stove), the first argument
  of the first predicate, an articulated fixture or one of its regions.
* ``receiver``: the second argument of that predicate, mapped from a region name
  (``flat_stove_1_cook_region``) to the object or fixture that owns it (``flat_stove_1``).
* ``kind``: ``pick_place`` (on/in), ``articulated`` (open/close/turnon/turnoff only) or ``push``
  (libero_goal task 5, "push the plate to the front of the stove").
* ``placements``: every ``on``/``in`` predicate whose first argument is movable, as
  (object, region as written), in goal order (LIBERO-10 tasks place two objects).
* ``articulations``: every ``open``/``close``/``turnon``/``turnoff`` predicate as an
  :class:`ArticulationGoal`, with ``before_placement`` saying whether the robot acts on it before
  the placements: ``open`` always (a drawer must be open before something goes in), ``close``
  never (one closes a door after putting something in), ``turnon``/``turnoff`` where the goal
  lists it before the first placement (LIBERO-10 task 2 "turn on the stove and put the moka pot
  on it" lists it first; task 8 last). Which joint and which handle/knob a part has is read from
  the scene (:mod:`liberopro.episode.phases`), not from the BDDL.

LIBERO-Spatial instructions pick one of two identical black bowls by a spatial relation ("the
black bowl next to the ramekin"); :data:`REFERRING` keeps those relations so that a shift which
moves the bowl can check that the instruction still names it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal

from liberopro.sim.tasks import TaskRef, task_info

Kind = Literal["pick_place", "articulated", "push"]


@dataclass(frozen=True)
class Referring:
    """How the instruction singles the target out among look-alikes.

    ``relation``: ``on`` (resting on ``anchors[0]``), ``in`` (inside a fixture region),
    ``next_to`` (nearest to ``anchors[0]``), ``between`` (nearest to the midpoint of the two
    anchors), ``table_center`` (nearest to the table centre site), ``unique`` (nothing to keep).
    ``rivals``: the look-alikes the relation must still tell apart.
    """

    relation: Literal["on", "in", "next_to", "between", "table_center", "unique"]
    anchors: tuple[str, ...] = ()
    rivals: tuple[str, ...] = ()


_BOWLS = ("akita_black_bowl_2",)

#: LIBERO-Spatial referring expressions (instructions in ``tasks.task_info``).
REFERRING: dict[TaskRef, Referring] = {
    TaskRef("libero_spatial", 0): Referring("between", ("plate_1", "glazed_rim_porcelain_ramekin_1"), _BOWLS),
    TaskRef("libero_spatial", 1): Referring("next_to", ("glazed_rim_porcelain_ramekin_1",), _BOWLS),
    TaskRef("libero_spatial", 2): Referring("table_center", ("main_table_table_center",), _BOWLS),
    TaskRef("libero_spatial", 3): Referring("on", ("cookies_1",), _BOWLS),
    TaskRef("libero_spatial", 4): Referring("in", ("wooden_cabinet_1",), _BOWLS),
    TaskRef("libero_spatial", 5): Referring("on", ("glazed_rim_porcelain_ramekin_1",), _BOWLS),
    TaskRef("libero_spatial", 6): Referring("next_to", ("cookies_1",), _BOWLS),
    TaskRef("libero_spatial", 7): Referring("on", ("flat_stove_1",), _BOWLS),
    TaskRef("libero_spatial", 8): Referring("next_to", ("plate_1",), _BOWLS),
    TaskRef("libero_spatial", 9): Referring("on", ("wooden_cabinet_1",), _BOWLS),
}

_PUSH_TASKS = {TaskRef("libero_goal", 5)}

ArticulationPredicate = Literal["open", "close", "turnon", "turnoff"]
_ARTICULATION_PREDICATES = ("open", "close", "turnon", "turnoff")


@dataclass(frozen=True)
class ArticulationGoal:
    """An articulated part the goal sets.

    Attributes:
        part: the BDDL name in the predicate: a fixture (``flat_stove_1``, ``microwave_1``) or one
            of its regions (``wooden_cabinet_1_middle_region``, a drawer).
        fixture: the fixture owning ``part``.
        predicate: ``open``, ``close``, ``turnon`` or ``turnoff``.
        before_placement: whether the robot acts on it before the task's placements (see the
            module docstring).
    """

    part: str
    fixture: str
    predicate: ArticulationPredicate
    before_placement: bool


@dataclass(frozen=True)
class TaskSemantics:
    """The roles of a task's objects.

    Attributes:
        target: BDDL name of the first thing the robot must act on.
        target_is_movable: True for a free object, False for a fixture / fixture region.
        receiver: BDDL name of the object or fixture the target goes to (None for articulated
            goals).
        receiver_region: the goal region name as written in the BDDL (may equal ``receiver``).
        kind: see module docstring.
        goal_objects: every object or fixture named in the goal.
        referring: how the instruction picks the target out.
        placements: every (movable object, goal region as written) of the goal, in goal order.
        articulations: every articulated part the goal sets, in goal order.
    """

    target: str
    target_is_movable: bool
    receiver: str | None
    receiver_region: str | None
    kind: Kind
    goal_objects: tuple[str, ...]
    referring: Referring = field(default_factory=lambda: Referring("unique"))
    placements: tuple[tuple[str, str], ...] = ()
    articulations: tuple[ArticulationGoal, ...] = ()


def owner_of(region: str, names: list[str]) -> str:
    """The object/fixture that owns a region name: the longest name that prefixes it.
    ``main_table_stove_front_region`` -> ``main_table``. Returns ``region`` itself if none does."""
    best = ""
    for n in names:
        if (region == n or region.startswith(n + "_")) and len(n) > len(best):
            best = n
    return best or region


def task_semantics(ref: TaskRef, goal_state: list[list[str]], objects: list[str], fixtures: list[str]) -> TaskSemantics:
    """Derive the roles from a parsed BDDL goal.

    Args:
        goal_state: ``parsed_problem["goal_state"]``, e.g. ``[["on", "akita_black_bowl_1", "plate_1"]]``.
        objects: movable object names of the scene. fixtures: fixture names (table included).
    """
    names = objects + fixtures
    goal_objects = tuple(dict.fromkeys(owner_of(a, names) for p in goal_state for a in p[1:]))
    placement = [p for p in goal_state if p[0].lower() in ("on", "in") and p[1] in objects]
    placements = tuple((p[1], p[2]) for p in placement)
    first_placement = next((i for i, p in enumerate(goal_state) if p in placement), len(goal_state))
    articulations = tuple(
        ArticulationGoal(
            part=p[1],
            fixture=owner_of(p[1], names),
            predicate=p[0].lower(),  # type: ignore[arg-type]
            before_placement=p[0].lower() == "open" or (p[0].lower() in ("turnon", "turnoff") and i < first_placement),
        )
        for i, p in enumerate(goal_state)
        if p[0].lower() in _ARTICULATION_PREDICATES
    )
    if placement:
        pred = placement[0]
        target, receiver_region = pred[1], pred[2]
        kind: Kind = "push" if ref in _PUSH_TASKS else "pick_place"
        return TaskSemantics(
            target=target,
            target_is_movable=True,
            receiver=owner_of(receiver_region, names),
            receiver_region=receiver_region,
            kind=kind,
            goal_objects=goal_objects,
            referring=REFERRING.get(ref, Referring("unique")),
            placements=placements,
            articulations=articulations,
        )
    pred = goal_state[0]
    return TaskSemantics(
        target=owner_of(pred[1], names),
        target_is_movable=owner_of(pred[1], names) in objects,
        receiver=None,
        receiver_region=None,
        kind="articulated",
        goal_objects=goal_objects,
        referring=Referring("unique"),
        placements=placements,
        articulations=articulations,
    )


@functools.cache
def semantics_of(ref: TaskRef) -> TaskSemantics:
    """Task roles from the BDDL file alone (no simulator)."""
    from libero.libero.envs import bddl_utils

    parsed = bddl_utils.robosuite_parse_problem(task_info(ref).bddl_path)
    objects = [n for names in parsed["objects"].values() for n in names]
    fixtures = [n for names in parsed["fixtures"].values() for n in names]
    return task_semantics(ref, parsed["goal_state"], objects, fixtures)
