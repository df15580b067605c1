"""The shift catalog is complete and its committed table is current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from liberopro.cli import catalog_markdown
from liberopro.compositions import RESOURCES
from liberopro.shifts import CATEGORIES, SHIFTS

REPO = Path(__file__).resolve().parents[2]


def test_catalog_lists_42_shifts_in_six_categories():
    proc = subprocess.run([str(Path(sys.executable).parent / "liberopro"), "shifts", "--json"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 42
    assert [r["id"] for r in rows if r["kind"] == "static"] == [f"S{i:02d}" for i in range(1, 23)]
    assert [r["id"] for r in rows if r["kind"] == "runtime"] == [f"D{i:02d}" for i in range(1, 21)]
    assert {r["category"] for r in rows} == set(CATEGORIES)
    for r in rows:
        assert r["name"] and r["summary"] and r["post_condition"], r["id"]
        assert (r["trigger"] is None) == (r["kind"] == "static"), r["id"]


def test_every_shift_has_typed_parameters_and_composition_resources():
    for sid, cls in SHIFTS.items():
        assert cls.id == sid and cls.Params is not None
        assert sid in RESOURCES, f"{sid} has no resources in liberopro.compositions.RESOURCES"
        assert cls.default_params(), f"{sid} lists no default parameters"


def test_docs_shift_table_is_current():
    assert (REPO / "docs" / "shifts.md").read_text() == catalog_markdown(), (
        "docs/shifts.md is stale: run `liberopro shifts --markdown > docs/shifts.md`")
