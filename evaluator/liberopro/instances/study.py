"""The diagnostic study's committed presets: case lists named ``@NAME`` for ``--shifts`` and the
replan-steps sweep for ``--replan-steps @sweep`` (``docs/evaluator.md``, "Reports").

The compositions and sweep values are data, in ``liberopro/data/study.toml``; the single-shift
presets follow from the shift ids (``S``: static, ``D``: runtime; ``docs/definition.md``). Every
preset starts with ``nominal``, the reference of every paired drop:

* ``@all``: nominal and every single shift (the overall landscape);
* ``@static`` / ``@runtime``: nominal and the single shifts of that kind (``@runtime`` with
  ``--observations live,frozen`` is the feedback-utilisation study, with
  ``--recovery none,hold,retry,restore`` the recovery study);
* ``@compositions``: nominal, every constituent of the committed compositions, then the
  compositions (pairs and triples, static, runtime and mixed): everything the weakest-single
  gaps need, in one run.

``@FILE`` (a path to an existing file) reads cases from a file: comma- or line-separated, ``#``
starts a comment. Light: no simulator import.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

STUDY_FILE = Path(__file__).resolve().parents[1] / "data" / "study.toml"

#: Composition groups of ``study.toml``, in report order.
COMPOSITION_GROUPS: tuple[str, ...] = (
    "static_pairs",
    "static_runtime_pairs",
    "runtime_pairs",
    "static_triples",
    "mixed_triples",
    "runtime_triples",
)

SHIFT_PRESETS: tuple[str, ...] = ("all", "static", "runtime", "compositions")


class PresetError(ValueError):
    """An unknown preset name, an unreadable preset file, or a malformed ``study.toml``."""


@functools.cache
def study() -> dict[str, Any]:
    """``study.toml`` parsed (``compositions``: group -> cases; ``replan``: ``sweep``)."""
    data = tomllib.loads(STUDY_FILE.read_text())
    comps = data.get("compositions") or {}
    if set(comps) != set(COMPOSITION_GROUPS):
        raise PresetError(f"{STUDY_FILE}: [compositions] must hold exactly {', '.join(COMPOSITION_GROUPS)}")
    sweep = (data.get("replan") or {}).get("sweep")
    if not sweep or not all(isinstance(k, int) and k >= 1 for k in sweep):
        raise PresetError(f"{STUDY_FILE}: [replan] sweep must be a list of integers >= 1")
    return data


def compositions() -> dict[str, list[str]]:
    """The committed compositions by group (``static_pairs`` ... ``runtime_triples``), each case
    written ``ID+ID[+ID]``."""
    return {g: list(study()["compositions"][g]) for g in COMPOSITION_GROUPS}


def replan_sweep() -> list[int]:
    """The committed replan-steps values of the closed-loop update-frequency study."""
    return list(study()["replan"]["sweep"])


def _shift_ids() -> list[str]:
    from liberopro.catalog import SPECS

    ids = list(SPECS)
    return sorted((i for i in ids if i.startswith("S")), key=lambda i: int(i[1:])) + sorted(
        (i for i in ids if i.startswith("D")), key=lambda i: int(i[1:])
    )


def preset_cases(name: str) -> list[str]:
    """The cases of preset ``name`` (without the ``@``), as case strings (``nominal``, ``S01``,
    ``S01+D10``). Raises :class:`PresetError` for an unknown name."""
    if name == "all":
        return ["nominal", *_shift_ids()]
    if name in ("static", "runtime"):
        return ["nominal", *(i for i in _shift_ids() if i.startswith("S" if name == "static" else "D"))]
    if name == "compositions":
        comps = [c for g in compositions().values() for c in g]
        constituents = sorted({s for c in comps for s in c.split("+")}, key=lambda i: (i[0] != "S", int(i[1:])))
        return ["nominal", *constituents, *comps]
    raise PresetError(
        f"unknown preset @{name}; presets: {', '.join('@' + p for p in SHIFT_PRESETS)} (or @FILE, a file of cases)"
    )


def _file_cases(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"cannot read cases from {path}: {exc}") from None
    items = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        items += [p.strip() for p in line.split(",") if p.strip()]
    if not items:
        raise PresetError(f"{path} lists no cases")
    if any(i.startswith("@") for i in items):
        raise PresetError(f"{path}: a case file may not name presets (@...)")
    return items


def expand(items: list[str]) -> list[str]:
    """``items`` with every ``@NAME`` / ``@FILE`` replaced by its cases, duplicates dropped (first
    occurrence kept, compared after upper-casing shift ids). Raises :class:`PresetError`."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if item.startswith("@"):
            name = item[1:].strip()
            cases = preset_cases(name) if name in SHIFT_PRESETS or not Path(name).is_file() else _file_cases(Path(name))
        else:
            cases = [item]
        for case in cases:
            key = "nominal" if case.lower() == "nominal" else case.upper().replace(" ", "")
            if key not in seen:
                seen.add(key)
                out.append(case)
    return out


def parse_replan_steps(text: str | None) -> list[int | None]:
    """``--replan-steps``: None (the policy's own), ``K``, ``K1,K2,...`` or ``@sweep`` (the
    committed values). Raises :class:`PresetError` naming the bad value."""
    if text is None or not text.strip():
        return [None]
    values: list[int] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        if item == "@sweep":
            values += replan_sweep()
        elif item.isdigit() and int(item) >= 1:
            values.append(int(item))
        else:
            raise PresetError(f"--replan-steps takes integers >= 1 or @sweep, not {item!r}")
    if not values:
        raise PresetError("--replan-steps got no value")
    return list(dict.fromkeys(values))
