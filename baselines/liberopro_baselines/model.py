"""The network in flax.linen (training side; the server runs :mod:`.numpy_net`, the same
computation in numpy).

Per camera (agentview, wrist) an encoder of four 3x3 stride-2 convolutions with ReLU (channels
``config.conv_channels``, 32-64-128-128) and a spatial softmax (each channel's expected image
position: 2 x 128 keypoint coordinates); the instruction's hashed words through a learned
embedding, averaged over the words; the standardised state through a 2-layer MLP; the four
concatenated into a 2 x 256 ReLU MLP whose output is K x 7 standardised actions (an action chunk).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from liberopro_baselines.checkpoint import BCConfig


def spatial_softmax(x: jax.Array) -> jax.Array:
    """(B, H, W, C) -> (B, 2C): per channel the expected position (x then y, in [-1, 1])."""
    b, h, w, c = x.shape
    p = jax.nn.softmax(x.reshape(b, h * w, c), axis=1)
    gy, gx = jnp.meshgrid(jnp.linspace(-1.0, 1.0, h), jnp.linspace(-1.0, 1.0, w), indexing="ij")
    ex = jnp.einsum("bnc,n->bc", p, gx.reshape(-1))
    ey = jnp.einsum("bnc,n->bc", p, gy.reshape(-1))
    return jnp.concatenate([ex, ey], axis=-1)


class Encoder(nn.Module):
    """(B, S, S, 3) uint8 -> (B, 2 * channels[-1]) float32."""

    channels: tuple[int, ...]

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = images.astype(jnp.float32) / 255.0 - 0.5
        for i, c in enumerate(self.channels):
            x = nn.relu(nn.Conv(c, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)), name=f"Conv_{i}")(x))
        return spatial_softmax(x)


class BCNet(nn.Module):
    """(agentview, wrist, state, tokens) -> (B, K, 7) standardised actions; see the module
    docstring, and :func:`liberopro_baselines.numpy_net.forward` for the argument shapes."""

    config: BCConfig

    @nn.compact
    def __call__(self, agentview: jax.Array, wrist: jax.Array, state: jax.Array, tokens: jax.Array) -> jax.Array:
        cfg = self.config
        a = Encoder(tuple(cfg.conv_channels), name="agentview")(agentview)
        w = Encoder(tuple(cfg.conv_channels), name="wrist")(wrist)
        emb = nn.Embed(cfg.vocab_size, cfg.token_dim, name="tokens")(tokens)
        mask = (tokens > 0).astype(jnp.float32)[..., None]
        tok = (emb * mask).sum(axis=1) / jnp.maximum(mask.sum(axis=1), 1.0)
        st = (state.astype(jnp.float32) - jnp.asarray(cfg.state_mean, jnp.float32)) / jnp.asarray(
            cfg.state_std, jnp.float32
        )
        st = nn.relu(nn.Dense(cfg.state_dim_hidden, name="state_0")(st))
        st = nn.relu(nn.Dense(cfg.state_dim_hidden, name="state_1")(st))
        h = jnp.concatenate([a, w, tok, st], axis=-1)
        h = nn.relu(nn.Dense(cfg.hidden, name="head_0")(h))
        h = nn.relu(nn.Dense(cfg.hidden, name="head_1")(h))
        return nn.Dense(cfg.chunk_length * 7, name="out")(h).reshape(h.shape[0], cfg.chunk_length, 7)


def flatten(params: Any) -> dict[str, np.ndarray]:
    """A flax parameter tree -> ``{"agentview/Conv_0/kernel": array, ...}`` (numpy float32), the
    layout of ``weights.npz``."""
    from flax.traverse_util import flatten_dict

    return {"/".join(k): np.asarray(v, np.float32) for k, v in flatten_dict(params).items()}


def unflatten(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    """The inverse of :func:`flatten` (jax arrays in a nested dict)."""
    from flax.traverse_util import unflatten_dict

    return unflatten_dict({tuple(k.split("/")): jnp.asarray(v) for k, v in flat.items()})


def init_params(config: BCConfig, seed: int) -> dict[str, Any]:
    """The initial parameters for ``seed`` (flax's default initialisers)."""
    s, n = config.image_size, config.max_tokens
    dummy = (
        jnp.zeros((1, s, s, 3), jnp.uint8),
        jnp.zeros((1, s, s, 3), jnp.uint8),
        jnp.zeros((1, 8), jnp.float32),
        jnp.zeros((1, n), jnp.int32),
    )
    return BCNet(config).init(jax.random.PRNGKey(seed), *dummy)["params"]


def apply(config: BCConfig, params: Any, agentview: Any, wrist: Any, state: Any, tokens: Any) -> jax.Array:
    """The training-side forward pass: (B, K, 7) standardised actions."""
    out: jax.Array = BCNet(config).apply({"params": params}, agentview, wrist, state, tokens)  # type: ignore[assignment]
    return out
