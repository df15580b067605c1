"""The leaderboard's JSON and CSV API on the platform app, over the seeded PostgreSQL database:
the numbers are the stored summaries' numbers, every column sorts, a trial run is marked and never
ranked among the full results, hidden and unpublished submissions never appear, nothing from an
evaluation instance is published, and a page costs a fixed number of queries."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from sqlalchemy import create_engine, event, select, update

from tests.leaderboard.seed import CANARIES, HIDDEN_POLICY, HIDDEN_TEAM, TRIAL_POLICY, TRIAL_REASONS

FULL = ["OpenVLA-OFT", "pi0-FAST", "Diffusion Policy", "BC-RNN baseline"]
VISIBLE = [*FULL, TRIAL_POLICY]


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def summaries(seeded_db) -> dict[str, dict]:
    """Submission id -> the summary as stored in the results table."""
    from liberopro_platform.models import Result

    engine = create_engine(seeded_db["url"])
    with engine.connect() as conn:
        rows = conn.execute(select(Result.submission_id, Result.summary)).all()
    engine.dispose()
    return {sid: summary for sid, summary in rows}


def board(client, **params) -> dict:
    r = client.get("/api/leaderboard", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_ranking_lists_exactly_the_visible_published_results(client, ids):
    data = board(client)
    names = [row["policy_name"] for row in data["rows"]]
    assert sorted(names) == sorted(VISIBLE)
    assert HIDDEN_POLICY not in json.dumps(data) and HIDDEN_TEAM not in json.dumps(data)
    assert "StillRunningPolicy" not in json.dumps(data)
    assert data["sort"] == "overall" and data["order"] == "desc" and data["rank_by"] == "overall"
    assert "entire 95% interval" in data["tie_rule"]
    assert [c["key"] for c in data["columns"]][:4] == ["overall", "nominal", "static_mean", "runtime_mean"]
    assert len(data["columns"]) == 4 + 2 * 6
    for row in data["rows"]:
        assert set(row["metrics"]) == {c["key"] for c in data["columns"]}
        assert row["page_url"] == f"/leaderboard/submissions/{row['submission_id']}"
        assert row["trial"] == (row["policy_name"] == TRIAL_POLICY)
        assert row["trial_reasons"] == (TRIAL_REASONS if row["trial"] else [])


def test_a_trial_run_is_marked_and_never_ranked_among_full_results(client, ids):
    """The seeded quick trial (every episode a success) has a higher overall and nominal rate than
    any full result, yet it comes after all of them under every sort, with no rank; the row and
    the submission endpoint say why it is a trial."""
    rows = board(client)["rows"]
    trial = next(r for r in rows if r["policy_name"] == TRIAL_POLICY)
    full = [r for r in rows if not r["trial"]]
    for key in ("overall", "nominal"):
        assert all(trial["metrics"][key]["value"] > r["metrics"][key]["value"] for r in full), key
    assert rows[-1] is trial and trial["rank"] is None and trial["tied"] is False
    assert rows[0]["policy_name"] != TRIAL_POLICY and rows[0]["rank"] == 1
    assert [r["policy_name"] for r in full] == [r["policy_name"] for r in rows[:-1]]
    for sort, order in (("overall", "asc"), ("nominal", "desc"), ("team", "desc"), ("published", "asc")):
        assert board(client, sort=sort, order=order)["rows"][-1]["policy_name"] == TRIAL_POLICY, (sort, order)
    data = _published(client, ids[TRIAL_POLICY])
    assert data["trial"] is True and data["trial_reasons"] == TRIAL_REASONS
    assert data["meta"]["max_steps"] == 10 and data["meta"]["episodes_per_instance"] == 1
    full_view = _published(client, ids["pi0-FAST"])
    assert full_view["trial"] is False and full_view["trial_reasons"] == []
    assert any("trial run is listed after the full results" in n for n in board(client)["notes"])


def _published(client, sid: str) -> dict:
    r = client.get(f"/api/leaderboard/submissions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()


def _column_cases(cases: list[dict], key: str) -> list[tuple[float, int]]:
    """(rate, valid episodes) of the published single-shift cases a column averages."""
    singles = [c for c in cases if c["observations"] == "live" and c["recovery"] == "none" and len(c["shift_ids"]) == 1]
    if key != "overall":
        kind, _, cat = key.removesuffix("_mean").partition(".")
        singles = [c for c in singles if c["kind"] == kind and (not cat or c["categories"][0] == cat)]
    return [(c["rate"]["value"], c["rate"]["episodes"]) for c in singles if c["rate"]["value"] is not None]


def test_numbers_are_the_stored_summaries(client, summaries):
    """Values and counts are the summary's; a mean's interval is computed from the published rates and
    episode counts of its cases (never the summary's bootstrap interval, which reads per-task counts)."""
    from liberopro.metrics import mean_of_rates_ci

    differs = 0
    for row in board(client)["rows"]:
        head = summaries[row["submission_id"]]["headline"]
        cases = _published(client, row["submission_id"])["cases"]
        m = row["metrics"]
        assert (m["nominal"]["value"], m["nominal"]["ci95"], m["nominal"]["episodes"]) == (
            head["nominal"]["success_rate"],
            head["nominal"]["ci95"],
            head["nominal"]["episodes"],
        )
        means = {"overall": head["overall"], "static_mean": head["static_mean"], "runtime_mean": head["runtime_mean"]}
        for kind in ("static", "runtime"):
            for cat in ("Condition", "Environment", "Observation", "Execution", "Robot", "Language"):
                means[f"{kind}.{cat}"] = head["categories"][kind].get(cat)
        for key, raw in means.items():
            if raw is None or raw["mean"] is None:  # not run (the trial run has no runtime shift)
                assert m[key]["value"] is None and m[key]["ci95"] is None, key
                continue
            expected = mean_of_rates_ci(_column_cases(cases, key))
            assert (m[key]["value"], m[key]["episodes"], m[key]["cases"], m[key]["method"]) == (
                raw["mean"],
                raw["episodes"],
                raw["cases"],
                "mover",
            ), key
            assert expected["cases"] == raw["cases"] and expected["episodes"] == raw["episodes"], key
            assert m[key]["ci95"] == expected["ci95"], key
            assert m[key]["ci95"][0] <= m[key]["value"] <= m[key]["ci95"][1], key
            differs += m[key]["ci95"] != raw["ci95"]
    assert differs > 0  # the summary's own (bootstrap) intervals are not what is published


def test_ranks_follow_the_tie_rule(client):
    """Rank = 1 + the number of rows whose interval lies entirely above; the seed has a tie at the top."""
    for sort in ("overall", "nominal", "runtime.Robot", "static.Observation"):
        rows = [r for r in board(client, sort=sort)["rows"] if not r["trial"]]  # trial runs: no rank
        for row in rows:
            r = row["metrics"][sort]
            if r["value"] is None:
                continue
            above = sum(
                1
                for o in rows
                if o["metrics"][sort]["value"] is not None and o["metrics"][sort]["ci95"][0] > r["ci95"][1]
            )
            assert row["rank"] == 1 + above, (sort, row["policy_name"])
            assert row["tied"] == (sum(1 for o in rows if o["rank"] == row["rank"]) > 1)
    top = board(client)["rows"][:2]
    assert {r["policy_name"] for r in top} == {"OpenVLA-OFT", "pi0-FAST"}
    assert top[0]["rank"] == top[1]["rank"] == 1 and top[0]["tied"] and top[1]["tied"]


def test_every_column_sorts_both_ways(client):
    from liberopro_leaderboard.ranking import sort_keys

    for key in sort_keys():
        for order in ("desc", "asc"):
            data = board(client, sort=key, order=order)
            assert (data["sort"], data["order"]) == (key, order)
            assert [r["trial"] for r in data["rows"]] == sorted(r["trial"] for r in data["rows"])  # trials last
            for trial in (False, True):  # each group sorted in itself
                _assert_sorted([r for r in data["rows"] if r["trial"] == trial], key, order)
    # BC-RNN baseline ran no Language shift: last of the full results under both orders
    for order in ("desc", "asc"):
        rows = board(client, sort="static.Language", order=order)["rows"]
        assert [r for r in rows if not r["trial"]][-1]["policy_name"] == "BC-RNN baseline"


def _assert_sorted(rows: list[dict], key: str, order: str) -> None:
    """``rows`` are in ``order`` by ``key``; rows without a value for a metric come last."""
    if key == "team":
        values = [r["team"].casefold() for r in rows]
    elif key == "policy":
        values = [r["policy_name"].casefold() for r in rows]
    elif key == "published":
        values = [r["published_at"] for r in rows]
    else:
        present = [r["metrics"][key]["value"] for r in rows if r["metrics"][key]["value"] is not None]
        missing = [r for r in rows if r["metrics"][key]["value"] is None]
        assert rows[len(present) :] == missing, "rows without a value come last"
        values = present
    assert values == sorted(values, reverse=order == "desc"), (key, order, values)


def test_unknown_sort_is_refused_with_the_valid_columns(client):
    r = client.get("/api/leaderboard", params={"sort": "speed"})
    assert r.status_code == 422
    assert r.json()["detail"]["error"] == "bad_sort" and "runtime.Robot" in r.json()["detail"]["message"]
    r = client.get("/api/leaderboard", params={"order": "sideways"})
    assert r.status_code == 422 and "asc or desc" in r.json()["detail"]["message"]


def test_csv_parses_and_holds_the_json_numbers(client):
    data = board(client, sort="runtime_mean")
    r = client.get("/api/leaderboard.csv", params={"sort": "runtime_mean"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["submission_id"] for row in rows] == [row["submission_id"] for row in data["rows"]]
    assert any(row["trial"] for row in data["rows"])
    for line, row in zip(rows, data["rows"], strict=True):
        assert line["rank"] == ("" if row["rank"] is None else str(row["rank"]))
        assert line["tied"] == str(row["tied"]).lower()
        assert line["trial"] == str(row["trial"]).lower() and line["trial_reasons"] == "; ".join(row["trial_reasons"])
        assert line["team"] == row["team"] and line["policy_name"] == row["policy_name"]
        assert int(line["unproved_instances"]) == row["unproved_instances"]
        for c in data["columns"]:
            m = row["metrics"][c["key"]]
            if m["value"] is None:
                assert line[c["key"]] == "" and line[f"{c['key']}_ci_low"] == ""
            else:
                assert float(line[c["key"]]) == m["value"]
                assert [float(line[f"{c['key']}_ci_low"]), float(line[f"{c['key']}_ci_high"])] == m["ci95"]
            assert int(line[f"{c['key']}_episodes"]) == m["episodes"]


def test_submission_json(client, ids, summaries):
    sid = ids["OpenVLA-OFT"]
    r = client.get(f"/api/leaderboard/submissions/{sid}")
    assert r.status_code == 200
    data = r.json()
    meta = data["meta"]
    assert meta["policy_name"] == "OpenVLA-OFT" and meta["team"] == "Lab Alpha"
    assert meta["image_digest"].startswith("sha256:") and meta["spec_version"] == "1.0"
    assert meta["evaluator_version"] == "0.1.0" and meta["stack"]["mujoco"] == "2.3.7"
    stored = {c["case"]: c for c in summaries[sid]["cases"]}
    assert {c["case"] for c in data["cases"]} == set(stored)
    for c in data["cases"]:
        s = stored[c["case"]]
        assert (c["rate"]["value"], c["rate"]["ci95"], c["rate"]["episodes"], c["rate"]["tasks"]) == (
            s["success_rate"],
            s["ci95"],
            s["episodes"],
            s["tasks"],
        )
    assert data["termination_reasons"]["shift_invalid"] == 1
    assert data["termination_reasons"] == summaries[sid]["termination_reasons"]
    # the unproved instance (S20 on one task, tests/leaderboard/seed.py) is published apart, as counts
    s20 = next(c for c in data["cases"] if c["case"] == "S20")
    assert s20["unproved"]["instances"] == 1 and s20["rate"]["tasks"] == 7
    assert s20["unproved"]["episodes"] == stored["S20"]["unproved"]["episodes"] == 10
    assert data["unproved"]["instances"] == 1 and data["proof"]["unproved"] == 1
    assert data["proof"]["proved_by_nominal"] == 15 * 8  # 15 shifts proved by the nominal run, 8 tasks
    assert data["proof"]["not_proved"] == 1  # the seeded invalid S03 record carries no verdict
    assert data["trial"] is False and data["trial_reasons"] == []  # a full result
    row = next(r for r in client.get("/api/leaderboard").json()["rows"] if r["submission_id"] == sid)
    assert row["unproved_instances"] == 1


def test_differences_are_unpaired_from_the_published_counts(client, ids, summaries):
    """Drops from nominal, the composition gap, live minus frozen: differences of the published rates
    with intervals from the published rates and counts (never the summary's paired intervals)."""
    from liberopro.metrics import mean_difference_ci, newcombe_difference

    sid = ids["OpenVLA-OFT"]
    data = _published(client, sid)
    cases = {c["case"]: c for c in data["cases"]}
    pub = {k: (c["rate"]["value"], c["rate"]["episodes"]) for k, c in cases.items()}
    stored = {c["case"]: c for c in summaries[sid]["cases"]}
    differs = 0
    for case, c in cases.items():
        if case == "nominal" or c["observations"] != "live":
            assert c["drop_from_nominal"] is None, case
            continue
        d = newcombe_difference(pub["nominal"], pub[case])
        assert c["drop_from_nominal"] == {"value": d["value"], "ci95": d["ci95"], "method": "newcombe"}, case
        differs += d["ci95"] != stored[case]["drop_from_nominal"]["ci95"]
    assert differs > 0  # the summary's paired intervals are not what is published
    [comp] = data["compositions"]
    weakest = min(("D10", "S01"), key=lambda i: pub[i][0])
    gap = newcombe_difference(pub["D10+S01"], pub[weakest])
    assert comp == {
        "case": "D10+S01",
        "success_rate": pub["D10+S01"][0],
        "constituents": {"D10": pub["D10"][0], "S01": pub["S01"][0]},
        "weakest_constituent": weakest,
        "weakest_single": pub[weakest][0],
        "weakest_single_gap": gap["value"],
        "gap_ci95": gap["ci95"],
    }
    [frozen] = data["diagnostics"]["live_minus_frozen"]
    d = newcombe_difference(pub["D10"], pub["D10 [frozen]"])
    assert frozen == {
        "case": "D10",
        "live": pub["D10"][0],
        "frozen": pub["D10 [frozen]"][0],
        "gap": d["value"],
        "ci95": d["ci95"],
    }
    mean = mean_difference_ci([(pub["D10"], pub["D10 [frozen]"])])
    assert data["diagnostics"]["live_minus_frozen_mean_gap"] == mean["value"]
    assert data["diagnostics"]["live_minus_frozen_mean_gap_ci95"] == mean["ci95"]


@pytest.mark.parametrize("policy", ["pi0-FAST", TRIAL_POLICY])
def test_the_api_serves_the_public_view_of_the_stored_summary(client, seeded_db, ids, policy):
    """What the submission route serves is ``public_result`` of the stored row, unchanged, plus the
    trial verdict of its stored summary (``trial``, ``trial_reasons``)."""
    from liberopro.schema.public import public_result
    from liberopro_leaderboard.trial import listed_result
    from liberopro_platform.models import Result
    from sqlalchemy.orm import Session

    with Session(create_engine(seeded_db["url"])) as session:
        row = session.scalars(select(Result).where(Result.submission_id == ids[policy])).one()
        view = json.loads(public_result(row).model_dump_json())
        listed = json.loads(listed_result(row).model_dump_json())
    served = _published(client, ids[policy])
    assert served == listed and served == {
        **view,
        "trial_reasons": TRIAL_REASONS if policy == TRIAL_POLICY else [],
        "trial": policy == TRIAL_POLICY,
    }


@pytest.mark.parametrize("who", ["hidden", "unknown", "unpublished"])
def test_hidden_unknown_and_unpublished_submissions_are_404(client, ids, who):
    sid = {"hidden": ids[HIDDEN_POLICY], "unknown": "000000000000", "unpublished": ids["StillRunningPolicy"]}[who]
    for path in (
        f"/api/leaderboard/submissions/{sid}",
        f"/leaderboard/charts/submissions/{sid}/categories.svg",
        f"/api/leaderboard/compare?a={sid}&b={ids['pi0-FAST']}",
    ):
        r = client.get(path)
        assert r.status_code == 404, path
        body = r.json()["detail"]
        assert body["error"] == "submission_not_found" and sid in body["message"] and "hidden" in body["message"]
    r = client.get(f"/leaderboard/submissions/{sid}")
    assert r.status_code == 404 and "No published submission" in r.text
    assert HIDDEN_POLICY not in r.text


def test_compare_json(client, ids):
    """Every difference is unpaired, from the two published results: per case Newcombe from the two
    published rates and counts, per column MOVER from the two published intervals."""
    from liberopro.metrics import interval_difference, newcombe_difference
    from liberopro_leaderboard.comparison import UNPAIRED_NOTE

    a, b = ids["OpenVLA-OFT"], ids["Diffusion Policy"]
    data = client.get("/api/leaderboard/compare", params={"a": a, "b": b}).json()
    assert data["a"]["submission_id"] == a and data["b"]["submission_id"] == b
    assert data["note"] == UNPAIRED_NOTE and "pairing" not in data
    overall = next(m for m in data["metrics"] if m["key"] == "overall")
    assert overall["difference"] == pytest.approx(overall["a"]["value"] - overall["b"]["value"], abs=1e-6)
    assert overall["separated"] is True and overall["excludes_zero"] is True  # about 66% vs 29%, 2,600 episodes each
    assert data["cases"][0]["key"] == "nominal"
    assert data["differences_in_provenance"] == []
    pa, pb = _published(client, a), _published(client, b)
    for m in data["metrics"]:
        ra, rb = pa["metrics"][m["key"]], pb["metrics"][m["key"]]
        assert (m["a"], m["b"]) == (ra, rb), m["key"]
        if ra["value"] is None or rb["value"] is None:
            assert m["difference"] is None and m["difference_ci95"] is None, m["key"]
            continue
        d = (
            newcombe_difference((ra["value"], ra["episodes"]), (rb["value"], rb["episodes"]))
            if m["key"] == "nominal"
            else interval_difference((ra["value"], *ra["ci95"]), (rb["value"], *rb["ci95"]))
        )
        assert (m["difference"], m["difference_ci95"]) == (d["value"], d["ci95"]), m["key"]
        assert m["excludes_zero"] == (d["ci95"][0] > 0 or d["ci95"][1] < 0)
    rates_a = {c["case"]: c["rate"] for c in pa["cases"]}
    rates_b = {c["case"]: c["rate"] for c in pb["cases"]}
    for row in data["cases"]:
        ra, rb = rates_a[row["key"]], rates_b[row["key"]]
        d = newcombe_difference((ra["value"], ra["episodes"]), (rb["value"], rb["episodes"]))
        assert (row["difference"], row["difference_ci95"]) == (d["value"], d["ci95"]), row["key"]
        assert set(row) == {
            "key",
            "label",
            "kind",
            "a",
            "b",
            "difference",
            "difference_ci95",
            "excludes_zero",
            "separated",
        }


def test_compare_reads_no_episode(seeded_db, ids):
    """The comparison is computed from the two published views: the episodes table is never read,
    and another evaluation manifest changes only the provenance flag."""
    from fastapi.testclient import TestClient
    from liberopro_leaderboard.app import create_app
    from liberopro_leaderboard.comparison import compare

    app = create_app(seeded_db["url"])
    engine = app.state.sessions.kw["bind"]
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    a, b = ids["OpenVLA-OFT"], ids["Diffusion Policy"]
    with TestClient(app) as c:
        for path in (f"/api/leaderboard/compare?a={a}&b={b}", f"/leaderboard/compare?a={a}&b={b}"):
            assert c.get(path).status_code == 200, path
        store = app.state.leaderboard.store
        with app.state.sessions() as session:
            ra, rb = store.get(session, a), store.get(session, b)
    assert statements and not [s for s in statements if "episodes" in s.lower()], statements
    other = rb.model_copy(update={"meta": rb.meta.model_copy(update={"manifest_sha256": "cd" * 32})})
    same, moved = compare(ra, rb), compare(ra, other)
    assert moved.differences_in_provenance == ["evaluation manifest"]
    assert moved.model_dump(exclude={"b", "differences_in_provenance"}) == same.model_dump(
        exclude={"b", "differences_in_provenance"}
    )


def test_openapi_documents_the_api(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/api/leaderboard",
        "/api/leaderboard.csv",
        "/api/leaderboard/submissions/{submission_id}",
        "/api/leaderboard/compare",
        "/api/leaderboard/methodology",
    ):
        assert path in paths, path
        assert "leaderboard" in paths[path]["get"]["tags"]
    ok = paths["/api/leaderboard"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/LeaderboardResponse")
    assert "text/csv" in paths["/api/leaderboard.csv"]["get"]["responses"]["200"]["content"]
    sub = paths["/api/leaderboard/submissions/{submission_id}"]["get"]["responses"]
    assert sub["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ListedResult") and "404" in sub
    listed = spec["components"]["schemas"]["ListedResult"]["properties"]
    assert {"trial", "trial_reasons", "meta", "metrics"} <= set(listed)
    assert {"Rate", "RankedRow", "CompareResponse", "Catalog"} <= set(spec["components"]["schemas"])
    assert not any(p.startswith("/leaderboard") for p in paths), "pages and charts are not API"


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def test_nothing_from_an_evaluation_instance_is_published(client, ids):
    """Canaries planted in shift parameters, applied values, instructions, invalid-episode details,
    the image reference and the episode seed appear in no response; nor does the hidden result."""
    visible = [ids[p] for p in VISIBLE]
    paths = [
        "/leaderboard",
        "/leaderboard?sort=runtime.Robot&order=asc",
        "/leaderboard/methodology",
        "/leaderboard/compare",
        "/api/leaderboard",
        "/api/leaderboard.csv",
        "/api/leaderboard/methodology",
        "/leaderboard/charts/static-vs-runtime.svg",
        "/leaderboard/charts/heatmap.svg",
        f"/leaderboard/compare?a={visible[0]}&b={visible[1]}",
        f"/api/leaderboard/compare?a={visible[0]}&b={visible[1]}",
        f"/leaderboard/charts/compare/{visible[0]}/{visible[1]}.svg",
    ]
    for sid in visible:
        paths += [
            f"/leaderboard/submissions/{sid}",
            f"/api/leaderboard/submissions/{sid}",
            f"/leaderboard/charts/submissions/{sid}/categories.svg",
            f"/leaderboard/charts/submissions/{sid}/shifts.svg",
        ]
    for path in paths:
        r = client.get(path)
        assert r.status_code == 200, path
        for canary in (*CANARIES, HIDDEN_POLICY, HIDDEN_TEAM, ids[HIDDEN_POLICY]):
            assert canary not in r.text, (path, canary)
        assert "<video" not in r.text
        if path.startswith("/api/") and not path.endswith((".csv", "/methodology")):  # the split's seed is public
            leaked = _keys(r.json()) & {
                "per_task",
                "params",
                "applied",
                "invalid_reasons",
                "image_ref",
                "seed",
                "instance_id",
                "init_state_id",
                "policy_log",
                "settings",
            }
            assert not leaked, (path, leaked)


def test_hiding_a_result_takes_effect_at_once(client, seeded_db, ids):
    from liberopro_platform.models import Result

    sid = ids["Diffusion Policy"]
    assert client.get(f"/api/leaderboard/submissions/{sid}").status_code == 200  # cached now
    engine = create_engine(seeded_db["url"])
    try:
        with engine.begin() as conn:
            conn.execute(update(Result).where(Result.submission_id == sid).values(hidden=True))
        assert client.get(f"/api/leaderboard/submissions/{sid}").status_code == 404
        assert "Diffusion Policy" not in client.get("/leaderboard").text
        assert sid not in client.get("/api/leaderboard.csv").text
    finally:
        with engine.begin() as conn:
            conn.execute(update(Result).where(Result.submission_id == sid).values(hidden=False))
        engine.dispose()
    assert client.get(f"/api/leaderboard/submissions/{sid}").status_code == 200


def test_a_page_costs_a_fixed_number_of_queries(seeded_db, ids):
    """No query per row: the ranking reads the visible ids, then the summaries not cached yet."""
    from fastapi.testclient import TestClient
    from liberopro_leaderboard.app import create_app

    app = create_app(seeded_db["url"])
    engine = app.state.sessions.kw["bind"]
    with engine.connect():
        pass  # the dialect's first-connect queries are not the page's
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    with TestClient(app) as c:

        def count(path: str) -> int:
            statements.clear()
            assert c.get(path).status_code == 200, path
            return len([s for s in statements if s.lstrip().upper().startswith("SELECT")])

        assert count("/api/leaderboard") == 2  # cold: ids, then the 5 summaries in one query
        assert count("/api/leaderboard") == 1  # warm: ids only
        assert count("/leaderboard") == 1
        assert count("/leaderboard?sort=nominal") == 1
        assert count(f"/leaderboard/submissions/{ids['pi0-FAST']}") == 1
        assert count(f"/api/leaderboard/submissions/{ids['pi0-FAST']}") == 1
    assert app.state.leaderboard.store.loaded == 5  # each result converted once


def test_charts_are_svg_cached_and_revalidated(seeded_db, ids):
    from xml.etree import ElementTree

    from fastapi.testclient import TestClient
    from liberopro_leaderboard.app import create_app

    app = create_app(seeded_db["url"])
    site = app.state.leaderboard
    sid = ids["OpenVLA-OFT"]
    with TestClient(app) as c:
        url = f"/leaderboard/charts/submissions/{sid}/categories.svg"
        first = c.get(url)
        assert first.status_code == 200 and first.headers["content-type"] == "image/svg+xml"
        root = ElementTree.fromstring(first.content)
        assert root.tag.endswith("svg") and root.find("{http://www.w3.org/2000/svg}title") is not None
        assert "Condition" in first.text and "nominal" in first.text  # text stays text (svg.fonttype none)
        again = c.get(url)
        assert again.content == first.content and site.charts.renders == 1
        assert c.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 304
        assert c.get("/leaderboard/charts/heatmap.svg").status_code == 200
        assert c.get("/leaderboard/charts/heatmap.svg").status_code == 200
        assert site.charts.renders == 2
        assert c.get(f"/leaderboard/charts/submissions/{sid}/pie.svg").status_code == 404


def test_the_stylesheet_is_served_with_its_type_and_cache_header(client):
    """The platform app serves the leaderboard's static folder (Starlette's StaticFiles) at the
    path the pages link to, cached for an hour; anything else under it is a 404."""
    r = client.get("/leaderboard/static/leaderboard.css")
    assert r.status_code == 200 and r.headers["content-type"] == "text/css; charset=utf-8"
    assert r.headers["cache-control"] == "public, max-age=3600" and ":root" in r.text
    assert (
        client.get("/leaderboard/static/leaderboard.css", headers={"If-None-Match": r.headers["etag"]}).status_code
        == 304
    )
    assert client.get("/leaderboard/static/nope.css").status_code == 404
    assert client.get("/leaderboard/static/../routes.py").status_code == 404
