"""Opt-in (marker ``vlaeval``; ``uv sync --frozen --extra vlaeval``): one real instance run for a
few steps by allenai's vla-evaluation-harness itself, its orchestrator naming our benchmark class
by import string in its config, against a tiny random model server over its WebSocket protocol
(``docs/integrations.md``). Deselected by ``scripts/test.sh`` like the ``lerobot`` tier."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = [pytest.mark.vlaeval, pytest.mark.sim]


@pytest.fixture(autouse=True)
def _vla_eval_installed() -> None:
    """The tier fails, never skips, without its extra (it runs only when asked for: -m vlaeval)."""
    if importlib.util.find_spec("vla_eval") is None:
        pytest.fail("the vlaeval tier needs the vlaeval extra: uv sync --frozen --extra vlaeval")


STEPS = 6


def test_vla_eval_runs_an_instance(tmp_path):
    from .vlaeval_server import RandomModelServer, run_orchestrator

    server = RandomModelServer(seed=0)
    params = {"suite": "libero_goal", "task_index": 1, "shifts": "S14", "image_size": 64, "render_size": 64}
    benchmark = {
        "benchmark": "liberopro.integrations.vla_eval:LiberoProBenchmark",
        "episodes_per_task": 2,
        "max_steps": STEPS,
        "params": params,
    }
    results = run_orchestrator(server, str(tmp_path), benchmark)
    text = json.dumps(results, default=str)
    assert len(server.seen) == 2 * STEPS, text[:2000]  # two episodes, asked at every step
    assert {s[2]["agentview"] for s in server.seen} == {(64, 64, 3)} and {s[4] for s in server.seen} == {8}
    assert server.seen[0][3] == "put the bowl on the stove"
    episodes = [e for r in results for t in r["tasks"] for e in t["episodes"]]
    assert len(episodes) == 2, text[:2000]
    for e in episodes:
        assert e["steps"] == STEPS and e["metrics"]["success"] is False and e["metrics"]["valid"] is True
        assert e["metrics"]["shifts"][0]["id"] == "S14"


def test_tasks_from_a_manifest(tmp_path):
    from liberopro.instances.build import make_instance
    from liberopro.integrations.vla_eval import LiberoProBenchmark
    from liberopro.schema.manifest import make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    instances = [make_instance(TaskRef("libero_goal", 1), case, seed=0) for case in ([], ["S14"], ["D19"])]
    path = tmp_path / "m.jsonl"
    write_manifest(path, make_header("train", 0, instances, episodes=1), instances)  # type: ignore[arg-type]
    bench = LiberoProBenchmark(manifest=str(path))
    tasks = bench.get_tasks()
    assert [t["instance_id"] for t in tasks] == [i.instance_id for i in instances]  # type: ignore[union-attr]
    assert [t["case"] for t in tasks] == ["nominal", "S14", "D19"] and len({t["name"] for t in tasks}) == 3
    picked = LiberoProBenchmark(manifest=str(path), instance_ids=[tasks[2]["instance_id"]])
    assert [t["case"] for t in picked.get_tasks()] == ["D19"]
    with pytest.raises(ValueError, match="not in"):
        LiberoProBenchmark(manifest=str(path), instance_ids=["inst-nope"])
    assert bench.get_metadata()["max_steps"] == 300 and set(bench.get_observation_spec()) >= {"agentview", "wrist"}
