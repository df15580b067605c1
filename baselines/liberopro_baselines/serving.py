"""The trained policy behind the submission SDK (numpy only: no JAX in the policy image).

Metadata: both cameras (agentview, wrist) at the checkpoint's image size, so that the evaluator's
own resize (area interpolation from its render) produces what training read; LIBERO's 8-number
state; action chunks of K = ``chunk_length`` actions of which the evaluator executes the first
:data:`REPLAN_STEPS` (4) before asking again. Executing half the chunk is the usual compromise
for chunked BC policies (Diffusion Policy executes 8 of 16): the later actions of a chunk are
the least accurate and an open-loop stretch ignores what happened meanwhile, while replanning
every step throws away the temporal consistency chunking gives. The policy keeps no per-episode
state, so it serves 16 episodes at once and answers batches with one forward pass (``act_batch``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from liberopro_baselines import checkpoint, numpy_net
from liberopro_baselines.tokens import token_ids
from submission_spec import CameraSpec, Observation, ObservationBatch, PolicyMetadata

#: Actions of each chunk executed before the next query (see the module docstring).
REPLAN_STEPS = 4


class BCPolicy:
    """A :class:`submission_spec.Policy` from a ``liberopro-bc train`` checkpoint folder.
    ``FileNotFoundError`` when ``folder`` is not one."""

    def __init__(self, folder: Path, name: str = "liberopro-bc") -> None:
        self.params, self.config = checkpoint.load(Path(folder))
        s, k = self.config.image_size, self.config.chunk_length
        self.metadata = PolicyMetadata(
            policy_name=name,
            cameras=[CameraSpec(name="agentview", height=s, width=s), CameraSpec(name="wrist", height=s, width=s)],
            chunk_length=k,
            replan_steps=min(REPLAN_STEPS, k),
            max_concurrent_episodes=16,
        )
        self._tokens: dict[str, np.ndarray] = {}

    def reset(self, episode_id: str, instruction: str) -> None:
        pass

    def _token_ids(self, instruction: str) -> np.ndarray:
        if instruction not in self._tokens:
            self._tokens[instruction] = token_ids(instruction, self.config.vocab_size, self.config.max_tokens)
        return self._tokens[instruction]

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        """(B, K, 7) float32 action chunks of a batch of observations (one forward pass)."""
        tokens = np.stack([self._token_ids(i) for i in batch.instructions])
        out = numpy_net.forward(
            self.params,
            self.config,
            batch.images("agentview"),
            batch.images("wrist"),
            batch.state().astype(np.float32),
            tokens,
        )
        return checkpoint.postprocess(out, self.config)

    def act(self, observation: Observation) -> np.ndarray:
        """(K, 7) float32: the action chunk of one observation."""
        return self.act_batch(ObservationBatch([observation]))[0]
