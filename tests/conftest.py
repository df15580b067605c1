"""Shared fixtures: policy servers served in-process on real sockets, and LIBERO scenes shared
across a test session (building one costs ~8 s on our CPU machines)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")


class ServerThread:
    """A real uvicorn server for an ASGI app on 127.0.0.1, in a daemon thread."""

    def __init__(self, app) -> None:
        import uvicorn
        from liberopro.episode.policy_process import free_port

        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error", access_log=False)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        end = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > end:
                raise RuntimeError("test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def serve_app():
    """``serve_app(app)`` -> base URL of the app served for the rest of the test."""
    servers = []

    def start(app) -> str:
        s = ServerThread(app).__enter__()
        servers.append(s)
        return s.url

    yield start
    for s in servers:
        s.__exit__()


@pytest.fixture(scope="session")
def scenes():
    """Session-wide LIBERO scene cache for :class:`liberopro.episode.runner.EpisodeRunner`."""
    cache: dict = {}
    yield cache
    for scene in cache.values():
        scene.close()


@pytest.fixture
def python() -> str:
    return sys.executable


# ---------------------------------------------------------------- test tiers
#: Fixtures that put a test in a tier: whoever uses one (directly or through another fixture)
#: needs that component. Markers are registered in pyproject.toml; the fast tier is
#: ``pytest -m "not sim and not services and not docker and not browser and not lerobot and not vlaeval"`` (README, "Development").
TIER_FIXTURES = {
    "browser": {"browser"},
    "docker": {"docker_client", "platform_images", "hostile_images", "worker"},
    "services": {"pg_url", "migrated_pg", "redis_url", "platform_env", "platform_settings", "seeded_db"},
    "sim": {"scenes"},
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tiers its fixtures imply (on top of explicit ``sim``/``docker``
    markers, which modules that step the simulator or drive the engine set themselves)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for tier, fixtures in TIER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(tier)
