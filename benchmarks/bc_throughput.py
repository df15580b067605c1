"""Training throughput of the baseline network (liberopro-bc; docs/baselines.md, "Throughput").

    nice -n 10 uv run --frozen python benchmarks/bc_throughput.py [--sizes 84,128] [--batch 64] [--steps 20]

For each image size, random frames (both cameras, uint8), random states, tokens and action
chunks (K = 8), the real training step (``liberopro_baselines.train``: forward, masked L1, AdamW
update, jitted) timed over ``--steps`` steps after two warm-up steps (compilation), and the numpy
forward pass the server runs (batch 1, mean of 20). Printed: one row per size with samples/s of
training and ms per served query; nothing is written.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from liberopro_baselines import numpy_net
from liberopro_baselines.checkpoint import BCConfig
from liberopro_baselines.data import Arrays
from liberopro_baselines.model import flatten
from liberopro_baselines.train import TrainSettings, _batch, _make_step


def _arrays(size: int, n: int, k: int, rng: np.random.Generator) -> Arrays:
    return Arrays(
        agentview=rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
        wrist=rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
        state=rng.normal(size=(n, 8)).astype(np.float32),
        tokens=rng.integers(0, 4096, (n, 32)).astype(np.int32),
        actions=rng.uniform(-1, 1, (n, k, 7)).astype(np.float32),
        mask=np.ones((n, k), np.float32),
        episode=np.zeros(n, np.int64),
        instructions=["x"],
    )


def bench(size: int, batch: int, steps: int) -> tuple[float, float]:
    """(training samples/s, served ms per query) at ``size`` px."""
    import jax
    from liberopro_baselines.model import init_params

    rng = np.random.default_rng(0)
    config = BCConfig(image_size=size)
    arrays = _arrays(size, 4 * batch, config.chunk_length, rng)
    settings = TrainSettings(steps=steps, batch_size=batch)
    params = init_params(config, 0)
    opt, step = _make_step(config, settings)
    opt_state = opt.init(params)
    for i in range(steps + 2):
        if i == 2:
            t0 = time.perf_counter()
        b = _batch(arrays, rng.integers(0, len(arrays), batch), settings.shift, rng)
        params, opt_state, loss = step(params, opt_state, b)
        jax.block_until_ready(loss)
    train_sps = steps * batch / (time.perf_counter() - t0)
    flat = flatten(params)
    one = (arrays.agentview[:1], arrays.wrist[:1], arrays.state[:1], arrays.tokens[:1])
    t0 = time.perf_counter()
    for _ in range(20):
        numpy_net.forward(flat, config, *one)
    return train_sps, (time.perf_counter() - t0) / 20 * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="84,128")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, batch {a.batch}, {a.steps} timed steps")
    for size in [int(s) for s in a.sizes.split(",")]:
        sps, ms = bench(size, a.batch, a.steps)
        print(f"{size:4d} px  train {sps:6.1f} samples/s  serve (numpy, batch 1) {ms:6.1f} ms/query")


if __name__ == "__main__":
    main()
