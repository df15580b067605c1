"""Opt-in (marker ``vlaeval``; ``uv sync --frozen --extra vlaeval``): one real instance run for a
few steps by allenai's vla-evaluation-harness itself, its orchestrator naming our benchmark class
by import string in its config, against a tiny random model server over its WebSocket protocol
(``docs/integrations.md``). Deselected by ``scripts/test.sh`` like the ``lerobot`` tier."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.vlaeval, pytest.mark.sim]

vla_eval = pytest.importorskip("vla_eval", reason="the vlaeval extra: uv sync --frozen --extra vlaeval")

STEPS = 6


def test_vla_eval_runs_an_instance(tmp_path):
    import anyio
    from vla_eval.model_servers.serve import serve_async
    from vla_eval.orchestrator import Orchestrator

    from .vlaeval_server import RandomModelServer

    server = RandomModelServer(seed=0)
    params = {"suite": "libero_goal", "task_index": 1, "shifts": "S14", "image_size": 64, "render_size": 64}

    async def main() -> list[dict]:
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_async, server, "127.0.0.1", 0)
            config = {
                "server": {"url": f"ws://127.0.0.1:{port}"},
                "output_dir": str(tmp_path),
                "benchmarks": [
                    {
                        "benchmark": "liberopro.integrations.vla_eval:LiberoProBenchmark",
                        "episodes_per_task": 2,
                        "max_steps": STEPS,
                        "params": params,
                    }
                ],
            }
            results = await Orchestrator(config).run()
            tg.cancel_scope.cancel()
        return results

    results = anyio.run(main)
    text = json.dumps(results, default=str)
    assert len(server.seen) == 2 * STEPS, text[:2000]  # two episodes, asked at every step
    assert {s[2]["agentview"] for s in server.seen} == {(64, 64, 3)} and {s[4] for s in server.seen} == {8}
    assert server.seen[0][3] == "put the bowl on the stove"
    episodes = [e for r in results for t in r["tasks"] for e in t["episodes"]]
    assert len(episodes) == 2, text[:2000]
    for e in episodes:
        assert e["steps"] == STEPS and e["metrics"]["success"] is False and e["metrics"]["valid"] is True
        assert e["metrics"]["shifts"][0]["id"] == "S14"
