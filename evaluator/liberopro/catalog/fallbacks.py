"""The fallback rule of runtime shifts: one rule for every runtime shift and trigger phase.

A runtime shift fires at the first step its trigger phase is reached, or at its fallback step,
whichever comes first (``docs/definition.md``, "Task phases"). The fallback exists so that the
shift acts whatever the policy does; for that it must come *before any policy can complete the
task*, else a fast policy's success would be counted as an episode under the shift although the
shift never acted. The rule (issue 11, item 4)::

    F(task, phase) = max(MIN_FALLBACK_STEP, floor(FRACTION[phase] * S(task)))

* ``S(task)``: the fastest success of the privileged scripted oracle on the task, in policy
  steps (``data/fastest_success.json``, :func:`fastest_success`). A policy's actions are bounded
  (OSC_POSE, 5 cm / 0.5 rad per step at full scale) and the oracle moves at full scale most of
  the time, so a policy that succeeds in fewer than ``MAX_FRACTION * S`` steps would have to be
  ``1 / MAX_FRACTION`` times faster than the oracle's fastest run: the margin.
* ``FRACTION[phase]``: later phases get later fallbacks (a policy reaches them later), each at
  most :data:`MAX_FRACTION` of ``S``. Where the oracle itself reaches each phase, as a fraction of
  its fastest success (median over the 34 tasks it solved on init states 0-1 in its first
  measurement, ``oracle_phase_steps`` in the table; ``S`` itself is the faster of that and the
  later 10-init-state run of ``liberopro oracle``, ``data/oracle_nominal.json``):
  approach 0.10, grasp 0.33, transport 0.41, placement 0.81. The fractions sit above the first
  three medians, so a policy moving like the oracle usually meets the phase first (the oracle
  reaches approach by its fallback on 32 of 34 tasks, grasp on 22, transport on 23), and are
  capped by the margin: placement comes so late (up to 0.99 S) that its fallback precedes it on
  all but 5 tasks; a policy that reaches placement fires the shift by its phase anyway.
* ``MIN_FALLBACK_STEP``: never before the policy has had a few steps to act.

An episode under a runtime shift therefore either sees the shift (fired by its phase or by this
fallback) or ends before the fallback step, which (with the margin) only a failure does: it
counts with its outcome, and ``summary.json`` reports per case how many episodes fired by
phase, by fallback, or ended before firing (``runtime_fired``).

Light: reads one committed JSON file, imports no simulator.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

#: The committed per-task table of the oracle's fastest success (policy steps).
TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "fastest_success.json"

#: The fallback step as a fraction of the task's fastest oracle success, per trigger phase.
FRACTION: dict[str, float] = {"approach": 0.25, "grasp": 0.4, "transport": 0.5, "placement": 0.6}
#: The latest any fallback may come, as a fraction of the fastest oracle success (the margin).
MAX_FRACTION = max(FRACTION.values())
#: No fallback before this policy step.
MIN_FALLBACK_STEP = 10


@cache
def _table() -> dict[str, Any]:
    return json.loads(TABLE_PATH.read_text())


def table_source() -> str:
    """How the table's numbers were obtained (its ``source`` field)."""
    return str(_table()["source"])


def fastest_success(task: str) -> int:
    """``S(task)``: the fastest success of the oracle on ``task`` (``"libero_goal:3"``), policy
    steps from the first policy step, from ``data/fastest_success.json``. ``KeyError`` for a task
    the table does not list."""
    return int(_table()["tasks"][str(task)]["steps"])


def fallback_step(task: str, phase: str) -> int:
    """``F(task, phase)`` (module docstring): the policy-loop step (0-based) at which a runtime
    shift with trigger ``phase`` fires on ``task`` if the phase has not come first. ``KeyError``
    for an unknown phase or task."""
    return max(MIN_FALLBACK_STEP, math.floor(FRACTION[phase] * fastest_success(task)))


def earliest_fallback_step(phase: str) -> int:
    """The smallest ``F(task, phase)`` over the tasks of the table: the default where no task is
    known (a parameter model built without one)."""
    return min(fallback_step(t, phase) for t in _table()["tasks"])


def describe(phase: str) -> str:
    """The rule for ``phase`` as the listing shows it (``docs/shifts.md``)."""
    return f"{FRACTION[phase]:g}*S(task)"
