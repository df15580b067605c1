"""``liberopro demos collect``: LeRobot demonstration datasets from the privileged oracle."""

from __future__ import annotations

from pathlib import Path

import typer

from liberopro.cli.common import _fail, _init_state_list, _require_renderer, console

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Demonstration datasets (LeRobot format) from the privileged oracle.",
)


@app.command("collect")
def demos_collect(
    manifest: Path = typer.Option(..., help="A training manifest (`liberopro instances generate --split train`)."),
    episodes: int | None = typer.Option(
        None, min=1, max=50, help="Episodes per instance: init states 0..N-1 (env seed: seed + e)."
    ),
    init_states: str | None = typer.Option(
        None,
        "--init-states",
        help="Instead of --episodes: the init states to collect on, e.g. 10-49 (0-9 held out for evaluation).",
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

    if (episodes is None) == (init_states is None):
        _fail("give --episodes N (init states 0..N-1) or --init-states, e.g. --init-states 10-49")
    states = _init_state_list(init_states, "--init-states") if init_states is not None else None

    def show(r: dict) -> None:
        verdict = "kept" if r["kept"] else "dropped"
        console.print(
            f"{r['libero_task']} {r['case']} init {r['init_state_id']}: {r['termination_reason']} after {r['steps']} "
            f"steps, {verdict} ({r['wall_s']:.1f} s)"
        )

    try:
        result = collect(
            manifest, out, episodes, init_states=states, fmt=fmt, workers=workers, image_size=image_size, max_steps=max_steps,
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
