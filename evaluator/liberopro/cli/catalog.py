"""``liberopro split`` (the held-out split) and ``liberopro shifts`` (the shift catalog)."""

from __future__ import annotations

import json

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from liberopro.cli.common import out


def split_cmd(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the held-out split (seed 142: two evaluation tasks per suite)."""
    from liberopro.sim.tasks import SUITES, TASKS_PER_SUITE, TaskRef, task_info
    from liberopro.split import SPLIT_SEED, held_out

    ho = held_out()
    if json_out:
        rows = [
            {
                "suite": s,
                "index": i,
                "split": "eval" if i in ho[s] else "train",
                "name": task_info(TaskRef(s, i)).name,
                "instruction": task_info(TaskRef(s, i)).instruction,
            }
            for s in SUITES
            for i in range(TASKS_PER_SUITE)
        ]
        out.print_json(json.dumps({"seed": SPLIT_SEED, "held_out": ho, "tasks": rows}))
        return
    table = Table(title=f"LIBERO-Pro2.0 split (random.Random({SPLIT_SEED}), 2 held out per suite)")
    for col in ("suite", "task", "split", "instruction"):
        table.add_column(col)
    for s in SUITES:
        for i in range(TASKS_PER_SUITE):
            table.add_row(s, str(i), "[bold]eval[/]" if i in ho[s] else "train", task_info(TaskRef(s, i)).instruction)
    out.print(table)
    out.print("held out: " + "; ".join(f"{s} {ho[s]}" for s in SUITES))


def catalog_rows() -> list[dict]:
    """The shift catalog as plain rows (``liberopro shifts --json``; :mod:`liberopro.catalog.listing`)."""
    from liberopro.catalog.listing import rows

    return rows()


def catalog_markdown() -> str:
    """The catalog as the Markdown page committed in ``docs/shifts.md``."""
    from liberopro.catalog.listing import markdown

    return markdown()


#: Widest the stacked shift listing gets (:func:`_shifts_table`): on a wider terminal and piped (100
#: columns when ``COLUMNS`` is unset, :mod:`liberopro.cli.common`) too, as the results table fits 80.
STACKED_WIDTH = 80


def _fallback_text(step: object) -> str:
    """A row's ``fallback_step`` as one string: ``-``, ``0.25*S(task)``, or one per trigger phase."""
    if step is None:
        return "-"
    if isinstance(step, dict):
        return ", ".join(f"{phase} {s}" for phase, s in step.items())
    return str(step)


def _other_params(row: dict) -> str:
    """A row's parameter defaults but its trigger and fallback step (shown apart), or ``-``, escaped."""
    from liberopro.catalog.listing import params_text

    params = {k: v for k, v in row["parameters"].items() if k not in ("trigger", "fallback_step")}
    return escape(params_text(params)) or "-"


def _shifts_table(rows: list[dict], wide: bool, width: int) -> Table:
    """The catalog ``rows`` (:func:`catalog_rows`) as a table. ``wide``: every field in its own column
    (about 200 columns wide; narrower, long values fold); otherwise stacked to fit ``width`` columns, at
    most :data:`STACKED_WIDTH`: beside each shift's ID three lines: name, category, kind and, for a
    runtime shift, trigger phase and fallback step; what changes; the other parameters' defaults.
    Either way a long value folds onto further lines, never cut to ``…``."""
    title = f"LIBERO-Pro2.0 shift catalog ({len(rows)} shifts)"
    if wide:
        table = Table(title=title)
        for col in ("ID", "name", "category", "kind", "trigger", "fallback", "what changes", "parameters (defaults)"):
            table.add_column(col, overflow="fold")
        for r in rows:
            fallback = escape(_fallback_text(r["fallback_step"]))
            table.add_row(
                r["id"],
                escape(r["name"]),
                r["category"],
                r["kind"],
                r["trigger"] or "-",
                fallback,
                escape(r["summary"]),
                _other_params(r),
            )
        return table
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        leading=1,
        width=min(width, STACKED_WIDTH),
        caption="A runtime shift fires at its trigger phase, else at its fallback step (S(task): the oracle's "
        "fastest success on the task, in policy steps). --wide: one column per field; --markdown: docs/shifts.md.",
        caption_justify="left",
    )
    table.add_column("ID", no_wrap=True)
    table.add_column("shift; what changes; parameters (defaults)", overflow="fold", ratio=1)
    for r in rows:
        head = f"[bold]{escape(r['name'])}[/][dim]: {r['category']}, {r['kind']}"
        if r["trigger"]:
            head += f" at {r['trigger']} (fallback {escape(_fallback_text(r['fallback_step']))})"
        table.add_row(r["id"], f"{head}[/]\n{escape(r['summary'])}\n[dim]{_other_params(r)}[/]")
    return table


def shifts_cmd(
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    markdown: bool = typer.Option(False, "--markdown", help="The Markdown table of docs/shifts.md."),
    wide: bool = typer.Option(
        False,
        "--wide",
        help=f"One column per field (about 200 columns wide). Default: stacked to fit {STACKED_WIDTH} columns.",
    ),
) -> None:
    """Print the shift catalog (ID, name, category, kind, trigger, fallback step, what changes,
    parameters with defaults)."""
    rows = catalog_rows()
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    if markdown:
        print(catalog_markdown(), end="")
        return
    out.print(_shifts_table(rows, wide, out.width))
