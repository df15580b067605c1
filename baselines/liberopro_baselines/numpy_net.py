"""The network's forward pass in plain numpy, from the exported weights (:mod:`.checkpoint`):
what the server runs, so that the policy image needs no JAX. It mirrors
:class:`liberopro_baselines.model.BCNet` operation by operation (same padding, same order of
reductions up to float32 rounding); ``tests/baselines`` checks the two agree to ~1e-5.

Shapes: B observations, S = ``config.image_size``, K = ``config.chunk_length``, L =
``config.max_tokens``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from liberopro_baselines.checkpoint import BCConfig

CAMERAS = ("agentview", "wrist")


def conv3x3_s2(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(B, H, W, Cin) float32 -> (B, ceil(H/2), ceil(W/2), Cout): a 3x3 cross-correlation with
    stride 2 and one pixel of zero padding on each side (flax ``nn.Conv(padding=((1, 1), (1, 1)))``);
    ``kernel`` (3, 3, Cin, Cout) as flax stores it."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::2, ::2]  # type: ignore[call-overload]  # (B, Ho, Wo, Cin, 3, 3)
    b, ho, wo, cin = win.shape[:4]
    cols = np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(b * ho * wo, 9 * cin)
    out = cols @ kernel.reshape(9 * cin, -1) + bias
    return out.reshape(b, ho, wo, -1).astype(np.float32)


def spatial_softmax(x: np.ndarray) -> np.ndarray:
    """(B, H, W, C) -> (B, 2C): per channel the expected image position (x then y, each in
    [-1, 1]) under a softmax over the H*W locations (keypoints, as in robomimic's encoders)."""
    b, h, w, c = x.shape
    logits = x.reshape(b, h * w, c)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = p / p.sum(axis=1, keepdims=True)
    gy, gx = np.meshgrid(np.linspace(-1.0, 1.0, h, dtype=np.float32), np.linspace(-1.0, 1.0, w, dtype=np.float32), indexing="ij")  # fmt: skip
    ex = np.einsum("bnc,n->bc", p, gx.reshape(-1))
    ey = np.einsum("bnc,n->bc", p, gy.reshape(-1))
    return np.concatenate([ex, ey], axis=-1).astype(np.float32)


def _dense(params: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return (x @ params[f"{name}/kernel"] + params[f"{name}/bias"]).astype(np.float32)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def encode_image(params: dict[str, np.ndarray], camera: str, images: np.ndarray, config: BCConfig) -> np.ndarray:
    """(B, S, S, 3) uint8 -> (B, 2 * last conv channels) float32: one camera's encoder."""
    x = images.astype(np.float32) / np.float32(255.0) - np.float32(0.5)
    for i in range(len(config.conv_channels)):
        x = _relu(conv3x3_s2(x, params[f"{camera}/Conv_{i}/kernel"], params[f"{camera}/Conv_{i}/bias"]))
    return spatial_softmax(x)


def forward(
    params: dict[str, np.ndarray],
    config: BCConfig,
    agentview: np.ndarray,
    wrist: np.ndarray,
    state: np.ndarray,
    tokens: np.ndarray,
) -> np.ndarray:
    """The standardised action chunks, (B, K, 7) float32 (:func:`.checkpoint.postprocess` turns
    them into actions).

    Args:
        params: flat parameters (``weights.npz``).
        agentview, wrist: (B, S, S, 3) uint8 RGB, oriented as the dataset's frames.
        state: (B, 8) LIBERO's state (eef position m, axis-angle rad, gripper qpos m), raw.
        tokens: (B, L) int32 hashed instruction ids (:func:`.tokens.token_ids`), 0 = padding.
    Raises ``ValueError`` when an image is not (B, S, S, 3).
    """
    s = config.image_size
    for name, img in (("agentview", agentview), ("wrist", wrist)):
        if img.ndim != 4 or img.shape[1:] != (s, s, 3):
            raise ValueError(f"{name} images must be (B, {s}, {s}, 3) uint8, got {img.shape}")
    feats = [encode_image(params, cam, img, config) for cam, img in zip(CAMERAS, (agentview, wrist), strict=True)]
    emb = params["tokens/embedding"][tokens]  # (B, L, D)
    mask = (tokens > 0).astype(np.float32)[..., None]
    tok = (emb * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
    mean, std = np.asarray(config.state_mean, np.float32), np.asarray(config.state_std, np.float32)
    st = (state.astype(np.float32) - mean) / std
    st = _relu(_dense(params, "state_1", _relu(_dense(params, "state_0", st))))
    h = np.concatenate([*feats, tok.astype(np.float32), st], axis=-1)
    h = _relu(_dense(params, "head_1", _relu(_dense(params, "head_0", h))))
    return _dense(params, "out", h).reshape(len(h), config.chunk_length, 7)
