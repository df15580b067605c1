"""The solvability proof's verdict travels with every episode (issue 22, item 4): the record
carries it, the summary's rates and headline leave unproved instances out and show them apart
with their count, and records without a verdict (ad-hoc runs, older records) count as before,
marked not proved. Pure computations on records (no simulator)."""

from __future__ import annotations

import json

from liberopro.runs.summary import EpisodeRecord, summarize
from liberopro.schema.manifest import Instance, OracleProof

from .test_metrics_and_compositions import rec


def with_proof(r: EpisodeRecord, proof: str | None) -> EpisodeRecord:
    return r.model_copy(update={"proof": proof})


def records() -> list[EpisodeRecord]:
    """libero_goal:0 and :1 nominal (proved), S01 proved under the shift on task 0 and unproved on
    task 1 (the policy fails there), S12 proved by the nominal run."""
    out = []
    for task in (0, 1):
        for e in (0, 1):
            out.append(with_proof(rec("nominal", task, True, e), "proved_under_shift"))
            out.append(with_proof(rec("S01", task, task == 0, e), "proved_under_shift" if task == 0 else "unproved"))
            out.append(with_proof(rec("S12", task, e == 0, e), "proved_by_nominal"))
    return out


def test_the_record_writes_the_verdict_and_leaves_the_key_out_without_one():
    r = rec("S01", 0, True)
    assert "proof" not in json.loads(r.model_dump_json())  # older lines keep their bytes
    assert EpisodeRecord.model_validate_json(r.model_dump_json()).proof is None
    unproved = with_proof(r, "unproved")
    assert json.loads(unproved.model_dump_json())["proof"] == "unproved"
    assert not unproved.scored and r.scored and with_proof(r, "proved_by_nominal").scored


def test_unproved_instances_are_scored_apart_and_left_out_of_the_headline():
    s = summarize(records(), {})
    s01 = s.case("S01")
    assert s01 is not None and s01.success_rate == 1.0 and s01.episodes == 2 and s01.tasks == 1
    assert s01.proof == {"proved_under_shift": 1, "unproved": 1}
    assert s01.unproved is not None
    assert (s01.unproved.instances, s01.unproved.episodes, s01.unproved.successes) == (1, 2, 0)
    assert s01.unproved.success_rate == 0.0 and s01.invalid_episodes == 0  # unproved is not invalid
    assert s01.drop_from_nominal is not None and s01.drop_from_nominal.pairs == 2  # task 0 only
    s12 = s.case("S12")
    assert s12 is not None and s12.proof == {"proved_by_nominal": 2} and s12.unproved is None
    h = s.headline
    assert h.proof == {"proved_under_shift": 3, "proved_by_nominal": 2, "unproved": 1}
    assert (h.unproved.instances, h.unproved.episodes) == (1, 2)
    assert h.overall.mean == (1.0 + 0.5) / 2  # S01 over task 0 only (1.0), S12 0.5
    with_unproved_counted = summarize([with_proof(r, None) for r in records()], {})
    assert with_unproved_counted.headline.overall.mean == (0.5 + 0.5) / 2  # S01 over both tasks


def test_records_without_a_verdict_count_as_before_marked_not_proved():
    old = [with_proof(r, None) for r in records()]
    s = summarize(old, {})
    assert s.headline.proof == {"not_proved": 6} and s.headline.unproved.instances == 0
    s01 = s.case("S01")
    assert s01 is not None and s01.success_rate == 0.5 and s01.unproved is None
    # a summary stored before the fields loads with empty counts
    raw = s.to_json()
    for c in raw["cases"]:
        c.pop("proof"), c.pop("unproved")
    raw["headline"].pop("proof"), raw["headline"].pop("unproved")
    again = type(s).load(raw)
    assert again.headline.proof == {} and again.cases[1].proof == {}


def test_the_runner_writes_the_manifest_proofs_kind_into_the_record():
    """``episode_record`` (here through ``failed_record``, which builds no scene) takes the verdict
    from the instance's ``oracle`` record; an instance without one gives no key."""
    from liberopro.episode.runner import RunSettings, failed_record
    from liberopro.instances.build import EpisodePlan

    from .policies import metadata

    proof = OracleProof(
        verdict="proved", basis="nominal", init_states=[0], successes=1, attempts=1, nominal_successes=1
    )
    for oracle, expected in ((proof, "proved_by_nominal"), (None, None)):
        inst = Instance(instance_id="x", suite="libero_goal", task_index=0, oracle=oracle)
        r = failed_record(EpisodePlan(inst, 0, 0, 0), metadata("m"), RunSettings(), "worker_crashed", "test")
        assert r.proof == expected


def test_the_summary_table_marks_rows_with_unproved_instances():
    from liberopro.cli.common import out
    from liberopro.cli.tables import print_summary, proof_mark

    s = summarize(records(), {})
    assert [proof_mark(c) for c in s.cases] == ["", "!", ""]  # nominal, S01, S12
    adhoc = summarize([with_proof(r, None) for r in records()], {})
    assert {proof_mark(c) for c in adhoc.cases} == {""}  # counted once under the table
    with out.capture() as cap:
        print_summary(adhoc)
    assert "instances: 6 without a proof (no manifest" in " ".join(cap.get().split())
    with out.capture() as cap:
        print_summary(s)
    text = cap.get()
    assert "S01 (object pose) !" in text
    assert "instances: 3 proved under the shift, 2 proved by the nominal run, 1 unproved" in " ".join(text.split())
    assert "S01 !: 1 unproved instance(s), 2 valid episode(s), 0 success(es) (0.0%)" in " ".join(text.split())


def test_the_report_shows_unproved_instances_apart(tmp_path):
    from liberopro.report import write_report

    from .report_runs import header, write_run

    run = write_run(tmp_path / "run", records(), header("p"))
    md = write_report([run], tmp_path / "report", charts=False)["markdown"]
    assert md is not None
    text = md.read_text()
    assert "(! 1 unproved apart)" in text  # the S01 cell
    assert "p, S01: 1 unproved instance(s)" in text and "0 of 2 valid episode(s) succeeded" in text
    assert "3 proved under the shift, 2 proved by the nominal run, 1 unproved (in no rate)" in text
