"""The site's presentation: the Jinja2 templates (``templates/``) with the filters that format
rates, intervals and dates, and the static files (``static/``) served with a cache header."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from liberopro.report.palette import css_variables
from liberopro.schema.public import CATEGORIES, COLUMNS, KINDS, Column, Rate

from liberopro_leaderboard.ranking import TIE_RULE
from liberopro_leaderboard.trial import TRIAL_RULE

PACKAGE = Path(__file__).resolve().parent
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


def static_files() -> CachedStaticFiles:
    """The package's ``static/`` folder, to mount at ``/leaderboard/static``."""
    return CachedStaticFiles(directory=PACKAGE / "static")


# ------------------------------------------------------------------------------ formatting
def fmt_pct(v: float | None, digits: int = 1) -> str:
    """The page's rendering of a rate: ``62.5%`` (``-`` when missing)."""
    return "–" if v is None else f"{100 * v:.{digits}f}%"


def fmt_ci(r: Rate | None) -> str:
    """A rate's 95% interval in percent: ``50.0–75.0`` (empty when missing)."""
    if r is None or r.ci95 is None:
        return ""
    return f"{100 * r.ci95[0]:.1f}–{100 * r.ci95[1]:.1f}"


def fmt_diff(v: float | None) -> str:
    """A difference in percentage points with its sign (a true minus sign)."""
    return "–" if v is None else f"{100 * v:+.1f}".replace("-", "\u2212")


def fmt_diff_ci(ci: tuple[float, float] | None) -> str:
    """An interval of a difference in points: ``[−12.5, +3.0]`` (empty when missing)."""
    return "" if ci is None else f"[{fmt_diff(ci[0])}, {fmt_diff(ci[1])}]"


def fmt_date(d: datetime) -> str:
    """A date as ``YYYY-MM-DD``."""
    return d.strftime("%Y-%m-%d")


def fmt_param(v: Any) -> str:
    """One default parameter of the catalog: text as is, ranges and choices as JSON."""
    return v if isinstance(v, str) else json.dumps(v)


def column_title(c: Column) -> str:
    """``Overall``, ``static Robot``: a column's name outside its grouped header."""
    return c.label if c.group == "headline" else f"{c.group} {c.label}"


def make_templates() -> Jinja2Templates:
    """The package's templates with the filters above (``pct``, ``ci``, ``diff``, ``diff_ci``,
    ``date``, ``param``, ``column_title``) and the globals every page reads (the palette's CSS
    variables, the categories, kinds and columns, the tie rule, the trial rule)."""
    templates = Jinja2Templates(directory=str(PACKAGE / "templates"))
    env = templates.env
    env.filters.update(pct=fmt_pct, ci=fmt_ci, diff=fmt_diff, diff_ci=fmt_diff_ci, date=fmt_date, param=fmt_param)
    env.filters.update(column_title=column_title)
    env.globals.update(
        css_variables=css_variables(),
        CATEGORIES=CATEGORIES,
        KINDS=KINDS,
        COLUMNS=COLUMNS,
        TIE_RULE=TIE_RULE,
        TRIAL_RULE=TRIAL_RULE,
    )
    return templates
