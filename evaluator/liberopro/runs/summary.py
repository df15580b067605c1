"""Result records: ``episodes.jsonl`` (one line per episode) and ``summary.json``.

Both carry ``schema_version``; the summary records the evaluator version, the simulation stack
versions and the settings, so that every number can be traced to what produced it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liberopro.metrics import (
    PairKey,
    bootstrap_mean_of_rates,
    mean_paired_difference,
    paired_difference,
    success_rate,
    weakest_single_gap,
)
from liberopro.schema.reasons import TerminationReason
from liberopro.schema.results import (
    PROOF_VERDICTS,
    RESULTS_SCHEMA_VERSION,
    EpisodeRecord,
    Headline,
    LatencyStats,
    RunHeader,
    ShiftRecord,
    Summary,
)

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "EpisodeRecord",
    "Headline",
    "LatencyStats",
    "ResultsWriter",
    "RunHeader",
    "ShiftRecord",
    "Summary",
    "case_kind",
    "headline",
    "proof_counts",
    "read_episodes",
    "summarize",
]


def case_kind(shift_records: list[ShiftRecord]) -> str:
    """nominal (no shift), static, runtime, or mixed."""
    kinds = {s.kind for s in shift_records}
    if not kinds:
        return "nominal"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _outcomes(recs: list[EpisodeRecord]) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = defaultdict(list)
    for r in recs:
        if r.valid:
            out[r.task_key].append(r.success)
    return out


def headline(rows: dict[str, list[EpisodeRecord]]) -> Headline:
    """The benchmark's aggregate metrics (``docs/definition.md``, "Metrics" and "Diagnostic
    studies").

    * ``nominal``: SR of the nominal case.
    * ``overall``: mean SR over every single-shift case (static and runtime), with a bootstrap
      interval over tasks and episodes: the leaderboard's ranking score.
    * ``static_mean`` / ``runtime_mean``: mean SR over the single-shift cases of that kind, with
      a bootstrap interval over tasks and episodes.
    * ``categories``: the same per category, static and runtime apart.
    * ``compositions``: for each multi-shift case, SR, the weakest-single gap
      Delta = SR(C) - min_i SR(c_i) with every rate over the composition's own tasks and starts
      (paired per task and episode, :func:`liberopro.metrics.weakest_single_gap`), its bootstrap
      interval, the weakest constituent and its paired rate (None when a constituent was not run).
    * ``live_minus_frozen``: per case run both ways, SR(live) - SR(frozen) over the starts both
      ran, with a paired bootstrap interval; and their mean with its interval.
    * ``recovery_gain``: per protocol, mean over cases run both ways of SR(protocol) - SR(none),
      paired, with its interval.
    Only standard-condition rows (live, no recovery) enter the first four.
    """
    standard = {k: v for k, v in rows.items() if not v[0].diagnostic_label}
    singles = {k: v for k, v in standard.items() if len(v[0].shifts) == 1}

    def group(kind: str | None = None, category: str | None = None) -> dict:
        sel = {
            k: _outcomes(v)
            for k, v in singles.items()
            if (kind is None or v[0].shifts[0].kind == kind)
            and (category is None or v[0].shifts[0].category == category)
        }
        return bootstrap_mean_of_rates(sel)

    categories: dict[str, dict[str, Any]] = {"static": {}, "runtime": {}}
    for v in singles.values():
        s = v[0].shifts[0]
        categories[s.kind].setdefault(s.category, None)
    for kind, cats in categories.items():
        for cat in sorted(cats):
            cats[cat] = group(kind, cat)

    compositions = _compositions(standard)
    frozen, frozen_pairs = _frozen_gaps(rows, standard)
    recovery = _recovery_pairs(rows, standard)
    mean_frozen = mean_paired_difference(frozen_pairs) if frozen_pairs else None
    nominal = standard.get("nominal")
    return Headline.model_validate(
        {
            "nominal": success_rate((r.task_key, r.success) for r in nominal if r.valid) if nominal else None,
            "overall": group(),
            "static_mean": group("static"),
            "runtime_mean": group("runtime"),
            "categories": categories,
            "compositions": compositions,
            "live_minus_frozen": {
                "cases": frozen,
                "mean_gap": mean_frozen["value"] if mean_frozen else None,
                "mean_gap_ci95": mean_frozen["ci95"] if mean_frozen else None,
                "mean_gap_paired_episodes": mean_frozen["pairs"] if mean_frozen else 0,
            },
            "recovery_gain": {p: _gain(g) for p, g in sorted(recovery.items())},
        }
    )


def _sr(recs: list[EpisodeRecord]) -> float | None:
    """The task-averaged success rate of the valid episodes of ``recs``."""
    return success_rate((r.task_key, r.success) for r in recs if r.valid)["success_rate"]


def _paired(recs: list[EpisodeRecord]) -> dict[PairKey, bool]:
    """Start -> success of the valid episodes of ``recs``."""
    return {r.pair_key: r.success for r in recs if r.valid}


def _compositions(standard: dict[str, list[EpisodeRecord]]) -> list[dict[str, Any]]:
    """The headline's ``compositions``: per multi-shift standard row, its SR and its
    weakest-single gap (:func:`headline`)."""
    compositions: list[dict[str, Any]] = []
    for key, recs in standard.items():
        ids = [s.id for s in recs[0].shifts]
        if len(ids) < 2:
            continue
        gap = (
            weakest_single_gap(_paired(recs), {i: _paired(standard[i]) for i in ids if i in standard})
            if all(i in standard for i in ids)
            else None
        )
        compositions.append(
            {
                "case": key,
                "success_rate": _sr(recs),
                # SR of each constituent over its own tasks (context; the gap does not use these)
                "constituents": {i: _sr(standard[i]) if i in standard else None for i in ids},
                # the weakest constituent and its rate over the composition's own episodes
                "weakest_constituent": gap["weakest_single"] if gap else None,
                "weakest_single": gap["constituent_rates"][gap["weakest_single"]]
                if gap and gap["weakest_single"]
                else None,
                "weakest_single_gap": gap["value"] if gap else None,
                "gap_ci95": gap["ci95"] if gap else None,
                "paired_tasks": gap["tasks"] if gap else 0,
                "paired_episodes": gap["pairs"] if gap else 0,
                "paired_rates": {"composition": gap["composition_rate"], **gap["constituent_rates"]} if gap else {},
            }
        )
    return compositions


def _frozen_gaps(
    rows: dict[str, list[EpisodeRecord]], standard: dict[str, list[EpisodeRecord]]
) -> tuple[list[dict[str, Any]], dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]]]:
    """Per case run both ways, SR(live) - SR(frozen) with its paired interval, and the paired
    outcomes their mean is taken over (:func:`headline`)."""
    frozen: list[dict[str, Any]] = []
    frozen_pairs: dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]] = {}
    for recs in rows.values():
        if (
            recs[0].observations == "frozen"
            and recs[0].recovery.get("protocol", "none") == "none"
            and recs[0].case in standard
        ):
            live, fro = _paired(standard[recs[0].case]), _paired(recs)
            d = paired_difference(live, fro)
            if d["value"] is not None:
                frozen_pairs[recs[0].case] = (live, fro)
                frozen.append(
                    {
                        "case": recs[0].case,
                        "live": _sr(standard[recs[0].case]),
                        "frozen": _sr(recs),
                        "gap": d["value"],
                        "ci95": d["ci95"],
                        "paired_episodes": d["pairs"],
                    }
                )
    return frozen, frozen_pairs


def _recovery_pairs(
    rows: dict[str, list[EpisodeRecord]], standard: dict[str, list[EpisodeRecord]]
) -> dict[str, dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]]]:
    """Protocol -> case -> (paired outcomes with the protocol, without) for the cases run both
    ways (:func:`headline`)."""
    recovery: dict[str, dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]]] = defaultdict(dict)
    for recs in rows.values():
        proto = recs[0].recovery.get("protocol", "none")
        if proto != "none" and recs[0].observations == "live" and recs[0].case in standard:
            base, rec = _paired(standard[recs[0].case]), _paired(recs)
            if paired_difference(rec, base)["value"] is not None:
                recovery[proto][recs[0].case] = (rec, base)
    return recovery


def _fired_counts(valid: list[EpisodeRecord]) -> dict[str, Any] | None:
    """For a case with runtime shifts (:class:`~liberopro.schema.results.FiredCounts`): how many
    valid episodes saw every runtime shift fire by its phase, how many by a fallback step (at
    least one), how many ended because one could not be realised (``blocked``: ``shift_blocked``,
    the policy's failure; a shift of such an episode that had not fired counts as ``blocked`` in
    ``by_shift``) and how many ended before one fired; how many of those succeeded (0 when the
    fallback rule holds) and on which tasks; the range of fallback steps; the counts per shift (with ``delayed``: fired after a deferral)."""
    if not any(s.kind == "runtime" for s in (valid[0].shifts if valid else [])):
        return None
    out: dict[str, Any] = {"phase": 0, "fallback": 0, "not_fired": 0, "blocked": 0, "succeeded_before_firing": 0}
    late: set[str] = set()
    steps: list[int] = []
    by_shift: dict[str, dict[str, int]] = {}
    for r in valid:
        runtime = [s for s in r.shifts if s.kind == "runtime"]
        by = [s.fired_by for s in runtime]
        blocked = r.termination_reason == TerminationReason.shift_blocked
        kind = "blocked" if blocked else "not_fired" if None in by else "fallback" if "fallback" in by else "phase"
        out[kind] += 1
        if kind == "not_fired" and r.success:
            out["succeeded_before_firing"] += 1
            late.add(r.task_key)
        for s in runtime:
            counts = by_shift.setdefault(s.id, {"phase": 0, "fallback": 0, "not_fired": 0, "blocked": 0, "delayed": 0})
            counts[s.fired_by or ("blocked" if blocked else "not_fired")] += 1
            if s.fired_by is not None and s.delay_steps:
                counts["delayed"] += 1
            if isinstance(s.params.get("fallback_step"), int):
                steps.append(s.params["fallback_step"])
    out["late_fallback_tasks"] = sorted(late)
    out["fallback_steps"] = [min(steps), max(steps)] if steps else None
    out["by_shift"] = dict(sorted(by_shift.items()))
    return out


def _drop(nominal: dict[PairKey, bool], valid: list[EpisodeRecord]) -> dict[str, Any]:
    """SR(nominal) - SR(case) over the starts both ran (positive: the shift costs success), with
    a paired bootstrap interval."""
    return paired_difference(nominal, {r.pair_key: r.success for r in valid})


def proof_counts(records: list[EpisodeRecord]) -> dict[str, int]:
    """Instances of ``records`` per proof verdict (``liberopro.schema.results.PROOF_VERDICTS``;
    ``not_proved`` for records without one: no manifest proof, or written before the key), the
    verdicts present only, in that order."""
    verdict: dict[str, str] = {r.instance_id: r.proof or "not_proved" for r in records}
    counts = Counter(verdict.values())
    return {v: counts[v] for v in PROOF_VERDICTS if counts[v]}


def _unproved(records: list[EpisodeRecord]) -> dict[str, Any]:
    """The :class:`~liberopro.schema.results.UnprovedRate` of the ``unproved`` episodes of ``records``."""
    recs = [r for r in records if r.proof == "unproved"]
    valid = [r for r in recs if r.valid]
    wins = sum(r.success for r in valid)
    return {
        "instances": len({r.instance_id for r in recs}),
        "episodes": len(valid),
        "successes": wins,
        "success_rate": wins / len(valid) if valid else None,
    }


def _gain(by_case: dict[str, tuple[dict, dict]]) -> dict[str, Any]:
    """Mean recovery gain over cases (protocol minus none, paired), with its interval."""
    d = mean_paired_difference(by_case)
    return {"mean_gain": d["value"], "ci95": d["ci95"], "cases": len(by_case), "paired_episodes": d["pairs"]}


def summarize(records: list[EpisodeRecord], header: RunHeader | dict[str, Any]) -> Summary:
    """The :class:`~liberopro.schema.results.Summary` (``summary.json``) of ``records`` under
    ``header`` (a :class:`~liberopro.schema.results.RunHeader` from
    :func:`~liberopro.schema.results.run_header`, or its dict; ``{}`` for none): per row (case
    with its diagnostic conditions) the task-averaged success rate with its Wilson interval and counts, the paired drop from the policy's own
    nominal (``drop_from_nominal``: SR(nominal) - SR(case) over the same tasks, init states and
    seeds, with a paired bootstrap interval), how runtime shifts fired (``runtime_fired``: by
    phase, by fallback, not fired), and the :func:`headline` metrics. Rates are over the scored
    episodes (``EpisodeRecord.scored``: valid, instance not ``unproved``); each row and the
    headline count instances per proof verdict (``proof``) and summarise the unproved ones apart
    (``unproved``; issue 22, item 4). Records without a verdict (``proof`` missing: ad-hoc runs,
    older records) count as before, as ``not_proved``. ``shift_blocked`` counts episodes whose shift could not be
    realised after the policy acted (failures, in the rate)."""
    rows: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        rows[r.row_key].append(r)
    nominal = {r.pair_key: r.success for r in rows.get("nominal", []) if r.scored}
    cases = []
    for key in sorted(rows, key=lambda c: (not c.startswith("nominal"), c)):
        recs = rows[key]
        valid = [r for r in recs if r.scored]
        rate = success_rate((r.task_key, r.success) for r in valid)
        first = recs[0].shifts
        fired = _fired_counts(valid)
        cases.append(
            {
                "case": key,
                "shift_ids": [s.id for s in first],
                "shift_names": [s.name for s in first],
                "categories": [s.category for s in first],
                "kind": case_kind(first),
                "observations": recs[0].observations,
                "recovery": recs[0].recovery.get("protocol", "none"),
                **rate,
                "invalid_episodes": sum(not r.valid for r in recs),
                "shift_blocked": sum(r.termination_reason == TerminationReason.shift_blocked for r in recs),
                "runtime_not_fired": fired["not_fired"] if fired else 0,
                "invalid_reasons": sorted({r.detail or "" for r in recs if not r.valid}),
                "runtime_fired": fired,
                "drop_from_nominal": _drop(nominal, valid)
                if first and nominal and not recs[0].diagnostic_label
                else None,
                "proof": proof_counts(recs),
                "unproved": _unproved(recs) if any(r.proof == "unproved" for r in recs) else None,
            }
        )
    # the headline leaves the episodes of unproved instances out (issue 22, item 4)
    scored_rows = {k: kept for k, v in rows.items() if (kept := [r for r in v if r.proof != "unproved"])}
    head_metrics = headline(scored_rows).model_dump(mode="json")
    head_metrics |= {"proof": proof_counts(records), "unproved": _unproved(records)}
    head = header.to_json() if isinstance(header, RunHeader) else RunHeader.model_validate(header).to_json()
    return Summary.model_validate(
        {
            "schema_version": RESULTS_SCHEMA_VERSION,
            **head,
            "episodes": {
                "total": len(records),
                "valid": sum(r.valid for r in records),
                "invalid": sum(not r.valid for r in records),
                "shift_blocked": sum(r.termination_reason == TerminationReason.shift_blocked for r in records),
                "successes": sum(r.success for r in records if r.valid),
            },
            "termination_reasons": dict(sorted(Counter(r.termination_reason for r in records).items())),
            "headline": head_metrics,
            "cases": cases,
        }
    )


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

    @staticmethod
    def _line(record: EpisodeRecord) -> str:
        # video and actions only when written: other lines keep their bytes
        unset = {k for k in ("video", "actions") if getattr(record, k) is None}
        return record.model_dump_json(exclude=unset) + "\n"

    def add(self, record: EpisodeRecord) -> None:
        self._fh.write(self._line(record))
        self._fh.flush()
        self.records.append(record)

    def finish(
        self, header: RunHeader | dict[str, Any], order: Callable[[EpisodeRecord], int] | None = None
    ) -> Summary:
        """Close ``episodes.jsonl`` and write ``summary.json`` (:meth:`Summary.to_json`). ``order``:
        each record's position in the plan; records added out of that order (a resumed run's)
        are sorted by it and ``episodes.jsonl`` is rewritten so."""
        self._fh.close()
        if order is not None:
            ranked = sorted(self.records, key=order)
            if ranked != self.records:
                self.records = ranked
                tmp = self.episodes_path.with_suffix(".jsonl.tmp")
                tmp.write_text("".join(self._line(r) for r in ranked))
                tmp.replace(self.episodes_path)
        summary = summarize(self.records, header)
        self.summary_path.write_text(json.dumps(summary.to_json(), indent=2) + "\n")
        return summary


def read_episodes(path: Path) -> list[EpisodeRecord]:
    """Parse an ``episodes.jsonl`` file."""
    return [EpisodeRecord.model_validate_json(line) for line in Path(path).read_text().splitlines() if line.strip()]
