"""``liberopro report``: the study's tables from run directories, as Markdown and as one
self-contained HTML page (``docs/evaluator.md``, "Reports").

:mod:`.runs` reads run directories (the one place that reads ``summary.json``'s keys) and groups
them per policy; :mod:`.build` makes the tables and charts; :mod:`.render` writes them. Pairing
between policies is :mod:`liberopro.runs.comparison`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from liberopro.report.runs import ReportError, find_runs, group_policies, load_run

__all__ = ["ReportError", "write_report"]


def write_report(
    run_dirs: list[Path],
    out_dir: Path,
    title: str = "LIBERO-Pro2.0 report",
    charts: bool = True,
    on_skip: Callable[[str], None] | None = None,
) -> dict[str, Path | None]:
    """Read the run directories (each, or every run directory below it), group them per policy
    and write ``out_dir/report.md``, ``out_dir/report.html`` and ``out_dir/figures/*.svg``
    (tables only, no figures, when ``charts`` is False: drawing them is most of the time).

    A run directory that cannot be read (:func:`~liberopro.report.runs.load_run`: an unreadable
    ``summary.json``, a missing ``episodes.jsonl``, a line that is no episode record) is left out:
    the report says so in its introduction, one line per run naming the file and the reason, and
    ``on_skip`` gets each line. Returns the written paths (``markdown``, ``html``, ``figures``:
    None without figures). Raises :class:`ReportError` for a path that neither is nor holds a run
    directory, when no run could be read (naming each), or for two runs holding the same episode
    of one policy.
    """
    from liberopro.report.build import Figure, build_document
    from liberopro.report.render import write

    runs, skipped = [], []
    for path in find_runs(list(run_dirs)):
        try:
            runs.append(load_run(path))
        except ReportError as exc:
            skipped.append(f"left out {path}: {exc}")
            if on_skip is not None:
                on_skip(skipped[-1])
    if not runs:
        raise ReportError("no run could be read:\n" + "\n".join(skipped))
    doc = build_document(group_policies(runs), title)
    if skipped:
        doc.intro.append(f"{len(skipped)} run(s) could not be read and are in no table: " + "; ".join(skipped) + ".")
    if not charts:
        for sec in doc.sections:
            sec.blocks = [b for b in sec.blocks if not isinstance(b, Figure)]
    return write(doc, out_dir)
