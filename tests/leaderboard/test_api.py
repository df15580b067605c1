"""The leaderboard's JSON and CSV API on the platform app, over the seeded PostgreSQL database:
the numbers are the stored summaries' numbers, every column sorts, hidden and unpublished
submissions never appear, nothing from an evaluation instance is published, and a page costs a
fixed number of queries."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from sqlalchemy import create_engine, event, select, update

from tests.leaderboard.seed import CANARIES, HIDDEN_POLICY, HIDDEN_TEAM

VISIBLE = ["OpenVLA-OFT", "pi0-FAST", "Diffusion Policy", "BC-RNN baseline"]


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


def test_numbers_are_the_stored_summaries(client, summaries):
    for row in board(client)["rows"]:
        head = summaries[row["submission_id"]]["headline"]
        m = row["metrics"]
        assert (m["overall"]["value"], m["overall"]["ci95"], m["overall"]["episodes"]) == (
            head["overall"]["mean"],
            head["overall"]["ci95"],
            head["overall"]["episodes"],
        )
        assert (m["nominal"]["value"], m["nominal"]["ci95"], m["nominal"]["episodes"]) == (
            head["nominal"]["success_rate"],
            head["nominal"]["ci95"],
            head["nominal"]["episodes"],
        )
        for key, raw in (("static_mean", head["static_mean"]), ("runtime_mean", head["runtime_mean"])):
            assert (m[key]["value"], m[key]["ci95"]) == (raw["mean"], raw["ci95"])
        for kind in ("static", "runtime"):
            for cat in ("Condition", "Environment", "Observation", "Execution", "Robot", "Language"):
                raw = head["categories"][kind].get(cat)
                if raw is None:
                    assert m[f"{kind}.{cat}"]["value"] is None
                else:
                    assert (
                        m[f"{kind}.{cat}"]["value"],
                        m[f"{kind}.{cat}"]["ci95"],
                        m[f"{kind}.{cat}"]["episodes"],
                        m[f"{kind}.{cat}"]["cases"],
                    ) == (raw["mean"], raw["ci95"], raw["episodes"], raw["cases"])


def test_ranks_follow_the_tie_rule(client):
    """Rank = 1 + the number of rows whose interval lies entirely above; the seed has a tie at the top."""
    for sort in ("overall", "nominal", "runtime.Robot", "static.Observation"):
        rows = board(client, sort=sort)["rows"]
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
            rows = data["rows"]
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
    # BC-RNN baseline ran no Language shift: last under both orders
    for order in ("desc", "asc"):
        assert board(client, sort="static.Language", order=order)["rows"][-1]["policy_name"] == "BC-RNN baseline"


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
    for line, row in zip(rows, data["rows"], strict=True):
        assert int(line["rank"]) == row["rank"] and line["tied"] == str(row["tied"]).lower()
        assert line["team"] == row["team"] and line["policy_name"] == row["policy_name"]
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
    assert data["compositions"][0]["case"] == "D10+S01"
    assert data["diagnostics"]["live_minus_frozen"][0]["case"] == "D10"
    assert data["termination_reasons"]["shift_invalid"] == 1


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
    a, b = ids["OpenVLA-OFT"], ids["Diffusion Policy"]
    data = client.get("/api/leaderboard/compare", params={"a": a, "b": b}).json()
    assert data["a"]["submission_id"] == a and data["b"]["submission_id"] == b
    overall = next(m for m in data["metrics"] if m["key"] == "overall")
    assert overall["difference"] == pytest.approx(overall["a"]["value"] - overall["b"]["value"], abs=1e-6)
    assert overall["separated"] is True  # 66% vs 29% with 1320 episodes each
    assert data["cases"][0]["key"] == "nominal"
    assert data["differences_in_provenance"] == []
    # same manifest: every case is paired over the episodes both ran (8 tasks x 5 starts)
    pairing = data["pairing"]
    assert pairing["paired"] is True and "same evaluation manifest" in pairing["note"]
    nominal = data["cases"][0]["paired"]
    assert nominal["pairs"] == 40 and nominal["ci95"][0] <= nominal["value"] <= nominal["ci95"][1]
    assert nominal["value"] == pytest.approx(data["cases"][0]["difference"], abs=1e-6)  # same episodes here
    assert set(pairing["means"]) == {"static", "runtime"} and pairing["means"]["static"]["excludes_zero"] is True


def test_compare_refuses_to_pair_different_manifests(seeded_db, ids):
    """Results of different evaluation manifests are compared side by side, never paired."""
    from liberopro_leaderboard.comparison import compare
    from liberopro_leaderboard.store import ResultStore
    from sqlalchemy.orm import Session

    store = ResultStore()
    with Session(create_engine(seeded_db["url"])) as session:
        a = store.get(session, ids["OpenVLA-OFT"])
        b = store.get(session, ids["Diffusion Policy"])
        other = b.model_copy(update={"meta": b.meta.model_copy(update={"manifest_sha256": "cd" * 32})})
        assert store.pairing(session, a, b).paired is True
        pairing = store.pairing(session, a, other)
    assert pairing.paired is False and pairing.note == "not paired: different evaluation manifests"
    cmp = compare(a, other, pairing)
    assert all(c.paired is None for c in cmp.cases) and "evaluation manifest" in cmp.differences_in_provenance


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
    assert sub["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/PublicResult") and "404" in sub
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

        assert count("/api/leaderboard") == 2  # cold: ids, then the 4 summaries in one query
        assert count("/api/leaderboard") == 1  # warm: ids only
        assert count("/leaderboard") == 1
        assert count("/leaderboard?sort=nominal") == 1
        assert count(f"/leaderboard/submissions/{ids['pi0-FAST']}") == 1
        assert count(f"/api/leaderboard/submissions/{ids['pi0-FAST']}") == 1
    assert app.state.leaderboard.store.loaded == 4  # each result converted once


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
