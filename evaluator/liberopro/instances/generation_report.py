"""A generation report as Markdown (``liberopro instances report-md``): the report JSON that
:func:`liberopro.instances.generation.report` writes beside a manifest, and the run-time validity
sweep of ``benchmarks/runtime_validity.py``. Light: reads JSON, loads no simulator."""

from __future__ import annotations

from collections import Counter
from typing import Any

from liberopro.schema.manifest import NOMINAL

#: Reference counts of the study this benchmark follows (``docs/definition.md``, "Instances"):
#: shifted instances only (40 tasks x 42 shifts = 1,680 pairs); nominal instances come on top.
REFERENCE = {"train": 1313, "eval": 335, "total": 1648, "pairs": 1680}


def _short(reason: str, limit: int = 400) -> str:
    """A reason for a Markdown list: one line, at most ``limit`` characters (the report JSON
    keeps it whole)."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "… (whole in the report JSON)"


def _dropped_by_stage(dropped: list[dict[str, Any]]) -> list[str]:
    """The report's "Dropped pairs by shift" table (no lines when nothing was dropped)."""
    lines: list[str] = []
    by_stage: dict[str, dict[str, list[str]]] = {}
    for d in dropped:
        task = f"{d['suite'].removeprefix('libero_')}:{d['task_index']}"
        by_stage.setdefault(d["case"], {}).setdefault(d["stage"], []).append(task)
    if by_stage:
        stages = ("applicability", "validation", "proof")
        lines += [
            "",
            "## Dropped pairs by shift",
            "",
            "The tasks (`suite:index`, suite without `libero_`) each shift was dropped on, by stage.",
            "",
            "| case | " + " | ".join(stages) + " |",
            "|---|" + "---|" * len(stages),
        ]
        for case in sorted(by_stage, key=lambda c: (c != NOMINAL, c[:1] != "S", c)):
            cells = " | ".join(", ".join(by_stage[case].get(st, [])) or "-" for st in stages)
            lines.append(f"| {case} | {cells} |")
    return lines


def _fired_by_table(fired_by: dict[str, dict[str, int]]) -> list[str]:
    """The report's "How the runtime shifts fired" table (no lines without runtime shifts)."""
    lines: list[str] = []
    if fired_by:
        lines += [
            "",
            "## How the runtime shifts fired",
            "",
            "Per runtime shift, instances whose shift fired by its trigger phase, by its fallback step, or not",
            "at all, in the instance's validation episode (the oracle with the fallbacks suspended: a shift",
            "fires by its fallback there only where the oracle never reaches its phase).",
            "",
            "| shift | phase | fallback | not fired |",
            "|---|---:|---:|---:|",
        ]
        for sid, c in fired_by.items():
            lines.append(f"| {sid} | {c.get('phase', 0)} | {c.get('fallback', 0)} | {c.get('not_fired', 0)} |")
    return lines


def report_markdown(rep: dict[str, Any], title: str | None = None, note: str = "") -> str:
    """A generation report (:func:`report`, the ``*.report.json`` beside a manifest) as a Markdown
    page: totals against the reference (:data:`REFERENCE`: 1,313 train / 335 eval shifted
    instances), the proof's counts per suite and per shift, and every pair dropped or kept
    unproved with its measured reason (shortened to 400 characters). ``note`` is printed under the title (what the run covers,
    when, how to reproduce it). Raises ``KeyError`` for a report without the proof's counts
    (generated before the proof, or with ``--no-validate``)."""
    from liberopro.catalog import SPECS

    proof = rep["proof"]
    nominal = rep.get("nominal_instances", 0)
    shifted = rep["instances"] - nominal
    ref = REFERENCE.get(rep["split"])
    lines = [f"# {title or rep['split'].capitalize() + ' manifest: generation report'}", ""]
    if note:
        lines += [note.strip(), ""]
    lines += [
        f"- split: `{rep['split']}`; tasks: `{rep.get('tasks', 'all')}`; cases: {rep.get('cases', 'all')}",
        f"- proof init states: {proof['init_states']}; oracle episodes run: {proof['oracle_episodes']}",
        f"- pairs (task, case): {rep['pairs']}; instances: {rep['instances']} "
        f"({nominal} nominal, {shifted} shifted); dropped: {rep['dropped']}",
        f"- shifted instances proved by the oracle: **{proof['shifted_proved']}** of {shifted}",
    ]
    if ref is not None and rep.get("reference_instances") is not None:
        lines.append(
            f"- reference ({rep['split']}): {ref:,} shifted instances; this manifest: {shifted:,} "
            f"({shifted - ref:+,}), proved: {proof['shifted_proved']:,} ({proof['shifted_proved'] - ref:+,})"
        )
    else:
        lines.append(
            f"- reference for the full catalog on every task: {REFERENCE['train']:,} train / "
            f"{REFERENCE['eval']:,} eval shifted instances (this page covers a subset: not comparable)"
        )
    cols = ("proved", "unproved", "not_run", "dropped")
    other: Counter[str] = Counter()
    other_suite: Counter[str] = Counter()
    for d in rep.get("dropped_pairs", []):
        if d["stage"] != "proof":
            other[d["case"]] += 1
            other_suite[d["suite"]] += 1
    lines += [
        "",
        "## Per suite",
        "",
        "| suite | instances | proved | unproved | not run | dropped by proof | dropped otherwise |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for suite, c in proof["per_suite"].items():
        cells = " | ".join(str(c.get(k, 0)) for k in cols)
        lines.append(f"| {suite} | {rep['per_suite'].get(suite, 0)} | {cells} | {other_suite.get(suite, 0)} |")
    lines += [
        "",
        "## Per shift",
        "",
        "| case | category | name | instances | proved | unproved | not run | dropped by proof | dropped otherwise |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    cases = sorted(set(proof["per_shift"]) | set(other), key=lambda c: (c != NOMINAL, c[:1] != "S", c))
    for case in cases:
        c = proof["per_shift"].get(case, {})
        first = SPECS.get(case.split("+")[0])
        cat, name = (first.category, first.name) if first is not None and "+" not in case else ("", "")
        cells = " | ".join(str(c.get(k, 0)) for k in cols)
        lines.append(f"| {case} | {cat} | {name} | {rep['per_shift'].get(case, 0)} | {cells} | {other.get(case, 0)} |")
    dropped = rep.get("dropped_pairs", [])
    lines += _dropped_by_stage(dropped)
    lines += ["", "## Dropped pairs", ""]
    lines += [
        f"- {d['suite']}:{d['task_index']} {d['case']} ({d['stage']}): {_short(d['reason'])}" for d in dropped
    ] or ["None."]
    lines += _fired_by_table(proof.get("fired_by") or {})
    lines += ["", "## Kept unproved", ""]
    lines += [f"- {u['task']} {u['case']}: {_short(u['reason'])}" for u in proof.get("unproved", [])] or ["None."]
    return "\n".join(lines) + "\n"


def runtime_validity_markdown(sweep: dict[str, Any]) -> str:
    """The run-time validity sweep (``benchmarks/runtime_validity.py``'s JSON: ``by_policy`` ->
    shift -> counts, ``source``) as a Markdown section: per policy and runtime shift the episodes,
    how the shift fired (phase, fallback, after a delay), episodes that ended before it fired, and
    the episodes invalid at run time, each with its task and reason. Raises ``KeyError`` for a
    file without ``by_policy``."""
    source = sweep.get("source", {})
    where = (
        f"the runtime instances of `{source['manifest']}` (content hash `{source['content_hash'][:16]}...`)"
        if "manifest" in source
        else "unvalidated draws (no manifest given)"
    )
    lines = [
        "## Run-time validity sweep",
        "",
        f"One episode per instance and policy over {where}: {sweep.get('instances', '?')} instances, "
        f"{sweep.get('episodes', '?')} episodes, {sweep.get('wall_s', '?')} s wall on {sweep.get('workers', 1)} "
        + (
            f"worker(s) for the last {sweep['episodes'] - sweep['resumed_episodes']} (the other "
            f"{sweep['resumed_episodes']} were measured by an earlier run of the sweep and kept with `--resume`) "
            if sweep.get("resumed_episodes")
            else "worker(s) "
        )
        + "(`benchmarks/runtime_validity.py`; init state 0, episodes stopped once the shift has acted,",
        "cameras only for Observation shifts).",
        "",
        "| policy | shift | episodes | fired by phase | by fallback | after a delay | ended before firing | invalid |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    invalid: list[str] = []
    for policy, shifts in sweep["by_policy"].items():
        for sid, c in shifts.items():
            if sid == "total":
                continue
            lines.append(
                f"| {policy} | {sid} | {c['episodes']} | {c['phase']} | {c['fallback']} | {c['delayed']} | "
                f"{c['not_fired']} | {c['invalid']} |"
            )
            invalid += [
                f"- {policy} {sid} {case['task']}: {_short(str(case['reason']))}" for case in c["invalid_cases"]
            ]
        t = shifts.get("total", {})
        if t:
            lines.append(
                f"| {policy} | **all** | {t['episodes']} | {t['phase']} | {t['fallback']} | {t['delayed']} | | "
                f"{t['invalid']} |"
            )
    lines += ["", "Invalid at run time:", ""] + (invalid or ["None."])
    return "\n".join(lines) + "\n"
