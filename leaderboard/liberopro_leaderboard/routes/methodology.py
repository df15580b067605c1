"""The methodology: the page ``/leaderboard/methodology`` (the catalog, the split, the metrics,
the versions) and its API ``/api/leaderboard/methodology``."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from liberopro.schema.public import KINDS
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.catalog import Catalog, build_catalog
from liberopro_leaderboard.deps import Site


def pages(site: Site) -> APIRouter:
    """``/leaderboard/methodology``."""
    router = APIRouter()

    @router.get("/leaderboard/methodology", response_class=HTMLResponse, include_in_schema=False)
    def methodology_page(request: Request, session: SessionDep) -> HTMLResponse:
        catalog = build_catalog()
        results = site.store.visible(session)
        counts = {
            (k, c): sum(1 for s in catalog.shifts if s.kind == k and s.category == c)
            for k in KINDS
            for c in catalog.categories
        }
        return site.render(
            request,
            "methodology.html",
            {
                "c": catalog,
                "counts": counts,
                "static": [s for s in catalog.shifts if s.kind == "static"],
                "runtime": [s for s in catalog.shifts if s.kind == "runtime"],
                "seen_versions": sorted({(r.meta.evaluator_version, r.meta.spec_version) for r in results}),
                "seen_stacks": sorted({json.dumps(r.meta.stack, sort_keys=True) for r in results}),
                "json": json,
            },
        )

    return router


def api() -> APIRouter:
    """``/api/leaderboard/methodology``."""
    router = APIRouter()

    @router.get(
        "/api/leaderboard/methodology",
        response_model=Catalog,
        tags=["leaderboard"],
        summary="The shift catalog, the split and the versions (the methodology page's data)",
    )
    def api_methodology() -> Catalog:
        """Generated from the evaluator's light catalog (:mod:`liberopro.catalog`)."""
        return build_catalog()

    return router
