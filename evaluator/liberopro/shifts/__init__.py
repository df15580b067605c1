"""The simulator side of the shifts: one module per shift (``sNN_*.py`` static, ``dNN_*.py``
runtime), each a :class:`~liberopro.shifts.base.Shift` subclass with the hooks it needs, plus
shared helpers (``_placement``, ``_props``, ``_swap``, ``_objects``, ``_appearance``, ``_signal``).

What a shift *is* (id, category, trigger, parameters, sampling, post-condition) lives in the
light catalog, :mod:`liberopro.catalog`; each class here takes its metadata from its spec
(``spec = SPECS["S01"]``) and the spec's ``entry_point`` names the class. A new shift is a spec in
the catalog plus one module here. Importing this package imports no shift module:
:data:`SHIFTS` and :func:`get_shift` import a module when its class is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from liberopro.catalog import SPECS, shift_class
from liberopro.shifts.base import CATEGORIES, RuntimeShift, Shift, ShiftDeferred, ShiftInvalid, ShiftParams


def get_shift(shift_id: str) -> type[Shift]:
    """The shift class for an id (case-insensitive; imports its module); ``KeyError`` lists the
    known ids."""
    return shift_class(shift_id)


class _ShiftClasses(Mapping[str, type[Shift]]):
    """Id -> shift class, in catalog order; a class is imported when it is looked up."""

    def __getitem__(self, shift_id: str) -> type[Shift]:
        if shift_id not in SPECS:
            raise KeyError(shift_id)
        return shift_class(shift_id)

    def __iter__(self) -> Iterator[str]:
        return iter(SPECS)

    def __len__(self) -> int:
        return len(SPECS)


#: Every shift class by id (metadata readers use :data:`liberopro.catalog.SPECS` instead: it
#: needs no simulator).
SHIFTS: Mapping[str, type[Shift]] = _ShiftClasses()

__all__ = ["CATEGORIES", "SHIFTS", "RuntimeShift", "Shift", "ShiftDeferred", "ShiftInvalid", "ShiftParams", "get_shift"]
