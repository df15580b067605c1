"""The shift catalog: one module per shift (``sNN_*.py`` static, ``dNN_*.py`` runtime).

Each module defines one :class:`~liberopro.shifts.base.Shift` subclass and registers it with
:func:`register`; importing this package imports every module, so a new shift slots in as one
file.
"""

from __future__ import annotations

import importlib
import pkgutil

from liberopro.shifts.base import CATEGORIES, RuntimeShift, Shift, ShiftInvalid, ShiftParams

SHIFTS: dict[str, type[Shift]] = {}


def register(cls: type[Shift]) -> type[Shift]:
    """Class decorator adding a shift to :data:`SHIFTS` under its id."""
    if cls.id in SHIFTS:
        raise ValueError(f"shift {cls.id} registered twice")
    SHIFTS[cls.id] = cls
    return cls


def get_shift(shift_id: str) -> type[Shift]:
    """The shift class for an id; ``KeyError`` lists the known ids."""
    try:
        return SHIFTS[shift_id.upper()]
    except KeyError:
        raise KeyError(f"unknown shift {shift_id!r}; known: {', '.join(sorted(SHIFTS))}") from None


for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.name[:1] in ("s", "d") and _m.name[1:3].isdigit():
        importlib.import_module(f"{__name__}.{_m.name}")

SHIFTS = dict(sorted(SHIFTS.items()))

__all__ = ["CATEGORIES", "SHIFTS", "RuntimeShift", "Shift", "ShiftInvalid", "ShiftParams", "get_shift", "register"]
