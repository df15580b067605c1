"""``liberopro report``: the study's tables and charts from run directories."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.markup import escape

from liberopro.cli.common import _fail, console, out


def _skipped(line: str) -> None:
    """A run left out of the report, on stderr."""
    console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True, highlight=False)


def report_cmd(
    run_dirs: list[Path] = typer.Argument(
        ...,
        help="Run directories (what `evaluate --out DIR` wrote), or "
        "directories holding them; several policies side by side.",
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Output directory (default reports/<timestamp>)."),
    title: str = typer.Option("LIBERO-Pro2.0 report", help="Title of the report."),
    charts: bool = typer.Option(True, help="Draw the charts (--no-charts: tables only, in a fraction of the time)."),
) -> None:
    """The study's tables from run directories: report.md and a self-contained report.html (inline
    SVG charts): landscape, per-shift rates with paired drops, paired comparisons between policies,
    live vs frozen, replan-steps sweep, recovery gains, compositions. A run that cannot be read is
    left out, named with its reason (stderr and the report); exit code 2 only when none can be."""
    from liberopro.report import ReportError, write_report

    target = out_dir or Path("reports") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        paths = write_report(run_dirs, target, title, charts, on_skip=_skipped)
    except ReportError as exc:
        _fail(str(exc))
    charts_at = f" (charts also in {paths['figures']})" if paths["figures"] else ""
    out.print(f"wrote {paths['markdown']} and {paths['html']}{charts_at}")
