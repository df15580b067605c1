"""What the leaderboard's routes share: the :class:`Site` (result store, chart cache, templates,
the charts a page and its SVG route both draw), the query parameters of the ranking, the 404
message, error pages and SVG answers with their cache headers."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from liberopro.report.charts import Chart, ChartCache, etag, heatmap_chart, static_runtime_chart
from liberopro.schema.public import shift_sort_key
from sqlalchemy.orm import Session

from liberopro_leaderboard.ranking import LeaderboardResponse, rank_table, sort_keys
from liberopro_leaderboard.settings import LeaderboardSettings
from liberopro_leaderboard.store import ResultStore
from liberopro_leaderboard.templating import make_templates
from liberopro_leaderboard.trial import ListedResult

CHART_CACHE_CONTROL = "public, max-age=300"

SortParam = Annotated[str, Query(description=f"Column to sort by: {', '.join(sort_keys())}.")]
OrderParam = Annotated[
    str | None, Query(description="desc or asc; default: best first for rates, A-Z for names, newest first for dates.")
]


def not_found(submission_id: str) -> str:
    """The message of a 404 for ``submission_id`` (unknown, unpublished and hidden read the same)."""
    return (
        f"No published submission {submission_id[:80]!r} on the leaderboard: the id is unknown, the submission "
        "has not been published yet, or its result is hidden."
    )


def submission_not_found(submission_id: str) -> HTTPException:
    """The API's 404 for ``submission_id`` (``error: submission_not_found``)."""
    return HTTPException(404, detail={"error": "submission_not_found", "message": not_found(submission_id)})


class Site:
    """What the routes share: the result store, the chart cache and the templates."""

    def __init__(self, settings: LeaderboardSettings) -> None:
        self.settings = settings
        self.store = ResultStore(settings.result_cache_entries)
        self.charts = ChartCache(settings.chart_cache_entries)
        self.templates = make_templates()

    def render(self, request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
        """The template ``name`` rendered with ``context`` as an HTML answer."""
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    def error_page(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        """The error page (``error.html``) answering ``status``."""
        return self.render(
            request, "error.html", {"title": title, "message": message, "status": status}, status_code=status
        )

    def pair(self, session: Session, a: str, b: str) -> tuple[ListedResult, ListedResult]:
        """The visible results ``a`` and ``b``; the API's 404 naming the first one missing."""
        ra, rb = self.store.get(session, a), self.store.get(session, b)
        if ra is None:
            raise submission_not_found(a)
        if rb is None:
            raise submission_not_found(b)
        return ra, rb

    # charts: the page and the SVG route build the same Chart, so the alt text matches the drawing
    def heatmap(self, table: LeaderboardResponse, by_id: dict[str, ListedResult]) -> tuple[Chart, list, tuple]:
        """The heatmap of the first ``settings.heatmap_rows`` rows of ``table``: the chart, the
        data the page's table shows ``[static_ids, runtime_ids, names, rows]`` and the cache key."""
        shown = table.rows[: self.settings.heatmap_rows]
        ids: dict[str, set[str]] = {"static": set(), "runtime": set()}
        names: dict[str, str] = {}
        rows = []
        for row in shown:
            result = by_id[row.submission_id]
            rates = {}
            for c in result.single_shift_cases():
                sid = c.shift_ids[0]
                rates[sid] = c.rate
                names[sid] = c.shift_names[0]
                if c.kind in ids:
                    ids[c.kind].add(sid)
            place = "trial" if row.rank is None else f"#{row.rank}{'=' if row.tied else ''}"
            rows.append((f"{place} {row.policy_name} ({row.team})", rates))
        static_ids = sorted(ids["static"], key=shift_sort_key)
        runtime_ids = sorted(ids["runtime"], key=shift_sort_key)
        key = ("heatmap", tuple((r.submission_id, r.published_at, r.rank, r.tied) for r in shown))
        return heatmap_chart(rows, static_ids, runtime_ids, names), [static_ids, runtime_ids, names, rows], key

    def scatter(self, table: LeaderboardResponse) -> tuple[Chart, tuple]:
        """Static against runtime mean of every full result of ``table`` (trial runs are not
        drawn: a point carries no badge): the chart and its cache key."""
        full = [row for row in table.rows if not row.trial]
        points = [(row.policy_name, row.metrics["static_mean"], row.metrics["runtime_mean"]) for row in full]
        key = ("static-vs-runtime", tuple((r.submission_id, r.published_at) for r in full))
        return static_runtime_chart(points), key

    def table(
        self, session: Session, sort: str, order: str | None
    ) -> tuple[LeaderboardResponse, dict[str, ListedResult]]:
        """The ranking of the visible results and those results by submission id.

        Raises :class:`~liberopro_leaderboard.ranking.SortError` for an unknown sort or order."""
        results = self.store.visible(session)
        return rank_table(results, sort, order), {r.meta.submission_id: r for r in results}


def version_token(key: tuple) -> str:
    """A short token naming a chart's content, for its URL (browser caches)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:12]


def svg_response(request: Request, svg: bytes) -> Response:
    """``svg`` with its ETag and ``Cache-Control``; 304 when the request's If-None-Match names it."""
    tag = etag(svg)
    headers = {"ETag": tag, "Cache-Control": CHART_CACHE_CONTROL}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(svg, media_type="image/svg+xml", headers=headers)
