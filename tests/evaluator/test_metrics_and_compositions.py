"""Metrics and composition rules: pure computations on records (no simulator)."""

from __future__ import annotations

import pytest
from liberopro.compositions import conflict
from liberopro.metrics import bootstrap_mean_of_rates, success_rate, wilson
from liberopro.results import EpisodeRecord, summarize

SHIFT = {
    "S01": ("object pose", "Condition", "static"), "S12": ("lighting", "Environment", "static"),
    "D01": ("object pose", "Condition", "runtime"), "D10": ("observation freeze", "Observation", "runtime"),
}


def rec(case: str, task: int, ok: bool, episode: int = 0, observations: str = "live", recovery: str = "none",
        valid: bool = True) -> EpisodeRecord:
    ids = [] if case == "nominal" else case.split("+")
    shifts = [{"id": i, "name": SHIFT[i][0], "category": SHIFT[i][1], "kind": SHIFT[i][2], "params": {}, "applied": {}}
              for i in ids]
    return EpisodeRecord(instance_id=f"i-{case}-{task}", case=case, suite="libero_goal", task_index=task,
                         task_name="t", episode_index=episode, init_state_id=episode, seed=episode, shifts=shifts,
                         success=ok, valid=valid, steps=10, horizon=10, termination_reason="success" if ok else "horizon",
                         instruction="x", observations=observations, recovery={"protocol": recovery},
                         episode_id="e", wall_s=1.0)


def test_wilson_interval_known_values():
    lo, hi = wilson(0, 1)
    assert lo == 0.0 and hi == pytest.approx(0.7935, abs=1e-3)
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)


def test_success_rate_averages_tasks_not_episodes():
    # task A: 4/4, task B: 0/1 -> (1 + 0) / 2, not 4/5
    outcomes = [("A", True)] * 4 + [("B", False)]
    assert success_rate(outcomes)["success_rate"] == 0.5


def test_composition_conflicts():
    assert conflict(["S01", "D01"]) is None  # the target's pose at reset, then at approach
    assert conflict(["S12", "D08"]) is None
    assert "pose:target" in conflict(["S01", "S03"])
    assert "approach" in conflict(["D01", "D03"])
    assert conflict(["D07", "D19"], [{"trigger": "transport"}, {"trigger": "transport"}]) is None
    assert "twice" in conflict(["S14", "S14"])
    assert "at most three" in conflict(["S12", "S14", "S16", "S18"])


def test_headline_metrics():
    records = []
    for task in (0, 1):
        for e in range(2):
            records += [rec("nominal", task, True, e), rec("S01", task, e == 0, e), rec("S12", task, True, e),
                        rec("D01", task, False, e), rec("D10", task, task == 0, e),
                        rec("S01+D10", task, False, e),
                        rec("D10", task, False, e, observations="frozen"),
                        rec("D01", task, True, e, recovery="hold")]
    records.append(rec("S12", 0, False, 9, valid=False))  # invalid: counted in no rate
    summary = summarize(records, {})
    h = summary["headline"]
    assert h["nominal"]["success_rate"] == 1.0
    assert h["static_mean"]["mean"] == pytest.approx((0.5 + 1.0) / 2)
    assert h["runtime_mean"]["mean"] == pytest.approx((0.0 + 0.5) / 2)
    assert h["categories"]["static"]["Condition"]["mean"] == 0.5
    assert h["categories"]["runtime"]["Observation"]["mean"] == 0.5
    comp = h["compositions"][0]
    assert comp["case"] == "S01+D10" and comp["weakest_single"] == 0.5 and comp["weakest_single_gap"] == -0.5
    assert h["live_minus_frozen"]["cases"] == [{"case": "D10", "live": 0.5, "frozen": 0.0, "gap": 0.5}]
    assert h["recovery_gain"]["hold"] == {"mean_gain": 1.0, "cases": 1}
    rows = {c["case"]: c for c in summary["cases"]}
    assert rows["S12"]["invalid_episodes"] == 1 and rows["S12"]["episodes"] == 4
    assert "D10 [frozen]" in rows and "D01 [hold]" in rows
    lo, hi = h["static_mean"]["ci95"]
    assert lo <= h["static_mean"]["mean"] <= hi


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    data = {"S01": {"a": [True, False, True], "b": [False, False]}, "S12": {"a": [True], "b": [True, False]}}
    one, two = bootstrap_mean_of_rates(data), bootstrap_mean_of_rates(data)
    assert one == two
    assert one["ci95"][0] <= one["mean"] <= one["ci95"][1]
    assert one["episodes"] == 8 and one["cases"] == 2
