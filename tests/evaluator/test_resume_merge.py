"""Resume, shards and merge without a simulator (liberopro.runs.resume): synthetic run folders
written as ``liberopro evaluate --shard I/N`` writes them (tests/evaluator/test_resume_sim.py runs
the real thing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from liberopro.runs.resume import (
    ResumeError,
    identity_difference,
    kept_records,
    merge_runs,
    record_key,
    shard_plans,
    write_identity,
)
from liberopro.runs.summary import EpisodeRecord, ResultsWriter, read_episodes, summarize

from tests.evaluator.report_runs import record

RECORDS = [
    record(case, task, e, ok=(task + e) % 2 == 0) for case in ("nominal", "S01") for task in (0, 1) for e in (0, 1)
]
SETTINGS = {"render_size": 128, "max_steps": 20}


def _identity(shard: list[int] | None, settings: dict | None = None) -> dict:
    plan = [[*record_key(r), r.init_state_id, r.seed] for r in RECORDS]
    return {
        "plan": plan,
        "instances_sha256": "h",
        "settings": settings or SETTINGS,
        "policy": {"protocol": "liberopro", "metadata": {"policy_name": "zero"}},
        "shard": shard,
    }


def _header(started: str, shard: str | None) -> dict:
    return {
        "evaluator_version": "0.1.0",
        "started": started,
        "finished": started,
        "policy": {"cmd": "zero", "metadata": {"policy_name": "zero"}},
        "settings": SETTINGS,
        "instances": 4,
        "workers": 1,
        **({"shard": shard} if shard else {}),
    }


def _run(path: Path, records: list[EpisodeRecord], shard: list[int] | None, settings: dict | None = None) -> Path:
    """A finished run folder of ``records`` as evaluate writes it."""
    writer = ResultsWriter(path)
    for r in records:
        writer.add(r)
    writer.finish(_header(f"2026-01-0{1 + (shard or [0])[0]}T00:00:00+00:00", shard and f"{shard[0]}/{shard[1]}"))
    ids = dict.fromkeys(r.instance_id for r in records)
    (path / "instances.jsonl").write_text("".join(json.dumps({"instance_id": i}) + "\n" for i in ids))
    write_identity(path, _identity(shard, settings))
    return path


def _shards(tmp_path: Path, n: int) -> list[Path]:
    blocks = [shard_plans(RECORDS, (i, n)) for i in range(n)]  # type: ignore[arg-type]
    return [_run(tmp_path / f"shard-{i}", list(b), [i, n]) for i, b in enumerate(blocks)]


def test_shards_are_contiguous_disjoint_blocks_covering_the_plan():
    plan = list(range(10))
    blocks = [shard_plans(plan, (i, 3)) for i in range(3)]  # type: ignore[arg-type]
    assert blocks == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert shard_plans(plan, None) == plan  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only 10 episode"):
        shard_plans(plan, (0, 11))  # type: ignore[arg-type]


def test_merging_the_shards_gives_the_summary_of_one_run(tmp_path):
    merged = merge_runs(list(reversed(_shards(tmp_path, 3))), tmp_path / "all")
    whole = summarize(RECORDS, _header("2026-01-01T00:00:00+00:00", None)).to_json()
    got = merged.to_json()
    assert got.pop("shards") == [str(tmp_path / f"shard-{i}") for i in (2, 1, 0)]
    assert got.pop("finished") == "2026-01-03T00:00:00+00:00" and got.pop("workers") == 3
    whole.pop("finished"), whole.pop("workers")
    assert got == whole
    assert [r.outcome_key() for r in read_episodes(tmp_path / "all" / "episodes.jsonl")] == [
        r.outcome_key() for r in RECORDS
    ]
    assert json.loads((tmp_path / "all" / "run.json").read_text())["shard"] is None
    assert len((tmp_path / "all" / "instances.jsonl").read_text().splitlines()) == 4


def test_merge_refuses_a_shard_twice_a_missing_one_and_another_run_naming_it(tmp_path):
    s0, s1, s2 = _shards(tmp_path, 3)
    with pytest.raises(ResumeError, match=r"^shard 1/3 given twice: .*shard-1 and .*shard-1$"):
        merge_runs([s0, s1, s1, s2], tmp_path / "x")
    with pytest.raises(ResumeError, match=r"^shard\(s\) 2/3 missing$"):
        merge_runs([s0, s1], tmp_path / "x")
    other = _run(tmp_path / "other", list(shard_plans(RECORDS, (2, 3))), [2, 3], {**SETTINGS, "max_steps": 8})  # type: ignore[arg-type]
    with pytest.raises(ResumeError, match=r"other is a run with other settings: max_steps 20 -> 8"):
        merge_runs([s0, s1, other], tmp_path / "x")
    (s2 / "summary.json").unlink()
    with pytest.raises(ResumeError, match="shard-2 is not finished"):
        merge_runs([s0, s1, s2], tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_cut_last_line_is_dropped_and_a_broken_earlier_line_refused(tmp_path):
    run = _run(tmp_path / "run", RECORDS[:3], None)
    text = (run / "episodes.jsonl").read_text()
    (run / "episodes.jsonl").write_text(text[: len(text) - 40])  # killed while writing the third line
    assert [r.outcome_key() for r in kept_records(run)] == [r.outcome_key() for r in RECORDS[:2]]
    lines = text.splitlines(keepends=True)
    (run / "episodes.jsonl").write_text(lines[0][:50] + "\n" + lines[1])
    with pytest.raises(ResumeError, match="line 1 is not an episode record"):
        kept_records(run)


def test_identity_differences_are_named():
    base = _identity(None)
    assert identity_difference(base, _identity(None)) is None
    fewer = {**base, "plan": base["plan"][:5]}
    assert identity_difference(base, fewer) == "a run of another plan: 3 episode(s) differ (8 planned there, 5 here)"
    other_policy = {**base, "policy": {"protocol": "liberopro", "metadata": {"policy_name": "pi0"}}}
    assert identity_difference(base, other_policy) == 'a run of another policy: policy_name "zero" -> "pi0"'
    assert identity_difference(base, _identity([0, 2])) == "a run of the whole of this plan, not shard 0/2"
    assert identity_difference(_identity([1, 2]), _identity([0, 2]), shard=False) is None
    # a setting added since (video_size) left at None: the run written before it resumes
    assert identity_difference(base, _identity(None, {**SETTINGS, "video_size": None})) is None
    assert identity_difference(base, _identity(None, {**SETTINGS, "video_size": 128})) == (
        "a run with other settings: video_size null -> 128"
    )


def test_what_needs_no_policy_is_checked_before_it_starts(tmp_path):
    """check_before_start: the plan, settings and shard of an earlier run are compared before the
    policy starts; the policy, and a render size the policy's metadata will choose, after."""
    from dataclasses import asdict

    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import make_instance, plan_episodes
    from liberopro.runs.resume import check_before_start, run_identity
    from liberopro.sim.tasks import TaskRef

    plans = plan_episodes([make_instance(TaskRef("libero_goal", 0), [], seed=0)], 2, 0)
    policy = {"protocol": "liberopro", "metadata": {"policy_name": "zero"}}
    write_identity(tmp_path, run_identity(plans, asdict(RunSettings(render_size=128)), policy, None))
    (tmp_path / "episodes.jsonl").write_text("")
    auto = {**asdict(RunSettings()), "render_size": None}
    check_before_start(tmp_path, plans, auto, None, resume=True)  # the same run: nothing to refuse yet
    with pytest.raises(ResumeError, match="other settings: max_steps null -> 5; use another --out or --fresh"):
        check_before_start(tmp_path, plans, {**auto, "max_steps": 5}, None, resume=True)
    with pytest.raises(ResumeError, match="other settings: render_size 128 -> 256"):
        check_before_start(tmp_path, plans, {**auto, "render_size": 256}, None, resume=True)
    with pytest.raises(ResumeError, match="a run of the whole of this plan, not shard 1/2"):
        check_before_start(tmp_path, plans, auto, (1, 2), resume=True)
    with pytest.raises(ResumeError, match="another plan"):
        check_before_start(tmp_path, plans[:1], auto, None, resume=True)
    check_before_start(tmp_path, plans[:1], {**auto, "max_steps": 5}, (1, 2), resume=False)  # --fresh
