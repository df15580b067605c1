"""``liberopro submit / status / cancel`` against the API on a real socket (PostgreSQL behind it;
the queue is a recorder)."""

from __future__ import annotations

import datetime as dt
import secrets

import pytest
from lp_helpers import ApiServer, free_port
from typer.testing import CliRunner

IMAGE_ID = "sha256:" + "cd" * 32


class Recorder:
    """The queue: records nothing; a submission whose note is ``fail-me`` is failed at validation
    half a second after it is queued (so ``submit --wait`` sees a final state)."""

    sessions = None

    def validate(self, submission_id, countdown=0):
        import threading

        def fail_it() -> None:
            from liberopro_platform.db import transaction
            from liberopro_platform.models import Submission
            from liberopro_platform.pipeline import fail

            with transaction(self.sessions) as s:
                sub = s.get(Submission, submission_id)
                if sub.note == "fail-me":
                    fail(s, sub, "validation", "the policy failed the conformance check", "answer /act")

        threading.Timer(0.5, fail_it).start()

    def run_shard(self, shard_id, countdown=0):
        pass

    def aggregate(self, submission_id, countdown=0):
        pass


@pytest.fixture(scope="module")
def server(migrated_pg, tmp_path_factory):
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings

    settings = Settings(database_url=migrated_pg, data_dir=tmp_path_factory.mktemp("cli-data"), max_concurrent=5)
    recorder = Recorder()
    app = create_app(settings, enqueue=recorder)
    recorder.sessions = app.state.sessions
    with ApiServer(app, free_port()) as s:
        yield s, app


@pytest.fixture
def token(server) -> tuple[str, str]:
    """A token of a user in a new team that uploaded IMAGE_ID before."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    with transaction(server[1].state.sessions) as s:
        team = Team(name=f"cli-{secrets.token_hex(3)}")
        s.add(team)
        s.flush()
        user = User(name=f"cli-{secrets.token_hex(3)}", team_id=team.id)
        s.add(user)
        s.flush()
        row, tok = issue_token(s, user, 1)
        team_id = team.id
    from liberopro_platform.ownership import grant_image

    grant_image(server[1].state.sessions, team_id, IMAGE_ID, "upload", None)
    return tok, row.id


def run(args: list[str], env: dict[str, str]):
    from liberopro.cli.main import app

    return CliRunner().invoke(app, args, env=env)


def test_submit_status_cancel_from_the_command_line(server, token, tmp_path):
    api, _ = server
    env = {"LIBEROPRO_API_URL": api.url, "LIBEROPRO_TOKEN": token[0], "LIBEROPRO_CONFIG": str(tmp_path / "none.toml")}
    r = run(["submit", IMAGE_ID], env)
    assert r.exit_code == 0, r.output
    assert "your team uploaded it before, so it is submitted by id (no upload" in r.output
    sid = r.output.split("submitted: ")[1].split()[0]
    r = run(["status", sid], env)
    assert r.exit_code == 0 and f"submission {sid}" in r.output and "queued" in r.output
    r = run(["status"], env)
    assert sid in r.output
    r = run(["cancel", sid], env)
    assert r.exit_code == 0 and "cancelled" in r.output
    r = run(["cancel", sid], env)
    assert r.exit_code == 2 and "already cancelled" in r.output


def test_submit_wait_exits_non_zero_unless_published(server, token, tmp_path):
    api, _ = server
    env = {"LIBEROPRO_API_URL": api.url, "LIBEROPRO_TOKEN": token[0], "LIBEROPRO_CONFIG": str(tmp_path / "none.toml")}
    r = run(["submit", IMAGE_ID, "--note", "fail-me", "--wait"], env)
    assert r.exit_code == 1, r.output
    assert "failed" in r.output and "conformance check" in r.output


def test_config_file_and_the_reason_for_a_refused_token(server, token, tmp_path):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import ApiToken, utcnow

    api, app = server
    conf = tmp_path / "platform.toml"
    conf.write_text(f'api_url = "{api.url}"\ntoken = "{token[0]}"\n')
    env = {"LIBEROPRO_CONFIG": str(conf)}
    r = run(["status"], env)
    assert r.exit_code == 0, r.output
    with transaction(app.state.sessions) as s:
        s.get(ApiToken, token[1]).expires_at = utcnow() - dt.timedelta(minutes=1)
    r = run(["status"], env)
    assert r.exit_code == 2
    assert "token_expired" in r.output and "expired on" in r.output and "None" not in r.output
    r = run(["submit", "team/policy:latest"], {**env, "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert r.exit_code == 2 and "team/policy:latest could not be read from your local Docker engine" in r.output
    r = run(["status"], {"LIBEROPRO_CONFIG": str(tmp_path / "missing.toml")})
    assert r.exit_code == 2 and "LIBEROPRO_API_URL" in r.output


def test_submit_explains_what_it_cannot_send(server, token, tmp_path):
    """An id the team did not upload, or a digest of a registry the platform does not pull from,
    is uploaded from the local engine; when the engine does not have it the CLI says so."""
    api, _ = server
    env = {
        "LIBEROPRO_API_URL": api.url,
        "LIBEROPRO_TOKEN": token[0],
        "LIBEROPRO_CONFIG": str(tmp_path / "none.toml"),
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
    }
    r = run(["submit", "sha256:" + "ee" * 32], env)
    assert r.exit_code == 2 and "not uploaded by your team, and it could not be read from your local" in r.output
    r = run(["submit", "ghcr.io/team/policy@sha256:" + "0" * 64], env)
    assert r.exit_code == 2 and "ghcr.io is not a registry the platform pulls from (allowed: none)" in r.output, (
        r.output
    )


def test_admin_bootstrap_on_the_sqlite_default(tmp_path):
    """`python -m liberopro_platform db-upgrade` and `create-user` on SQLite (the default
    database), then the printed token works against the API."""
    import os
    import subprocess
    import sys

    from fastapi.testclient import TestClient
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings

    url = f"sqlite:///{tmp_path}/platform.db"
    env = {**os.environ, "LIBEROPRO_DATABASE_URL": url, "LIBEROPRO_DATA_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "liberopro_platform"]
    up = subprocess.run([*cmd, "db-upgrade"], env=env, capture_output=True, text=True, check=False)
    assert up.returncode == 0, up.stderr
    made = subprocess.run(
        [*cmd, "create-user", "root", "--team", "ops", "--admin"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("lp_")
    with TestClient(create_app(Settings(database_url=url, data_dir=tmp_path), enqueue=Recorder())) as c:
        me = c.get("/me", headers={"Authorization": f"Bearer {token}"})
        assert me.json() == {"user": "root", "team": "ops", "is_admin": True}
        assert c.get("/admin/stuck", headers={"Authorization": f"Bearer {token}"}).json() == []


def test_platform_version_names_its_evaluator_and_contract():
    from importlib.metadata import version

    from liberopro_platform.admin_cli import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"liberopro-platform {version('liberopro-platform')} (evaluator liberopro ")
