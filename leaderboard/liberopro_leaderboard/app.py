"""The leaderboard as an app of its own, on the platform's database (read-only use):
``python -m liberopro_leaderboard serve --database-url postgresql+psycopg://...``.

The platform's API app mounts the same router; this app is for serving the public site apart
from the submission API (another host, another scaling) and for tests.
"""

from __future__ import annotations

from fastapi import FastAPI
from liberopro_platform.db import make_engine, make_sessionmaker

from liberopro_leaderboard.routes import make_router
from liberopro_leaderboard.settings import LeaderboardSettings


def create_app(database_url: str, settings: LeaderboardSettings | None = None) -> FastAPI:
    """The leaderboard site and API on ``database_url``; ``app.state.leaderboard`` holds its caches."""
    app = FastAPI(
        title="LIBERO-Pro2.0 leaderboard",
        description="Published results of LIBERO-Pro2.0: the ranking, each submission, comparisons "
        "and the methodology. Rates are fractions in [0, 1] with 95% intervals and episode counts.",
    )
    app.state.sessions = make_sessionmaker(make_engine(database_url))
    router = make_router(settings)
    app.state.leaderboard = router.site
    app.include_router(router)
    return app
