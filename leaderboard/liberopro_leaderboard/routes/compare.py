"""Two submissions side by side: the page ``/leaderboard/compare?a=<id>&b=<id>`` and its API
``/api/leaderboard/compare``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from liberopro.report.charts import compare_chart
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.comparison import CompareResponse, compare
from liberopro_leaderboard.deps import Site, not_found
from liberopro_leaderboard.ranking import DEFAULT_SORT


def pages(site: Site) -> APIRouter:
    """``/leaderboard/compare``."""
    router = APIRouter()

    @router.get("/leaderboard/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(request: Request, session: SessionDep, a: str | None = None, b: str | None = None) -> HTMLResponse:
        table, by_id = site.table(session, DEFAULT_SORT, None)
        ctx: dict[str, Any] = {"rows": table.rows, "a": a, "b": b, "cmp": None}
        for sid in (a, b):
            if sid and sid not in by_id:
                return site.error_page(request, 404, "Submission not found", not_found(sid))
        if a and b:
            ctx["cmp"] = compare(by_id[a], by_id[b])
            ctx["trials"] = [by_id[sid] for sid in (a, b) if by_id[sid].trial]
            ctx["chart"] = compare_chart(
                by_id[a].meta.policy_name, by_id[a].metrics, by_id[b].meta.policy_name, by_id[b].metrics
            )
            ctx["chart_url"] = f"/leaderboard/charts/compare/{a}/{b}.svg"
        return site.render(request, "compare.html", ctx)

    return router


def api(site: Site) -> APIRouter:
    """``/api/leaderboard/compare``."""
    router = APIRouter()

    @router.get(
        "/api/leaderboard/compare",
        response_model=CompareResponse,
        tags=["leaderboard"],
        summary="Two submissions side by side",
        responses={404: {"description": "Unknown, unpublished or hidden submission."}},
    )
    def api_compare(
        session: SessionDep,
        a: Annotated[str, Query(description="First submission id.")],
        b: Annotated[str, Query(description="Second submission id.")],
    ) -> CompareResponse:
        """Every column and case of ``a`` and ``b``, with a - b, its unpaired 95% interval from the two
        published rates and counts, and whether the two intervals separate. Never paired (``note``)."""
        ra, rb = site.pair(session, a, b)
        return compare(ra, rb)

    return router
