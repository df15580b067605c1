"""``liberopro evaluate`` (a policy on instances of tasks x cases, or of a manifest) and ``liberopro
demo`` (the main job on embedded defaults): both run through :func:`_evaluate`."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from liberopro.cli.common import _config, _fail, _require_renderer, _StopOnSignal, console, out
from liberopro.cli.tables import print_side_by_side, print_summary
from liberopro.config import EvalConfig
from liberopro.runs.quickstart import (  # the main job's defaults (``liberopro demo``)
    DEMO_SHIFTS,
    DEMO_TASKS,
    EXAMPLE_STEPS,
)
from liberopro.schema.manifest import Instance
from liberopro.schema.results import Summary

if TYPE_CHECKING:
    from rich.progress import Progress

    from liberopro.episode.runner import RunSettings
    from submission_spec import PolicyError


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


def _instances(a: EvalConfig) -> tuple[list[Instance], list[str], int]:
    """(instances, skipped reasons, episodes per instance) from a manifest or from tasks x cases."""
    from liberopro.instances.build import N_INIT_STATES, make_instance, parse_cases
    from liberopro.instances.generation import check_manifest, first_valid_static
    from liberopro.schema.manifest import ManifestError
    from liberopro.sim.tasks import parse_task_list
    from liberopro.split import as_split, tasks_in_split

    if a.manifest is not None:
        try:
            manifest = check_manifest(a.manifest)
        except ManifestError as exc:
            _fail(f"{exc}\nnothing was run: fix the manifest (or regenerate it with `liberopro instances generate`)")
        return manifest.instances, [], a.episodes or manifest.header.episodes_per_instance
    try:
        refs = parse_task_list(a.tasks) if a.tasks else None
        if a.split:
            refs = tasks_in_split(as_split(a.split), refs)
        if not refs:
            _fail("choose tasks with --tasks SUITE:INDEX[,...] and/or --split train|eval|all, or give --manifest FILE")
        cases = parse_cases(a.shifts)
    except (ValueError, KeyError) as exc:
        _fail(str(exc).strip("'\""))
    instances: list[Instance] = []
    skipped: list[str] = []
    cache: dict = {}
    episodes = a.episodes or 1
    states = sorted({e % N_INIT_STATES for e in range(episodes)})  # the run's episodes' init states
    try:
        for ref in refs:
            for case in cases:
                if a.check_static and case:
                    inst, attempt, why = first_valid_static(ref, case, a.seed, cache, init_states=states)
                    if attempt or why:
                        console.print(
                            f"[dim]{'+'.join(case)} on {ref}: "
                            + (
                                f"draw {attempt + 1} is the first whose post-conditions hold at reset on init "
                                f"states {_span(states)}"
                                if attempt
                                else f"no draw's post-conditions hold on every init state {_span(states)}: "
                                "draw 1 is run, its invalid episodes recorded"
                            )
                            + f" ({why[:200]})[/]"
                        )
                else:
                    inst = make_instance(ref, case, a.seed)
                if isinstance(inst, str):
                    skipped.append(inst)
                else:
                    instances.append(inst)
            for scene in cache.values():  # one task's validation scenes at a time
                scene.close()
            cache.clear()
    finally:
        for scene in cache.values():
            scene.close()
    return instances, skipped, episodes


def _span(states: list[int]) -> str:
    """[0, 1, ..., 9] -> ``0-9``; other lists as written."""
    if len(states) > 2 and states == list(range(states[0], states[-1] + 1)):
        return f"{states[0]}-{states[-1]}"
    return ",".join(map(str, states))


def _oracle_policy():
    from liberopro.oracle.policy import OraclePolicy

    return OraclePolicy


def _diagnostics(a: EvalConfig):
    from liberopro.instances.build import Diagnostic

    return [Diagnostic(o, r) for o in a.observation_modes for r in a.recovery_protocols]


def _shard_size(a: EvalConfig, plans: list) -> int:
    """This run's episodes: all of ``plans``, or with ``--shard I/N`` its block of them; ends the
    command when N is more than the plan has episodes."""
    from liberopro.runs.resume import shard_plans

    try:
        return len(shard_plans(plans, a.shard_pair))
    except ValueError as exc:
        _fail(str(exc))


def _plan_line(size: int, plan: int, shard: tuple[int, int] | None, what: tuple[int, int, int], out_dir: Path) -> str:
    """The line that says what runs: ``size`` episodes, with ``shard = (I, N)`` the I-th block of the
    ``plan``'s episodes; ``what``: (instances, episodes per instance, conditions); the run folder."""
    how = f"{what[0]} instances x {what[1]} x {what[2]} condition(s)"
    if shard is None:
        return f"{size} episodes ({how}) -> {out_dir}"
    return f"{size} episodes: shard {shard[0]}/{shard[1]} of {plan} episodes ({how}) -> {out_dir}"


def _progress_bar() -> Progress:
    """The episodes' progress bar (shown on a terminal only)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )


def _run_settings(a: EvalConfig) -> RunSettings:
    """The episode runner's settings from the evaluation's configuration."""
    from liberopro.episode.runner import RunSettings

    return RunSettings(
        max_steps=a.max_steps,
        episode_policy_budget_s=a.episode_budget,
        replan_steps=a.replan_steps,
        video=a.video,
        video_size=a.video_size,
        record_actions=a.record_actions,
    )


def _policy_failure(exc: PolicyError, a: EvalConfig) -> str:
    """The error line for a policy that could not be used (with a hint for a URL that refused)."""
    hint = (
        "; start the server first, or let the evaluator start it with --policy-cmd"
        if exc.reason == "policy_connect_error" and a.policy
        else ""
    )
    return f"the policy could not be used: {exc.reason}: {exc.detail}{hint}"


def _evaluate(
    a: EvalConfig, prepared: tuple[list[Instance], list[str], int] | None = None, title: str | None = None
) -> Summary:
    """Run the evaluation ``a`` asks for (a checked :class:`~liberopro.config.EvalConfig`), print its
    summary and return it; ends the command through :func:`_fail` on anything that stops it.
    ``prepared``: what :func:`_instances` returned for ``a`` (or for the same tasks, cases and
    seed), when the caller has it already; ``title``: what ran, in the summary's title.
    The caller has checked the renderer (:func:`_require_renderer`): the imports here load mujoco."""
    from liberopro.instances.build import plan_episodes
    from liberopro.schema.manifest import content_hash
    from submission_spec import PolicyError

    instances, skipped, episodes = prepared if prepared is not None else _instances(a)
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
    from liberopro.runs.evaluation import run_evaluation
    from liberopro.stack import StackError

    out_dir = a.out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    size = _shard_size(a, plans)  # this run's episodes
    console.print(_plan_line(size, len(plans), a.shard_pair, (len(instances), episodes, len(diagnostics)), out_dir))
    if a.fresh and (out_dir / "episodes.jsonl").exists():
        console.print(f"replacing the earlier run in {out_dir} (its episodes, summary, videos and action logs)")
    if a.policy:
        console.print(f"waiting for the policy at {a.policy} (up to {a.startup_timeout:.0f} s, --startup-timeout)")
    progress = _progress_bar()
    with progress:
        bar = progress.add_task("episodes", total=size, ok=0)
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
                settings=_run_settings(a),
                render_size=a.render_size,
                request_timeout=a.request_timeout,
                startup_timeout=a.startup_timeout,
                skipped=skipped,
                on_record=on_record,
                workers=a.workers,
                note=console.print,
                resume=not a.fresh,
                shard=a.shard_pair,
                extra_header={
                    "manifest": str(a.manifest) if a.manifest else None,
                    # read_manifest verified that the instances hash to the header's value
                    "manifest_sha256": content_hash(instances) if a.manifest else None,
                },
            )
        except StackError as exc:
            _fail(str(exc))
        except PolicyError as exc:
            _fail(_policy_failure(exc, a))
        except ValueError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            # The policy process (its own session) was stopped on the way out of run_evaluation.
            _fail(
                f"interrupted ({stop.name}): the policy server was stopped; the episodes finished so far are "
                f"in {out_dir / 'episodes.jsonl'} (no summary.json); the same command resumes the run",
                128 + stop.signum,
            )
        finally:
            stop.restore()
    print_summary(summary, title)
    out.print(f"camera renders: {work['renders']} for {work['steps']} policy steps (each record's renders)")
    out.print(f"wrote {out_dir / 'episodes.jsonl'} and {out_dir / 'summary.json'}")
    return summary


#: ``liberopro evaluate``'s longer options (declared here to keep its signature readable).
_ORACLE = typer.Option(
    False,
    "--oracle",
    help="Run the privileged oracle in process instead of a policy (a reference, never a submission).",
)
_PROTOCOL_OPTION = typer.Option(
    None,
    "--protocol-option",
    help="KEY=VALUE for the protocol's client, repeatable, e.g. chunk_length=10, "
    "variant=oft, image_size=224 (see docs/adapters.md).",
)
_REPLAN_STEPS = typer.Option(
    None,
    help="Diagnostic: execute K actions of each chunk (overrides the policy's). Several values "
    "(K1,K2,... or @sweep, the committed study values) run one evaluation each, into OUT/replan-K.",
)
_CHECK_STATIC = typer.Option(
    True,
    help="Without --manifest: realise each static case at reset on every init state of the run's episodes first "
    "and take the first parameter draw whose post-conditions hold on all of them (as manifests do).",
)
_VIDEO = typer.Option(
    "none",
    help="Episode videos, OUT/videos/*.mp4: none, failures (episodes that did not succeed) or all. Policy's "
    "view beside the clean agentview, 10 fps; step number and runtime shift in a strip above the images. Costs "
    "renders: the recorded camera is rendered at every other step, which on-demand rendering otherwise skips.",
)
_VIDEO_SIZE = typer.Option(
    None,
    help="Size (px) of each video panel, a multiple of 16 from 64 to 1024 (default 256): the render resized, "
    "no render more or larger (--render-size sets what is rendered).",
)
_RECORD_ACTIONS = typer.Option(
    False, help="Write each episode's executed and commanded actions, OUT/actions/*.npz (np.load)."
)
_FRESH = typer.Option(
    False,
    "--fresh",
    help="Replace an earlier run in OUT. Default: an earlier run of the same plan, settings and policy is "
    "resumed (its finished episodes kept), another one refused (docs/evaluator.md).",
)
_SHARD = typer.Option(
    None,
    "--shard",
    help="I/N: run only the I-th of N contiguous blocks of the plan's episodes; combine the N runs with "
    "liberopro merge.",
)
_WORKERS = typer.Option(
    None,
    help="Simulator processes, one task's episodes in one (default: the smallest of the CPUs, the policy's "
    "max_concurrent_episodes (none: 1), ~2 GB of memory each and the tasks; docs/evaluator.md).",
)


def evaluate(
    policy: str | None = typer.Option(None, "--policy", help="URL of a running policy server."),
    policy_cmd: str | None = typer.Option(None, "--policy-cmd", help="Command that starts a policy server on $PORT."),
    oracle: bool = _ORACLE,
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
    protocol_option: list[str] | None = _PROTOCOL_OPTION,
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
    replan_steps: str | None = _REPLAN_STEPS,
    check_static: bool = _CHECK_STATIC,
    video: str = _VIDEO,
    video_size: int | None = _VIDEO_SIZE,
    record_actions: bool = _RECORD_ACTIONS,
    workers: int | None = _WORKERS,
    fresh: bool = _FRESH,
    shard: str | None = _SHARD,
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
        video_size=video_size,
        record_actions=record_actions,
        workers=workers,
        fresh=fresh,
        shard=shard,
    )
    if len(sweep) == 1:
        _evaluate(args)
        return
    base = out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for k in sweep:  # one run directory per value: `liberopro report` reads them side by side
        console.print(f"replan-steps sweep: K = {k} -> {base / f'replan-{k}'}")
        _evaluate(args.replace(replan_steps=k, out=base / f"replan-{k}"))


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
    shifts under which the oracle's measured success drops (liberopro.runs.quickstart); both tables,
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
            fresh=True,  # the demo runs again each time
        )
        if instances is None:  # both run the same instances: realise the static draws once
            instances = _instances(args)
        summaries.append((run.label, _evaluate(args, instances, title=run.label)))
    print_side_by_side(summaries, plan)


def merge(
    runs: list[Path] = typer.Argument(..., help="The run folders of every shard (liberopro evaluate --shard I/N)."),
    out_dir: Path = typer.Option(..., "--out", help="Output directory of the merged run."),
) -> None:
    """Merge the runs of the N shards of one evaluation (evaluate --shard I/N) into one run, whose
    summary equals a single run's; runs of other plans, settings or policies, a shard given twice or
    missing, and unfinished runs are refused, named."""
    from liberopro.runs.resume import ResumeError, merge_runs

    try:
        summary = merge_runs(runs, out_dir)
    except ResumeError as exc:
        _fail(str(exc))
    print_summary(summary, f"merged {len(runs)} shards")
    out.print(f"wrote {out_dir / 'episodes.jsonl'} and {out_dir / 'summary.json'}")
