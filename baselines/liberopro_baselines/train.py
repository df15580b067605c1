"""Behaviour cloning with action chunking: one command, seeded, deterministic on one machine
(``liberopro-bc train``; docs/baselines.md).

Each step draws ``batch_size`` frames uniformly with replacement (numpy ``default_rng(seed)``),
shifts both images by up to ``shift`` px (DrQ's random shift: edge-padded, randomly cropped back,
from the same generator), and takes one AdamW step (gradient norm clipped at 1, a warm-up then
cosine learning-rate schedule) on the masked L1 loss between the predicted and the target
standardised action chunk (ACT's loss; padded targets past an episode's end do not count).
Initialisation is ``jax.random.PRNGKey(seed)``; nothing else is random, so two runs with one seed
on one machine give the same weights (``tests/baselines`` checks it).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from liberopro_baselines import checkpoint
from liberopro_baselines.checkpoint import BCConfig
from liberopro_baselines.data import Arrays


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings (steps >= 1, batch_size >= 1, lr > 0, shift >= 0 px)."""

    steps: int = 2000
    seed: int = 0
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    shift: int = 4

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0 or self.shift < 0:
            raise ValueError(f"{self}: steps and batch_size must be >= 1, lr > 0 and shift >= 0")


def standardisation(arrays: Arrays) -> dict[str, Any]:
    """Mean and std (floored at 1e-3) of the states and of the per-frame actions."""
    acts = arrays.actions[:, 0]
    floor = lambda s: np.maximum(s, 1e-3).tolist()  # noqa: E731
    return {
        "state_mean": arrays.state.mean(0).tolist(),
        "state_std": floor(arrays.state.std(0)),
        "action_mean": acts.mean(0).tolist(),
        "action_std": floor(acts.std(0)),
    }


def random_shift(images: np.ndarray, pad: int, rng: np.random.Generator) -> np.ndarray:
    """(B, S, S, 3) uint8 -> the same shape: each image edge-padded by ``pad`` px and cropped back
    at a random offset (0 .. 2 * pad in each axis)."""
    if pad == 0:
        return images
    b, s = images.shape[:2]
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    offsets = rng.integers(0, 2 * pad + 1, size=(b, 2))
    return np.stack([padded[i, y : y + s, x : x + s] for i, (y, x) in enumerate(offsets)])


def _make_step(config: BCConfig, settings: TrainSettings) -> tuple[Any, Callable]:
    import jax
    import jax.numpy as jnp
    import optax

    from liberopro_baselines.model import apply

    warmup = max(1, min(500, settings.steps // 20))
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, settings.lr, warmup, max(settings.steps, warmup + 1), end_value=settings.lr * 0.05
    )
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=settings.weight_decay))
    mean, std = jnp.asarray(config.action_mean, jnp.float32), jnp.asarray(config.action_std, jnp.float32)

    def loss_fn(params, batch):
        pred = apply(config, params, batch["agentview"], batch["wrist"], batch["state"], batch["tokens"])
        target = (batch["actions"] - mean) / std
        err = jnp.abs(pred - target).sum(-1) * batch["mask"]
        return err.sum() / (7.0 * jnp.maximum(batch["mask"].sum(), 1.0))

    @jax.jit
    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return opt, step


def _batch(arrays: Arrays, idx: np.ndarray, shift: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "agentview": random_shift(arrays.agentview[idx], shift, rng),
        "wrist": random_shift(arrays.wrist[idx], shift, rng),
        "state": arrays.state[idx],
        "tokens": arrays.tokens[idx],
        "actions": arrays.actions[idx],
        "mask": arrays.mask[idx],
    }


def fit(
    arrays: Arrays, config: BCConfig, settings: TrainSettings, on_step: Callable[[int, float], None] | None = None
) -> tuple[dict[str, np.ndarray], list[float], float]:
    """Train from ``PRNGKey(settings.seed)``: (flat float32 params, loss per step, wall seconds
    of the steps, compilation included). ``config`` carries the standardisation
    (:func:`standardisation`); ``on_step(step, loss)`` after each step."""
    import jax

    from liberopro_baselines.model import flatten, init_params

    params = init_params(config, settings.seed)
    opt, step = _make_step(config, settings)
    opt_state = opt.init(params)
    rng = np.random.default_rng(settings.seed)
    losses: list[float] = []
    t0 = time.perf_counter()
    for i in range(settings.steps):
        idx = rng.integers(0, len(arrays), size=settings.batch_size)
        params, opt_state, loss = step(params, opt_state, _batch(arrays, idx, settings.shift, rng))
        losses.append(float(jax.device_get(loss)))
        if on_step is not None:
            on_step(i + 1, losses[-1])
    return flatten(params), losses, time.perf_counter() - t0


def plot_loss(losses: list[float], path: Path) -> None:
    """The loss curve (per step, and its 50-step running mean) as a PNG (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    x = np.arange(1, len(losses) + 1)
    ax.plot(x, losses, lw=0.6, alpha=0.5, label="loss")
    w = min(50, len(losses))
    ax.plot(x[w - 1 :], np.convolve(losses, np.ones(w) / w, mode="valid"), lw=1.5, label=f"{w}-step mean")
    ax.set(xlabel="step", ylabel="masked L1 (standardised actions)", yscale="log", title="liberopro-bc training loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(
    out: Path, params: dict[str, np.ndarray], config: BCConfig, losses: list[float], training: dict
) -> None:
    """The checkpoint (:func:`.checkpoint.save`), ``loss.csv`` and ``loss.png`` in ``out``."""
    checkpoint.save(out, params, config, training)
    with (out / "loss.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss"])
        w.writerows((i + 1, f"{v:.6g}") for i, v in enumerate(losses))
    plot_loss(losses, out / "loss.png")
