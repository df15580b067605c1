"""LIBERO-Pro2.0 public leaderboard: pages and API (issue 5).

Modules: :mod:`.public` (what of a result is public, as typed models), :mod:`.ranking` (sorting
and the tie rule), :mod:`.comparison`, :mod:`.store` (reading published results, cached),
:mod:`.charts` (matplotlib SVG), :mod:`.catalog` (the methodology's data, from the evaluator's light catalog),
:mod:`.palette` (colours and contrast), :mod:`.routes` (the FastAPI router, one module per page family; :mod:`.deps` what they share, :mod:`.templating` the Jinja2 setup), :mod:`.app` (a
standalone app) and ``python -m liberopro_leaderboard serve``.

The platform mounts the router: ``app.include_router(make_router())``.

Importing the package loads nothing else: :func:`make_router` imports the routes (FastAPI, the
platform's database) when first used, so ``liberopro report`` draws its charts with
:mod:`.charts` and :mod:`.public` without them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_router"]


def __getattr__(name: str) -> Any:  # PEP 562: the router on first use
    if name == "make_router":
        from liberopro_leaderboard.routes import make_router

        return make_router
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
