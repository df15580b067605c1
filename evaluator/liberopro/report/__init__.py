"""``liberopro report``: the study's tables from run directories, as Markdown and as one
self-contained HTML page (``docs/evaluator.md``, "Reports").

:mod:`.runs` reads run directories (the one place that reads ``summary.json``'s keys) and groups
them per policy; :mod:`.build` makes the tables and charts; :mod:`.render` writes them. Pairing
between policies is :mod:`liberopro.runs.comparison`.
"""

from __future__ import annotations

from pathlib import Path

from liberopro.report.runs import ReportError, find_runs, group_policies, load_run

__all__ = ["ReportError", "write_report"]


def write_report(
    run_dirs: list[Path], out_dir: Path, title: str = "LIBERO-Pro2.0 report", charts: bool = True
) -> dict[str, Path | None]:
    """Read the run directories (each, or every run directory below it), group them per policy
    and write ``out_dir/report.md``, ``out_dir/report.html`` and ``out_dir/figures/*.svg``
    (tables only, no figures, when ``charts`` is False: drawing them is most of the time).

    Returns the written paths (``markdown``, ``html``, ``figures``: None without figures). Raises :class:`ReportError`
    for a directory that is not a run, an unreadable file, or two runs holding the same episode
    of one policy.
    """
    from liberopro.report.build import Figure, build_document
    from liberopro.report.render import write

    runs = [load_run(p) for p in find_runs(list(run_dirs))]
    doc = build_document(group_policies(runs), title)
    if not charts:
        for sec in doc.sections:
            sec.blocks = [b for b in sec.blocks if not isinstance(b, Figure)]
    return write(doc, out_dir)
