"""The shift catalog: one :class:`ShiftSpec` per shift, readable without the simulator.

Importing this package loads pydantic and numpy only (no robosuite, MuJoCo, LIBERO or OpenCV;
``tests/evaluator/test_catalog.py`` checks it), so the CLI listing, ``docs/shifts.md``, the
leaderboard's methodology page, the platform and manifest validation read shift metadata from
here. The simulator-side class of a shift (its hooks) is named by the spec's ``entry_point`` and
imported only by :func:`make_shift` / :func:`shift_class` (:mod:`liberopro.catalog.registry`), as
Gymnasium's ``make()`` does.

One module per category holds its shifts' ``Params`` models (validity bounds and the sampling
declaration, :mod:`liberopro.catalog.sampling`) and specs::

    from liberopro.catalog import SPECS, get_spec, make_shift
    spec = get_spec("S21")                      # id, name, category, kind, triggers, Params, ...
    params = spec.sample_params(rng)            # GainParams(gain=0.731), drawn as declared
    shift = make_shift("S21", {"gain": 1.3})    # imports liberopro.shifts.s21_actuation_gain
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from liberopro.catalog.registry import SPECS, get_spec, make_shift, shift_class
from liberopro.catalog.spec import (
    CATEGORIES,
    PHASES,
    RESOURCE_CHANNELS,
    Category,
    FallbackRule,
    Phase,
    RuntimeParams,
    ShiftKind,
    ShiftParams,
    ShiftSpec,
)


def shift_problems(shifts: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """What is wrong with the shifts of one instance, as ``(id, params)`` pairs (empty when
    nothing is): an id the catalog does not know, or not written as the catalog writes it
    (``s01``), parameters that do not validate against the shift's ``Params`` model (ranges,
    trigger phases, unknown or missing fields), or shifts that may not be composed
    (:func:`liberopro.catalog.compositions.conflict`). One line per problem, naming the shift. Light: the
    platform checks its manifest with it before planning."""
    from liberopro.catalog.compositions import conflict
    from liberopro.schema.manifest import describe_errors

    problems = []
    for shift_id, params in shifts:
        try:
            spec = get_spec(shift_id)
        except KeyError as exc:
            problems.append(str(exc).strip("'\""))
            continue
        if spec.id != shift_id:
            problems.append(f"shift id {shift_id!r} is written {spec.id!r}")
            continue
        try:
            spec.validate_params(params)
        except ValidationError as exc:
            problems.append(f"{spec.id} parameters: {describe_errors(exc)}")
    if not problems and shifts:
        reason = conflict([sid for sid, _ in shifts], [dict(p) for _, p in shifts])
        if reason is not None:
            problems.append(f"{'+'.join(sid for sid, _ in shifts)} is not a valid composition: {reason}")
    return problems


__all__ = [
    "CATEGORIES",
    "PHASES",
    "RESOURCE_CHANNELS",
    "SPECS",
    "Category",
    "FallbackRule",
    "Phase",
    "RuntimeParams",
    "ShiftKind",
    "ShiftParams",
    "ShiftSpec",
    "get_spec",
    "make_shift",
    "shift_class",
    "shift_problems",
]
