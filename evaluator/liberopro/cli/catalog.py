"""``liberopro split`` (the held-out split) and ``liberopro shifts`` (the shift catalog)."""

from __future__ import annotations

import json

import typer
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


def shifts_cmd(
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    markdown: bool = typer.Option(False, "--markdown", help="The Markdown table of docs/shifts.md."),
) -> None:
    """Print the shift catalog (ID, name, category, kind, trigger, parameters with defaults)."""
    rows = catalog_rows()
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    if markdown:
        print(catalog_markdown(), end="")
        return
    from liberopro.catalog.listing import params_text

    table = Table(title=f"LIBERO-Pro2.0 shift catalog ({len(rows)} shifts)")
    for col in ("ID", "name", "category", "kind", "trigger", "fallback", "parameters (defaults)"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["id"],
            r["name"],
            r["category"],
            r["kind"],
            r["trigger"] or "-",
            "-" if r["fallback_step"] is None else str(r["fallback_step"]),
            params_text(r["parameters"]),
        )
    out.print(table)
