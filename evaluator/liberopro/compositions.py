"""Compositions of shifts (pairs and triples: static+static, static+runtime, runtime+runtime)
and the rule that keeps them meaningful: two shifts may not own the same thing at the same
moment (``benchmark.md``: "two shifts may not own one object's pose at the same moment").

Each shift owns resources (:data:`RESOURCES`); its moment is ``reset`` for a static shift and
its trigger phase for a runtime one. S01 + D01 is allowed (the target's pose is owned at reset,
then at approach); S01 + S03 is not (both place the target at reset); D01 + D03 is not (both at
approach); S12 + D08 is allowed (lights at reset, then at approach).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

#: What each shift takes over. ``pose:*`` are object poses, ``space:*`` regions of the table a
#: prop occupies, ``view``/``camera``/``lights``/``appearance:*`` what the cameras see,
#: ``stream``/``pixels``/``proprio`` what the policy receives, ``actions:*`` the control path,
#: ``robot:*`` the robot, ``instruction`` the language.
RESOURCES: dict[str, tuple[str, ...]] = {
    "S01": ("pose:target",), "S02": ("pose:receiver",), "S03": ("pose:target", "pose:others"),
    "S04": ("space:beside-target",), "S05": ("space:path",), "S06": ("instance:target",),
    "S07": ("space:free",), "S08": ("space:near-target",), "S09": ("view:occluder",),
    "S10": ("appearance:target",), "S11": ("appearance:table",), "S12": ("lights",),
    "S13": ("appearance:scene",), "S14": ("pixels:noise",), "S15": ("camera:agentview",),
    "S16": ("pixels:degradation",), "S17": ("robot:joints",), "S18": ("proprio",),
    "S19": ("actions:timing",), "S20": ("actions:noise",), "S21": ("actions:gain",),
    "S22": ("instruction",),
    "D01": ("pose:target",), "D02": ("pose:receiver",), "D03": ("pose:target", "pose:others"),
    "D04": ("space:goal",), "D05": ("space:path",), "D06": ("space:near-target",),
    "D07": ("camera:agentview",), "D08": ("lights",), "D09": ("view:occluder",),
    "D10": ("stream:timing",), "D11": ("stream:dropout",), "D12": ("stream:timing",),
    "D13": ("pixels:noise",), "D14": ("actions:timing",), "D15": ("actions:drop",),
    "D16": ("actions:noise",), "D17": ("actions:rate",), "D18": ("robot:gripper",),
    "D19": ("robot:control",), "D20": ("instruction",),
}


def moment(shift_id: str, params: dict[str, Any] | None = None) -> str:
    """``reset`` for a static shift, else its trigger phase (from ``params`` when given)."""
    from liberopro.shifts import get_shift

    cls = get_shift(shift_id)
    if cls.kind == "static":
        return "reset"
    if params and "trigger" in params:
        return str(params["trigger"])
    return cls.triggers[0] if cls.triggers else "runtime"


def conflict(shift_ids: list[str], params: list[dict[str, Any]] | None = None) -> str | None:
    """None when the shifts compose, else the reason they do not (duplicates, more than three,
    or two owning one resource at one moment)."""
    if len(shift_ids) > 3:
        return f"compositions have at most three shifts, got {len(shift_ids)}"
    if len(set(shift_ids)) != len(shift_ids):
        return f"a shift appears twice in {'+'.join(shift_ids)}"
    params = params or [None] * len(shift_ids)
    for (a, pa), (b, pb) in combinations(zip(shift_ids, params, strict=True), 2):
        shared = set(RESOURCES.get(a, ())) & set(RESOURCES.get(b, ()))
        ma, mb = moment(a, pa), moment(b, pb)
        if shared and ma == mb:
            return f"{a} and {b} both own {', '.join(sorted(shared))} at {ma}"
    return None
