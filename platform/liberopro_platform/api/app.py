"""The FastAPI application: ``uvicorn liberopro_platform.api.app:app`` (or
``python -m liberopro_platform api``).

The public site (the leaderboard's pages and ``/api/leaderboard``) is mounted from the
``liberopro_platform.site`` entry point group: the leaderboard package registers its router there
(``leaderboard/pyproject.toml``), so the platform serves it without importing it (the leaderboard depends on
the platform's models, never the other way; ``lint-imports`` checks it)."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from pathlib import Path

from fastapi import APIRouter, FastAPI

from liberopro_platform import __version__
from liberopro_platform.api.limits import UPLOAD_FRAMING_BYTES, BodyLimitMiddleware
from liberopro_platform.api.routes import admin, images, submissions, tokens
from liberopro_platform.config import Settings, get_settings
from liberopro_platform.db import make_engine, make_sessionmaker
from liberopro_platform.pipeline import Enqueue, Pipeline

log = logging.getLogger(__name__)

#: Entry point group of the routers the API serves beside its own (name -> ``() -> APIRouter``).
SITE_ENTRY_POINTS = "liberopro_platform.site"


def site_routers() -> list[APIRouter]:
    """The routers registered in :data:`SITE_ENTRY_POINTS`, in name order (the leaderboard's:
    ``liberopro_leaderboard:make_router``). An entry point that fails to load raises: a platform
    that silently served no leaderboard would look healthy."""
    found = sorted(entry_points(group=SITE_ENTRY_POINTS), key=lambda ep: ep.name)
    if not found:
        log.warning("no %s entry point is installed: the API serves no public site", SITE_ENTRY_POINTS)
    return [ep.load()() for ep in found]


def create_app(settings: Settings | None = None, enqueue: Enqueue | None = None) -> FastAPI:
    """The API for ``settings`` (default: from the environment); ``enqueue`` defaults to Celery
    on ``settings.broker_url``."""
    settings = settings or get_settings()
    if enqueue is None:
        from liberopro_platform.celery_app import CeleryEnqueue, make_celery

        enqueue = CeleryEnqueue(make_celery(settings), settings.queue)
    sessions = make_sessionmaker(make_engine(settings.database_url))
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    app = FastAPI(
        title="LIBERO-Pro2.0 submission platform",
        version=__version__,
        description="Submit a policy image; the platform validates it, runs it in a sandbox against the "
        "hidden LIBERO-Pro2.0 manifest and publishes the result. Authenticate with "
        "'Authorization: Bearer <token>'; a 401 says why a token was refused.",
    )
    app.state.settings = settings
    app.state.sessions = sessions
    app.state.enqueue = enqueue
    app.state.pipeline = Pipeline(settings, sessions, enqueue, worker="api")

    @app.get("/health", tags=["health"], summary="Liveness")
    def health() -> dict:
        return {"ok": True, "version": __version__, "backend": settings.backend}

    app.include_router(submissions.router)
    app.include_router(images.router)
    app.include_router(tokens.router)
    app.include_router(admin.router)
    for router in site_routers():  # public pages and /api/leaderboard (docs/leaderboard.md)
        app.include_router(router)

    def body_limit(method: str, path: str) -> tuple[int, str]:
        if method == "POST" and path.rstrip("/") == "/submissions/upload":
            return settings.max_upload_bytes + UPLOAD_FRAMING_BYTES, "an uploaded archive (make the image smaller)"
        return settings.max_request_bytes, f"{method} {path[:100]}"

    app.add_middleware(BodyLimitMiddleware, limit_for=body_limit)
    return app


def __getattr__(name: str):
    # ``uvicorn liberopro_platform.api.app:app`` builds the app on first access only.
    if name == "app":
        return create_app()
    raise AttributeError(name)
