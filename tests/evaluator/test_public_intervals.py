"""The intervals of the public view, from published rates and counts only
(``liberopro.metrics``, "Intervals from published counts"): pure arithmetic, no simulator."""

from __future__ import annotations

import math

import pytest
from liberopro.metrics import (
    interval_difference,
    mean_difference_ci,
    mean_of_rates_ci,
    mover,
    newcombe_difference,
    wilson,
    wilson_estimate,
)

#: Newcombe (1998), Statistics in Medicine 17:873-890, Table II, method 10 (hybrid score), to 4 places.
NEWCOMBE_TABLE_II = [
    ((56, 70), (48, 80), (0.0524, 0.3339)),
    ((9, 10), (3, 10), (0.1705, 0.8090)),
    ((6, 7), (2, 7), (0.0582, 0.8062)),
    ((5, 56), (0, 29), (-0.0381, 0.1926)),
    ((0, 10), (0, 20), (-0.1611, 0.2775)),
    ((0, 10), (0, 10), (-0.2775, 0.2775)),
]


@pytest.mark.parametrize(("a", "b", "expected"), NEWCOMBE_TABLE_II)
def test_newcombe_difference_matches_the_published_table(a, b, expected):
    d = newcombe_difference((a[0] / a[1], a[1]), (b[0] / b[1], b[1]))
    assert d["value"] == pytest.approx(a[0] / a[1] - b[0] / b[1], abs=1e-6)
    assert d["ci95"] == [pytest.approx(expected[0], abs=1e-4), pytest.approx(expected[1], abs=1e-4)]


def test_newcombe_difference_without_a_rate_is_none():
    assert newcombe_difference((None, 0), (0.5, 40)) == {"value": None, "ci95": None}
    assert newcombe_difference((0.5, 40), (0.5, 0)) == {"value": None, "ci95": None}


def test_mover_is_the_linear_combination_of_the_intervals():
    a, b = wilson_estimate(0.7, 40), wilson_estimate(0.4, 40)
    value, lo, hi = mover([(1.0, a), (-1.0, b)])
    assert value == pytest.approx(0.3)
    assert lo == pytest.approx(0.3 - math.hypot(a[0] - a[1], b[2] - b[0]))
    assert hi == pytest.approx(0.3 + math.hypot(a[2] - a[0], b[0] - b[1]))
    # a single term with coefficient 1 is the interval itself
    assert mover([(1.0, a)]) == pytest.approx(a)


def test_mean_of_one_rate_is_its_wilson_interval():
    got = mean_of_rates_ci([(0.5, 100)])
    lo, hi = wilson(50, 100)
    assert got == {"value": 0.5, "ci95": [round(lo, 6), round(hi, 6)], "cases": 1, "episodes": 100}


def test_mean_of_rates_stays_within_the_mean_of_the_bounds_and_in_0_1():
    rates = [(0.0, 40), (1.0, 40), (0.975, 40), (0.5, 8), (0.25, 80)]
    got = mean_of_rates_ci(rates)
    bounds = [wilson(p * n, n) for p, n in rates]
    mean = sum(p for p, _ in rates) / len(rates)
    assert got["value"] == pytest.approx(mean, abs=1e-6) and got["cases"] == 5 and got["episodes"] == 208
    lo, hi = got["ci95"]
    assert sum(b[0] for b in bounds) / 5 - 1e-6 <= lo < mean < hi <= sum(b[1] for b in bounds) / 5 + 1e-6
    assert 0.0 <= lo and hi <= 1.0


def test_mean_of_rates_is_never_zero_width():
    """All failures (or all successes) in every case: a Wilson-width interval, not [0, 0]."""
    zero = mean_of_rates_ci([(0.0, 40), (0.0, 40)])
    assert zero["value"] == 0.0 and zero["ci95"] == [0.0, pytest.approx(wilson(0, 40)[1] / math.sqrt(2), abs=1e-6)]
    one = mean_of_rates_ci([(1.0, 40), (1.0, 40)])
    assert one["ci95"] == [pytest.approx(1 - zero["ci95"][1], abs=1e-6), 1.0]


def test_mean_of_rates_leaves_out_cases_without_a_rate():
    assert mean_of_rates_ci([(None, 0), (0.5, 40)]) == mean_of_rates_ci([(0.5, 40)])
    assert mean_of_rates_ci([]) == {"value": None, "ci95": None, "cases": 0, "episodes": 0}


def test_mean_of_rates_narrows_with_more_cases():
    one = mean_of_rates_ci([(0.6, 40)])["ci95"]
    four = mean_of_rates_ci([(0.6, 40)] * 4)["ci95"]
    assert four[1] - four[0] == pytest.approx((one[1] - one[0]) / 2, abs=2e-6)  # sqrt(4) / 4


def test_mean_difference_of_one_case_is_newcombe():
    got = mean_difference_ci([((0.7, 40), (0.45, 40))])
    assert got == {**newcombe_difference((0.7, 40), (0.45, 40)), "cases": 1}
    assert mean_difference_ci([((0.7, 40), (None, 0))]) == {"value": None, "ci95": None, "cases": 0}


def test_mean_difference_is_mover_over_every_side():
    pairs = [((0.7, 40), (0.45, 40)), ((0.2, 40), (0.3, 40))]
    got = mean_difference_ci(pairs)
    value, lo, hi = mover(
        [(0.5, wilson_estimate(*pairs[0][0])), (-0.5, wilson_estimate(*pairs[0][1]))]
        + [(0.5, wilson_estimate(*pairs[1][0])), (-0.5, wilson_estimate(*pairs[1][1]))]
    )
    assert got == {"value": round(value, 6), "ci95": [round(lo, 6), round(hi, 6)], "cases": 2}


def test_interval_difference_of_two_wilson_intervals_is_newcombe():
    a, b = wilson_estimate(0.8, 70), wilson_estimate(0.6, 80)
    assert interval_difference(a, b) == newcombe_difference((0.8, 70), (0.6, 80))


def test_interval_difference_of_two_means_is_mover_over_all_their_cases():
    a_cases, b_cases = [(0.7, 40), (0.5, 40), (0.9, 40)], [(0.4, 40), (0.6, 40)]
    a, b = mean_of_rates_ci(a_cases), mean_of_rates_ci(b_cases)
    got = interval_difference((a["value"], *a["ci95"]), (b["value"], *b["ci95"]))
    flat = mover(
        [(1 / 3, wilson_estimate(p, n)) for p, n in a_cases] + [(-1 / 2, wilson_estimate(p, n)) for p, n in b_cases]
    )
    assert got["value"] == pytest.approx(flat[0], abs=1e-6)
    assert got["ci95"] == [pytest.approx(flat[1], abs=2e-6), pytest.approx(flat[2], abs=2e-6)]


# ------------------------------------------------------------------------------ the public view
def _public(summary):
    import datetime as dt
    from types import SimpleNamespace

    from liberopro.schema.public import public_result

    row = SimpleNamespace(
        submission_id="s",
        team_name="t",
        policy_name="p",
        image_digest="sha256:x",
        spec_version="1.0",
        evaluator_version="0.1.0",
        stack={},
        manifest_sha256="m",
        published_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        summary=summary,
    )
    return public_result(row)


def test_public_view_derives_every_difference_from_the_published_rates():
    """The drops, the composition gap, live minus frozen and the recovery gain of the public view
    are differences of the published rates with unpaired intervals; the means keep the summary's
    value with an interval from the cases' published rates and counts."""
    from liberopro.runs.summary import summarize

    from tests.evaluator.test_metrics_and_compositions import rec

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
    summary = summarize(records, {})
    pub = _public(summary.to_json())
    cases = {c.case: c for c in pub.cases}
    pr = {k: c.rate.published for k, c in cases.items()}
    for case in ("S01", "S12", "D01", "D10", "S01+D10"):
        d = newcombe_difference(pr["nominal"], pr[case])
        assert cases[case].drop_from_nominal.model_dump() == {
            "value": d["value"],
            "ci95": tuple(d["ci95"]),
            "method": "newcombe",
        }
    assert cases["nominal"].drop_from_nominal is None and cases["D10 [frozen]"].drop_from_nominal is None
    [comp] = pub.compositions
    gap = newcombe_difference(pr["S01+D10"], pr["S01"])  # S01 and D10 tie at 0.5: the first is the weakest
    assert (comp.weakest_constituent, comp.weakest_single, comp.weakest_single_gap) == ("S01", 0.5, -0.5)
    assert comp.gap_ci95 == tuple(gap["ci95"]) and comp.constituents == {"S01": 0.5, "D10": 0.5}
    [frozen] = pub.diagnostics.live_minus_frozen
    d = newcombe_difference(pr["D10"], pr["D10 [frozen]"])
    assert (frozen.case, frozen.live, frozen.frozen, frozen.gap, frozen.ci95) == (
        "D10",
        0.5,
        0.0,
        0.5,
        tuple(d["ci95"]),
    )
    assert pub.diagnostics.live_minus_frozen_mean_gap_ci95 == tuple(d["ci95"])  # one case: the same interval
    hold = pub.diagnostics.recovery_gain["hold"]
    g = mean_difference_ci([(pr["D01 [hold]"], pr["D01"])])
    assert (hold.mean_gain, hold.cases, hold.ci95) == (1.0, 1, tuple(g["ci95"]))
    static = mean_of_rates_ci([pr["S01"], pr["S12"]])
    m = pub.metrics["static_mean"]
    assert (m.value, m.ci95, m.method, m.cases) == (
        summary.headline.static_mean.mean,
        tuple(static["ci95"]),
        "mover",
        2,
    )
    assert pub.metrics["nominal"].ci95 == tuple(summary.headline.nominal.ci95)  # a case: its Wilson interval
    dumped = pub.model_dump_json()
    assert "pairs" not in dumped and "paired" not in dumped and "bootstrap" not in dumped


def test_public_mean_without_its_cases_has_no_interval():
    """A summary whose rows do not hold the cases its mean averaged publishes the value, no interval."""
    summary = {
        "headline": {"overall": {"mean": 0.5, "ci95": [0.4, 0.6], "cases": 3, "episodes": 90}},
        "cases": [],
    }
    m = _public(summary).metrics["overall"]
    assert (m.value, m.ci95, m.cases, m.episodes) == (0.5, None, 3, 90)
