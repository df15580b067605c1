"""``liberopro instances generate|report-md`` (instance manifests and their generation reports) and
``liberopro review`` (review pages of a training manifest's instances)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from liberopro.cli.common import _fail, _init_state_list, _require_renderer, console, out
from liberopro.schema.manifest import EPISODES_PER_INSTANCE

if TYPE_CHECKING:
    from liberopro.schema.manifest import ManifestHeader

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Instance manifests.")


def _generation_seed(split: str, seed: int | None, seed_env: str) -> int:
    """The manifest's seed: ``seed`` for train/all; for eval, the secret in the environment
    variable ``seed_env`` (never on the command line). Ends the command otherwise."""
    import os

    if split == "eval":
        if seed is not None:
            _fail(
                "the evaluation manifest's seed is secret: put it in the environment variable named by "
                f"--seed-env ({seed_env}), never on the command line"
            )
        raw = os.environ.get(seed_env)
        if not raw or not raw.strip().isdigit():
            _fail(f"set {seed_env} to the secret evaluation seed (an integer)")
        return int(raw)
    if seed is None:
        _fail("give --seed for a train/all manifest")
    return seed


def _proof_settings(proof: bool | None, validate: bool, proof_init_states: str | None) -> tuple[bool, list[int] | None]:
    """(whether the solvability proof runs, its init states or None for the default) from the
    options; ends the command for a proof without validation or unreadable init states."""
    if proof and not validate:
        _fail(
            "--proof needs --validate (the proof runs the oracle on validated instances): drop --no-validate, or give --no-proof"
        )
    proof = validate if proof is None else proof
    if proof_init_states is not None and not proof:
        _fail("--proof-init-states only applies to the solvability proof: drop it, or run with --validate and --proof")
    if proof_init_states is None:
        return proof, None
    items = [x.strip() for x in proof_init_states.split(",") if x.strip()]
    if not items or not all(x.isdigit() for x in items):
        _fail(f"--proof-init-states takes init state indices separated by commas, e.g. 0,1 (got {proof_init_states!r})")
    return proof, sorted({int(x) for x in items})


@app.command("generate")
def instances_generate(
    split: str = typer.Option(..., help="train, eval or all."),
    out_path: Path = typer.Option(..., "--out", help="Manifest file (JSON lines); the drop report goes beside it."),
    seed: int | None = typer.Option(None, help="Seed (train/all). The eval seed is secret: use --seed-env."),
    seed_env: str = typer.Option("LIBEROPRO_EVAL_SEED", help="Environment variable holding the secret eval seed."),
    tasks: str | None = typer.Option(None, help="Restrict to these tasks of the split."),
    shifts: str | None = typer.Option(
        None, help="Cases, e.g. nominal,S01,D01,S01+D10 (default: nominal and every shift of the catalog)."
    ),
    episodes: int = typer.Option(EPISODES_PER_INSTANCE, help="Episodes per instance recorded in the header."),
    attempts: int = typer.Option(10, help="Parameter draws per pair before it is dropped."),
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
    validity_init_states: str = typer.Option(
        "0-9",
        help="Init states every instance holding a static shift must be valid on at reset, e.g. 0-9 or 0,1,2 "
        "(default 0-9: those of a 10-episode evaluation).",
    ),
    proof_attempts: int = typer.Option(
        3, help="Validated draws proved before a pair is dropped at the proof (a draw the proof drops is redrawn)."
    ),
    resume: bool = typer.Option(
        True,
        help="Keep each task's result in OUT.parts/ as it completes and reuse it "
        "when the same generation is run again (removed once the manifest is written).",
    ),
) -> None:
    """Generate a validated, schema-versioned instance manifest, with a report of every dropped pair."""
    if split not in ("train", "eval", "all"):
        _fail(f"--split must be train, eval or all, not {split!r}")
    seed = _generation_seed(split, seed, seed_env)
    proof, states = _proof_settings(proof, validate, proof_init_states)
    validity = _init_state_list(validity_init_states, "--validity-init-states", proof_attempts)
    _require_renderer()  # before the imports below load mujoco
    from liberopro.instances.build import parse_cases
    from liberopro.instances.generation import default_cases, generate
    from liberopro.instances.generation import proof_init_states as proof_states_of
    from liberopro.instances.generation import validity_init_states as validity_init_states_of
    from liberopro.schema.manifest import ManifestError, write_manifest
    from liberopro.sim.tasks import parse_task_list
    from liberopro.split import as_split, tasks_in_split
    from liberopro.stack import StackError

    try:
        refs = parse_task_list(tasks) if tasks else None
        cases = parse_cases(shifts) if shifts else None
        if refs is not None:
            tasks_in_split(as_split(split), refs)
        if proof and validate:
            proof_states_of(split, episodes, states)  # ValueError for an init state out of range
        validity_init_states_of(validity)
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
            validity_states=validity,
            proof_attempts=proof_attempts,
            progress=progress,
            parts_dir=parts_dir,
        )
        write_manifest(out_path, header, instances)
    except (StackError, ManifestError) as exc:
        _fail(str(exc))
    if parts_dir is not None:
        import shutil

        shutil.rmtree(parts_dir, ignore_errors=True)
    subset = refs is not None or cases is not None
    rep = _write_report(out_path, header, instances, dropped, subset, validate, proof, tasks, shifts, validity)
    _print_generation(split, header, rep, rep["pairs"], len(dropped), cases or default_cases())
    out.print(f"wrote {out_path} (content hash {header.content_hash[:16]}...) and {out_path.name}.report.json")


def _write_report(out_path, header, instances, dropped, subset, validate, proof, tasks, shifts, validity) -> dict:
    """Write ``OUT.report.json`` (:func:`liberopro.instances.generation.report` and the run's
    settings) and return it; a subset of tasks or cases leaves the reference counts out."""
    from liberopro.instances.generation import report

    rep = report(header, dropped, len(instances) + len(dropped), instances)
    rep["validated"] = validate
    rep["proved"] = proof and validate
    rep["validity_init_states"] = validity if validate else []
    rep["tasks"] = tasks or "all"
    rep["cases"] = shifts or "nominal and every single shift"
    if subset:  # a subset: the reference counts do not apply
        rep["reference_instances"] = rep["difference_vs_reference"] = None
    out_path.with_name(out_path.name + ".report.json").write_text(json.dumps(rep, indent=2) + "\n")
    return rep


def _print_generation(
    split: str, header: ManifestHeader, rep: dict[str, Any], pairs: int, dropped: int, cases: list[list[str]]
) -> None:
    """The generation's table per case (instances, dropped, proved, unproved) and its per-suite
    line against the reference counts."""
    from liberopro.instances.build import NOMINAL
    from liberopro.instances.generation import REFERENCE

    table = Table(title=f"{split} manifest: {header.instances} instances of {pairs} pairs ({dropped} dropped)")
    for col in ("shift", "instances", "dropped", "proved", "unproved"):
        table.add_column(col)
    proved = rep["proof"]["per_shift"]
    for sid in ("+".join(c) or NOMINAL for c in cases):
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


@app.command("report-md")
def instances_report_md(
    report_path: Path = typer.Argument(..., help="A generation report (MANIFEST.report.json)."),
    title: str | None = typer.Option(None, help="Page title (default: the split's)."),
    note: str = typer.Option("", help="A paragraph under the title: what the run covers, when, how to reproduce."),
    runtime_validity: Path | None = typer.Option(
        None, help="Append the run-time validity sweep (the JSON of benchmarks/runtime_validity.py --manifest)."
    ),
) -> None:
    """Print a generation report as Markdown: proved counts per suite and shift against the reference."""
    from liberopro.instances.generation_report import report_markdown, runtime_validity_markdown

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
    entries: list[dict] = []
    scenes: dict = {}
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
