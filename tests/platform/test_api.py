"""The API on a real PostgreSQL database: tokens and why they are refused, which image references
a team may submit (its own uploads by id, allowed registries' digests), per-team limits, status,
cancel, logs, admin endpoints. The queue is a recorder here (the Celery path is covered by
test_docker_pipeline)."""

from __future__ import annotations

import datetime as dt
import secrets

import pytest
from fastapi.testclient import TestClient
from lp_helpers import Canary, RecordingEnqueue, free_port

IMAGE_ID = "sha256:" + "ab" * 32
DIGEST = "sha256:" + "0" * 64


@pytest.fixture(scope="module")
def env(migrated_pg, tmp_path_factory):
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings

    settings = Settings(
        database_url=migrated_pg,
        data_dir=tmp_path_factory.mktemp("api-data"),
        submissions_per_day=3,
        max_concurrent=1,
        allowed_registries=["registry.example.org"],
    )
    recorder = RecordingEnqueue()
    app = create_app(settings, enqueue=recorder)
    return app, recorder, settings


@pytest.fixture
def make_user(env):
    """``make_user(admin=False, ...)`` -> (token, user name, team name) in a new team."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    app = env[0]

    def make(admin: bool = False, days: int = 30, per_day: int | None = None, concurrent: int | None = None):
        with transaction(app.state.sessions) as s:
            team = Team(name=f"team-{secrets.token_hex(3)}", submissions_per_day=per_day, max_concurrent=concurrent)
            s.add(team)
            s.flush()
            user = User(name=f"user-{secrets.token_hex(3)}", team_id=team.id, is_admin=admin)
            s.add(user)
            s.flush()
            row, token = issue_token(s, user, days)
            return token, user.name, team.name, row.id

    return make


def own(env, team: str, image_id: str = IMAGE_ID) -> None:
    """Record that ``team`` uploaded ``image_id`` (what the worker does after loading an upload)."""
    from liberopro_platform.models import Team
    from liberopro_platform.ownership import grant_image
    from sqlalchemy import select

    with env[0].state.sessions() as s:
        team_id = s.scalar(select(Team.id).where(Team.name == team))
    grant_image(env[0].state.sessions, team_id, image_id, "upload", None)


@pytest.fixture
def client(env):
    with TestClient(env[0]) as c:
        yield c


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_401_says_why_the_token_is_refused(client, make_user, env):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import ApiToken, utcnow

    r = client.get("/me")
    assert r.status_code == 401 and r.json()["detail"]["error"] == "token_missing"
    assert "Authorization: Bearer" in r.json()["detail"]["message"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = client.get("/me", headers=auth("nonsense"))
    assert r.json()["detail"]["error"] == "token_malformed"
    r = client.get("/me", headers=auth("lp_000000000000_secret"))
    assert r.json()["detail"]["error"] == "token_unknown"
    token, name, team, token_id = make_user()
    assert client.get("/me", headers=auth(token)).json() == {"user": name, "team": team, "is_admin": False}
    r = client.get("/me", headers=auth(token[:-2] + "xx"))
    assert r.json()["detail"]["error"] == "token_unknown"
    with transaction(env[0].state.sessions) as s:
        s.get(ApiToken, token_id).expires_at = utcnow() - dt.timedelta(hours=1)
    r = client.get("/me", headers=auth(token))
    assert r.status_code == 401 and r.json()["detail"]["error"] == "token_expired"
    assert "expired on" in r.json()["detail"]["message"] and "new one" in r.json()["detail"]["message"]
    token2, *_, token2_id = make_user()
    r = client.delete(f"/tokens/{token2_id}", headers=auth(token2))
    assert r.status_code == 200 and r.json()["revoked_at"]
    r = client.get("/me", headers=auth(token2))
    assert r.json()["detail"]["error"] == "token_revoked" and "revoked on" in r.json()["detail"]["message"]


def test_a_user_can_rotate_tokens(client, make_user):
    token, *_ = make_user()
    r = client.post("/tokens", json={"label": "ci", "days": 7}, headers=auth(token))
    assert r.status_code == 201
    new = r.json()["token"]
    assert client.get("/me", headers=auth(new)).status_code == 200
    listed = client.get("/tokens", headers=auth(new)).json()
    assert {t["label"] for t in listed} == {"", "ci"} and all("secret" not in t for t in listed)


def test_image_must_be_pinned_by_digest(client, make_user):
    token, *_ = make_user()
    for ref in ("team/policy:latest", "registry.example.org/t/p:v1@" + DIGEST, "sha256:abc", "UPPER/x@" + DIGEST):
        r = client.post("/submissions", json={"image": ref}, headers=auth(token))
        assert r.status_code == 422, (ref, r.text)
        d = r.json()["detail"]
        assert d["error"] == "image_not_pinned" and "sha256" in d["message"] and "liberopro submit" in d["message"]
    r = client.post("/submissions", json={"command": "python -m x"}, headers=auth(token))
    assert r.status_code == 422 and r.json()["detail"]["error"] == "command_not_allowed"
    r = client.post("/submissions", json={"image": "registry.example.org/t/p@" + DIGEST}, headers=auth(token))
    assert r.status_code == 201, r.text


def test_only_the_teams_own_uploads_are_accepted_by_id(client, make_user, env):
    """Team B cannot submit team A's upload (its id is public on the leaderboard) nor any other
    id it did not upload; the refusal is the same whether the image exists or not."""
    token_a, _, team_a, _ = make_user()
    token_b, _, team_b, _ = make_user()
    own(env, team_a)
    assert client.get(f"/images/{IMAGE_ID}", headers=auth(token_a)).json() == {"image_id": IMAGE_ID, "owned": True}
    assert client.get(f"/images/{IMAGE_ID}", headers=auth(token_b)).json()["owned"] is False
    assert client.get("/images/latest", headers=auth(token_b)).status_code == 422
    listed = client.get("/images", headers=auth(token_a)).json()
    assert listed["allowed_registries"] == ["registry.example.org"]
    assert [i["image_id"] for i in listed["owned"]] == [IMAGE_ID] and listed["owned"][0]["source"] == "upload"
    assert client.get("/images", headers=auth(token_b)).json()["owned"] == []
    refusals = []
    for ref in (IMAGE_ID, "sha256:" + "ef" * 32):
        r = client.post("/submissions", json={"image": ref}, headers=auth(token_b))
        assert r.status_code == 403, r.text
        d = r.json()["detail"]
        assert d["error"] == "image_not_owned" and f"not uploaded by team {team_b}" in d["message"]
        assert "liberopro submit IMAGE" in d["message"]
        refusals.append(d["message"].replace(ref, "ID"))
    assert refusals[0] == refusals[1]
    r = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token_a))
    assert r.status_code == 201, r.text
    client.post(f"/submissions/{r.json()['id']}/cancel", headers=auth(token_a))


def test_registry_digests_only_from_the_allowed_list_and_no_reachability_oracle(client, make_user):
    """127.0.0.1:<open port> and 127.0.0.1:<closed port> get the same refusal, and nothing
    connects to the open one (the API never asks the engine)."""
    token, *_ = make_user()
    canary = Canary(free_port())
    closed = free_port()
    try:
        answers = []
        for port in (canary.port, closed):
            r = client.post("/submissions", json={"image": f"127.0.0.1:{port}/x@{DIGEST}"}, headers=auth(token))
            assert r.status_code == 422, r.text
            d = r.json()["detail"]
            assert d["error"] == "registry_not_allowed" and "registry.example.org" in d["message"]
            answers.append(d["message"].replace(str(port), "PORT"))
        r = client.post("/submissions", json={"image": f"docker.io/library/python@{DIGEST}"}, headers=auth(token))
        assert r.status_code == 422 and "docker.io is not a registry" in r.json()["detail"]["message"]
        assert answers[0] == answers[1]
        assert canary.connections == []
    finally:
        canary.close()


def test_submit_status_cancel(client, make_user, env):
    _, recorder, _ = env
    token, _, team, _ = make_user()
    own(env, team)
    r = client.post("/submissions", json={"image": IMAGE_ID, "note": "n"}, headers=auth(token))
    assert r.status_code == 201
    sid = r.json()["id"]
    assert ("validate", sid) in recorder.sent
    st = client.get(f"/submissions/{sid}", headers=auth(token)).json()
    assert st["state"] == "queued" and st["team"] == team and st["image_digest"] == IMAGE_ID
    assert isinstance(st["queue_position"], int)
    assert st["progress"] == {"episodes_done": 0, "episodes_total": 0, "shards_done": 0, "shards_total": 0}
    assert [e["message"] for e in st["events"]] == ["submitted"]
    assert client.get(f"/submissions/{sid}/logs", headers=auth(token)).text.startswith("(no output")
    other, *_ = make_user()
    assert client.get(f"/submissions/{sid}", headers=auth(other)).status_code == 404
    r = client.post(f"/submissions/{sid}/cancel", headers=auth(token))
    assert r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["queue_position"] is None
    assert "cancelled by" in r.json()["message"]
    r = client.post(f"/submissions/{sid}/cancel", headers=auth(token))
    assert r.status_code == 409 and "already cancelled" in r.json()["detail"]["message"]


def test_team_limits_concurrent_and_per_day(client, make_user, env):
    token, _, team, _ = make_user(per_day=2, concurrent=1)
    own(env, team)
    first = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token)).json()["id"]
    r = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token))
    assert r.status_code == 429 and r.json()["detail"]["error"] == "too_many_active"
    assert first in r.json()["detail"]["message"] and "liberopro cancel" in r.json()["detail"]["message"]
    client.post(f"/submissions/{first}/cancel", headers=auth(token))
    second = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token))
    assert second.status_code == 201
    client.post(f"/submissions/{second.json()['id']}/cancel", headers=auth(token))
    r = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token))
    assert r.status_code == 429 and r.json()["detail"]["error"] == "daily_limit"
    assert "next one is possible at" in r.json()["detail"]["message"]


def test_team_limit_of_hidden_runs_per_week(client, make_user, env):
    """Submissions that ran the hidden stage in the last 7 days, plus those that may still run it
    (waiting, validating), count against ``hidden_runs_per_week`` (the cap on what a policy can
    signal through what its submitter reads, docs/platform.md); one that failed validation does not."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, Team

    token, _, team, _ = make_user(per_day=10, concurrent=5)
    own(env, team)
    app = env[0]
    with transaction(app.state.sessions) as s:
        s.query(Team).filter(Team.name == team).one().hidden_runs_per_week = 2
    post = lambda: client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token))  # noqa: E731
    first, second = post().json()["id"], post().json()["id"]
    r = post()
    assert r.status_code == 429 and r.json()["detail"]["error"] == "hidden_run_limit", r.text
    assert "limit is 2 per week" in r.json()["detail"]["message"] and "once a waiting submission ends" in r.text
    with transaction(app.state.sessions) as s:  # the first ran the hidden stage; the second failed validation
        a, b = s.get(Submission, first), s.get(Submission, second)
        a.state, a.manifest_sha256 = "published", "0" * 64
        b.state, b.failure_stage = "failed", "validation"
    third = post()
    assert third.status_code == 201, third.text
    r = post()
    assert r.status_code == 429 and "next one is possible at" in r.json()["detail"]["message"], r.text
    client.post(f"/submissions/{third.json()['id']}/cancel", headers=auth(token))


def test_upload_must_be_a_tar(client, make_user):
    token, *_ = make_user()
    r = client.post("/submissions/upload", files={"file": ("x.tar", b"not a tar" * 100)}, headers=auth(token))
    assert r.status_code == 422 and "docker save" in r.json()["detail"]["message"]


def test_admin_endpoints_need_an_admin(client, make_user, env):
    token, *_ = make_user()
    assert client.get("/admin/stuck", headers=auth(token)).status_code == 403
    admin, *_ = make_user(admin=True)
    assert client.get("/admin/stuck", headers=auth(admin)).status_code == 200
    r = client.post("/admin/teams", json={"name": "newteam-" + secrets.token_hex(2)}, headers=auth(admin))
    assert r.status_code == 201
    team = r.json()["name"]
    r = client.post("/admin/users", json={"name": "bob-" + secrets.token_hex(2), "team": team}, headers=auth(admin))
    assert r.status_code == 201
    r = client.post(f"/admin/users/{r.json()['name']}/tokens", json={"days": 1}, headers=auth(admin))
    assert r.status_code == 201 and client.get("/me", headers=auth(r.json()["token"])).json()["team"] == team
    assert client.post("/admin/submissions/nope/hide", json={"hidden": True}, headers=auth(admin)).status_code == 404


def test_admin_hides_a_published_result(client, make_user, env):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Result, Submission

    token, _, team, _ = make_user()
    own(env, team)
    admin, *_ = make_user(admin=True)
    sid = client.post("/submissions", json={"image": IMAGE_ID}, headers=auth(token)).json()["id"]
    with transaction(env[0].state.sessions) as s:
        sub = s.get(Submission, sid)
        sub.state = "published"
        s.add(
            Result(
                submission_id=sid,
                team_id=sub.team_id,
                team_name=sub.team.name,
                policy_name="p",
                image_digest=IMAGE_ID,
                spec_version="1.0",
                evaluator_version="0.1.0",
                stack={},
                manifest_sha256="0" * 64,
                summary={"cases": []},
            )
        )
    r = client.post(f"/admin/submissions/{sid}/hide", json={"hidden": True}, headers=auth(admin))
    assert r.status_code == 200 and r.json() == {"id": sid, "hidden": True}
    with env[0].state.sessions() as s:
        from sqlalchemy import select

        assert s.scalar(select(Result.hidden).where(Result.submission_id == sid)) is True
    events = client.get(f"/submissions/{sid}", headers=auth(token)).json()["events"]
    assert any("hidden by" in e["message"] for e in events)
    r = client.post(f"/admin/submissions/{sid}/requeue", headers=auth(admin))
    assert r.status_code == 409 and "published" in r.json()["detail"]["message"]
