"""A generation report as Markdown (``liberopro instances report-md``): the report JSON that
:func:`liberopro.instances.generation.report` writes beside a manifest, and the run-time validity
sweep of ``benchmarks/runtime_validity.py``. Light: reads JSON, loads no simulator."""

from __future__ import annotations

from collections import Counter
from typing import Any

from liberopro.catalog.proof_basis import needs_own_proof
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


def _fired_by_table(fired_by: dict[str, dict[str, int]], episodes: dict[str, dict[str, int]] | None) -> list[str]:
    """The report's "How the runtime shifts fired" table (no lines without runtime shifts):
    ``fired_by`` counts the validation episodes, ``episodes`` the proof's own (None: a report
    written before the proof recorded them, shown as "?")."""
    lines: list[str] = []
    if fired_by:
        lines += [
            "",
            "## How the runtime shifts fired",
            "",
            "Per runtime shift, how it fired by its trigger phase, by its fallback step, or not at all: in",
            "each instance's validation episode (init state 0, the oracle with the fallbacks suspended: a",
            "shift fires by its fallback there only where the oracle never reaches its phase), and in the",
            "proof's own episodes (one per proof init state, with the instance's fallbacks, as a policy as",
            'slow as the oracle meets them; none for a shift proved by the nominal run: "-").',
            "",
            "| shift | validation: phase | fallback | not fired | proof episodes: phase | fallback | not fired |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for sid, c in fired_by.items():
            e = None if episodes is None else episodes.get(sid)
            proof = (
                "? | ? | ?"
                if episodes is None
                else "- | - | -"
                if e is None
                else f"{e.get('phase', 0)} | {e.get('fallback', 0)} | {e.get('not_fired', 0)}"
            )
            lines.append(
                f"| {sid} | {c.get('phase', 0)} | {c.get('fallback', 0)} | {c.get('not_fired', 0)} | {proof} |"
            )
    return lines


#: The proof's columns per suite and per shift (``proof_counts``), in table order.
PROOF_COLUMNS = ("proved_under_shift", "proved_by_nominal", "unproved", "not_run", "dropped")


def _proof_cells(counts: dict[str, int], case: str | None) -> dict[str, int | str]:
    """One row's proof counts by :data:`PROOF_COLUMNS`. A report written before the two kinds were
    counted apart has ``proved`` only: for a case, the kind follows from its shifts
    (:func:`liberopro.catalog.proof_basis.needs_own_proof`); for a suite it cannot be told
    ("?", the total in the first column)."""
    if "proved" not in counts:
        return {k: counts.get(k, 0) for k in PROOF_COLUMNS}
    out: dict[str, int | str] = {k: counts.get(k, 0) for k in PROOF_COLUMNS}
    if case is None:
        out["proved_under_shift"], out["proved_by_nominal"] = f"{counts['proved']} (both kinds)", "?"
    else:
        ids = [] if case == NOMINAL else case.split("+")
        kind = "proved_under_shift" if needs_own_proof(ids) else "proved_by_nominal"
        out[kind] = counts["proved"]
    return out


def _shifted_proved(proof: dict[str, Any]) -> tuple[int, int]:
    """(proved under the shift, proved by the nominal run) among the shifted instances; from the
    per-shift counts for a report written before the two were counted apart."""
    if "shifted_proved_under_shift" in proof:
        return proof["shifted_proved_under_shift"], proof["shifted_proved_by_nominal"]
    under = by_nominal = 0
    for case, c in proof["per_shift"].items():
        if case != NOMINAL:
            cells = _proof_cells(c, case)
            under += int(cells["proved_under_shift"])
            by_nominal += int(cells["proved_by_nominal"])
    return under, by_nominal


def report_markdown(rep: dict[str, Any], title: str | None = None, note: str = "") -> str:
    """A generation report (:func:`report`, the ``*.report.json`` beside a manifest) as a Markdown
    page: totals against the reference (:data:`REFERENCE`: 1,313 train / 335 eval shifted
    instances), the proof's counts per suite and per shift (proved under the shift and proved by
    the nominal run apart; a report JSON of an older evaluator, with ``proved`` only, is split by
    each case's shifts, per suite shown unsplit), and every pair dropped or kept
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
        "- static shifts valid at reset on init states: "
        + (str(rep["validity_init_states"]) if "validity_init_states" in rep else "[0] (generated before issue 22)"),
        f"- pairs (task, case): {rep['pairs']}; instances: {rep['instances']} "
        f"({nominal} nominal, {shifted} shifted); dropped: {rep['dropped']}",
    ]
    under, by_nominal = _shifted_proved(proof)
    lines += [
        f"- shifted instances proved: {proof['shifted_proved']} of {shifted}: **{under}** under the shift "
        f"(the oracle ran the instance itself and solved it) and **{by_nominal}** by the nominal run (no "
        "episode ran under the shift: it changes what the policy perceives or is told, and the nominal "
        "oracle run of its task stands in)",
    ]
    if ref is not None and rep.get("reference_instances") is not None:
        lines.append(
            f"- reference ({rep['split']}): {ref:,} shifted instances; this manifest: {shifted:,} "
            f"({shifted - ref:+,}), proved under the shift or by the nominal run: {proof['shifted_proved']:,} "
            f"({proof['shifted_proved'] - ref:+,})"
        )
    else:
        lines.append(
            f"- reference for the full catalog on every task: {REFERENCE['train']:,} train / "
            f"{REFERENCE['eval']:,} eval shifted instances (this page covers a subset: not comparable)"
        )
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
        "| suite | instances | proved under the shift | proved by the nominal run | unproved | not run "
        "| dropped by proof | dropped otherwise |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for suite, c in proof["per_suite"].items():
        cells = " | ".join(str(v) for v in _proof_cells(c, None).values())
        lines.append(f"| {suite} | {rep['per_suite'].get(suite, 0)} | {cells} | {other_suite.get(suite, 0)} |")
    lines += [
        "",
        "## Per shift",
        "",
        "| case | category | name | instances | proved under the shift | proved by the nominal run | unproved "
        "| not run | dropped by proof | dropped otherwise |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cases = sorted(set(proof["per_shift"]) | set(other), key=lambda c: (c != NOMINAL, c[:1] != "S", c))
    for case in cases:
        c = proof["per_shift"].get(case, {})
        first = SPECS.get(case.split("+")[0])
        cat, name = (first.category, first.name) if first is not None and "+" not in case else ("", "")
        cells = " | ".join(str(v) for v in _proof_cells(c, case).values())
        lines.append(f"| {case} | {cat} | {name} | {rep['per_shift'].get(case, 0)} | {cells} | {other.get(case, 0)} |")
    dropped = rep.get("dropped_pairs", [])
    lines += _dropped_by_stage(dropped)
    lines += ["", "## Dropped pairs", ""]
    lines += [
        f"- {d['suite']}:{d['task_index']} {d['case']} ({d['stage']}): {_short(d['reason'])}" for d in dropped
    ] or ["None."]
    lines += _fired_by_table(proof.get("fired_by") or {}, proof.get("episodes_fired_by"))
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
