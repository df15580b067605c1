"""Pure parts of the leaderboard: the tie rule, sorting, the public whitelist, the catalog
(live and from a snapshot). No database, no browser."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from liberopro_leaderboard.public import CATEGORIES, Rate, public_result
from liberopro_leaderboard.ranking import SortError, interval_ranks, rank_table, separated


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


def _result(sid, team, policy, overall, nominal=None, days=0):
    summary = {"headline": {"overall": {"mean": overall[0], "ci95": list(overall[1:]), "cases": 3, "episodes": 90},
                            "nominal": None if nominal is None else {
                                "success_rate": nominal, "ci95": [nominal - 0.1, nominal + 0.1], "episodes": 30,
                                "successes": 1, "tasks": 3, "per_task": {"libero_goal:7": nominal}},
                            "categories": {"static": {}, "runtime": {}}},
               "cases": [], "settings": {"seed": 123, "episodes_per_instance": 10}}
    row = SimpleNamespace(submission_id=sid, team_name=team, policy_name=policy, image_digest="sha256:x",
                          spec_version="1.0", evaluator_version="0.1.0", stack={}, manifest_sha256="m",
                          published_at=dt.datetime(2026, 1, 1 + days, tzinfo=dt.UTC), summary=summary)
    return public_result(row)


def test_sorting_and_rank_by():
    results = [_result("a", "Zed", "alpha", (0.5, 0.4, 0.6), 0.9, 1), _result("b", "amy", "Beta", (0.7, 0.65, 0.75), None, 2),
               _result("c", "Bob", "gamma", (0.3, 0.25, 0.35), 0.5, 3)]
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


def test_public_result_keeps_only_the_whitelist():
    r = _result("a", "t", "p", (0.5, 0.4, 0.6), 0.9)
    dumped = r.model_dump_json()
    assert "per_task" not in dumped and "123" not in dumped and "libero_goal:7" not in dumped
    assert r.metrics["nominal"].value == 0.9 and r.metrics["nominal"].tasks == 3
    assert r.metrics["static.Robot"].value is None and r.meta.episodes_per_instance == 10


def test_categories_equal_the_evaluators():
    from liberopro.shifts import CATEGORIES as EVALUATOR_CATEGORIES

    assert CATEGORIES == EVALUATOR_CATEGORIES


def test_catalog_snapshot_round_trip(tmp_path):
    from liberopro.shifts import SHIFTS
    from liberopro_leaderboard.__main__ import main
    from liberopro_leaderboard.catalog import CatalogProvider, CatalogUnavailable

    path = tmp_path / "catalog.json"
    assert main(["catalog", "--out", str(path)]) == 0
    catalog = CatalogProvider(path).get()
    assert [s.id for s in catalog.shifts] == list(SHIFTS)
    assert catalog.source == "snapshot catalog.json" and catalog.split.seed == 142
    with pytest.raises(CatalogUnavailable, match="cannot read the catalog snapshot"):
        CatalogProvider(tmp_path / "missing.json").get()


def test_methodology_from_a_snapshot_and_without_one(tmp_path, seeded_db):
    from fastapi.testclient import TestClient
    from liberopro_leaderboard.app import create_app
    from liberopro_leaderboard.catalog import build_catalog
    from liberopro_leaderboard.settings import LeaderboardSettings

    path = tmp_path / "catalog.json"
    path.write_text(build_catalog().model_dump_json())
    with TestClient(create_app(seeded_db["url"], LeaderboardSettings(catalog=path))) as c:
        r = c.get("/leaderboard/methodology")
        assert r.status_code == 200 and "snapshot catalog.json" in r.text and "S01" in r.text
    with TestClient(create_app(seeded_db["url"], LeaderboardSettings(catalog=tmp_path / "gone.json"))) as c:
        r = c.get("/leaderboard/methodology")
        assert r.status_code == 503 and "cannot read the catalog snapshot" in r.text
        assert c.get("/api/leaderboard/methodology").json()["detail"]["error"] == "catalog_unavailable"
