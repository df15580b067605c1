"""``liberopro-bc``: train the baseline from a demonstration dataset, serve a checkpoint
(docs/baselines.md). Training needs the ``train`` extra; serving only numpy and the SDK."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="A behaviour-cloning baseline (action chunks from two cameras, state and instruction), "
    "trained on CPU from `liberopro demos collect` datasets and served with numpy.",
)


@app.command()
def train(
    dataset: list[Path] = typer.Option(
        ..., "--dataset", help="A LeRobot v3.0 dataset of `liberopro demos collect`; repeat to train on several."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Checkpoint folder to write (weights.npz, config.json, loss.csv, loss.png)."
    ),
    steps: int = typer.Option(2000, "--steps", min=1, help="Optimiser steps."),
    seed: int = typer.Option(0, "--seed", help="Seeds the initialisation, the batches and the augmentation."),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    lr: float = typer.Option(1e-3, "--lr", min=1e-8, help="Peak learning rate (warm-up, then cosine)."),
    image_size: int = typer.Option(84, "--image-size", min=16, max=256, help="Square camera size (px)."),
    chunk_length: int = typer.Option(8, "--chunk-length", min=1, max=64, help="K, actions per chunk."),
    shift: int = typer.Option(4, "--shift", min=0, help="Random-shift augmentation (px; 0: none)."),
) -> None:
    """Train on the DATASETs' frames (together) for STEPS steps and write the checkpoint to OUT."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from liberopro_baselines import data
    from liberopro_baselines.checkpoint import BCConfig
    from liberopro_baselines.train import TrainSettings, fit, standardisation, write_outputs

    settings = TrainSettings(steps=steps, seed=seed, batch_size=batch_size, lr=lr, shift=shift)
    t0 = time.perf_counter()
    try:
        parts = [data.load(d, image_size=image_size, chunk_length=chunk_length) for d in dataset]
    except data.DatasetError as exc:
        several = any("," in str(d) for d in dataset)
        hint = " (several datasets: repeat the option, --dataset A --dataset B)" if several else ""
        raise typer.BadParameter(f"{exc}{hint}", param_hint="--dataset") from exc
    arrays = parts[0] if len(parts) == 1 else data.concatenate(parts)
    load_s = time.perf_counter() - t0
    typer.echo(f"{len(arrays)} frames, {len(set(arrays.episode.tolist()))} episodes, {len(arrays.instructions)} instructions; read in {load_s:.1f} s")  # fmt: skip
    config = BCConfig(image_size=image_size, chunk_length=chunk_length, **standardisation(arrays))
    columns = [TextColumn("training"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn()]  # fmt: skip
    every = max(1, steps // 20)
    with Progress(*columns) as bar:
        task = bar.add_task("train", total=steps, loss="-")

        def on_step(i: int, loss: float) -> None:
            bar.update(task, completed=i, loss=f"{loss:.4f}")
            # Rich draws the bar only on a terminal: a log (nohup, SLURM) gets a line per 5%.
            if not bar.console.is_terminal and (i % every == 0 or i == steps):
                bar.console.print(f"step {i}/{steps} loss {loss:.4f}", highlight=False)

        params, losses, wall = fit(arrays, config, settings, on_step)
    training = {
        "dataset": str(dataset[0]) if len(dataset) == 1 else [str(d) for d in dataset],
        "frames": len(arrays),
        "episodes": len(set(arrays.episode.tolist())),
        "instructions": arrays.instructions,
        "settings": settings.__dict__,
        "wall_s": round(wall, 2),
        "samples_per_s": round(steps * batch_size / wall, 1),
        "final_loss_mean_50": float(sum(losses[-50:]) / len(losses[-50:])),
        "parameters": int(sum(v.size for v in params.values())),
    }
    write_outputs(out, params, config, losses, training)
    typer.echo(json.dumps({k: v for k, v in training.items() if k != "instructions"}))
    typer.echo(f"checkpoint in {out}")


@app.command()
def serve(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="A folder written by `liberopro-bc train`."),
    port: int = typer.Option(8000, "--port", envvar="PORT", help="Port (env PORT)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", envvar="HOST", help="Interface (env HOST; 0.0.0.0 in a container)."
    ),
    batch: bool = typer.Option(
        True, "--batch/--no-batch", help="Gather concurrent episodes' queries into one forward pass."
    ),
) -> None:
    """Serve CHECKPOINT with the submission SDK (spec v1) until interrupted."""
    from submission_spec.server import BatchConfig
    from submission_spec.server import serve as sdk_serve

    from liberopro_baselines.serving import BCPolicy

    try:
        policy = BCPolicy(checkpoint)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--checkpoint") from exc
    sdk_serve(policy, host=host, port=port, batch=BatchConfig() if batch else None)


if __name__ == "__main__":
    app()
