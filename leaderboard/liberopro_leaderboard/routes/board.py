"""The ranking: ``/`` (a redirect), the page ``/leaderboard`` (``?sort=<column>&order=desc|asc``),
and its API ``/api/leaderboard`` (JSON) and ``/api/leaderboard.csv``."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from liberopro.schema.public import COLUMN_BY_KEY, COLUMNS
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.deps import OrderParam, Site, SortParam, version_token
from liberopro_leaderboard.ranking import (
    DEFAULT_SORT,
    TEXT_SORTS,
    LeaderboardResponse,
    SortError,
    default_order,
    sort_keys,
)
from liberopro_leaderboard.templating import column_title

#: The CSV's identity columns; then per column key: value, ci_low, ci_high, episodes.
CSV_IDENTITY = [
    "rank",
    "tied",
    "submission_id",
    "team",
    "policy_name",
    "published_at",
    "evaluator_version",
    "spec_version",
]


def sort_links(sort: str, order: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the URL a click goes to and the aria-sort value."""
    out = {}
    for key in sort_keys():
        if key == sort:
            nxt = "asc" if order == "desc" else "desc"
            aria = "descending" if order == "desc" else "ascending"
        else:
            nxt, aria = default_order(key), "none"
        out[key] = {"href": "/leaderboard?" + urlencode({"sort": key, "order": nxt}), "aria": aria}
    return out


def leaderboard_csv(table: LeaderboardResponse) -> str:
    """``table`` as CSV text: a header, then one line per row (rates as fractions, empty when
    missing; ``rank`` empty for a trial run), ending with ``unproved_instances``, ``trial``
    (true/false) and ``trial_reasons`` (joined by "; ")."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = list(CSV_IDENTITY)
    for c in COLUMNS:
        head += [c.key, f"{c.key}_ci_low", f"{c.key}_ci_high", f"{c.key}_episodes"]
    w.writerow([*head, "unproved_instances", "trial", "trial_reasons"])  # last: outside the columns
    for row in table.rows:
        line: list[Any] = [
            "" if row.rank is None else row.rank,
            str(row.tied).lower(),
            row.submission_id,
            row.team,
            row.policy_name,
            row.published_at.isoformat(),
            row.evaluator_version,
            row.spec_version,
        ]
        for c in COLUMNS:
            r = row.metrics[c.key]
            line += [
                "" if r.value is None else r.value,
                "" if r.ci95 is None else r.ci95[0],
                "" if r.ci95 is None else r.ci95[1],
                r.episodes,
            ]
        w.writerow([*line, row.unproved_instances, str(row.trial).lower(), "; ".join(row.trial_reasons)])
    return buf.getvalue()


def pages(site: Site) -> APIRouter:
    """``/`` and ``/leaderboard``."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/leaderboard", status_code=307)

    @router.get("/leaderboard", response_class=HTMLResponse, include_in_schema=False)
    def leaderboard_page(
        request: Request, session: SessionDep, sort: str = DEFAULT_SORT, order: str | None = None
    ) -> HTMLResponse:
        try:
            table, by_id = site.table(session, sort, order)
        except SortError as exc:
            return site.error_page(request, 400, "Unknown sort", str(exc))
        heatmap, heat_data, heat_key = site.heatmap(table, by_id)
        scatter, scatter_key = site.scatter(table)
        query = urlencode({"sort": table.sort, "order": table.order})
        return site.render(
            request,
            "leaderboard.html",
            {
                "table": table,
                "links": sort_links(table.sort, table.order),
                "text_sorts": TEXT_SORTS,
                "rank_by": COLUMN_BY_KEY[table.rank_by],
                "rank_label": column_title(COLUMN_BY_KEY[table.rank_by]),
                "heatmap": heatmap,
                "heatmap_url": f"/leaderboard/charts/heatmap.svg?{query}&v={version_token(heat_key)}",
                "heatmap_static": heat_data[0],
                "heatmap_runtime": heat_data[1],
                "heatmap_names": heat_data[2],
                "heatmap_rows": table.rows[: site.settings.heatmap_rows],
                "scatter": scatter,
                "scatter_url": f"/leaderboard/charts/static-vs-runtime.svg?v={version_token(scatter_key)}",
                "by_id": by_id,
            },
        )

    return router


def api(site: Site) -> APIRouter:
    """``/api/leaderboard`` and ``/api/leaderboard.csv``."""
    router = APIRouter()

    @router.get(
        "/api/leaderboard",
        response_model=LeaderboardResponse,
        tags=["leaderboard"],
        summary="The ranking (the numbers /leaderboard shows)",
        responses={422: {"description": "Unknown sort column or order."}},
    )
    def api_leaderboard(
        session: SessionDep, sort: SortParam = DEFAULT_SORT, order: OrderParam = None
    ) -> LeaderboardResponse:
        """Every visible submission with its rank (tie rule in ``tie_rule``), in the requested order.
        Rates are fractions in [0, 1]; every rate carries its 95% interval and episode count. Trial
        runs (``trial``, with ``trial_reasons``) come after every full result, with ``rank`` null."""
        try:
            return site.table(session, sort, order)[0]
        except SortError as exc:
            raise HTTPException(422, detail={"error": "bad_sort", "message": str(exc)}) from None

    @router.get(
        "/api/leaderboard.csv",
        tags=["leaderboard"],
        summary="The ranking as CSV",
        response_class=Response,
        responses={
            200: {
                "content": {"text/csv": {}},
                "description": "One row per submission: rank (empty for a trial run), tied, "
                "identity, then per column key: value, ci_low, ci_high, episodes (fractions); last "
                "unproved_instances, trial and trial_reasons.",
            },
            422: {"description": "Unknown sort column or order."},
        },
    )
    def api_leaderboard_csv(session: SessionDep, sort: SortParam = DEFAULT_SORT, order: OrderParam = None) -> Response:
        """The same rows and numbers as ``/api/leaderboard``, flattened."""
        try:
            table = site.table(session, sort, order)[0]
        except SortError as exc:
            raise HTTPException(422, detail={"error": "bad_sort", "message": str(exc)}) from None
        return Response(
            leaderboard_csv(table),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'inline; filename="liberopro-leaderboard.csv"'},
        )

    return router
