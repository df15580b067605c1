"""The shift catalog: complete, light, faithful to the benchmark's definition, drawing exactly the
numbers it always drew, and its committed table current."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from liberopro.catalog import CATEGORIES, SPECS, get_spec, make_shift, shift_class
from liberopro.catalog.compositions import RESOURCES
from liberopro.catalog.sampling import DistinctSorted, DrawContext, TaskSubset, When, draws
from liberopro.cli.catalog import catalog_markdown
from liberopro.sim.tasks import all_task_refs

from tests.evaluator.catalog_draws import PINNED, digests

REPO = Path(__file__).resolve().parents[2]
BENCHMARK = tomllib.loads((REPO / "tests" / "data" / "benchmark_shifts.toml").read_text())
HEAVY = ("robosuite", "mujoco", "libero", "cv2")


def test_catalog_lists_every_shift_in_six_categories():
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "liberopro"), "shifts", "--json"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["id"] for r in rows] == list(SPECS)  # the counts come from the catalog, not from here
    n_static = sum(1 for s in SPECS.values() if s.kind == "static")
    n_runtime = len(SPECS) - n_static
    # ids numbered without gaps: S01..Sn static, D01..Dm runtime
    assert [r["id"] for r in rows if r["kind"] == "static"] == [f"S{i:02d}" for i in range(1, n_static + 1)]
    assert [r["id"] for r in rows if r["kind"] == "runtime"] == [f"D{i:02d}" for i in range(1, n_runtime + 1)]
    assert {r["category"] for r in rows} == set(CATEGORIES)
    for r in rows:
        assert r["name"] and r["summary"] and r["post_condition"], r["id"]
        assert (r["trigger"] is None) == (r["kind"] == "static"), r["id"]
        assert (r["fallback_step"] is None) == (r["kind"] == "static"), r["id"]


def test_every_shift_has_typed_parameters_and_composition_resources():
    for sid, cls in (
        (sid, shift_class(sid)) for sid in SPECS
    ):  # imports every entry point: each names the class declaring its spec
        assert cls.id == sid and cls.Params is not None and cls.spec is SPECS[sid]
        assert sid in RESOURCES, f"{sid} has no resources in liberopro.catalog.compositions.RESOURCES"
        assert cls.default_params(), f"{sid} lists no default parameters"


def test_docs_shift_table_is_current():
    assert (REPO / "docs" / "shifts.md").read_text() == catalog_markdown(), (
        "docs/shifts.md is stale: run `liberopro shifts --markdown > docs/shifts.md`"
    )


def test_definition_page_lists_the_same_shifts():
    """docs/definition.md, "Static shifts" and "Runtime shifts", name every shift of the tables
    in tests/data/benchmark_shifts.toml with the same name, category and trigger phases (the
    definition's trigger where ours differs, with its reason, as D04's)."""
    rows = {}
    for line in (REPO / "docs" / "definition.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0][:1] in ("S", "D") and cells[0][1:].isdigit():
            trigger = cells[3].split(" or ") if cells[0].startswith("D") else None
            rows[cells[0]] = (cells[1], cells[2], trigger)

    def trigger(b: dict) -> list[str] | None:
        return b.get("differences", {}).get("trigger", {}).get("definition", b.get("trigger"))

    assert rows == {sid: (b["name"], b["category"], trigger(b)) for sid, b in BENCHMARK.items()}


def test_catalog_loads_no_simulator():
    """Metadata readers (the listing, the leaderboard, the platform, manifest validation) import
    the catalog in processes without robosuite, MuJoCo, LIBERO or OpenCV."""
    code = (
        "import sys, liberopro.catalog, liberopro.catalog.listing, liberopro.catalog.compositions, liberopro.split, "
        "liberopro.sim.tasks, liberopro.shifts\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('liberopro.schema'): import liberopro.schema\n"
        "from liberopro.catalog import SPECS\n"
        "from liberopro.catalog.listing import markdown\n"
        "from liberopro.sim.tasks import all_task_refs, task_info\n"
        "markdown(); [task_info(r).instruction for r in all_task_refs()]\n"
        "[s.sample_params(__import__('numpy').random.default_rng(0)) for s in SPECS.values()\n"
        " if s.id in ('S01', 'S12', 'S16', 'S17', 'S21', 'D07', 'D08', 'D19')]\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", f"the catalog imported {proc.stdout.strip()}"


def test_make_shift_imports_the_entry_point_and_validates_the_params():
    shift = make_shift("s21", {"gain": 1.3})
    assert type(shift).__name__ == "ActuationGain" and shift.params.gain == 1.3 and shift.id == "S21"
    with pytest.raises(ValueError, match="gain"):
        make_shift("S21", {"gain": 7})
    with pytest.raises(KeyError, match="known: D01"):
        get_spec("S99")


# ----------------------------------------------------------------------------- the definition
@pytest.mark.parametrize("sid", sorted(BENCHMARK))
def test_spec_agrees_with_the_benchmark_table(sid):
    row, spec = BENCHMARK[sid], SPECS[sid]
    assert (spec.name, spec.category) == (row["name"], row["category"])
    assert spec.kind == ("runtime" if sid.startswith("D") else "static")
    assert list(spec.triggers) == row.get("trigger", [])
    declared = draws(spec.Params)
    for field, intervals in row.get("ranges", {}).items():
        if field in declared:
            got = declared[field].intervals()
        else:  # a fixed default (D08's scale is drawn; a field without a draw keeps its default)
            default = spec.Params.model_fields[field].default
            got = [(default, default)]
        assert [list(map(float, iv)) for iv in got] == [list(map(float, iv)) for iv in intervals], field
    for field, diff in row.get("differences", {}).items():
        assert diff["reason"] and field in spec.differs_from_definition, f"{sid} {field}: say why in the spec"
        assert diff["definition"] != (row["ranges"][field] if field in row.get("ranges", {}) else row[field])
    assert set(spec.differs_from_definition) == set(row.get("differences", {})), sid


def test_benchmark_table_lists_every_shift():
    """Every shift of the definition's tables is in the catalog. The catalog may hold more: a
    shift added beyond the definition (docs/contributing.md) is listed in docs/shifts.md and
    not on docs/definition.md, which states the definition as published."""
    assert set(BENCHMARK) <= set(SPECS), sorted(set(BENCHMARK) - set(SPECS))


def test_runtime_params_accept_any_trigger_and_early_fallback_steps():
    """Validity bounds, not sampling ranges: tests and hand-written instances fire at step 2."""
    rng = np.random.default_rng(0)
    for spec in SPECS.values():
        if spec.kind != "runtime" or any(d.__class__.__name__.startswith("Task") for d in draws(spec.Params).values()):
            continue
        base = spec.sample_params(rng).model_dump()
        for trigger in spec.triggers:
            for step in (0, 2, 500):
                assert spec.Params(**{**base, "trigger": trigger, "fallback_step": step}).fallback_step == step
            # without a fallback step, the rule's step for that trigger
            base_no_fb = {k: v for k, v in base.items() if k != "fallback_step"}
            assert spec.Params(**{**base_no_fb, "trigger": trigger}).fallback_step == spec.fallback.step(trigger)


# ----------------------------------------------------------------------------- sampling
def test_draws_are_the_pinned_ones():
    """Every shift x 40 tasks, seed 0, attempts 0 and 1: the instance ids and parameters recorded
    before the catalog existed (``tests/evaluator/catalog_draws.py``)."""
    pinned = json.loads(PINNED.read_text())
    got = digests()
    changed = sorted(sid for sid in pinned if got.get(sid) != pinned[sid])
    assert not changed, f"the draws of {changed} changed: manifests would get other instance ids"


@functools.cache
def _tasks_by_shift() -> dict[str, list]:
    """Per shift, the tasks it applies to (from ``make_instance``, the real applicability rules)."""
    from liberopro.instances.build import make_instance, semantics_of

    out: dict[str, list] = {sid: [] for sid in SPECS}
    for ref in all_task_refs():
        for sid in SPECS:
            if not isinstance(make_instance(ref, [sid], 0), str):
                out[sid].append((ref, semantics_of(ref)))
    return out


def test_sampled_parameters_fall_inside_the_declared_ranges_and_validate():
    """A property over many seeds and every applicable task: each drawn field is one its declared
    distribution can draw, and the parameters round-trip through the Params model."""
    by_shift = _tasks_by_shift()
    seeds = 10
    for sid, spec in SPECS.items():
        assert by_shift[sid], f"{sid} applies to no task"
        declared = draws(spec.Params)
        for ref, sem in by_shift[sid]:
            for seed in range(seeds):
                params = spec.sample_params(np.random.default_rng([seed, hash(str(ref)) % 1000]), ref, sem)
                dumped = params.model_dump(mode="json")
                assert spec.Params.model_validate(dumped) == params, (sid, ref, seed)
                ctx = DrawContext(ref, sem, dict(params))
                for field, d in declared.items():
                    assert d.contains(getattr(params, field), ctx), (sid, str(ref), seed, field, dumped[field])


def test_sampling_ranges_lie_inside_the_validity_bounds():
    """Both ends of every declared numeric range validate (so no draw can be refused)."""
    by_shift = _tasks_by_shift()
    for sid, spec in SPECS.items():
        ref, sem = by_shift[sid][0]
        for field, d in draws(spec.Params).items():
            inner = d.then if isinstance(d, When) else d
            if isinstance(inner, TaskSubset | DistinctSorted) or inner.intervals() is None:
                continue
            base = next(
                p.model_dump()
                for seed in range(200)  # a draw that draws the field (S16's mode)
                if getattr(p := spec.sample_params(np.random.default_rng(seed), ref, sem), field) is not None
            )
            checked = 0
            for lo, hi in inner.intervals():
                for end in (lo, hi):
                    value = tuple(end for _ in base[field]) if isinstance(base[field], tuple) else end
                    assert getattr(spec.Params(**{**base, field: value}), field) == value, (sid, field, end)
                    checked += 1
            assert checked >= 2, (sid, field)
