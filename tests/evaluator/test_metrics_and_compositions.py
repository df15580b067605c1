"""Metrics and composition rules: pure computations on records (no simulator)."""

from __future__ import annotations

import pytest
from liberopro.catalog.compositions import conflict
from liberopro.metrics import bootstrap_mean_of_rates, success_rate, wilson
from liberopro.runs.summary import EpisodeRecord, summarize

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


def test_weakest_single_gap_over_a_task_set_unlike_the_constituents():
    """The synthetic check of issue 11: the composition ran on tasks 2 and 3 (and 4, which D10 did
    not run); its constituents on tasks 0-3. S01 always succeeds on tasks 0-1 and always fails on
    2-3, as the composition does; D10 always succeeds. Unpaired, S01's rate is 0.5 and the gap
    would read 0.0 - 0.5 = -0.5; paired over the composition's own tasks and starts it is 0.0.
    The composition fails exactly where S01 does, so no replicate moves the gap: its interval is
    the exact +-0.088 of 0 discordant pairs in 20 x 2 (not a zero-width [0, 0])."""
    records = []
    for e in range(10):
        for t in (2, 3, 4):
            records.append(rec("S01+D10", t, False, e))
        for t in range(4):
            records.append(rec("S01", t, t < 2, e))
            records.append(rec("D10", t, True, e))
        records.append(rec("S01", 4, False, e))
    comp = summarize(records, {}).to_json()["headline"]["compositions"][0]
    assert comp["success_rate"] == 0.0 and comp["constituents"] == {"S01": 0.4, "D10": 1.0}
    unpaired_s01 = sum(t < 2 for t in range(4)) / 4
    assert comp["success_rate"] - unpaired_s01 == -0.5  # what the unpaired gap over tasks 0-3 reports
    assert comp["weakest_single_gap"] == 0.0 and comp["weakest_constituent"] == "S01"
    assert comp["paired_tasks"] == 2 and comp["paired_episodes"] == 20  # task 4 has no D10 episodes
    assert comp["paired_rates"] == {"composition": 0.0, "S01": 0.0, "D10": 1.0}
    u = 1 - 0.025 ** (1 / 20)
    assert comp["gap_ci95"] == [pytest.approx(-u, abs=1e-6), pytest.approx(u, abs=1e-6)]


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


def test_bootstrap_interval_matches_the_binomial_one_on_a_known_case():
    """One task, 100 episodes, 50 successes: resampling tasks does nothing and the episode level
    is Binomial(100, 0.5)/100, whose central 95% is 0.50 +- 0.098. The percentile interval must
    have that width and centre (a bracketing check alone would pass [0, 1] or [0.5, 0.5]), and be
    a pure function of the data."""
    data = {"S01": {"a": [True] * 50 + [False] * 50}}
    one = bootstrap_mean_of_rates(data)
    assert one == bootstrap_mean_of_rates(data)  # fixed seed
    lo, hi = one["ci95"]
    assert one["mean"] == 0.5 and one["episodes"] == 100 and one["cases"] == 1
    assert lo == pytest.approx(0.40, abs=0.015) and hi == pytest.approx(0.60, abs=0.015)
    assert hi - lo == pytest.approx(2 * 1.96 * 0.05, abs=0.02)


@pytest.mark.parametrize("outcome", [False, True])
def test_bootstrap_interval_of_a_single_outcome_is_the_wilson_one_not_zero_width(outcome):
    """40 episodes over 4 tasks that all fail (or all succeed): every bootstrap replicate equals
    the mean, so the percentile interval would be [0, 0]; the reported one is the Wilson interval
    at n = 40 ([0, 0.088], or its mirror)."""
    data = {"S01": {f"t{i}": [outcome] * 10 for i in range(4)}}
    got = bootstrap_mean_of_rates(data)
    assert got["mean"] == float(outcome)
    expected = wilson(40.0 * outcome, 40)
    assert got["ci95"] == [pytest.approx(expected[0], abs=1e-6), pytest.approx(expected[1], abs=1e-6)]
    assert got["ci95"][1] - got["ci95"][0] == pytest.approx(0.0876, abs=1e-3)


def test_paired_intervals_without_discordant_pairs_are_the_exact_bound_not_zero_width():
    """40 starts that fail with and without the shift: the paired difference is 0 in every
    replicate; the interval is +-(1 - 0.025^(1/40)) = +-0.088, the exact bound on the share of
    discordant pairs 0 of 40 leaves open."""
    from liberopro.metrics import discordance_bound, mean_paired_difference, paired_difference

    keys = [(f"libero_goal:{t}", e, e) for t in range(4) for e in range(10)]
    fail = dict.fromkeys(keys, False)
    d = paired_difference(fail, dict(fail))
    assert d["value"] == 0.0 and d["pairs"] == 40
    assert discordance_bound(40) == pytest.approx(0.0880, abs=1e-4)
    assert d["ci95"] == [pytest.approx(-0.0880, abs=1e-4), pytest.approx(0.0880, abs=1e-4)]
    m = mean_paired_difference({"D10": (fail, dict(fail))})
    assert m["ci95"] == d["ci95"]


def test_summary_counts_how_runtime_shifts_fired_per_case():
    def fired(ok: bool, e: int, by: str | None, task: int = 0, step: int = 23):
        r = rec("D01", task, ok, e)
        r.shifts[0].fired_by, r.shifts[0].fired_at_step = by, None if by is None else 12
        r.shifts[0].params = {"trigger": "approach", "fallback_step": step}
        return r

    records = [
        fired(True, 0, "phase"),
        fired(False, 1, "phase"),
        fired(False, 2, "fallback", task=1, step=33),
        fired(False, 3, None),
        fired(True, 4, None, task=1, step=33),  # a success before the fallback: the table is too late there
        fired(False, 5, "fallback", task=1, step=33),
        rec("nominal", 0, True, 0),
        rec("S01", 0, True, 0),
    ]
    records[5].valid = False  # an invalid episode is in no count
    records[1].shifts[0].delay_steps = 3  # fired by its phase 3 steps after it came due
    records[5].shifts[0].delay_steps = 4  # invalid: not counted as delayed either
    rows = {c["case"]: c for c in summarize(records, {}).to_json()["cases"]}
    got = rows["D01"]["runtime_fired"]
    assert {k: got[k] for k in ("phase", "fallback", "not_fired")} == {"phase": 2, "fallback": 1, "not_fired": 2}
    assert got["succeeded_before_firing"] == 1 and got["late_fallback_tasks"] == ["libero_goal:1"]
    assert got["fallback_steps"] == [23, 33]
    assert got["by_shift"] == {"D01": {"phase": 2, "fallback": 1, "not_fired": 2, "blocked": 0, "delayed": 1}}
    # unfired episodes count with their outcome: 5 valid episodes, 2 successes
    assert rows["D01"]["runtime_not_fired"] == 2 and rows["D01"]["episodes"] == 5 and rows["D01"]["successes"] == 2
    assert rows["S01"]["runtime_fired"] is None and rows["nominal"]["runtime_fired"] is None
    assert rows["D01"]["drop_from_nominal"]["pairs"] == 1  # only start 0 ran in both
    typed = summarize(records, {}).case("D01")  # the same through the model
    assert typed.runtime_fired.model_dump(mode="json") == got and typed.drop_from_nominal.pairs == 1


def test_summary_counts_each_runtime_shift_of_a_composition():
    """D01+D10: an episode where D01 fired by its phase and D10 by its fallback counts as
    ``fallback`` for the case, and per shift as each fired."""
    r = rec("D01+D10", 0, False, 0)
    r.shifts[0].fired_by, r.shifts[0].fired_at_step = "phase", 12
    r.shifts[1].fired_by, r.shifts[1].fired_at_step = "fallback", 23
    got = summarize([r], {}).to_json()["cases"][0]["runtime_fired"]
    assert (got["phase"], got["fallback"], got["not_fired"]) == (0, 1, 0)
    assert got["by_shift"] == {
        "D01": {"phase": 1, "fallback": 0, "not_fired": 0, "blocked": 0, "delayed": 0},
        "D10": {"phase": 0, "fallback": 1, "not_fired": 0, "blocked": 0, "delayed": 0},
    }


def test_a_blocked_runtime_firing_is_a_failure_in_the_denominator_and_counted(monkeypatch):
    """A runtime shift that could not be realised after the policy acted (``shift_blocked``) is
    the policy's failure: valid, in the rate's denominator, counted per case and per run, and not
    mistaken for an unfired shift; a static shift invalid at reset stays out of every rate."""
    from liberopro.schema.reasons import Side, TerminationReason, unrealised

    assert unrealised(acted=True) is TerminationReason.shift_blocked and TerminationReason.shift_blocked.scored
    assert unrealised(acted=False) is TerminationReason.shift_invalid and not TerminationReason.shift_invalid.scored
    assert TerminationReason.shift_blocked.side is Side.policy

    def blocked(e: int) -> EpisodeRecord:
        r = rec("D01", 0, False, e)
        r.shifts[0].params = {"trigger": "approach", "fallback_step": 23}
        r.shifts[0].fired_by = None  # the deferred fire never acted
        r.termination_reason, r.valid = unrealised(acted=True), unrealised(acted=True).scored
        return r

    fired = rec("D01", 0, True, 0)
    fired.shifts[0].fired_by, fired.shifts[0].params = "phase", {"trigger": "approach", "fallback_step": 23}
    static = rec("S01", 0, False, 1, valid=False)
    static.termination_reason = unrealised(acted=False)
    summary = summarize([fired, blocked(1), blocked(2), static, rec("S01", 0, True, 0)], {})
    d01, s01 = summary.case("D01"), summary.case("S01")
    assert (d01.episodes, d01.successes, d01.success_rate) == (3, 1, pytest.approx(1 / 3))
    assert d01.shift_blocked == 2 and d01.invalid_episodes == 0 and d01.runtime_not_fired == 0
    assert d01.runtime_fired.blocked == 2 and d01.runtime_fired.by_shift["D01"].blocked == 2
    assert (s01.episodes, s01.invalid_episodes, s01.shift_blocked) == (1, 1, 0)
    assert summary.episodes.shift_blocked == 2 and summary.episodes.invalid == 1
    assert summary.termination_reasons["shift_blocked"] == 2
    # shown with its count: the CLI table (stacked, 80 columns) and the public (leaderboard) result
    import io

    from liberopro.cli import tables
    from liberopro.schema.public import public_cases
    from rich.console import Console

    buffer = io.StringIO()
    monkeypatch.setattr(tables, "out", Console(file=buffer, width=80, color_system=None))
    tables.print_summary(summary)
    text = " ".join(buffer.getvalue().split())  # lines wrapped at 80 joined
    assert "D01: in 2 episode(s) a shift could not be realised after the policy acted" in text, text
    assert "(4 valid, 1 invalid, 2 shift blocked)" in text and "D01 1/0/2/0" in text, text
    assert {c.case: c.shift_blocked for c in public_cases(summary)} == {"D01": 2, "S01": 0}
