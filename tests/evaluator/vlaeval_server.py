"""A tiny vla-eval model server for the ``vlaeval`` tier: seeded random 7-d actions (arm deltas
within +-0.3, gripper sign at random), written as vla-eval's own servers are (a
``PredictModelServer`` whose ``predict`` returns ``{"actions": (7,)}``). It checks what it receives
against the LIBERO convention and keeps it (:attr:`RandomModelServer.seen`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.specs import GRIPPER_CLOSE_POS, IMAGE_RGB, LANGUAGE, POSITION_DELTA, ROTATION_AA, DimSpec


class RandomModelServer(PredictModelServer):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        #: (episode id, step, image shapes, instruction, state length) of every observation.
        self.seen: list[tuple[str, int, dict[str, tuple[int, ...]], str, int]] = []

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        images = {k: tuple(np.asarray(v).shape) for k, v in obs["images"].items()}
        self.seen.append((ctx.episode_id, ctx.step, images, obs["task_description"], len(obs["states"])))
        arm = self.rng.uniform(-0.3, 0.3, size=6)
        return {"actions": np.append(arm, self.rng.choice([-1.0, 1.0])).astype(np.float32)}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"position": POSITION_DELTA, "rotation": ROTATION_AA, "gripper": GRIPPER_CLOSE_POS}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"agentview": IMAGE_RGB, "wrist": IMAGE_RGB, "language": LANGUAGE}


def run_orchestrator(server: PredictModelServer, output_dir: str, benchmark: dict[str, Any]) -> list[dict]:
    """Serve ``server`` on a free local port and run vla-eval's own ``Orchestrator`` on one
    benchmark entry of its config (``benchmark``: ``benchmark``, ``episodes_per_task``,
    ``params``, ...) over the WebSocket protocol; returns the orchestrator's results."""
    import anyio
    from vla_eval.model_servers.serve import serve_async
    from vla_eval.orchestrator import Orchestrator

    async def main() -> list[dict]:
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_async, server, "127.0.0.1", 0)
            config = {"server": {"url": f"ws://127.0.0.1:{port}"}, "output_dir": output_dir, "benchmarks": [benchmark]}
            results = await Orchestrator(config).run()
            tg.cancel_scope.cancel()
        return results

    return anyio.run(main)
