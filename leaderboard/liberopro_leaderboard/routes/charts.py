"""The pages' charts as SVG (ETag and ``Cache-Control``; 304 on revalidation):
``/leaderboard/charts/submissions/{id}/{categories|shifts}.svg``, ``static-vs-runtime.svg``,
``heatmap.svg`` (``?sort=&order=``) and ``compare/{a}/{b}.svg``. A page and its chart's route
draw the same :class:`~liberopro.report.charts.Chart` (:class:`~liberopro_leaderboard.deps.Site`)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from liberopro.report.charts import category_chart, compare_chart, shift_chart
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.deps import Site, submission_not_found, svg_response
from liberopro_leaderboard.ranking import DEFAULT_SORT, SortError


def charts(site: Site) -> APIRouter:
    """The SVG routes (none in the OpenAPI)."""
    router = APIRouter()

    @router.get("/leaderboard/charts/submissions/{submission_id}/{chart}.svg", include_in_schema=False)
    def submission_chart(request: Request, session: SessionDep, submission_id: str, chart: str) -> Response:
        if chart not in ("categories", "shifts"):
            raise HTTPException(
                404, detail={"error": "not_found", "message": f"no chart {chart!r}; use categories or shifts"}
            )
        result = site.store.get(session, submission_id)
        if result is None:
            raise submission_not_found(submission_id)
        draw = (
            (lambda: category_chart(result.metrics))
            if chart == "categories"
            else (lambda: shift_chart(result.cases, result.metrics["nominal"]))
        )
        key = (chart, result.meta.submission_id, result.meta.published_at)
        return svg_response(request, site.charts.get(key, draw))

    @router.get("/leaderboard/charts/static-vs-runtime.svg", include_in_schema=False)
    def scatter_chart(request: Request, session: SessionDep) -> Response:
        table, _ = site.table(session, DEFAULT_SORT, None)
        chart, key = site.scatter(table)
        return svg_response(request, site.charts.get(key, lambda: chart))

    @router.get("/leaderboard/charts/heatmap.svg", include_in_schema=False)
    def heatmap_svg(
        request: Request, session: SessionDep, sort: str = DEFAULT_SORT, order: str | None = None
    ) -> Response:
        try:
            table, by_id = site.table(session, sort, order)
        except SortError as exc:
            raise HTTPException(400, detail={"error": "bad_sort", "message": str(exc)}) from None
        chart, _, key = site.heatmap(table, by_id)
        return svg_response(request, site.charts.get(key, lambda: chart))

    @router.get("/leaderboard/charts/compare/{a}/{b}.svg", include_in_schema=False)
    def compare_svg(request: Request, session: SessionDep, a: str, b: str) -> Response:
        ra, rb = site.pair(session, a, b)
        key = ("compare", a, ra.meta.published_at, b, rb.meta.published_at)
        return svg_response(
            request,
            site.charts.get(
                key, lambda: compare_chart(ra.meta.policy_name, ra.metrics, rb.meta.policy_name, rb.metrics)
            ),
        )

    return router
