"""The registry of shifts: every :class:`~liberopro.catalog.spec.ShiftSpec` by id (:data:`SPECS`),
and the one place that turns an id into the simulator-side class its spec's ``entry_point``
names (:func:`shift_class`, :func:`make_shift`; as Gymnasium's ``make()`` does). The specs
themselves (:mod:`liberopro.catalog.spec`) name their class only as a string, so the catalog
imports :mod:`liberopro.shifts` only when a class is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from liberopro.catalog import condition, environment, execution, language, observation, robot
from liberopro.catalog.spec import ShiftParams, ShiftSpec

if TYPE_CHECKING:
    from liberopro.shifts.base import Shift

#: Every shift by id, in id order (``D01``...``D20``, then ``S01``...``S22``: the order of the
#: listing and of manifest generation).
SPECS: dict[str, ShiftSpec] = dict(
    sorted(
        (s.id, s) for module in (condition, environment, observation, execution, robot, language) for s in module.SPECS
    )
)


def get_spec(shift_id: str) -> ShiftSpec:
    """The spec of a shift id (case-insensitive); ``KeyError`` lists the known ids."""
    try:
        return SPECS[shift_id.strip().upper()]
    except KeyError:
        raise KeyError(f"unknown shift {shift_id!r}; known: {', '.join(SPECS)}") from None


def shift_class(shift_id: str) -> type[Shift]:
    """The simulator-side class of a shift (case-insensitive id), imported from its spec's
    ``entry_point`` (loads MuJoCo/robosuite). ``KeyError`` for an unknown id (listing the known
    ones); ``ImportError`` when the simulator is not installed; ``TypeError`` when the class is
    not this spec's."""
    spec = get_spec(shift_id)
    module, _, name = spec.entry_point.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if getattr(cls, "spec", None) is not spec:
        raise TypeError(f"{spec.entry_point} does not declare spec {spec.id}")
    return cls


def make_shift(shift_id: str, params: Mapping[str, Any] | ShiftParams) -> Shift:
    """A shift ready for an episode: its class, imported from the entry point, with ``params``
    validated against its Params model (``pydantic.ValidationError`` names the bad field)."""
    return shift_class(shift_id)(get_spec(shift_id).validate_params(params))
