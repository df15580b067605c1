"""Metrics and composition rules: pure computations on records (no simulator)."""

from __future__ import annotations

import pytest
from liberopro.compositions import conflict
from liberopro.metrics import bootstrap_mean_of_rates, success_rate, wilson
from liberopro.results import EpisodeRecord, summarize

SHIFT = {
    "S01": ("object pose", "Condition", "static"),
    "S12": ("lighting", "Environment", "static"),
    "D01": ("object pose", "Condition", "runtime"),
    "D10": ("observation freeze", "Observation", "runtime"),
}


def rec(
    case: str,
    task: int,
    ok: bool,
    episode: int = 0,
    observations: str = "live",
    recovery: str = "none",
    valid: bool = True,
) -> EpisodeRecord:
    ids = [] if case == "nominal" else case.split("+")
    shifts = [
        {"id": i, "name": SHIFT[i][0], "category": SHIFT[i][1], "kind": SHIFT[i][2], "params": {}, "applied": {}}
        for i in ids
    ]
    return EpisodeRecord(
        instance_id=f"i-{case}-{task}",
        case=case,
        suite="libero_goal",
        task_index=task,
        task_name="t",
        episode_index=episode,
        init_state_id=episode,
        seed=episode,
        shifts=shifts,
        success=ok,
        valid=valid,
        steps=10,
        horizon=10,
        termination_reason="success" if ok else "horizon",
        instruction="x",
        observations=observations,
        recovery={"protocol": recovery},
        episode_id="e",
        wall_s=1.0,
    )


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
            records += [
                rec("nominal", task, True, e),
                rec("S01", task, e == 0, e),
                rec("S12", task, True, e),
                rec("D01", task, False, e),
                rec("D10", task, task == 0, e),
                rec("S01+D10", task, False, e),
                rec("D10", task, False, e, observations="frozen"),
                rec("D01", task, True, e, recovery="hold"),
            ]
    records.append(rec("S12", 0, False, 9, valid=False))  # invalid: counted in no rate
    summary = summarize(records, {}).to_json()
    h = summary["headline"]
    assert h["nominal"]["success_rate"] == 1.0
    assert h["static_mean"]["mean"] == pytest.approx((0.5 + 1.0) / 2)
    assert h["runtime_mean"]["mean"] == pytest.approx((0.0 + 0.5) / 2)
    assert h["categories"]["static"]["Condition"]["mean"] == 0.5
    assert h["categories"]["runtime"]["Observation"]["mean"] == 0.5
    comp = h["compositions"][0]
    assert comp["case"] == "S01+D10" and comp["weakest_single"] == 0.5 and comp["weakest_single_gap"] == -0.5
    assert comp["paired_episodes"] == 4 and comp["paired_tasks"] == 2
    lo, hi = comp["gap_ci95"]
    assert lo <= -0.5 <= hi
    [frozen] = h["live_minus_frozen"]["cases"]
    assert {k: frozen[k] for k in ("case", "live", "frozen", "gap")} == {
        "case": "D10",
        "live": 0.5,
        "frozen": 0.0,
        "gap": 0.5,
    }
    assert frozen["paired_episodes"] == 4 and h["live_minus_frozen"]["mean_gap"] == 0.5
    assert {k: h["recovery_gain"]["hold"][k] for k in ("mean_gain", "cases")} == {"mean_gain": 1.0, "cases": 1}
    rows = {c["case"]: c for c in summary["cases"]}
    assert rows["S12"]["invalid_episodes"] == 1 and rows["S12"]["episodes"] == 4
    assert "D10 [frozen]" in rows and "D01 [hold]" in rows
    lo, hi = h["static_mean"]["ci95"]
    assert lo <= h["static_mean"]["mean"] <= hi


def test_weakest_single_gap_is_paired_over_the_compositions_own_tasks():
    """The composition ran on task 0 only; its constituent S01 also ran on task 1, where it always
    succeeds. Over the composition's own episodes S01 fails as the composition does: the gap is
    0, not the -0.5 a comparison with S01's rate over its own two tasks would report."""
    records = []
    for e in range(4):
        records += [
            rec("S01+D10", 0, False, e),
            rec("S01", 0, False, e),
            rec("S01", 1, True, e),
            rec("D10", 0, True, e),
            rec("D10", 1, True, e),
        ]
    comp = summarize(records, {}).to_json()["headline"]["compositions"][0]
    assert comp["constituents"]["S01"] == 0.5  # unpaired: S01 over its own tasks
    assert comp["weakest_single_gap"] == 0.0 and comp["weakest_constituent"] == "S01"
    assert comp["paired_tasks"] == 1 and comp["paired_episodes"] == 4
    assert comp["paired_rates"] == {"composition": 0.0, "S01": 0.0, "D10": 1.0}


def test_paired_difference_excludes_zero_where_unpaired_intervals_overlap():
    """Starts differ a lot in difficulty (the even starts of every task are solved nominally, the
    odd ones never), and the shift costs one solvable start per task: each rate's interval is
    wide and the two overlap, and so does the difference once the pairing is broken; the paired
    difference, which cancels the starts' difficulty, excludes zero."""
    import numpy as np
    from liberopro.metrics import paired_difference

    nominal, shifted = {}, {}
    for t in range(8):
        for e in range(10):
            key = (f"libero_goal:{t}", e, e)
            nominal[key] = e % 2 == 0
            shifted[key] = e % 2 == 0 and e != 0
    a = success_rate((k[0], v) for k, v in nominal.items())
    b = success_rate((k[0], v) for k, v in shifted.items())
    assert a["ci95"][0] < b["ci95"][1]  # the unpaired (Wilson) intervals overlap
    d = paired_difference(nominal, shifted)
    assert d["value"] == pytest.approx(0.1) and d["pairs"] == 80 and d["tasks"] == 8
    assert d["ci95"][0] > 0.0
    # the same outcomes with the pairing broken (starts permuted within each task): zero is inside
    rng = np.random.default_rng(0)
    order = {t: rng.permutation(10) for t in {k[0] for k in shifted}}
    broken = paired_difference(
        nominal, {(k[0], int(order[k[0]][k[1]]), int(order[k[0]][k[1]])): v for k, v in shifted.items()}
    )
    assert broken["value"] == pytest.approx(0.1) and broken["ci95"][0] < 0.0 < broken["ci95"][1]


def test_bootstrap_interval_covers_the_true_rate_at_its_level():
    """Coverage, measured. The interval resamples tasks and episodes: it describes the rate over
    a population of tasks like the ones run. Each synthetic run draws 8 task rates from a
    population with mean 0.5, then 10 episodes per task; the percentile interval of
    bootstrap_mean_of_rates must hold 0.5 in about 95% of 300 runs (a bracketing check alone
    would pass a zero-width interval)."""
    import numpy as np

    rng = np.random.default_rng(7)
    covered, widths = 0, []
    for _ in range(300):
        rates = rng.uniform(0.1, 0.9, size=8)
        data = {"S01": {f"t{i}": list(rng.random(10) < p) for i, p in enumerate(rates)}}
        ci = bootstrap_mean_of_rates(data, replicates=400, seed=int(rng.integers(1 << 30)))["ci95"]
        covered += ci[0] <= 0.5 <= ci[1]
        widths.append(ci[1] - ci[0])
    # the binomial sd of a coverage near 95% over 300 runs is 1.3 points; a percentile bootstrap
    # over 8 tasks under-covers a little: 88-99% passes, a zero-width or a [0, 1] interval does not
    assert 0.88 <= covered / 300 <= 0.99, covered
    assert 0.1 < float(np.mean(widths)) < 0.5


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    data = {"S01": {"a": [True, False, True], "b": [False, False]}, "S12": {"a": [True], "b": [True, False]}}
    one, two = bootstrap_mean_of_rates(data), bootstrap_mean_of_rates(data)
    assert one == two
    assert one["ci95"][0] <= one["mean"] <= one["ci95"][1]
    assert one["episodes"] == 8 and one["cases"] == 2


def test_summary_counts_how_runtime_shifts_fired_per_case():
    def fired(ok: bool, e: int, by: str | None):
        r = rec("D01", 0, ok, e)
        r.shifts[0].fired_by, r.shifts[0].fired_at_step = by, None if by is None else 12
        return r

    records = [
        fired(True, 0, "phase"),
        fired(False, 1, "phase"),
        fired(False, 2, "fallback"),
        fired(False, 3, None),
        rec("nominal", 0, True, 0),
        rec("S01", 0, True, 0),
    ]
    rows = {c["case"]: c for c in summarize(records, {}).to_json()["cases"]}
    assert rows["D01"]["runtime_fired"] == {"phase": 2, "fallback": 1, "not_fired": 1}
    assert rows["D01"]["runtime_not_fired"] == 1 and rows["D01"]["episodes"] == 4  # unfired episodes count
    assert rows["S01"]["runtime_fired"] is None and rows["nominal"]["runtime_fired"] is None
    assert rows["D01"]["drop_from_nominal"]["pairs"] == 1  # only start 0 ran in both
    typed = summarize(records, {}).case("D01")  # the same through the model
    assert typed.runtime_fired.model_dump() == rows["D01"]["runtime_fired"] and typed.drop_from_nominal.pairs == 1
