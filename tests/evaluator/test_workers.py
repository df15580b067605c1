"""Several simulator processes (liberopro.runs.workers) without the simulator: the assignment, the default
number of workers, the policy's limit, and a worker process that really dies (``os._exit``) in a real
spawned pool. The records the workers produce are compared with one process's in
``test_cli.py::test_evaluate_with_two_workers_writes_the_records_of_one``."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from liberopro.runs import workers as W

from submission_spec import PolicyMetadata

CASES = ([], ["D01"])


@functools.cache
def _plans(tasks: str = "libero_goal:0,libero_10:1,libero_spatial:2,libero_goal:3", episodes: int = 2):
    from liberopro.instances.build import make_instance, plan_episodes
    from liberopro.sim.tasks import parse_task_list

    instances = [make_instance(ref, case, 0) for case in CASES for ref in parse_task_list(tasks)]
    return tuple(plan_episodes(instances, episodes, 0))


def test_canonical_order_groups_by_task_in_order_of_first_appearance():
    plans = _plans()
    order = W.canonical_order(plans)
    tasks = [str(plans[i].instance.task) for i in order]
    assert sorted(order) == list(range(len(plans)))
    # 4 tasks x (nominal, D01) x 2 episodes, cases interleaved in the plan: each task's 4 together
    assert [tasks[k] for k in range(0, 16, 4)] == ["libero_goal:0", "libero_10:1", "libero_spatial:2", "libero_goal:3"]
    assert all(len(set(tasks[k : k + 4])) == 1 for k in range(0, 16, 4))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_assignment_keeps_tasks_together_and_is_a_pure_function(n):
    plans = _plans()
    shares = W.assign(plans, n)
    assert len(shares) == n
    assert sorted(i for s in shares for i in s) == list(range(len(plans)))
    owner = {}
    for w, share in enumerate(shares):
        for i in share:
            assert owner.setdefault(plans[i].instance.task, w) == w  # one task, one worker
    position = {i: k for k, i in enumerate(W.canonical_order(plans))}
    assert all([position[i] for i in s] == sorted(position[i] for i in s) for s in shares)
    assert W.assign(list(plans), n) == shares  # the same plans, the same split
    assert sum(1 for s in shares if s) == min(n, 4)


def test_assignment_spreads_tasks_by_work_largest_first():
    plans = _plans()
    shares = W.assign(plans, 2)
    # work = episodes x horizon: libero_10 520 -> worker 0, goal:0 300 -> worker 1, goal:3 300 -> worker 1
    # (300 < 520), spatial 220 -> worker 0 (520 < 600): loads 740 and 600
    assert {str(plans[i].instance.task) for i in shares[0]} == {"libero_10:1", "libero_spatial:2"}
    assert {str(plans[i].instance.task) for i in shares[1]} == {"libero_goal:0", "libero_goal:3"}
    with pytest.raises(ValueError, match="at least 1"):
        W.assign(plans, 0)


def test_cgroup_quota_and_memory_are_read_from_their_files(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    assert W.cgroup_cpu_quota(tmp_path / "absent") is None
    cpu_max.write_text("max 100000\n")
    assert W.cgroup_cpu_quota(cpu_max) is None
    cpu_max.write_text("150000 100000\n")
    assert W.cgroup_cpu_quota(cpu_max) == 1.5
    cpus, why = W.available_cpus(cpu_max)
    assert cpus == 1 and "quota of 1.5" in why  # rounded down, never below 1
    cpu_max.write_text("50000 100000\n")
    assert W.available_cpus(cpu_max)[0] == 1
    cpu_max.write_text(f"{64 * 100000} 100000\n")  # a quota above the affinity: the affinity counts
    assert W.available_cpus(cpu_max)[0] == len(os.sched_getaffinity(0))
    cpu_max.write_text("lots\n")
    with pytest.raises(ValueError, match="QUOTA PERIOD"):
        W.cgroup_cpu_quota(cpu_max)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:    5242880 kB\n")
    assert W.available_memory(meminfo) == 5 * 1024**3
    meminfo.write_text("MemTotal:       32000000 kB\n")
    assert W.available_memory(meminfo) is None


def test_default_is_the_smallest_bound_and_says_which():
    gb = 1024**3
    assert W.default_workers(None, 8, (16, "16 CPU(s)"), 64 * gb)[0] == 8  # tasks
    assert W.default_workers(None, 40, (16, "16 CPU(s)"), 64 * gb)[0] == 16  # CPUs
    n, why = W.default_workers(None, 40, (16, "16 CPU(s)"), 9 * gb)
    assert n == 4 and "4 scene(s) of ~2 GB fit in 9.0 GB" in why  # memory
    n, why = W.default_workers(1, 40, (16, "16 CPU(s)"), 64 * gb)
    assert n == 1 and "1 episode(s) at once" in why  # a spec-1.0 policy
    assert W.default_workers(4, 40, (16, "16 CPU(s)"), None)[0] == 4  # memory unknown: no bound
    assert W.default_workers(None, 40, (16, "16 CPU(s)"), 1 * gb)[0] == 1  # never below 1


def test_choice_follows_the_policy_limit_and_the_protocol():
    plans = _plans()
    meta = PolicyMetadata(policy_name="p")
    assert W.policy_limit(meta, in_process=False) == 1  # spec 1.0 declares no concurrency
    assert W.policy_limit(meta, in_process=True) is None  # one instance per worker
    n, why = W.choose_workers(None, meta, in_process=False, protocol="liberopro", plans=plans)
    assert n == 1 and why.startswith("workers: 1 (default: ")
    with pytest.raises(ValueError, match="--workers 2: the policy declares it runs 1 episode"):
        W.choose_workers(2, meta, in_process=False, protocol="liberopro", plans=plans)
    n, why = W.choose_workers(2, meta, in_process=False, protocol="openvla", plans=plans)
    assert n == 2 and "queue their requests" in why
    n, why = W.choose_workers(9, meta, in_process=True, protocol="liberopro", plans=plans)
    assert n == 4 and "only 4 task(s)" in why
    with pytest.raises(ValueError, match="at least 1"):
        W.choose_workers(0, meta, in_process=True, protocol="liberopro", plans=plans)


# ---------------------------------------------------------------- a worker process that dies
def _noop_init(access, meta, settings) -> None:
    return None


def crashing_target(plan) -> str:
    """A worker's episode: dies (``os._exit``) on libero_10:1 always, on libero_spatial:2 in its
    first process only (a marker file in ``$LP_TEST_MARKERS``); else the record of a finished
    episode (built without the simulator)."""
    from liberopro.episode.runner import RunSettings, failed_record
    from liberopro.oracle.policy import oracle_metadata

    task = str(plan.instance.task)
    marker = Path(os.environ["LP_TEST_MARKERS"]) / task
    if task == "libero_10:1" or (task == "libero_spatial:2" and not marker.exists()):
        marker.touch()
        os._exit(3)
    assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["LP_NUM_THREADS"] == "1"
    return failed_record(plan, oracle_metadata(), RunSettings(), "horizon", "ran").model_dump_json()


def test_a_dead_worker_is_replaced_once_then_its_episodes_are_recorded_as_crashed(tmp_path, monkeypatch):
    from liberopro.episode.runner import RunSettings
    from liberopro.oracle.policy import oracle_metadata

    monkeypatch.setenv("LP_TEST_MARKERS", str(tmp_path))
    plans = _plans("libero_goal:0,libero_10:1,libero_spatial:2", 1)  # 3 tasks x 2 cases x 1 episode
    written, arrived, notes = [], [], []
    before = os.environ.get("LP_NUM_THREADS")
    W.run_workers(
        plans,
        3,
        W.PolicyAccess(),
        oracle_metadata(),
        RunSettings(),
        written.append,
        arrived=arrived.append,
        note=notes.append,
        target=crashing_target,
        initializer=_noop_init,
    )
    assert os.environ.get("LP_NUM_THREADS") == before  # the parent's environment is left as it was
    assert len(written) == len(arrived) == 6
    # written in one process's order whatever the order of arrival
    assert [(r.task_key, r.case) for r in written] == [
        (str(plans[i].instance.task), plans[i].instance.case) for i in W.canonical_order(plans)
    ]
    by_task = {}
    for r in written:
        by_task.setdefault(r.task_key, set()).add(r.termination_reason)
    assert by_task == {"libero_goal:0": {"horizon"}, "libero_spatial:2": {"horizon"}, "libero_10:1": {"worker_crashed"}}
    crashed = [r for r in written if r.termination_reason == "worker_crashed"]
    assert all(not r.success and r.steps == 0 and "exit code 3" in r.detail for r in crashed)
    assert all(not r.valid for r in crashed) and all(r.valid for r in written if r not in crashed)  # the platform's
    assert sum("died (exit code 3); running its" in n for n in notes) == 2  # libero_10 and spatial, once each
    assert sum("died again (exit code 3)" in n for n in notes) == 1
