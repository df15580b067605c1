"""The leaderboard's routes: HTML pages, SVG charts and the JSON/CSV API, as one FastAPI router,
one module per page family (each with its page and its API):

    :mod:`.board`        ``/leaderboard`` (``?sort=<column>&order=desc|asc``), ``/api/leaderboard``,
                         ``/api/leaderboard.csv`` (and ``/``, a redirect)
    :mod:`.submission`   ``/leaderboard/submissions/{id}``, ``/api/leaderboard/submissions/{id}``
    :mod:`.compare`      ``/leaderboard/compare?a=<id>&b=<id>``, ``/api/leaderboard/compare``
    :mod:`.methodology`  ``/leaderboard/methodology`` (the catalog, the split, the metrics, the
                         versions), ``/api/leaderboard/methodology``
    :mod:`.charts`       ``/leaderboard/charts/...svg``

What they share (the result store, the chart cache, the templates) is a
:class:`~liberopro_leaderboard.deps.Site`; the templates and their filters are
:mod:`liberopro_leaderboard.templating`. The API routes are in the OpenAPI, tag ``leaderboard``.

Mount with ``app.include_router(make_router())`` in an app whose ``state.sessions`` is a
SQLAlchemy sessionmaker on the platform's database (the platform's app is one). Only results
with ``hidden`` false are ever read; an unknown or hidden submission answers 404, the same for both.
"""

from __future__ import annotations

from fastapi import APIRouter

from liberopro_leaderboard.deps import Site
from liberopro_leaderboard.routes import board, charts, compare, methodology, submission
from liberopro_leaderboard.settings import LeaderboardSettings
from liberopro_leaderboard.templating import static_files


class LeaderboardRouter(APIRouter):
    """An :class:`~fastapi.APIRouter` with the :class:`Site` its routes share (``site``: its caches)."""

    def __init__(self, site: Site) -> None:
        super().__init__()
        self.site = site


def make_router(settings: LeaderboardSettings | None = None) -> LeaderboardRouter:
    """The leaderboard's router (pages, charts, API). ``router.site`` holds its caches."""
    site = Site(settings or LeaderboardSettings())
    router = LeaderboardRouter(site)
    router.include_router(board.pages(site))
    router.include_router(submission.pages(site))
    router.include_router(compare.pages(site))
    router.include_router(methodology.pages(site))
    router.mount("/leaderboard/static", static_files(), name="leaderboard-static")
    router.include_router(charts.charts(site))
    router.include_router(board.api(site))
    router.include_router(submission.api(site))
    router.include_router(compare.api(site))
    router.include_router(methodology.api())
    return router
