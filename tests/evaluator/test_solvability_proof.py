"""The solvability proof of manifest generation (issue 11, item 2; ``docs/instances.md``,
"Solvability proof"): which instances the scripted oracle runs, the drop rule, the instance schema
version that records it, the report's counts and its Markdown page; and one real proof in the
simulator (camera-less, one init state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from liberopro.instances.generation import (
    DroppedPair,
    needs_own_proof,
    never_dropped_by_proof,
    proof_counts,
    proof_init_states,
    proof_verdict,
    report,
)
from liberopro.instances.generation_report import report_markdown
from liberopro.schema.manifest import (
    INSTANCE_SCHEMA_VERSION,
    Instance,
    ManifestError,
    OracleProof,
    ShiftEntry,
    make_header,
    read_manifest,
    write_manifest,
)

BIN = Path(sys.executable).parent


# ------------------------------------------------------------------------------ the drop rule
def test_an_instance_the_oracle_solves_nominally_but_never_under_the_shift_is_dropped():
    verdict, why = proof_verdict([True, True], [False, False], execution=False)
    assert verdict == "drop" and "fails under the shift on every attempt" in why
    # solved nominally on one init state only: still dropped when every shifted attempt fails
    assert proof_verdict([False, True], [False, False], execution=False)[0] == "drop"


def test_one_success_under_the_shift_proves_the_instance():
    assert proof_verdict([True, True], [False, True], execution=False) == ("proved", "")
    assert proof_verdict([False, False], [True, False], execution=False) == ("proved", "")
    assert proof_verdict([True], [True], execution=True) == ("proved", "")


def test_an_execution_shift_is_never_dropped_for_an_oracle_failure():
    verdict, why = proof_verdict([True, True], [False, False], execution=True)
    assert verdict == "unproved" and "never dropped" in why


def test_where_the_oracle_fails_nominally_the_instance_is_kept_unproved():
    verdict, why = proof_verdict([False, False], [False, False], execution=False)
    assert verdict == "unproved" and "does not solve the nominal task" in why


def test_a_shift_not_realised_where_the_oracle_solves_the_task_is_no_evidence():
    """libero_10:1 under S04 (seed 0): the oracle solves the nominal task on init state 1 only, and
    there the blocker could not be placed (the episode was invalid: it moved the orange juice);
    init state 0 fails nominally too. No attempt measured the oracle against the shift, so the
    instance is kept unproved, not dropped (it was dropped before)."""
    verdict, why = proof_verdict([False, True], [False, False], execution=False, shifted_valid=[True, False])
    assert verdict == "unproved" and "could not be realised" in why
    # a realised failure on the init state the oracle solves is evidence: dropped
    assert proof_verdict([False, True], [False, False], execution=False, shifted_valid=[False, True])[0] == "drop"
    # an Execution shift keeps its own reason
    assert "Execution" in proof_verdict([True], [False], execution=True, shifted_valid=[False])[1]
    with pytest.raises(ValueError):
        proof_verdict([True], [False], execution=False, shifted_valid=[True, True])


def test_the_drop_rule_wants_one_result_per_init_state():
    with pytest.raises(ValueError, match="one result per init state"):
        proof_verdict([True], [True, False], execution=False)
    with pytest.raises(ValueError):
        proof_verdict([], [], execution=False)


def test_which_instances_the_oracle_runs_follows_the_catalogs_categories_and_resources():
    own = {"S01", "S02", "S03", "S04", "S05", "D01", "D02", "D03", "D04", "D05"}  # Condition
    own |= {"S06", "S07", "S08", "S09", "D06", "D09"}  # Environment: adds a prop or swaps a model
    own |= {"S17", "S18", "D18", "D19"}  # Robot
    own |= {"S19", "S20", "S21", "D14", "D15", "D16", "D17"}  # Execution
    from liberopro.catalog import SPECS

    assert {sid for sid in SPECS if needs_own_proof([sid])} == own
    assert needs_own_proof([])  # the nominal run proves the others
    assert not needs_own_proof(["S12", "D20"]) and needs_own_proof(["S12", "S01"])
    assert {sid for sid in SPECS if never_dropped_by_proof([sid])} == {
        "S19",
        "S20",
        "S21",
        "D14",
        "D15",
        "D16",
        "D17",
    }


def test_proof_init_states_are_the_manifests_episodes():
    assert proof_init_states("train", 10) == [0, 1]
    assert proof_init_states("all", 10) == [0, 1]
    assert proof_init_states("train", 1) == [0]
    assert proof_init_states("eval", 10) == list(range(10))
    assert proof_init_states("eval", 10, [3, 1, 3]) == [1, 3]
    with pytest.raises(ValueError, match=r"0\.\.49"):
        proof_init_states("train", 10, [50])


# ------------------------------------------------------------------------------ schema and report
def _proof(verdict: str = "proved", basis: str = "shifted", successes: int = 2) -> OracleProof:
    return OracleProof(
        verdict=verdict,  # type: ignore[arg-type]
        basis=basis,  # type: ignore[arg-type]
        init_states=[0, 1],
        successes=successes,
        attempts=2,
        steps=[80, 220],
        stages=["done", "grasp"],
        nominal_successes=2,
        fired_by={"D01": "phase"} if basis == "shifted" else {},
        # the proof's own episodes met it by its fallback on init state 1 (validation: the phase)
        episodes_fired_by=[{"D01": "phase"}, {"D01": "fallback"}] if basis == "shifted" else None,
    )


def _instances() -> list[Instance]:
    def inst(iid, suite, index, sid, proof):
        shifts = [ShiftEntry(id=sid, params={})] if sid else []
        return Instance(instance_id=iid, suite=suite, task_index=index, shifts=shifts, oracle=proof)

    return [
        inst("a", "libero_spatial", 0, None, _proof()),
        inst("b", "libero_spatial", 0, "D01", _proof()),
        inst("c", "libero_spatial", 0, "S19", _proof("unproved", successes=0)),
        inst("d", "libero_spatial", 0, "S12", _proof(basis="nominal")),
        inst("e", "libero_object", 0, "S12", None),
    ]


def test_a_version_1_manifest_is_refused_with_the_advice_to_regenerate(tmp_path):
    assert INSTANCE_SCHEMA_VERSION == 2
    instances = _instances()
    path = tmp_path / "m.jsonl"
    write_manifest(path, make_header("train", 0, instances, episodes=2), instances)
    assert read_manifest(path).instances == instances  # the proof round-trips
    lines = path.read_text().splitlines()
    old = [lines[0]] + [
        json.dumps({k: v for k, v in {**json.loads(ln), "schema_version": 1}.items() if k != "oracle"})
        for ln in lines[1:]
    ]
    path.write_text("\n".join(old) + "\n")
    with pytest.raises(ManifestError, match=r"m\.jsonl:2: .*instance schema version 1 \(before the oracle's") as err:
        read_manifest(path)
    assert "regenerate the manifest with `liberopro instances generate`" in str(err.value)


def test_the_report_counts_proofs_per_shift_and_suite_and_renders_as_markdown():
    instances = _instances()
    dropped = [
        DroppedPair(suite="libero_object", task_index=0, case="S01", stage="proof", reason="horizon"),
        DroppedPair(suite="libero_object", task_index=0, case="S07", stage="applicability", reason="no space"),
    ]
    counts = proof_counts(instances, dropped)
    blank = {"proved_under_shift": 0, "proved_by_nominal": 0, "unproved": 0, "not_run": 0, "dropped": 0}
    assert counts["per_shift"]["S12"] == {**blank, "proved_by_nominal": 1, "not_run": 1}
    assert counts["per_shift"]["D01"] == {**blank, "proved_under_shift": 1}
    assert counts["per_shift"]["S01"] == {**blank, "dropped": 1}
    assert counts["per_suite"]["libero_spatial"] == {
        **blank,
        "proved_under_shift": 2,
        "proved_by_nominal": 1,
        "unproved": 1,
    }
    assert counts["shifted_proved"] == 2  # D01 and S12 (nominal not counted)
    assert (counts["shifted_proved_under_shift"], counts["shifted_proved_by_nominal"]) == (1, 1)
    assert counts["oracle_episodes"] == 2 + 2 + 2  # nominal once per init state, D01 and S19 their own
    assert [u["case"] for u in counts["unproved"]] == ["S19"]
    assert counts["fired_by"] == {"D01": {"phase": 3}}  # from each instance's oracle record (validation)
    assert counts["episodes_fired_by"] == {"D01": {"fallback": 3, "phase": 3}}  # the proof's episodes
    header = make_header("train", 0, instances, episodes=2)
    rep = report(header, dropped, len(instances) + len(dropped), instances)
    page = report_markdown(rep, note="subset")
    assert "| S12 | Environment | lighting | 2 | 0 | 1 | 0 | 1 | 0 | 0 |" in page
    assert "| D01 | Condition | object pose | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in page
    assert "2 of 4: **1** under the shift" in page and "**1** by the nominal run" in page
    assert "| S07 | " in page and "- libero_object:0 S01 (proof): horizon" in page
    assert "| S01 | - | - | object:0 |" in page and "| S07 | object:0 | - | - |" in page  # tasks by shift and stage
    assert "| libero_object | 1 | 0 | 0 | 0 | 1 | 1 | 1 |" in page
    assert "reference (train): 1,313 shifted instances" in page
    assert "| D01 | 3 | 0 | 0 | 3 | 3 | 0 |" in page  # how the runtime shifts fired: validation, proof episodes
    assert "valid at reset on init states: [0] (generated before issue 22)" in page
    page = report_markdown({**rep, "validity_init_states": list(range(10))})
    assert "- static shifts valid at reset on init states: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in page


def test_a_report_of_an_older_evaluator_is_split_by_each_cases_shifts():
    """A report JSON written before the two kinds were counted apart (``proved`` only, no
    ``episodes_fired_by``): per shift, the kind follows from the case's shifts; per suite it
    cannot be told and says so; the proof episodes' firing is unknown ("?")."""
    instances = _instances()
    rep = report(make_header("train", 0, instances, episodes=2), [], len(instances), instances)
    proof = rep["proof"]
    for rows in (proof["per_shift"], proof["per_suite"]):
        for c in rows.values():
            c["proved"] = c.pop("proved_under_shift") + c.pop("proved_by_nominal")
    for key in ("shifted_proved_under_shift", "shifted_proved_by_nominal", "episodes_fired_by"):
        proof.pop(key)
    page = report_markdown(rep)
    assert "| S12 | Environment | lighting | 2 | 0 | 1 | 0 | 1 | 0 | 0 |" in page
    assert "| D01 | Condition | object pose | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in page
    assert "| libero_spatial | 4 | 3 (both kinds) | ? | 1 | 0 | 0 | 0 |" in page
    assert "2 of 4: **1** under the shift" in page
    assert "| D01 | 3 | 0 | 0 | ? | ? | ? |" in page


def test_the_proof_record_keeps_the_bytes_of_a_record_without_episode_firings():
    """``episodes_fired_by`` is not written when unset: manifests generated before it keep their
    content hash; the kind combines verdict and basis."""
    bare = _proof(basis="nominal")
    assert "episodes_fired_by" not in bare.model_dump(mode="json") and bare.kind == "proved_by_nominal"
    own = _proof()
    assert own.model_dump(mode="json")["episodes_fired_by"] == [{"D01": "phase"}, {"D01": "fallback"}]
    assert own.kind == "proved_under_shift" and _proof("unproved").kind == "unproved"
    assert OracleProof.model_validate(own.model_dump(mode="json")) == own


def test_report_md_prints_the_page_and_refuses_a_report_without_the_proof(tmp_path):
    instances = _instances()
    rep = report(make_header("train", 0, instances, episodes=2), [], len(instances), instances)
    good, bad = tmp_path / "r.json", tmp_path / "old.json"
    good.write_text(json.dumps(rep))
    bad.write_text(json.dumps({k: v for k, v in rep.items() if k != "proof"}))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    sweep = tmp_path / "rv.json"  # benchmarks/runtime_validity.py --manifest's shape
    counts = {"episodes": 2, "phase": 1, "fallback": 0, "delayed": 0, "not_fired": 0, "invalid": 1}
    sweep.write_text(
        json.dumps(
            {
                "source": {"manifest": "manifests/train.jsonl", "content_hash": "ab" * 32},
                "instances": 2,
                "episodes": 2,
                "wall_s": 3.0,
                "workers": 1,
                "by_policy": {
                    "random": {
                        "D04": {**counts, "invalid_cases": [{"task": "libero_goal:4", "reason": "no free spot"}]},
                        "total": counts,
                    }
                },
            }
        )
    )
    ok = subprocess.run(
        [str(BIN / "liberopro"), "instances", "report-md", str(good), "--title", "T", "--runtime-validity", str(sweep)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert ok.stdout.startswith("# T\n") and "## Per shift" in ok.stdout
    assert "## Run-time validity sweep" in ok.stdout and "`manifests/train.jsonl`" in ok.stdout
    assert "| random | D04 | 2 | 1 | 0 | 0 | 0 | 1 |" in ok.stdout
    assert "- random D04 libero_goal:4: no free spot" in ok.stdout
    no = subprocess.run(
        [str(BIN / "liberopro"), "instances", "report-md", str(bad)], capture_output=True, text=True, env=env
    )
    assert no.returncode != 0 and "has no 'proof' section" in no.stderr


# ------------------------------------------------------------------------------ a real proof
@pytest.mark.sim  # the scripted oracle steps a real scene (camera-less)
def test_the_oracle_proves_a_physical_instance_through_the_episode_runner():
    """S01 (target moved) on libero_spatial:0, init state 0: the oracle solves the nominal task
    (``data/oracle_nominal.json``) and the shifted one; the nominal episode is cached for the
    task's next instance."""
    from liberopro.instances.build import make_instance
    from liberopro.instances.generation import prove_instance
    from liberopro.sim.tasks import TaskRef

    ref = TaskRef("libero_spatial", 0)
    inst = make_instance(ref, ["S01"], seed=0)
    assert isinstance(inst, Instance)
    cache: dict = {}
    nominal: dict = {}
    try:
        proved, why = prove_instance(inst, cache, [0], nominal)
    finally:
        for scene in cache.values():
            scene.close()
    assert why == "" and proved is not None
    o = proved.oracle
    assert o is not None and o.basis == "shifted" and o.verdict == "proved"
    assert (o.successes, o.attempts, o.nominal_successes, o.init_states) == (1, 1, 1, [0])
    assert 0 < o.steps[0] < ref.horizon and len(o.stages) == 1  # success ends the episode before the horizon
    assert nominal[0].success and 0 < nominal[0].steps < ref.horizon
    assert proved.instance_id == inst.instance_id  # the proof does not change the instance's identity


@pytest.mark.sim  # the scripted oracle steps a real scene (camera-less)
def test_the_oracle_takes_a_drawer_handle_again_after_the_arm_is_pushed_aside():
    """D19 (robot displacement) on libero_goal:0 as seed 0's third draw fixes it: transport trigger,
    fallback step 53, 4.9 cm toward 106.5 deg. The oracle's approach reaches the handle only at
    step ~110, so in the proof the push comes by the fallback, mid-reach: the reach ends short and
    the fingers close on nothing. It used to pull air for 64 steps and end "done" with the drawer
    shut (the pair was dropped by the proof); now it sees the empty grasp and takes the handle
    again (``ScriptedController._articulate``) and the drawer opens (measured: success at step 174)."""
    from liberopro.instances.build import make_instance
    from liberopro.instances.generation import _oracle_episode
    from liberopro.sim.tasks import TaskRef

    inst = make_instance(TaskRef("libero_goal", 0), ["D19"], seed=0, attempt=2)
    assert isinstance(inst, Instance) and inst.shifts[0].params["fallback_step"] == 53
    cache: dict = {}
    try:
        run = _oracle_episode(inst, cache, 0, 0)
    finally:
        for scene in cache.values():
            scene.close()
    assert run.fired_by == {"D19": "fallback"}
    assert run.success, run.describe()
    assert "(attempt 2)" in run.stage, run.stage


def test_a_resumed_sweep_says_which_episodes_this_run_measured():
    from liberopro.instances.generation_report import runtime_validity_markdown

    counts = {"episodes": 4, "phase": 4, "fallback": 0, "delayed": 0, "not_fired": 0, "invalid": 0}
    sweep = {
        "source": {"manifest": "m.jsonl", "content_hash": "cd" * 32},
        "instances": 2,
        "episodes": 4,
        "resumed_episodes": 3,
        "wall_s": 9.0,
        "workers": 2,
        "by_policy": {"oracle": {"D01": {**counts, "invalid_cases": []}, "total": counts}},
    }
    page = runtime_validity_markdown(sweep)
    assert "9.0 s wall on 2 worker(s) for the last 1 (the other 3 were measured by an earlier run" in page
    assert "| oracle | D01 | 4 | 4 | 0 | 0 | 0 | 0 |" in page and "None." in page


@pytest.mark.sim  # the scripted oracle steps a real scene (camera-less)
def test_the_proof_record_says_how_the_shift_fired_in_the_proofs_own_episode():
    """Issue 22, item 6: the proof record's ``episodes_fired_by`` is what its episode did, as the
    same episode run again through ``liberopro evaluate --oracle``'s runner records it (D02 on
    libero_spatial:0, init state 0); ``fired_by`` stays the validation episode's."""
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import EpisodePlan, make_instance
    from liberopro.instances.generation import prove_instance
    from liberopro.oracle.policy import oracle_runner
    from liberopro.sim.tasks import TaskRef

    inst = make_instance(TaskRef("libero_spatial", 0), ["D02"], seed=0)
    assert isinstance(inst, Instance)
    cache: dict = {}
    try:
        proved, why = prove_instance(inst, cache, [0], {}, validation_fired={"D02": "phase"})
        again = oracle_runner(RunSettings(render_size=64), scenes=cache).run_episode(EpisodePlan(inst, 0, 0, 0))
    finally:
        for scene in cache.values():
            scene.close()
    assert proved is not None and proved.oracle is not None, why
    fired = again.shifts[0].fired_by
    assert fired in ("phase", "fallback")
    assert proved.oracle.episodes_fired_by == [{"D02": fired}]
    assert proved.oracle.fired_by == {"D02": "phase"}
    assert proved.oracle.steps == [again.steps] and proved.oracle.kind == "proved_under_shift"
