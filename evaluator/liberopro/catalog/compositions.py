"""Compositions of shifts (pairs and triples: static+static, static+runtime, runtime+runtime)
and the rule that keeps them meaningful: two shifts may not own the same thing at the same
moment (``docs/definition.md``, "Compositions").

Each shift owns resources (:data:`RESOURCES`); its moment is ``reset`` for a static shift and
its trigger phase for a runtime one. S01 + D01 is allowed (the target's pose is owned at reset,
then at approach); S01 + S03 is not (both place the target at reset); D01 + D03 is not (both at
approach); S12 + D08 is allowed (lights at reset, then at approach).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from liberopro.catalog.registry import SPECS, get_spec

#: What each shift takes over (:attr:`liberopro.catalog.ShiftSpec.resources`). ``pose:*`` are
#: object poses, ``space:*`` regions of the table a prop occupies, ``view``/``camera``/``lights``/
#: ``appearance:*`` what the cameras see, ``stream``/``pixels``/``proprio`` what the policy
#: receives, ``actions:*`` the control path, ``robot:*`` the robot, ``instruction`` the language.
RESOURCES: dict[str, tuple[str, ...]] = {sid: spec.resources for sid, spec in SPECS.items()}


def moment(shift_id: str, params: dict[str, Any] | None = None) -> str:
    """``reset`` for a static shift, else its trigger phase (from ``params`` when given)."""
    spec = get_spec(shift_id)
    if spec.kind == "static":
        return "reset"
    if params and "trigger" in params:
        return str(params["trigger"])
    return spec.triggers[0] if spec.triggers else "runtime"


def conflict(shift_ids: list[str], params: list[dict[str, Any]] | None = None) -> str | None:
    """None when the shifts compose, else the reason they do not (duplicates, more than three,
    or two owning one resource at one moment)."""
    if len(shift_ids) > 3:
        return f"compositions have at most three shifts, got {len(shift_ids)}"
    if len(set(shift_ids)) != len(shift_ids):
        return f"a shift appears twice in {'+'.join(shift_ids)}"
    given: list[dict[str, Any] | None] = list(params) if params else [None] * len(shift_ids)
    for (a, pa), (b, pb) in combinations(zip(shift_ids, given, strict=True), 2):
        shared = set(RESOURCES.get(a, ())) & set(RESOURCES.get(b, ()))
        ma, mb = moment(a, pa), moment(b, pb)
        if shared and ma == mb:
            return f"{a} and {b} both own {', '.join(sorted(shared))} at {ma}"
    return None
