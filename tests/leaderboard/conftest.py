"""Fixtures of the leaderboard tests: a real PostgreSQL database (created, migrated with the
platform's Alembic history, seeded, and dropped here), the platform's API app with the
leaderboard mounted, served by uvicorn on a real socket, and a real headless Chromium driven by
Playwright.

Chromium is the SYSTEM one (``apt-get install -y chromium``); the tests FAIL, never skip, when
it is missing. ``LIBEROPRO_CHROMIUM`` overrides its path. Screenshots go to
``build/screenshots/leaderboard/`` (``LIBEROPRO_SCREENSHOTS`` overrides).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get("LIBEROPRO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(os.environ.get("LIBEROPRO_SCREENSHOTS", REPO / "build" / "screenshots" / "leaderboard"))

#: Bootstrap replicates for the seeded summaries (the evaluator uses 1000; 100 keeps the seed under
#: a minute on a 2-core machine and changes nothing the site does with the numbers).
SEED_REPLICATES = 100


class NoEnqueue:
    """The platform app's queue, unused by the leaderboard."""

    def validate(self, *a, **k) -> None: ...
    def run_shard(self, *a, **k) -> None: ...
    def aggregate(self, *a, **k) -> None: ...


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """An ASGI app under uvicorn on 127.0.0.1 in a daemon thread."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.thread.start()
        end = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > end:
                raise RuntimeError("leaderboard test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


# ---------------------------------------------------------------- the database
def _seed_key() -> str:
    """Cache key of the seeded summaries: the seed's code, the evaluator's summary code and the catalog."""
    from liberopro.catalog import SPECS

    h = hashlib.sha256()
    for p in (
        Path(__file__).with_name("seed.py"),
        REPO / "evaluator/liberopro/runs/summary.py",
        REPO / "evaluator/liberopro/metrics.py",
    ):
        h.update(p.read_bytes())
    h.update(json.dumps([(c.id, c.name, c.category, c.kind) for c in SPECS.values()]).encode())
    h.update(str(SEED_REPLICATES).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def seeded_db(request) -> dict:
    """A fresh PostgreSQL database with the platform's tables and the seeded results; dropped at the end.

    The summaries are computed by ``liberopro.runs.summary.summarize`` (cached in pytest's cache under a
    key of the code that makes them, so a rerun skips the bootstrap)."""
    import liberopro.metrics
    import liberopro.runs.summary
    import psycopg
    from liberopro.schema.results import Summary
    from liberopro_platform.db import upgrade

    from tests.leaderboard import seed

    name = f"lp_leaderboard_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_ADMIN_URL} ({exc}); start it or set LIBEROPRO_TEST_PG")
    admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    try:
        upgrade(url)
        key = f"liberopro/leaderboard-seed/{_seed_key()}"
        cached = request.config.cache.get(key, None)
        original = liberopro.runs.summary.bootstrap_mean_of_rates
        real_summarize = liberopro.runs.summary.summarize
        summaries: dict[str, dict] = dict(cached or {})

        def summarize(records, header):
            policy = header.policy.metadata["name"]
            if policy not in summaries:
                summaries[policy] = real_summarize(records, {}).to_json()
            return Summary.load({**summaries[policy], **header.to_json()})

        liberopro.runs.summary.bootstrap_mean_of_rates = functools.partial(original, replicates=SEED_REPLICATES)
        seed.summarize = summarize
        try:
            ids = seed.seed_database(url)
        finally:
            liberopro.runs.summary.bootstrap_mean_of_rates = original
            seed.summarize = real_summarize
        request.config.cache.set(key, summaries)
        yield {"url": url, "ids": ids}
    finally:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


@pytest.fixture(scope="session")
def ids(seeded_db) -> dict[str, str]:
    """Policy name -> submission id of the seeded submissions."""
    return seeded_db["ids"]


@pytest.fixture(scope="session")
def platform_app(seeded_db, tmp_path_factory):
    """The platform's API app (with the leaderboard mounted), on the seeded database."""
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings

    settings = Settings(
        database_url=seeded_db["url"],
        data_dir=tmp_path_factory.mktemp("platform-data"),
        broker_url="redis://127.0.0.1:6379/12",
    )
    return create_app(settings, enqueue=NoEnqueue())


@pytest.fixture(scope="session")
def server(platform_app):
    """The platform app on a real socket: base URL."""
    with Server(platform_app) as s:
        yield s.url


# ---------------------------------------------------------------- the browser
def chromium_path() -> str:
    """The system Chromium; FAILS the test (never skips) when it is not installed."""
    override = os.environ.get("LIBEROPRO_CHROMIUM")
    for candidate in ([override] if override else []) + list(CHROMIUM_CANDIDATES):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    pytest.fail(
        "Chromium is required for the leaderboard's browser tests and was not found at "
        f"{', '.join(CHROMIUM_CANDIDATES)}: run `apt-get install -y chromium` (scripts/setup-system.sh "
        "--with-test-deps does), or set LIBEROPRO_CHROMIUM to its path"
    )


@pytest.fixture(scope="package")
def browser():
    """A real headless Chromium (Playwright driving the system browser), for this package's tests.

    Package-scoped, not session-scoped: Playwright's sync API keeps an asyncio loop marked as
    running in the main thread while it is open, and a later test that runs its own loop there
    (``asyncio.run``) would fail."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"the playwright Python package is required ({exc}): uv sync (dev group)")
    path = chromium_path()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageProbe:
    """A browser page plus what went wrong on it: console errors, page errors, failed requests."""

    def __init__(self, page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

    def goto(self, url: str, expect_status: int = 200):
        response = self.page.goto(url, wait_until="networkidle")
        assert response is not None and response.status == expect_status, (url, response and response.status)
        return response

    def assert_clean(self, allow: tuple[str, ...] = ()) -> None:
        errors = [e for e in self.errors if not any(a in e for a in allow)]
        assert not errors, "browser reported errors:\n" + "\n".join(errors)

    def screenshot(self, name: str, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


@pytest.fixture
def probe(browser):
    """A fresh page (1440 x 900) whose console is watched."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    yield PageProbe(page)
    context.close()
