"""The checkpoint a training run writes and the server reads (numpy and the standard library only).

A checkpoint is a folder:

* ``weights.npz``: the network's parameters, one float32 array per leaf, keyed by its path in the
  flax parameter tree joined with ``/`` (e.g. ``agentview/Conv_0/kernel``, (3, 3, 3, 32));
* ``config.json``: :class:`BCConfig` (architecture, image size, chunk length, normalisation
  statistics) plus a ``training`` record (dataset, steps, seed, wall time, final loss);
* ``loss.png`` and ``loss.csv``: the training loss per step.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

WEIGHTS = "weights.npz"
CONFIG = "config.json"


@dataclass
class BCConfig:
    """The network and its input and output conventions.

    Attributes:
        image_size: side (px) of both square camera images the network takes (agentview and
            wrist), and the size the served policy asks the evaluator for.
        chunk_length: K, the actions predicted per query (an action chunk of K x 7).
        vocab_size, max_tokens: the hashed instruction vocabulary (:mod:`.tokens`).
        conv_channels: output channels of the 4 stride-2 3x3 convolutions of each camera encoder.
        token_dim, state_dim_hidden, hidden: widths of the instruction embedding, the state MLP
            and the 2-layer head.
        state_mean, state_std: (8,) statistics of the training states (the input is standardised).
        action_mean, action_std: (7,) statistics of the training actions (the network predicts
            standardised actions; the server un-standardises and clips to [-1, 1]).
    """

    image_size: int = 84
    chunk_length: int = 8
    vocab_size: int = 4096
    max_tokens: int = 32
    conv_channels: tuple[int, ...] = (32, 64, 128, 128)
    token_dim: int = 32
    state_dim_hidden: int = 64
    hidden: int = 256
    state_mean: list[float] = field(default_factory=lambda: [0.0] * 8)
    state_std: list[float] = field(default_factory=lambda: [1.0] * 8)
    action_mean: list[float] = field(default_factory=lambda: [0.0] * 7)
    action_std: list[float] = field(default_factory=lambda: [1.0] * 7)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BCConfig:
        """The config of a ``config.json`` dict (unknown keys, e.g. ``training``, ignored)."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if "conv_channels" in known:
            known["conv_channels"] = tuple(known["conv_channels"])
        return cls(**known)


def postprocess(normalised: np.ndarray, config: BCConfig) -> np.ndarray:
    """(..., K, 7) standardised network output -> float32 actions in LIBERO's convention:
    un-standardised with the training statistics and clipped to [-1, 1] (arm deltas; gripper
    -1 opens, +1 closes). The training-side and the served forward pass both end here."""
    std, mean = np.asarray(config.action_std, np.float32), np.asarray(config.action_mean, np.float32)
    out = np.asarray(normalised, np.float32) * std + mean
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def save(folder: Path, params: dict[str, np.ndarray], config: BCConfig, training: dict[str, Any]) -> None:
    """Write ``weights.npz`` (``params``: flat name -> array, stored float32) and ``config.json``
    into ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / WEIGHTS, **{k: np.asarray(v, np.float32) for k, v in params.items()})
    (folder / CONFIG).write_text(json.dumps({**asdict(config), "training": training}, indent=1))


def load(folder: Path) -> tuple[dict[str, np.ndarray], BCConfig]:
    """(flat params, config) of a checkpoint folder. ``FileNotFoundError`` naming the missing file
    when ``folder`` is not a checkpoint (train one with ``liberopro-bc train``)."""
    folder = Path(folder)
    for name in (WEIGHTS, CONFIG):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder / name} does not exist: {folder} is not a checkpoint of liberopro-bc train "
                f"(it writes {WEIGHTS} and {CONFIG})"
            )
    with np.load(folder / WEIGHTS) as z:
        params = {k: z[k] for k in z.files}
    return params, BCConfig.from_dict(json.loads((folder / CONFIG).read_text()))
