"""``python -m liberopro_leaderboard serve``: its options and its refusal without a database."""

from __future__ import annotations

import subprocess
import sys

from liberopro_leaderboard.__main__ import app
from typer.testing import CliRunner


def test_serve_without_a_database_url_exits_2_and_says_what_to_set(monkeypatch):
    monkeypatch.delenv("LIBEROPRO_DATABASE_URL", raising=False)
    r = CliRunner().invoke(app, ["serve", "--port", "8099"])
    assert r.exit_code == 2
    assert "serve needs --database-url or $LIBEROPRO_DATABASE_URL" in r.output


def test_serve_takes_the_url_from_the_environment(monkeypatch):
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port: calls.append((host, port)))
    monkeypatch.setenv("LIBEROPRO_DATABASE_URL", "sqlite://")
    r = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8099"])
    assert r.exit_code == 0, r.output
    assert calls == [("0.0.0.0", 8099)]


def test_the_module_lists_serve_and_its_options():
    proc = subprocess.run(
        [sys.executable, "-m", "liberopro_leaderboard", "serve", "-h"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert all(opt in proc.stdout for opt in ("--database-url", "--host", "--port"))
