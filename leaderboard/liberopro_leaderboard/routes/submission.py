"""One submission: the page ``/leaderboard/submissions/{id}`` and its API
``/api/leaderboard/submissions/{id}``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from liberopro.report.charts import category_chart, shift_chart
from liberopro.schema.public import shift_sort_key
from liberopro_platform.api.deps import SessionDep

from liberopro_leaderboard.deps import Site, not_found, submission_not_found
from liberopro_leaderboard.ranking import rank_table
from liberopro_leaderboard.trial import ListedResult


def pages(site: Site) -> APIRouter:
    """``/leaderboard/submissions/{submission_id}``."""
    router = APIRouter()

    @router.get("/leaderboard/submissions/{submission_id}", response_class=HTMLResponse, include_in_schema=False)
    def submission_page(request: Request, session: SessionDep, submission_id: str) -> HTMLResponse:
        results = site.store.visible(session)
        result = next((r for r in results if r.meta.submission_id == submission_id), None)
        if result is None:
            return site.error_page(request, 404, "Submission not found", not_found(submission_id))
        table = rank_table(results)
        row = next(r for r in table.rows if r.submission_id == submission_id)
        singles = sorted(result.single_shift_cases(), key=lambda c: shift_sort_key(c.shift_ids[0]))
        others = [r for r in table.rows if r.submission_id != submission_id]
        return site.render(
            request,
            "submission.html",
            {
                "r": result,
                "row": row,
                "total": sum(1 for r in table.rows if not r.trial),
                "nominal": result.standard_case("nominal"),
                "singles": singles,
                "others": others,
                "multi": [c for c in result.cases if c.standard and len(c.shift_ids) > 1],
                "diagnostic_rows": [c for c in result.cases if not c.standard],
                "categories_chart": category_chart(result.metrics),
                "shifts_chart": shift_chart(result.cases, result.metrics["nominal"]),
            },
        )

    return router


def api(site: Site) -> APIRouter:
    """``/api/leaderboard/submissions/{submission_id}``."""
    router = APIRouter()

    @router.get(
        "/api/leaderboard/submissions/{submission_id}",
        response_model=ListedResult,
        tags=["leaderboard"],
        summary="One submission (the numbers its page shows)",
        responses={404: {"description": "Unknown, unpublished or hidden submission."}},
    )
    def api_submission(session: SessionDep, submission_id: str) -> ListedResult:
        """Aggregate success rates (per column, per case) with intervals and episode counts, the
        provenance of the result, and whether it is a trial run (``trial``, ``trial_reasons``).
        Nothing per instance or per episode."""
        result = site.store.get(session, submission_id)
        if result is None:
            raise submission_not_found(submission_id)
        return result

    return router
