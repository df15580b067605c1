"""The leaderboard's routes: HTML pages, SVG charts and the JSON/CSV API, as one FastAPI router.

Pages (server-rendered, usable without JavaScript):
    ``/leaderboard``                       the ranking (``?sort=<column>&order=desc|asc``)
    ``/leaderboard/submissions/{id}``      one submission
    ``/leaderboard/compare?a=<id>&b=<id>`` two submissions side by side
    ``/leaderboard/methodology``           the catalog, the split, the metrics, the versions
API (in the OpenAPI, tag ``leaderboard``):
    ``/api/leaderboard``, ``/api/leaderboard.csv``, ``/api/leaderboard/submissions/{id}``,
    ``/api/leaderboard/compare``, ``/api/leaderboard/methodology``

Mount with ``app.include_router(make_router())`` in an app whose ``state.sessions`` is a
SQLAlchemy sessionmaker on the platform's database (the platform's app is one). Only results
with ``hidden`` false are ever read; an unknown or hidden submission answers 404, the same for both.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from liberopro.report.charts import (
    Chart,
    ChartCache,
    category_chart,
    compare_chart,
    etag,
    heatmap_chart,
    shift_chart,
    static_runtime_chart,
)
from liberopro.report.palette import css_variables
from liberopro.schema.public import (
    CATEGORIES,
    COLUMN_BY_KEY,
    COLUMNS,
    KINDS,
    Column,
    PublicResult,
    Rate,
    shift_sort_key,
)
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.catalog import Catalog, build_catalog
from liberopro_leaderboard.comparison import CompareResponse, compare
from liberopro_leaderboard.ranking import (
    DEFAULT_SORT,
    TEXT_SORTS,
    TIE_RULE,
    LeaderboardResponse,
    SortError,
    default_order,
    rank_table,
    sort_keys,
)
from liberopro_leaderboard.settings import LeaderboardSettings
from liberopro_leaderboard.store import ResultStore

PACKAGE = Path(__file__).resolve().parent
CHART_CACHE_CONTROL = "public, max-age=300"
STATIC_CACHE_CONTROL = "public, max-age=3600"


class CachedStaticFiles(StaticFiles):
    """Starlette's :class:`~starlette.staticfiles.StaticFiles` (the files of the package's
    ``static/`` folder, content type from the file name: ``leaderboard.css`` is
    ``text/css; charset=utf-8``; ETag and Last-Modified, 304 on revalidation; 404 for anything
    else) with ``Cache-Control: public, max-age=3600`` on every answer."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = STATIC_CACHE_CONTROL
        return response


SortParam = Annotated[str, Query(description=f"Column to sort by: {', '.join(sort_keys())}.")]
OrderParam = Annotated[
    str | None, Query(description="desc or asc; default: best first for rates, A-Z for names, newest first for dates.")
]


def not_found(submission_id: str) -> str:
    return (
        f"No published submission {submission_id[:80]!r} on the leaderboard: the id is unknown, the submission "
        "has not been published yet, or its result is hidden."
    )


# ------------------------------------------------------------------------------ formatting
def fmt_pct(v: float | None, digits: int = 1) -> str:
    """The page's rendering of a rate: ``62.5%`` (``-`` when missing)."""
    return "–" if v is None else f"{100 * v:.{digits}f}%"


def fmt_ci(r: Rate | None) -> str:
    if r is None or r.ci95 is None:
        return ""
    return f"{100 * r.ci95[0]:.1f}–{100 * r.ci95[1]:.1f}"


def fmt_diff(v: float | None) -> str:
    """A difference in percentage points with its sign (a true minus sign)."""
    return "–" if v is None else f"{100 * v:+.1f}".replace("-", "\u2212")


def fmt_diff_ci(ci: tuple[float, float] | None) -> str:
    """An interval of a difference in points: ``[−12.5, +3.0]`` (empty when missing)."""
    return "" if ci is None else f"[{fmt_diff(ci[0])}, {fmt_diff(ci[1])}]"


def fmt_date(d) -> str:
    return d.strftime("%Y-%m-%d")


def fmt_param(v: Any) -> str:
    """One default parameter of the catalog: text as is, ranges and choices as JSON."""
    return v if isinstance(v, str) else json.dumps(v)


def column_title(c: Column) -> str:
    """``Overall``, ``static Robot``: a column's name outside its grouped header."""
    return c.label if c.group == "headline" else f"{c.group} {c.label}"


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(PACKAGE / "templates"))
    env = templates.env
    env.filters.update(pct=fmt_pct, ci=fmt_ci, diff=fmt_diff, diff_ci=fmt_diff_ci, date=fmt_date, param=fmt_param)
    env.filters.update(column_title=column_title)
    env.globals.update(
        css_variables=css_variables(), CATEGORIES=CATEGORIES, KINDS=KINDS, COLUMNS=COLUMNS, TIE_RULE=TIE_RULE
    )
    return templates


# ------------------------------------------------------------------------------ the site
class Site:
    """What the routes share: the result store, the chart cache and the templates."""

    def __init__(self, settings: LeaderboardSettings) -> None:
        self.settings = settings
        self.store = ResultStore(settings.result_cache_entries)
        self.charts = ChartCache(settings.chart_cache_entries)
        self.templates = make_templates()

    # charts: the page and the SVG route build the same Chart, so the alt text matches the drawing
    def heatmap(self, table: LeaderboardResponse, by_id: dict[str, PublicResult]) -> tuple[Chart, list, tuple]:
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
            rows.append((f"#{row.rank}{'=' if row.tied else ''} {row.policy_name} ({row.team})", rates))
        static_ids = sorted(ids["static"], key=shift_sort_key)
        runtime_ids = sorted(ids["runtime"], key=shift_sort_key)
        key = ("heatmap", tuple((r.submission_id, r.published_at, r.rank, r.tied) for r in shown))
        return heatmap_chart(rows, static_ids, runtime_ids, names), [static_ids, runtime_ids, names, rows], key

    def scatter(self, table: LeaderboardResponse) -> tuple[Chart, tuple]:
        points = [(row.policy_name, row.metrics["static_mean"], row.metrics["runtime_mean"]) for row in table.rows]
        key = ("static-vs-runtime", tuple((r.submission_id, r.published_at) for r in table.rows))
        return static_runtime_chart(points), key

    def table(self, session, sort: str, order: str | None) -> tuple[LeaderboardResponse, dict[str, PublicResult]]:
        results = self.store.visible(session)
        return rank_table(results, sort, order), {r.meta.submission_id: r for r in results}


def version_token(key: tuple) -> str:
    """A short token naming a chart's content, for its URL (browser caches)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:12]


def svg_response(request: Request, svg: bytes) -> Response:
    tag = etag(svg)
    headers = {"ETag": tag, "Cache-Control": CHART_CACHE_CONTROL}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(svg, media_type="image/svg+xml", headers=headers)


def make_router(settings: LeaderboardSettings | None = None) -> APIRouter:
    """The leaderboard's router (pages, charts, API). ``router.site`` holds its caches."""
    settings = settings or LeaderboardSettings()
    site = Site(settings)
    router = APIRouter()
    router.site = site  # type: ignore[attr-defined]
    render = site.templates.TemplateResponse

    def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return render(request, "error.html", {"title": title, "message": message, "status": status}, status_code=status)

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

    # ------------------------------------------------------------------ pages
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
            return error_page(request, 400, "Unknown sort", str(exc))
        heatmap, heat_data, heat_key = site.heatmap(table, by_id)
        scatter, scatter_key = site.scatter(table)
        query = urlencode({"sort": table.sort, "order": table.order})
        return render(
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

    @router.get("/leaderboard/submissions/{submission_id}", response_class=HTMLResponse, include_in_schema=False)
    def submission_page(request: Request, session: SessionDep, submission_id: str) -> HTMLResponse:
        results = site.store.visible(session)
        result = next((r for r in results if r.meta.submission_id == submission_id), None)
        if result is None:
            return error_page(request, 404, "Submission not found", not_found(submission_id))
        table = rank_table(results)
        row = next(r for r in table.rows if r.submission_id == submission_id)
        singles = sorted(result.single_shift_cases(), key=lambda c: shift_sort_key(c.shift_ids[0]))
        others = [r for r in table.rows if r.submission_id != submission_id]
        return render(
            request,
            "submission.html",
            {
                "r": result,
                "row": row,
                "total": len(table.rows),
                "nominal": result.standard_case("nominal"),
                "singles": singles,
                "others": others,
                "multi": [c for c in result.cases if c.standard and len(c.shift_ids) > 1],
                "diagnostic_rows": [c for c in result.cases if not c.standard],
                "categories_chart": category_chart(result.metrics),
                "shifts_chart": shift_chart(result.cases, result.metrics["nominal"]),
            },
        )

    @router.get("/leaderboard/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(request: Request, session: SessionDep, a: str | None = None, b: str | None = None) -> HTMLResponse:
        table, by_id = site.table(session, DEFAULT_SORT, None)
        ctx: dict[str, Any] = {"rows": table.rows, "a": a, "b": b, "cmp": None}
        for sid in (a, b):
            if sid and sid not in by_id:
                return error_page(request, 404, "Submission not found", not_found(sid))
        if a and b:
            ctx["cmp"] = compare(by_id[a], by_id[b])
            ctx["chart"] = compare_chart(
                by_id[a].meta.policy_name, by_id[a].metrics, by_id[b].meta.policy_name, by_id[b].metrics
            )
            ctx["chart_url"] = f"/leaderboard/charts/compare/{a}/{b}.svg"
        return render(request, "compare.html", ctx)

    @router.get("/leaderboard/methodology", response_class=HTMLResponse, include_in_schema=False)
    def methodology_page(request: Request, session: SessionDep) -> HTMLResponse:
        catalog = build_catalog()
        results = site.store.visible(session)
        counts = {
            (k, c): sum(1 for s in catalog.shifts if s.kind == k and s.category == c)
            for k in KINDS
            for c in catalog.categories
        }
        return render(
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

    router.mount("/leaderboard/static", CachedStaticFiles(directory=PACKAGE / "static"), name="leaderboard-static")

    # ------------------------------------------------------------------ charts (SVG)
    @router.get("/leaderboard/charts/submissions/{submission_id}/{chart}.svg", include_in_schema=False)
    def submission_chart(request: Request, session: SessionDep, submission_id: str, chart: str) -> Response:
        if chart not in ("categories", "shifts"):
            raise HTTPException(
                404, detail={"error": "not_found", "message": f"no chart {chart!r}; use categories or shifts"}
            )
        result = site.store.get(session, submission_id)
        if result is None:
            raise HTTPException(404, detail={"error": "submission_not_found", "message": not_found(submission_id)})
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
        ra, rb = site.store.get(session, a), site.store.get(session, b)
        for sid, r in ((a, ra), (b, rb)):
            if r is None:
                raise HTTPException(404, detail={"error": "submission_not_found", "message": not_found(sid)})
        key = ("compare", a, ra.meta.published_at, b, rb.meta.published_at)  # type: ignore[union-attr]
        return svg_response(
            request,
            site.charts.get(
                key, lambda: compare_chart(ra.meta.policy_name, ra.metrics, rb.meta.policy_name, rb.metrics)
            ),
        )  # type: ignore[union-attr]

    # ------------------------------------------------------------------ API
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
        Rates are fractions in [0, 1]; every rate carries its 95% interval and episode count."""
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
                "description": "One row per submission: rank, tied, "
                "identity, then per column key: value, ci_low, ci_high, episodes (fractions).",
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
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        head = [
            "rank",
            "tied",
            "submission_id",
            "team",
            "policy_name",
            "published_at",
            "evaluator_version",
            "spec_version",
        ]
        for c in COLUMNS:
            head += [c.key, f"{c.key}_ci_low", f"{c.key}_ci_high", f"{c.key}_episodes"]
        w.writerow(head)
        for row in table.rows:
            line: list[Any] = [
                row.rank,
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
            w.writerow(line)
        return Response(
            buf.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'inline; filename="liberopro-leaderboard.csv"'},
        )

    @router.get(
        "/api/leaderboard/submissions/{submission_id}",
        response_model=PublicResult,
        tags=["leaderboard"],
        summary="One submission (the numbers its page shows)",
        responses={404: {"description": "Unknown, unpublished or hidden submission."}},
    )
    def api_submission(session: SessionDep, submission_id: str) -> PublicResult:
        """Aggregate success rates (per column, per case) with intervals and episode counts, and the
        provenance of the result. Nothing per instance or per episode."""
        result = site.store.get(session, submission_id)
        if result is None:
            raise HTTPException(404, detail={"error": "submission_not_found", "message": not_found(submission_id)})
        return result

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
        ra, rb = site.store.get(session, a), site.store.get(session, b)
        for sid, r in ((a, ra), (b, rb)):
            if r is None:
                raise HTTPException(404, detail={"error": "submission_not_found", "message": not_found(sid)})
        return compare(ra, rb)  # type: ignore[arg-type]

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
