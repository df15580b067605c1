"""An in-process policy client: the same methods as :class:`submission_spec.PolicyClient`, but
it calls a :class:`submission_spec.Policy` directly (no HTTP). For evaluator tooling (instance
validation, review pages) and scripted controllers; never for submissions."""

from __future__ import annotations

import time

import numpy as np

from submission_spec import ActResult, Observation, ObservationMessage, Policy, PolicyError, as_action_chunk


class LocalPolicyClient:
    """Drives ``policy`` in this process. Raises :class:`PolicyError` like the HTTP client when
    the policy returns a malformed chunk."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def health(self, timeout: float = 0.0) -> bool:
        return True

    def wait_healthy(self, timeout: float) -> None:
        return None

    def metadata(self):
        return self.policy.metadata

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None:
        self.policy.reset(episode_id, instruction)

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult:
        t0 = time.perf_counter()
        try:
            chunk = as_action_chunk(self.policy.act(Observation.from_message(observation)))
        except ValueError as exc:
            raise PolicyError("policy_bad_action_shape", str(exc)) from exc
        return ActResult(
            actions=chunk[:chunk_length].astype(np.float64), latency_ms=(time.perf_counter() - t0) * 1e3, server_ms=None
        )

    def close(self) -> None:
        return None

    def __enter__(self) -> LocalPolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
