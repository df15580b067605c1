"""The privileged oracle (the scripted controller, tooling only) solves one hard task of each suite
nominally, without cameras (tier: sim), and the bookkeeping of ``liberopro oracle`` (fast).

The hard tasks (:data:`HARD`) are ones the controller failed before issue 11 and needed a fix
for. The committed measurement (``data/oracle_nominal.json``) is checked against issue 11's
per-suite target (>= 95% over init states 0-9); the suites that miss it are named in
:data:`BELOW_TARGET` with their measured floor, and every failing task has its reason there.
"""

from __future__ import annotations

import pytest
from liberopro.oracle.nominal import OracleEpisode, OracleTask, load_nominal, run_task, select_tasks
from liberopro.sim.tasks import SUITES, TaskRef, all_task_refs

#: (task, init states): the tasks the controller failed before issue 11 and needed a fix for: an
#: articulation and a placement in one horizon, the bowl under the open drawer (libero_goal:3,
#: ~280 of its 300 steps), a bowl taken out of a drawer (libero_spatial:4), a flat box beside a
#: taller bottle that the palm must clear (libero_object:1, init states 1 and 2 missed before),
#: two moka pots grasped by their handles and set side by side (libero_10:8), the mug slid into
#: the microwave through its door opening (libero_10:9) and the bowl tucked under the middle
#: drawer's handle into the bottom drawer, which is then closed (libero_10:3): both 0/10 before.
HARD = [
    (TaskRef("libero_goal", 3), [0]),
    (TaskRef("libero_spatial", 4), [0]),
    (TaskRef("libero_object", 1), [1, 2]),
    (TaskRef("libero_10", 8), [0]),
    (TaskRef("libero_10", 9), [0]),
    (TaskRef("libero_10", 3), [0]),
]

#: Suites below issue 11's 95% target in the committed measurement, with the floor it measured
#: (every failing task carries its reason in the file's ``failures``).
BELOW_TARGET: dict[str, float] = {}


@pytest.mark.sim
@pytest.mark.parametrize(("ref", "inits"), HARD, ids=[str(r) for r, _ in HARD])
def test_oracle_solves_a_hard_task_of_each_suite(ref: TaskRef, inits: list[int]) -> None:
    result = run_task(ref, inits)
    failures = [(e.init_state, e.stage, e.steps) for e in result.episodes if not e.success]
    assert not failures, f"{ref}: failed (init state, stage, steps) {failures}"


def test_select_tasks_all_and_evaluate_syntax() -> None:
    assert select_tasks("all") == all_task_refs()
    assert select_tasks("libero_goal:3,libero_10") == [TaskRef("libero_goal", 3)] + [
        TaskRef("libero_10", i) for i in range(10)
    ]
    with pytest.raises(ValueError, match="libero_goal:x"):
        select_tasks("libero_goal:x")


def test_task_summary_counts_successes_only() -> None:
    r = OracleTask("libero_goal:0", 300)
    r.episodes = [
        OracleEpisode(0, True, 120, "done", 1.0),
        OracleEpisode(1, False, 300, "place x: carry", 2.0),
        OracleEpisode(2, True, 100, "done", 1.0),
    ]
    assert r.summary() == {
        "successes": 2,
        "attempts": 3,
        "fastest_success_steps": 100,
        "mean_success_steps": 110.0,
    }
    assert OracleTask("libero_goal:0", 300).summary()["fastest_success_steps"] is None


def test_committed_measurement_covers_every_task_and_meets_the_target() -> None:
    import json

    from liberopro.oracle.nominal import NOMINAL_PATH

    doc = json.loads(NOMINAL_PATH.read_text())
    nominal = load_nominal()
    assert set(nominal) == {str(r) for r in all_task_refs()}
    assert doc["settings"]["init_states"] == list(range(10)) and doc["settings"]["complete"]
    for suite in SUITES:
        rows = [v for k, v in nominal.items() if k.startswith(suite + ":")]
        ok, n = sum(v["successes"] for v in rows), sum(v["attempts"] for v in rows)
        assert ok / n >= BELOW_TARGET.get(suite, 0.95) - 1e-9, f"{suite}: {ok}/{n}"
        for v in rows:
            assert v["fastest_success_steps"] is None or 0 < v["fastest_success_steps"] <= TaskRef(suite, 0).horizon
    failing = {k for k, v in nominal.items() if v["successes"] < v["attempts"]}
    assert set(doc["failures"]) == failing and all(doc["failures"].values())


def test_oracle_command_refuses_bad_tasks_before_building_a_scene() -> None:
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["oracle", "--tasks", "libero_goal:11"])
    assert res.exit_code == 2 and "libero_goal:11" in res.output
    res = CliRunner().invoke(app, ["oracle", "--tasks", "libero_goal:1", "--max-steps", "0"])
    assert res.exit_code == 2
