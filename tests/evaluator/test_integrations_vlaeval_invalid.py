"""Opt-in (marker ``vlaeval``; ``uv sync --frozen --extra vlaeval``): an episode whose shift cannot
be realised at reset reaches vla-eval as an invalid episode, not as a policy failure. Its results
carry ``failure_reason`` ``shift_invalid`` and the reason in ``failure_detail``, count it in
``num_errors``, and the model server is never asked (``docs/integrations.md``). The first test
needs no simulator (a stand-in stepper reports every reset invalid, as
:class:`~liberopro.integrations.stepper.EpisodeStepper` reports it); the second resets a real
scene (``sim``)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from liberopro.instances.build import make_instance
from liberopro.sim.tasks import TaskRef

pytestmark = pytest.mark.vlaeval

TASK = TaskRef("libero_goal", 1)
#: libero_goal:1 under S01+D19, instance seed 0, draw 1: S01 finds no free placement from init
#: state 0 (env seed 0): measured with reset_validity on init states 0-9 (invalid on 0, 2, 5, 6, 7, 9).
DETAIL = "S01: no valid placement"


@pytest.fixture(autouse=True)
def _vla_eval_installed() -> None:
    """The tier fails, never skips, without its extra (it runs only when asked for: -m vlaeval)."""
    if importlib.util.find_spec("vla_eval") is None:
        pytest.fail("the vlaeval tier needs the vlaeval extra: uv sync --frozen --extra vlaeval")


class _InvalidStepper:
    """Stands in for EpisodeStepper: every reset ends the episode as invalid."""

    def __init__(self, instance, metadata, settings) -> None:
        self.instance = instance

    def reset(self, init_state: int, seed: int):
        from liberopro.integrations.stepper import StepOutcome

        info = {"is_success": False, "valid": False, "termination_reason": "shift_invalid", "detail": DETAIL}
        return StepOutcome(observation=None, terminated=True, info=info)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def test_an_episode_invalid_at_reset_is_reported_invalid(tmp_path, monkeypatch):
    import liberopro.integrations.vla_eval as module

    from .vlaeval_server import RandomModelServer, run_orchestrator

    inst = make_instance(TASK, ["S01", "D19"], 0)
    monkeypatch.setattr(module, "first_valid_draw", lambda *args, **kwargs: inst)
    monkeypatch.setattr(module, "EpisodeStepper", _InvalidStepper)
    server = RandomModelServer(seed=0)
    benchmark = {
        "benchmark": "liberopro.integrations.vla_eval:LiberoProBenchmark",
        "episodes_per_task": 2,
        "params": {"suite": TASK.suite, "task_index": TASK.index, "shifts": "S01+D19", "seed": 5},
    }
    results = run_orchestrator(server, str(tmp_path), benchmark)
    text = json.dumps(results, default=str)
    assert server.seen == [], text[:2000]  # the model server is never asked
    assert results[0]["num_errors"] == 2 and results[0]["tasks"][0]["num_errors"] == 2, text[:2000]
    episodes = results[0]["tasks"][0]["episodes"]
    for e, (state, seed) in zip(episodes, [(0, 5), (1, 6)], strict=True):
        assert e["failure_reason"] == "shift_invalid" and e["metrics"] == {"success": False}, text[:2000]
        assert (
            f"shift_invalid: {inst.instance_id} (S01+D19 on libero_goal:1) from init state {state}, env seed {seed}: {DETAIL}"
            in e["failure_detail"]
        )


@pytest.mark.sim
def test_a_real_reset_that_cannot_realise_its_shift_raises(tmp_path):
    from liberopro.integrations.vla_eval import LiberoProBenchmark, ShiftInvalidAtReset
    from liberopro.schema.manifest import make_header, write_manifest

    inst = make_instance(TASK, ["S01", "D19"], 0)  # draw 1: invalid from init state 0
    path = tmp_path / "m.jsonl"
    write_manifest(path, make_header("train", 0, [inst], episodes=1), [inst])  # type: ignore[arg-type, list-item]
    bench = LiberoProBenchmark(manifest=str(path), image_size=64, render_size=64)
    try:
        with pytest.raises(ShiftInvalidAtReset, match=f"shift_invalid: .* from init state 0, env seed 0: {DETAIL}"):
            bench.reset({"instance_id": inst.instance_id, "episode_idx": 0})  # type: ignore[union-attr]
    finally:
        bench.cleanup()
    assert ShiftInvalidAtReset.phase == "shift_invalid"
