"""The fallback rule of runtime shifts (issue 11, item 4): one rule for every runtime shift,
per task and trigger phase, from the committed table of the oracle's fastest success
(``evaluator/liberopro/data/fastest_success.json``). No simulator: instances are drawn from the
catalog (LIBERO's BDDL files are parsed, no scene is built)."""

from __future__ import annotations

import math

import pytest
from liberopro.catalog import SPECS, fallbacks
from liberopro.catalog.spec import PHASES
from liberopro.instances.build import make_instance
from liberopro.sim.tasks import TaskRef, all_task_refs

RUNTIME = [s for s in SPECS.values() if s.kind == "runtime"]


def test_the_table_lists_every_task_with_its_source():
    table = fallbacks._table()
    assert sorted(table["tasks"]) == sorted(str(r) for r in all_task_refs())
    assert table["source"] and table["description"]
    for task, row in table["tasks"].items():
        assert isinstance(row["steps"], int) and 20 <= row["steps"] <= 520, task
        assert row["source"] == "oracle" or row["source"].startswith("provisional"), task
        if row["source"] == "oracle" and "oracle_phase_steps" in row:  # a success with its phases, before it
            assert max(row["oracle_phase_steps"].values()) < row["steps"], task


def test_the_rule_is_a_fraction_of_the_fastest_success_with_a_margin():
    """F(task, phase) = max(10, floor(f[phase] * S(task))), later phases later, every fallback
    at most 0.6 S: a policy would have to be 1/0.6 times faster than the oracle's fastest run to
    succeed before its runtime shift acts."""
    assert list(fallbacks.FRACTION) == list(PHASES)
    assert list(fallbacks.FRACTION.values()) == sorted(fallbacks.FRACTION.values())
    assert fallbacks.MAX_FRACTION == 0.6
    for ref in all_task_refs():
        s = fallbacks.fastest_success(str(ref))
        steps = [fallbacks.fallback_step(str(ref), p) for p in PHASES]
        assert steps == [max(10, math.floor(fallbacks.FRACTION[p] * s)) for p in PHASES], ref
        assert steps == sorted(steps) and steps[-1] <= 0.6 * s < s, ref


def test_fallbacks_follow_the_table_per_task(monkeypatch):
    """A synthetic table: the steps are the rule applied to each task's own entry."""
    table = {"tasks": {"libero_goal:0": {"steps": 100}, "libero_10:0": {"steps": 400}, "libero_goal:1": {"steps": 30}}}
    monkeypatch.setattr(fallbacks, "_table", lambda: table)
    assert [fallbacks.fallback_step("libero_goal:0", p) for p in PHASES] == [25, 40, 50, 60]
    assert [fallbacks.fallback_step("libero_10:0", p) for p in PHASES] == [100, 160, 200, 240]
    assert [fallbacks.fallback_step("libero_goal:1", p) for p in PHASES] == [10, 12, 15, 18]  # the floor of 10
    assert fallbacks.earliest_fallback_step("transport") == 15
    with pytest.raises(KeyError):
        fallbacks.fallback_step("libero_goal:2", "approach")


def test_d19_transport_draws_get_the_transport_fallback():
    """D19's coin picks approach or transport; each draw carries its own trigger's step for its
    task (the bug of issue 11: transport draws kept the approach step 40, before transport)."""
    seen = set()
    for ref in all_task_refs():
        for attempt in range(4):
            inst = make_instance(ref, ["D19"], seed=0, attempt=attempt)
            assert not isinstance(inst, str), inst
            p = inst.shifts[0].params
            assert p["fallback_step"] == fallbacks.fallback_step(str(ref), p["trigger"]), (ref, p)
            seen.add(p["trigger"])
            if p["trigger"] == "transport":
                assert p["fallback_step"] > fallbacks.fallback_step(str(ref), "approach"), ref
    assert seen == {"approach", "transport"}


@pytest.mark.parametrize("spec", RUNTIME, ids=lambda s: s.id)
def test_every_runtime_shift_carries_its_tasks_fallback(spec):
    """The same rule for D01-D20 (D20 included): an instance drawn for a task carries that task's
    step for its trigger; tasks with different fastest successes get different steps."""
    got = {}
    for ref in (
        TaskRef("libero_spatial", 0),
        TaskRef("libero_object", 4),
        TaskRef("libero_goal", 8),
        TaskRef("libero_10", 0),
    ):
        inst = make_instance(ref, [spec.id], seed=0)
        if isinstance(inst, str):  # not applicable to this task
            continue
        p = inst.shifts[0].params
        assert p["fallback_step"] == fallbacks.fallback_step(str(ref), p["trigger"]), (ref, p)
        got[str(ref)] = p["fallback_step"]
    assert len(set(got.values())) >= min(2, len(got)), got  # per task, not one fixed number


def test_a_parameter_model_without_a_task_defaults_to_the_earliest_fallback():
    d19 = SPECS["D19"]
    assert d19.Params(distance_m=0.05, direction_deg=0.0, trigger="transport").fallback_step == (
        fallbacks.earliest_fallback_step("transport")
    )
    assert d19.fallback.steps == {p: fallbacks.earliest_fallback_step(p) for p in ("approach", "transport")}
    assert d19.fallback.describe() == {"approach": "0.25*S(task)", "transport": "0.5*S(task)"}
