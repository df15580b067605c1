"""``liberopro demo``'s plan (:mod:`liberopro.runs.quickstart`, fast: no simulator) and the privileged oracle
as a policy through the real evaluation path (:mod:`liberopro.oracle.policy`, tier: sim)."""

from __future__ import annotations

import json

import pytest
from liberopro.oracle.nominal import load_nominal
from liberopro.runs.quickstart import (
    DEMO_SHIFTS,
    DEMO_TASKS,
    EXAMPLE_STEPS,
    ORACLE_EPISODES,
    demo_plan,
    load_measured,
    oracle_steps,
)
from liberopro.sim.tasks import parse_task_list


def _rate(entry: dict) -> float:
    return entry["successes"] / entry["attempts"]


def test_the_demo_runs_the_example_policy_and_the_oracle_labelled_privileged():
    example, oracle = demo_plan("python3")
    assert not example.oracle and example.policy_cmd == "python3 -m submission_spec.examples zero"
    assert example.max_steps == EXAMPLE_STEPS and example.episodes == 1
    assert oracle.oracle and oracle.policy_cmd is None and oracle.episodes == ORACLE_EPISODES
    for words in ("privileged", "reads simulator state", "never a submission"):
        assert words in oracle.label
    assert {example.subdir, oracle.subdir} == {"example-zero", "oracle"}


def test_the_demo_cases_are_ones_where_the_oracles_measured_success_drops():
    measured = load_measured()["tasks"]
    tasks = DEMO_TASKS.split(",")
    cases = DEMO_SHIFTS.split(",")
    assert cases[0] == "nominal" and len(cases) > 1
    for task in tasks:
        assert set(cases) <= set(measured[task]), f"{task}: a demo case was not measured"
        nominal = measured[task]["nominal"]
        assert nominal["valid"] == nominal["attempts"] and _rate(nominal) >= 0.8, f"{task}: oracle fails nominally"
    for case in cases[1:]:
        # the case's mean over the demo's tasks is below nominal's (the summary's success rate)
        shifted = sum(_rate(measured[t][case]) for t in tasks) / len(tasks)
        nominal = sum(_rate(measured[t]["nominal"]) for t in tasks) / len(tasks)
        assert shifted < nominal, f"{case}: the oracle's measured success does not drop ({shifted} vs {nominal})"
        assert all(measured[t][case]["valid"] == measured[t][case]["attempts"] for t in tasks), case
        # and on the init states the demo runs (0..ORACLE_EPISODES-1)
        first = [sum(measured[t][c]["success"][:ORACLE_EPISODES]) for c in (case, "nominal") for t in tasks]
        assert sum(first[: len(tasks)]) < sum(first[len(tasks) :]), f"{case}: no drop on the demo's init states"


def test_the_oracles_horizon_leaves_room_for_its_successes():
    measured = load_measured()
    nominal = load_nominal()
    steps = oracle_steps(measured)
    assert demo_plan()[1].max_steps == steps
    for task in DEMO_TASKS.split(","):
        assert steps >= 1.5 * nominal[task]["fastest_success_steps"], task
        for case in DEMO_SHIFTS.split(","):
            entry = measured["tasks"][task][case]
            assert len(entry["steps"]) == len(entry["success"]) == entry["attempts"]
            assert all(s <= steps for s, ok in zip(entry["steps"], entry["success"], strict=True) if ok)
    with pytest.raises(KeyError):  # a demo case missing from the measurement is an error, not a default
        oracle_steps({"tasks": {t: {} for t in DEMO_TASKS.split(",")}})


def test_the_demo_tasks_exist():
    assert [str(r) for r in parse_task_list(DEMO_TASKS)] == DEMO_TASKS.split(",")


@pytest.mark.sim  # real LIBERO episodes, camera-less (~20 s)
def test_the_oracle_runs_through_the_evaluation_path_and_succeeds(tmp_path):
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import make_instance, plan_episodes
    from liberopro.oracle.policy import ORACLE_POLICY_NAME, OraclePolicy
    from liberopro.runs.evaluation import run_evaluation

    ref = parse_task_list(DEMO_TASKS)[0]
    inst = make_instance(ref, [], 0)
    summary = run_evaluation(
        plan_episodes([inst], 1, 0), tmp_path, local_policy=OraclePolicy, settings=RunSettings(max_steps=150)
    )
    rec = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert rec["termination_reason"] == "success" and rec["steps"] < 150, rec
    assert summary.cases[0].success_rate == 1.0
    policy = json.loads((tmp_path / "summary.json").read_text())["policy"]
    assert policy["in_process"] == ORACLE_POLICY_NAME and policy.get("url") is None and policy.get("cmd") is None
    assert policy["metadata"]["cameras"] == []


def test_the_example_policys_horizon_lets_each_runtime_case_fire():
    # the zero policy never reaches a phase: a runtime shift fires at its fallback step or never
    from liberopro.catalog import get_spec
    from liberopro.catalog.fallbacks import fallback_step

    runtime = [c for c in DEMO_SHIFTS.split(",")[1:] if get_spec(c).kind == "runtime"]
    assert runtime, "the demo shows no runtime shift"
    for task in DEMO_TASKS.split(","):
        for case in runtime:
            phase = get_spec(case).triggers[0]
            assert fallback_step(task, phase) < EXAMPLE_STEPS, (task, case)


@pytest.mark.sim  # 2 x 2 camera-less 8-step episodes, once in two worker processes (~40 s)
def test_the_oracle_in_two_worker_processes_gives_the_records_of_one(tmp_path):
    """Each worker builds its own OraclePolicy (in process, privileged: it reads its worker's scene);
    the records are those of one process apart from wall-clock fields and episode ids."""
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import make_instance, plan_episodes
    from liberopro.oracle.policy import OraclePolicy
    from liberopro.runs.evaluation import run_evaluation
    from liberopro.runs.summary import read_episodes

    plans = plan_episodes([make_instance(ref, [], 0) for ref in parse_task_list(DEMO_TASKS)], 2, 0)
    records, notes = {}, []
    for n in (2, 1):
        out = tmp_path / str(n)
        run_evaluation(
            plans, out, local_policy=OraclePolicy, settings=RunSettings(max_steps=8), workers=n, note=notes.append
        )
        assert json.loads((out / "summary.json").read_text())["workers"] == n
        records[n] = read_episodes(out / "episodes.jsonl")
    assert notes == ["workers: 2 (--workers 2)"]  # in process: no policy limit
    assert [r.outcome_key() for r in records[2]] == [r.outcome_key() for r in records[1]]
    assert len(records[1]) == 4 and all(r.steps == 8 and r.termination_reason == "horizon" for r in records[1])
