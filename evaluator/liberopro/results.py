"""Result records: ``episodes.jsonl`` (one line per episode) and ``summary.json``.

Both carry ``schema_version``; the summary records the evaluator version, the simulation stack
versions and the settings, so that every number can be traced to what produced it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from liberopro.metrics import success_rate

RESULTS_SCHEMA_VERSION = 1

#: Termination reasons besides the policy's own (``submission_spec.client.FailureReason``).
EVALUATOR_REASONS = ("success", "horizon", "shift_invalid", "evaluator_error")


class LatencyStats(BaseModel):
    """HTTP round trips of ``/act`` in one episode, milliseconds as the evaluator saw them."""

    requests: int = 0
    mean_ms: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    max_ms: float | None = None
    server_mean_ms: float | None = None


class EpisodeRecord(BaseModel):
    """One line of ``episodes.jsonl``.

    ``valid`` is False when a shift could not be realised as stated (``termination_reason``
    ``shift_invalid``): such an episode is reported but counts in no success rate.
    ``shifts`` lists each shift with id, name, category, kind, params, what was applied
    (measured), and for runtime shifts ``fired_at_step`` and ``fired_by`` (phase or fallback).
    ``wall_s`` is the whole episode (reset, settle, loop); ``loop_s`` the policy loop alone.
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: int = RESULTS_SCHEMA_VERSION
    instance_id: str
    case: str
    suite: str
    task_index: int
    task_name: str
    episode_index: int
    init_state_id: int
    seed: int
    shifts: list[dict[str, Any]] = Field(default_factory=list)
    success: bool
    valid: bool = True
    steps: int
    horizon: int
    termination_reason: str
    detail: str | None = None
    phases: dict[str, int] = Field(default_factory=dict)
    instruction: str
    latency: LatencyStats = Field(default_factory=LatencyStats)
    episode_id: str
    wall_s: float
    loop_s: float = 0.0

    def outcome_key(self) -> tuple:
        """Everything that must be identical when the same episode is run again."""
        d = self.model_dump(exclude={"latency", "episode_id", "wall_s", "loop_s"})
        return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in d.items()))


def case_kind(shift_records: list[dict]) -> str:
    kinds = {s["kind"] for s in shift_records}
    if not kinds:
        return "nominal"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def summarize(records: list[EpisodeRecord], header: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` content: per case (nominal, each shift, each composition) the
    task-averaged success rate with its Wilson interval and counts."""
    by_case: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_case[r.case].append(r)
    cases = []
    order = sorted(by_case, key=lambda c: (c != "nominal", c))
    for case in order:
        recs = by_case[case]
        valid = [r for r in recs if r.valid]
        rate = success_rate((f"{r.suite}:{r.task_index}", r.success) for r in valid)
        first = recs[0].shifts
        cases.append({
            "case": case,
            "shift_ids": [s["id"] for s in first],
            "shift_names": [s["name"] for s in first],
            "categories": [s["category"] for s in first],
            "kind": case_kind(first),
            **rate,
            "invalid_episodes": len(recs) - len(valid),
            "invalid_reasons": sorted({r.detail or "" for r in recs if not r.valid}),
        })
    return {
        "schema_version": RESULTS_SCHEMA_VERSION,
        **header,
        "episodes": {
            "total": len(records),
            "valid": sum(r.valid for r in records),
            "invalid": sum(not r.valid for r in records),
            "successes": sum(r.success for r in records if r.valid),
        },
        "termination_reasons": dict(sorted(Counter(r.termination_reason for r in records).items())),
        "cases": cases,
    }


class ResultsWriter:
    """Appends episode records to ``out/episodes.jsonl`` as they finish (flushed per line) and
    writes ``out/summary.json`` at the end."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.episodes_path = self.out_dir / "episodes.jsonl"
        self.summary_path = self.out_dir / "summary.json"
        self._fh = self.episodes_path.open("w")
        self.records: list[EpisodeRecord] = []

    def add(self, record: EpisodeRecord) -> None:
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()
        self.records.append(record)

    def finish(self, header: dict[str, Any]) -> dict[str, Any]:
        self._fh.close()
        summary = summarize(self.records, header)
        self.summary_path.write_text(json.dumps(summary, indent=2) + "\n")
        return summary


def read_episodes(path: Path) -> list[EpisodeRecord]:
    """Parse an ``episodes.jsonl`` file."""
    return [EpisodeRecord.model_validate_json(line) for line in Path(path).read_text().splitlines() if line.strip()]
