"""The typed results schema (``liberopro.schema.results``, ``docs/results.md``): light to import,
the committed JSON Schema in step with the models, files written as before, old summaries still
read, events round-tripped. No simulator."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from liberopro.runs.summary import summarize
from liberopro.schema.results import (
    EVENT_ADAPTER,
    RESULTS_SCHEMA_VERSION,
    SCHEMA_PATH,
    DoneEvent,
    EpisodeEvent,
    ErrorEvent,
    HelloEvent,
    RunHeader,
    ShiftRecord,
    Summary,
    event_json,
    json_schema,
    parse_event_json,
    render_json_schema,
    run_header,
)

from tests.evaluator.report_runs import RATES_A, header, policy_records

REGENERATE = "uv run --frozen python -m liberopro.schema.results"


def test_committed_json_schema_matches_the_models():
    assert SCHEMA_PATH.read_text() == render_json_schema(), (
        f"docs/results.schema.json is stale: run `{REGENERATE}` and commit it"
    )


def test_the_schema_modules_load_no_simulator():
    code = (
        "import sys, liberopro.schema.results, liberopro.schema.manifest, liberopro.schema.shard; "
        "print([m for m in sys.modules if m.split('.')[0] in ('robosuite', 'mujoco', 'libero', 'cv2')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_summary_file_is_the_model_dump_and_validates_against_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    records = policy_records(RATES_A)
    summary = summarize(records, header("policy-a").model_copy(update={"instances": 3}))
    data = json.loads(json.dumps(summary.to_json()))
    assert list(data)[:2] == ["schema_version", "evaluator_version"]
    assert list(data)[-4:] == ["episodes", "termination_reasons", "headline", "cases"]
    assert "submission_id" not in data and "team" not in data  # a local run writes no platform keys
    assert Summary.load(data).to_json() == data  # reading and writing again changes nothing
    doc = json_schema()
    for name, value in (
        ("Summary", data),
        ("EpisodeRecord", records[0].model_dump(mode="json")),
        ("RunHeader", summary.header.to_json()),
        ("Event", json.loads(event_json(EpisodeEvent(record=records[0])))),
    ):
        jsonschema.validate(value, {**doc, "$ref": f"#/$defs/{name}"})


def test_run_header_writes_only_the_keys_a_writer_gives():
    platform = run_header(
        evaluator_version="0.1.0",
        stack={"mujoco": "2.3.7"},
        started="s",
        finished="f",
        policy={"image_ref": "r", "image_digest": "d", "source": "reference", "protocol": "liberopro", "metadata": {}},
        settings={
            "episodes_per_instance": 10,
            "seed": 0,
            "max_steps": None,
            "request_timeout_s": 30,
            "episode_budget_s": 600,
            "backend": "local",
        },
        instances=2,
        submission_id="sub",
        team="t",
        manifest_sha256="ab",
    )
    data = platform.to_json()
    assert set(data) == {
        "evaluator_version",
        "stack",
        "started",
        "finished",
        "policy",
        "settings",
        "instances",
        "submission_id",
        "team",
        "manifest_sha256",
    }
    assert set(data["policy"]) == {"image_ref", "image_digest", "source", "protocol", "metadata"}
    assert data["settings"]["request_timeout_s"] == 30 and isinstance(data["settings"]["request_timeout_s"], int)
    assert data["settings"]["max_steps"] is None  # a null that was given stays
    assert RunHeader.model_validate(data).to_json() == data


def test_old_and_partial_summaries_still_load():
    """Summaries stored before (the platform's database) may lack keys or carry others."""
    old = {
        "cases": [
            {
                "case": "nominal",
                "success_rate": 0.5,
                "ci95": [0.2, 0.8],
                "episodes": 4,
                "tasks": 1,
                "successes": 2,
                "per_task": {"libero_goal:0": 0.5},
                "a_later_key": 1,
            }
        ],
        "headline": {"overall": {"mean": 0.4, "ci95": [0.3, 0.5], "cases": 2, "episodes": 8}},
        "settings": {"episodes_per_instance": 10},
        "unknown_top_level": True,
    }
    s = Summary.load(old)
    assert "schema_version" not in s.model_fields_set and s.schema_version == RESULTS_SCHEMA_VERSION
    assert s.case("nominal").success_rate == 0.5 and s.case("nominal").a_later_key == 1
    assert s.headline.overall.mean == 0.4 and s.headline.nominal is None and s.headline.compositions == []
    assert s.headline.category("static", "Condition") is None and s.settings.episodes_per_instance == 10
    assert s.to_json()["unknown_top_level"] is True
    assert Summary.load(None).cases == [] and Summary.load('{"cases": []}').episodes.total == 0


def test_shift_records_keep_their_keys():
    static = ShiftRecord.model_validate(
        {"id": "S01", "name": "n", "category": "Condition", "kind": "static", "params": {"x_m": 0.1}, "applied": {}}
    )
    runtime = ShiftRecord.model_validate(
        {
            "id": "D01",
            "name": "n",
            "category": "Condition",
            "kind": "runtime",
            "params": {},
            "applied": {},
            "fired_at_step": None,
            "fired_by": None,
        }
    )
    assert "fired_at_step" not in static.model_dump() and "fired_by" not in static
    assert runtime.model_dump()["fired_at_step"] is None and runtime["fired_by"] is None
    assert static["params"] == {"x_m": 0.1} and static.get("fired_by", "absent") == "absent"
    with pytest.raises(KeyError):
        static["fired_at_step"]  # noqa: B018 - as the dict it replaces


def test_events_round_trip_through_one_union():
    record = policy_records({"D01": 1.0}, diagnostics=False)[0]
    events = [
        HelloEvent(evaluator_version="0.1.0", stack={"mujoco": "2.3.7"}),
        EpisodeEvent(record=record),
        DoneEvent(episodes=1),
        ErrorEvent(kind="policy", reason="policy_timeout", message="slow"),
    ]
    for ev in events:
        back = parse_event_json(event_json(ev))
        assert type(back) is type(ev) and back == ev
    episode = json.loads(event_json(EpisodeEvent(record=record)))
    assert (
        episode["record"] == record.model_dump(mode="json") and episode["record"]["shifts"][0]["fired_by"] == "fallback"
    )
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        EVENT_ADAPTER.validate_python({"type": "nonsense"})
