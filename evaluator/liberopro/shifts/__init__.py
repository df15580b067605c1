"""The simulator side of the shifts: one module per shift (``sNN_*.py`` static, ``dNN_*.py``
runtime), each a :class:`~liberopro.shifts.base.Shift` subclass with the hooks it needs, plus
shared helpers (``_placement``, ``_props``, ``_swap``, ``_objects``, ``_appearance``, ``_signal``).

What a shift *is* (id, category, trigger, parameters, sampling, post-condition) lives in the
light catalog, :mod:`liberopro.catalog`; each class here takes its metadata from its spec
(``spec = SPECS["S01"]``) and the spec's ``entry_point`` names the class. A new shift is a spec in
the catalog plus one module here. Importing this package imports no shift module: a shift's
class is found by :func:`liberopro.catalog.shift_class` (its spec's entry point), the one way
to get it.
"""

from __future__ import annotations

from liberopro.shifts.base import CATEGORIES, RuntimeShift, Shift, ShiftDeferred, ShiftInvalid, ShiftParams

__all__ = ["CATEGORIES", "RuntimeShift", "Shift", "ShiftDeferred", "ShiftInvalid", "ShiftParams"]
