"""``liberopro oracle``: the privileged scripted oracle on the nominal tasks, per-task success."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from liberopro.cli.common import _fail, console, out


def oracle_cmd(
    tasks: str = typer.Option("all", help="all, or e.g. libero_goal:0,libero_10 (a bare suite means its 10 tasks)."),
    episodes: int = typer.Option(
        10, min=1, max=50, help="Episodes per task: init states 0..N-1 (env seed: seed + init state)."
    ),
    max_steps: int | None = typer.Option(None, min=1, help="Cap on policy steps (default: the suite's horizon)."),
    seed: int = typer.Option(0, help="Env seeds are seed + init state, as `evaluate` draws them."),
    out_path: Path | None = typer.Option(None, "--out", help="Write per-task results and episodes as JSON."),
) -> None:
    """Run the privileged scripted oracle (reads simulator state; tooling only, never a submission) on the
    nominal tasks, without cameras, and print per-task success."""
    import subprocess

    from liberopro.oracle.nominal import OracleTask, run_task, select_tasks, write_results
    from liberopro.sim.tasks import SUITES

    try:
        refs = select_tasks(tasks)
    except ValueError as exc:
        _fail(str(exc))
    started = t0 = dt.datetime.now(dt.UTC)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    results: list[OracleTask] = []

    def settings() -> dict:
        return {
            "date": started.isoformat(timespec="seconds"),
            "wall_s": round((dt.datetime.now(dt.UTC) - t0).total_seconds(), 1),
            "code_commit": commit.stdout.strip() or None,
            "command": f"liberopro oracle --tasks {tasks} --episodes {episodes}"
            + (f" --max-steps {max_steps}" if max_steps else "")
            + (f" --seed {seed}" if seed else ""),
            "init_states": list(range(episodes)),
            "seed": seed,
            "max_steps": max_steps,
            "cameras": [],
            "complete": len(results) == len(refs),
        }

    for n, ref in enumerate(refs, 1):
        console.print(f"[{n}/{len(refs)}] {ref}")
        results.append(
            run_task(
                ref,
                list(range(episodes)),
                max_steps,
                seed,
                lambda r, e: console.print(
                    f"  init {e.init_state}: {'success' if e.success else 'FAIL'} in {e.steps} steps "
                    f"({e.seconds:.1f} s){'' if e.success else ' at ' + escape(e.stage)}"
                ),
            )
        )
        if out_path is not None:  # after every task, so an interrupted run keeps what it measured
            write_results(out_path, results, settings())
    table = Table(title="Privileged scripted oracle, nominal (reads simulator state; never a submission)")
    for col in ("task", "success", "mean steps (successes)", "fastest success", "failures (init: stage)"):
        table.add_column(col)
    for r in results:
        mean = r.mean_success_steps
        fails = "; ".join(f"{e.init_state}: {e.stage}" for e in r.episodes if not e.success)
        table.add_row(
            r.task,
            f"{r.successes}/{r.attempts}",
            "-" if mean is None else f"{mean:.0f}",
            str(r.fastest_success_steps or "-"),
            escape(fails),
        )
    for suite in SUITES:
        rows = [r for r in results if r.task.startswith(suite + ":")]
        if rows:
            ok, n_ep = sum(r.successes for r in rows), sum(r.attempts for r in rows)
            table.add_row(f"[bold]{suite}[/]", f"[bold]{ok}/{n_ep} ({100 * ok / n_ep:.0f}%)[/]", "", "", "")
    out.print(table)
    episodes_run = [e for r in results for e in r.episodes]
    steps = sum(e.steps for e in episodes_run)
    secs = sum(e.seconds for e in episodes_run)
    out.print(
        f"{len(episodes_run)} episodes, {steps} steps, {secs:.0f} s: {secs / max(len(episodes_run), 1):.1f} s "
        f"an episode, {1000 * secs / max(steps, 1):.1f} ms a step (scene construction excluded)"
    )
    if out_path is not None:
        out.print(f"wrote {out_path}")
