"""LIBERO-Pro2.0 public leaderboard: pages and API (issue 5).

Modules: :mod:`.public` (what of a result is public, as typed models), :mod:`.ranking` (sorting
and the tie rule), :mod:`.comparison`, :mod:`.store` (reading published results, cached),
:mod:`.charts` (matplotlib SVG), :mod:`.catalog` (the methodology's data, from the evaluator's light catalog),
:mod:`.palette` (colours and contrast), :mod:`.routes` (the FastAPI router), :mod:`.app` (a
standalone app) and ``python -m liberopro_leaderboard serve``.

The platform mounts the router: ``app.include_router(make_router())``.
"""

from liberopro_leaderboard.routes import make_router

__all__ = ["make_router"]
