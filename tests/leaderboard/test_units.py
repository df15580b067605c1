"""Pure parts of the leaderboard: the tie rule, sorting, the trial-run rule, the public whitelist,
the methodology's catalog (built from the evaluator's light modules). No browser; the methodology
routes use the seeded database."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from types import SimpleNamespace

import pytest
from liberopro.metrics import mean_of_rates_ci, wilson
from liberopro.schema.public import CATEGORIES, Rate, public_result
from liberopro.schema.results import Summary
from liberopro.split import split_tasks
from liberopro_leaderboard.ranking import SortError, interval_ranks, rank_table, separated
from liberopro_leaderboard.trial import TRIAL_RULE, listed_result, trial_reasons

#: The held-out tasks as the summaries key them ("suite:index").
HELD_OUT = [str(t) for t in split_tasks("eval")]


def rate(value, low=None, high=None, episodes=100):
    ci = None if value is None else (low if low is not None else value, high if high is not None else value)
    return Rate(value=value, ci95=ci, episodes=episodes if value is not None else 0, method="bootstrap")


def test_tie_rule_ranks_by_separated_intervals():
    a, b, c, d = rate(0.8, 0.75, 0.85), rate(0.78, 0.72, 0.84), rate(0.5, 0.45, 0.55), rate(0.49, 0.40, 0.56)
    assert interval_ranks([a, b, c, d]) == [1, 1, 3, 3]
    assert separated(a, c) and not separated(a, b)


def test_tie_rule_is_not_transitive_and_says_so():
    # a overlaps b, b overlaps c, a and c separate: a 1, b 1, c 2 (only a lies entirely above c)
    a, b, c = rate(0.8, 0.7, 0.9), rate(0.65, 0.55, 0.75), rate(0.5, 0.45, 0.6)
    assert interval_ranks([a, b, c]) == [1, 1, 2]


def test_missing_values_share_the_last_rank():
    assert interval_ranks([rate(0.5, 0.4, 0.6), rate(None), rate(None)]) == [1, 2, 2]


def _case(case: str, kind: str, category: str, rate: float, episodes: int = 100) -> dict:
    return {
        "case": case,
        "shift_ids": [case],
        "shift_names": [case],
        "categories": [category],
        "kind": kind,
        "success_rate": rate,
        "ci95": [round(v, 6) for v in wilson(rate * episodes, episodes)],
        "episodes": episodes,
        "successes": round(rate * episodes),
        "tasks": 3,
        "per_task": dict.fromkeys(HELD_OUT, rate),
    }


def _row(sid, team, policy, summary, days=0):
    return SimpleNamespace(
        submission_id=sid,
        team_name=team,
        policy_name=policy,
        image_digest="sha256:x",
        spec_version="1.0",
        evaluator_version="0.1.0",
        stack={},
        manifest_sha256="m",
        published_at=dt.datetime(2026, 1, 1 + days, tzinfo=dt.UTC),
        summary=summary,
    )


def _result(sid, team, policy, overall, nominal=None, days=0, settings=None):
    """A published result whose three single-shift cases (100 episodes each, every held-out task)
    all have the rate ``overall``; a full result unless ``settings`` (the header's) make it a trial."""
    cases = [_case("S01", "static", "Condition", overall), _case("S12", "static", "Environment", overall)]
    cases.append(_case("D01", "runtime", "Condition", overall))
    summary = {
        "headline": {
            "overall": {"mean": overall, "ci95": [0.0, 1.0], "cases": 3, "episodes": 300},
            "nominal": None
            if nominal is None
            else {
                "success_rate": nominal,
                "ci95": [nominal - 0.1, nominal + 0.1],
                "episodes": 30,
                "successes": 1,
                "tasks": 3,
                "per_task": dict.fromkeys(HELD_OUT, nominal),
            },
            "categories": {"static": {}, "runtime": {}},
        },
        "cases": cases,
        "settings": settings or {"seed": 123, "episodes_per_instance": 10},
    }
    return listed_result(_row(sid, team, policy, summary, days))


def test_sorting_and_rank_by():
    results = [
        _result("a", "Zed", "alpha", 0.5, 0.9, 1),
        _result("b", "amy", "Beta", 0.7, None, 2),
        _result("c", "Bob", "gamma", 0.3, 0.5, 3),
    ]
    t = rank_table(results)
    assert [r.submission_id for r in t.rows] == ["b", "a", "c"] and [r.rank for r in t.rows] == [1, 2, 3]
    t = rank_table(results, "nominal", "asc")
    assert [r.submission_id for r in t.rows] == ["c", "a", "b"]  # no value: last, also ascending
    assert t.rank_by == "nominal" and [r.rank for r in t.rows] == [2, 1, 3]
    t = rank_table(results, "team")
    assert t.order == "asc" and [r.team for r in t.rows] == ["amy", "Bob", "Zed"] and t.rank_by == "overall"
    assert [r.submission_id for r in rank_table(results, "published").rows] == ["c", "b", "a"]  # newest first
    with pytest.raises(SortError, match="runtime.Robot"):
        rank_table(results, "speed")


def _summary(settings: dict | None = None, tasks: list[str] = HELD_OUT) -> Summary:
    """A stored summary whose nominal and S12 rows scored on ``tasks``, run with ``settings``
    (default: the platform's full run, 10 episodes per instance and no horizon cap)."""
    per_task = dict.fromkeys(tasks, 0.5)
    return Summary.load(
        {
            "settings": {"episodes_per_instance": 10, "seed": 0, "max_steps": None, **(settings or {})},
            "headline": {"nominal": {"success_rate": 0.5, "per_task": per_task, "tasks": len(tasks)}},
            "cases": [
                {"case": "nominal", "per_task": per_task, "tasks": len(tasks)},
                {"case": "S12", "shift_ids": ["S12"], "per_task": per_task, "tasks": len(tasks)},
            ],
        }
    )


def test_trial_rule_full_result_and_each_reason_alone():
    """The rule reads the stored summary: a full run gives no reason; each trial setting alone
    gives exactly its own reason, in words; together they come in the rule's order."""
    from tests.leaderboard.seed import TRIAL_REASONS

    assert trial_reasons(_summary()) == []
    assert trial_reasons(_summary({"episodes_per_instance": 12})) == []  # more than the protocol: still full
    assert trial_reasons(_summary({"max_steps": 10})) == ["horizon capped at 10 steps"]
    assert trial_reasons(_summary({"episodes_per_instance": 1})) == ["1 episode per instance (protocol: 10)"]
    assert trial_reasons(_summary({"episodes_per_instance": 5})) == ["5 episodes per instance (protocol: 10)"]
    assert trial_reasons(_summary(tasks=["libero_spatial:2"])) == ["1 of 8 held-out tasks"]
    assert trial_reasons(_summary(tasks=HELD_OUT[:7])) == ["7 of 8 held-out tasks"]
    train = next(f"libero_goal:{i}" for i in range(10) if f"libero_goal:{i}" not in HELD_OUT)
    assert trial_reasons(_summary(tasks=[*HELD_OUT, train])) == ["1 task outside the held-out split"]
    quick = _summary({"episodes_per_instance": 1, "max_steps": 10}, tasks=["libero_spatial:2"])
    assert trial_reasons(quick) == TRIAL_REASONS  # docs/platform.md's quick trial
    # a summary without the platform's settings (an older evaluator's) gives no settings reason
    older = Summary.load({"cases": [{"case": "nominal", "per_task": dict.fromkeys(HELD_OUT, 1.0)}]})
    assert trial_reasons(older) == []
    assert "10 episodes per instance" in TRIAL_RULE and "8 held-out tasks" in TRIAL_RULE


def test_trial_runs_are_listed_after_the_full_results_without_a_rank():
    """A trial run whose rate and interval lie above every full result's still comes after them, in
    both orders, with no rank; the full results' ranks are computed as if it were not there."""
    capped = {"seed": 1, "episodes_per_instance": 10, "max_steps": 10}
    results = [
        _result("full-a", "A", "a", 0.5, 0.8, 1),
        _result("trial", "T", "t", 0.99, 0.99, 2, settings=capped),
        _result("full-b", "B", "b", 0.3, 0.4, 3),
    ]
    assert results[1].trial and results[1].trial_reasons == ["horizon capped at 10 steps"]
    assert not results[0].trial and results[0].trial_reasons == []
    for sort, order in (("overall", "desc"), ("overall", "asc"), ("nominal", "desc"), ("team", "desc")):
        t = rank_table(results, sort, order)
        assert [r.submission_id for r in t.rows][-1] == "trial", (sort, order)
        trial = t.rows[-1]
        assert trial.rank is None and not trial.tied and trial.trial
        assert trial.trial_reasons == ["horizon capped at 10 steps"]
        assert sorted(r.rank for r in t.rows[:2] if r.rank is not None) == [1, 2], (sort, order)
    assert rank_table(results).rows[0].submission_id == "full-a"
    assert any("trial run is listed after the full results" in n for n in rank_table(results).notes)
    assert not rank_table([results[0], results[2]]).notes


def test_public_result_keeps_only_the_whitelist():
    r = _result("a", "t", "p", 0.5, 0.9)
    dumped = r.model_dump_json()
    assert "per_task" not in dumped and "123" not in dumped and "libero_goal:7" not in dumped
    assert r.metrics["nominal"].value == 0.9 and r.metrics["nominal"].tasks == 3
    assert r.metrics["static.Robot"].value is None and r.meta.episodes_per_instance == 10
    # the overall interval comes from the three published cases, not from the summary's [0, 1]
    assert r.metrics["overall"].ci95 == tuple(mean_of_rates_ci([(0.5, 100)] * 3)["ci95"])


def _rearranged(records, rng):
    """The records with each row's outcomes shuffled over its valid episodes: the same successes and
    valid episodes per case (and per row), another split over tasks and another episode pattern.
    Scored and unproved episodes are shuffled apart: they are published apart."""
    by_row: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.valid:
            by_row[r.row_key, r.proof == "unproved"].append(i)
    out = list(records)
    for idx in by_row.values():
        outcomes = [records[i].success for i in idx]
        rng.shuffle(outcomes)
        for i, ok in zip(idx, outcomes, strict=True):
            out[i] = records[i].model_copy(update={"success": ok, "termination_reason": "success" if ok else "horizon"})
    return out


def test_the_public_view_is_a_function_of_the_published_counts():
    """Two runs with the same successes and valid episodes per case, but another split of those
    successes over the tasks (per-instance data) and other episodes succeeding, publish byte-identical
    views, though their summaries' bootstrap and paired intervals differ; the published means are the
    summaries' values."""
    import random

    from liberopro.runs.summary import summarize

    from tests.leaderboard.seed import SPECS, records_for

    records = records_for(SPECS[0])  # every shift, a composition, a frozen row, an invalid episode
    first = summarize(records, {})
    rng = random.Random(11)
    for _ in range(3):
        other = summarize(_rearranged(records, rng), {})
        assert [c.per_task for c in other.cases] != [c.per_task for c in first.cases]  # another split
        assert other.headline.overall.ci95 != first.headline.overall.ci95  # the summaries' intervals moved
        assert [c.drop_from_nominal for c in other.cases] != [c.drop_from_nominal for c in first.cases]
        a = public_result(_row("s", "t", "p", first.to_json()))
        b = public_result(_row("s", "t", "p", other.to_json()))
        assert a.model_dump_json() == b.model_dump_json()
    head = first.headline
    assert a.metrics["overall"].value == head.overall.mean and a.metrics["runtime_mean"].value == head.runtime_mean.mean
    assert a.metrics["static.Robot"].value == head.category("static", "Robot").mean
    assert a.metrics["overall"].ci95 != tuple(head.overall.ci95)


def test_categories_are_the_evaluators_and_every_shift_has_its_column():
    from liberopro.catalog import CATEGORIES as EVALUATOR_CATEGORIES
    from liberopro.catalog import SPECS
    from liberopro.schema.public import COLUMN_BY_KEY

    assert CATEGORIES == EVALUATOR_CATEGORIES
    for spec in SPECS.values():
        assert f"{spec.kind}.{spec.category}" in COLUMN_BY_KEY, spec.id


def test_methodology_catalog_is_built_without_the_simulator():
    """The platform image has no simulator: the methodology's data must come from light modules."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from liberopro_leaderboard.catalog import build_catalog; c = build_catalog(); "
        "print(json.dumps({'ids': [s.id for s in c.shifts], 'seed': c.split.seed, "
        "'instructions': [t.instruction for t in c.split.tasks], "
        "'heavy': sorted(m for m in ('robosuite', 'mujoco', 'libero', 'cv2') if m in sys.modules)}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    from liberopro.catalog import SPECS

    assert got["heavy"] == [] and got["ids"] == list(SPECS) and got["seed"] == 142
    assert len(got["instructions"]) == 40 and all(got["instructions"])


def test_methodology_page_and_api_serve_the_catalog(seeded_db):
    from fastapi.testclient import TestClient
    from liberopro.catalog import SPECS
    from liberopro_leaderboard.app import create_app

    with TestClient(create_app(seeded_db["url"])) as c:
        r = c.get("/leaderboard/methodology")
        assert r.status_code == 200 and "S01" in r.text and "put the bowl on the stove" in r.text
        data = c.get("/api/leaderboard/methodology").json()
        assert [s["id"] for s in data["shifts"]] == list(SPECS)
        d07 = next(s for s in data["shifts"] if s["id"] == "D07")
        assert (
            d07["fallback_step"] == {"approach": "0.25*S(task)", "transport": "0.5*S(task)"}
            and d07["trigger"] == "approach or transport"
        )


def test_unproved_instances_are_published_apart_and_never_ranked():
    """Issue 22, item 4: the published rates and the ranking are over the instances that are not
    unproved; the unproved ones are shown apart, as counts (per case and for the run)."""
    from liberopro.runs.summary import summarize

    from tests.evaluator.test_proof_verdicts import records, with_proof

    proved = listed_result(_row("a", "t", "p", summarize(records(), {}).to_json()))
    s01 = next(c for c in proved.cases if c.case == "S01")
    assert s01.rate.value == 1.0 and s01.rate.episodes == 2  # the unproved task 1 is not in the rate
    assert s01.unproved is not None and (s01.unproved.instances, s01.unproved.episodes) == (1, 2)
    assert s01.unproved.success_rate == 0.0
    assert next(c for c in proved.cases if c.case == "S12").unproved is None
    assert proved.proof == {"proved_under_shift": 3, "proved_by_nominal": 2, "unproved": 1}
    assert proved.unproved.instances == 1 and proved.metrics["overall"].value == 0.75
    # the same episodes without verdicts (an older result): S01 over both tasks, nothing apart
    old = listed_result(_row("b", "t", "q", summarize([with_proof(r, None) for r in records()], {}).to_json(), 1))
    assert old.metrics["overall"].value == 0.5 and old.unproved.instances == 0 and old.proof == {"not_proved": 6}
    rows = {r.submission_id: r for r in rank_table([proved, old]).rows}
    assert rows["a"].unproved_instances == 1 and rows["b"].unproved_instances == 0
    assert rows["a"].metrics["overall"].value == 0.75  # ranked on the proved instances
