"""The report's content: the study's tables and charts, built from grouped runs
(:mod:`liberopro.report.runs`) as a renderer-neutral document (sections of paragraphs, tables
and charts) that :mod:`liberopro.report.render` writes as Markdown and as HTML.

Every rate is shown with its 95% interval and the episodes behind it; every difference with its
paired 95% interval and the number of paired episodes (``docs/evaluator.md``, "Metrics").
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from liberopro import EVALUATOR_VERSION
from liberopro.metrics import paired_difference
from liberopro.report.charts import (
    Chart,
    categories_chart,
    difference_chart,
    heatmap_chart,
    shift_chart,
    static_runtime_chart,
    sweep_chart,
)
from liberopro.report.runs import CaseRow, Condition, Policy, Run
from liberopro.runs.comparison import Difference, PairingError, SideRate, compare_runs
from liberopro.schema.public import CATEGORIES, CaseRate, PairedDifference, Rate, shift_sort_key

RECOVERY_PROTOCOLS = ("hold", "retry", "restore")


# ------------------------------------------------------------------------------- document model
@dataclass
class Text:
    """A paragraph (plain text; `backticks` mark code)."""

    text: str


@dataclass
class Heading:
    """A sub-heading inside a section."""

    text: str
    id: str


@dataclass
class Table:
    """A table whose first column names the row."""

    id: str
    caption: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Figure:
    """A chart (drawn as SVG by the renderer)."""

    id: str
    chart: Chart


Block = Text | Heading | Table | Figure


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    intro: list[str]
    sections: list[Section]


# ------------------------------------------------------------------------------- formatting
def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def fmt_rate(r: Rate | None) -> str:
    """``62.5% [40.0, 80.0] n=8`` (a mean over cases adds how many: ``n=40, 5 cases``)."""
    if r is None or r.value is None:
        return "not run"
    ci = f" [{100 * r.ci95[0]:.1f}, {100 * r.ci95[1]:.1f}]" if r.ci95 else " [no interval]"
    cases = f", {_count(r.cases, 'case')}" if r.method == "bootstrap" and r.cases else ""
    return f"{pct(r.value)}{ci} n={r.episodes}{cases}"


def case_cell(c: CaseRow | None) -> str:
    """A case row's rate (:func:`fmt_rate`); ``no valid episode (2 invalid)`` when every episode
    of a run case was invalid."""
    if c is None:
        return "not run"
    if c.rate.value is None and c.invalid:
        return f"no valid episode ({c.invalid} invalid)"
    mark = f" (! {c.unproved.instances} unproved apart)" if c.unproved is not None else ""
    return fmt_rate(c.rate) + mark


#: How the report names each proof verdict (``CaseSummary.proof`` keys).
PROOF_NAMES = {
    "proved_under_shift": "proved under the shift",
    "proved_by_nominal": "proved by the nominal run",
    "unproved": "unproved (in no rate)",
    "not_proved": "without a proof",
}


def proof_cell(counts: dict[str, int]) -> str:
    """Instances per proof verdict, e.g. ``3 proved under the shift, 1 unproved (in no rate)``;
    ``unknown (older summary)`` when a summary has no counts."""
    return ", ".join(f"{n} {PROOF_NAMES.get(k, k)}" for k, n in counts.items()) or "unknown (older summary)"


def fmt_diff(d: PairedDifference | None, cases: int | None = None) -> str:
    """``+12.5 pts [-5.0, +30.0] n=8 pairs``."""
    if d is None or d.value is None:
        return "not paired"
    ci = f" [{100 * d.ci95[0]:+.1f}, {100 * d.ci95[1]:+.1f}]" if d.ci95 else " [no interval]"
    extra = f", {_count(cases, 'case')}" if cases else ""
    return f"{100 * d.value:+.1f} pts{ci} n={_count(d.pairs, 'pair')}{extra}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _case_order(case: str) -> tuple:
    ids = [] if case == "nominal" else case.split("+")
    return (len(ids), [shift_sort_key(i) for i in ids])


def _paired_dict(d: dict) -> PairedDifference | None:
    if d.get("value") is None:
        return None
    return PairedDifference(value=d["value"], ci95=tuple(d["ci95"]) if d.get("ci95") else None, pairs=d.get("pairs", 0))


def _side_rate(side: SideRate | None) -> Rate | None:
    if side is None:
        return None
    return Rate(value=side.success_rate, ci95=side.ci95, episodes=side.episodes, method="wilson")


def _difference(d: Difference) -> PairedDifference | None:
    """A paired difference of :func:`compare_runs` as the charts and tables take it (None
    without pairs)."""
    if d.value is None:
        return None
    return PairedDifference(value=d.value, ci95=d.ci95, pairs=d.pairs)


def _case_rate(c: CaseRow) -> CaseRate:
    """A row as the shared charts take it (:func:`shift_chart` draws the rate; the report's paired
    drop from nominal is in its own table)."""
    return CaseRate(
        case=c.case,
        shift_ids=c.shift_ids,
        shift_names=c.shift_names,
        categories=c.categories,
        kind=c.kind,
        observations=c.observations,
        recovery=c.recovery,
        rate=c.rate,
        invalid_episodes=c.invalid,
    )


# ------------------------------------------------------------------------------- sections
def _runs_section(policies: list[Policy]) -> Section:
    rows = []
    for p in policies:
        for run in p.runs:
            h = run.header
            e = run.summary.episodes
            replan = "-" if h.replan is None else f"{h.replan}" + (" (override)" if h.replan_override else " (own)")
            rows.append(
                [
                    str(run.path),
                    p.label,
                    f"{h.identity_kind}: {h.identity}" if h.identity else h.identity_kind,
                    replan,
                    h.manifest_sha256[:16] + "..." if h.manifest_sha256 else "none (cases given directly)",
                    f"{e.total} ({e.valid} valid)",
                    proof_cell(run.summary.headline.proof),
                    str(h.max_steps or "suite horizon"),
                    str(h.evaluator_version or "?"),
                    h.finished or "?",
                ]
            )
    blocks: list[Block] = [
        Table(
            "runs-table",
            "Run directories and the policy each belongs to",
            [
                "run",
                "policy",
                "identity",
                "replan steps",
                "manifest (content hash)",
                "episodes",
                "instances by proof",
                "horizon cap",
                "evaluator",
                "finished",
            ],
            rows,
        )
    ]
    for p in policies:
        blocks += [Text(f"Note: {p.label}: {n}.") for c in p.conditions.values() for n in c.notes]
        diffs = _provenance_differences(p.runs)
        if diffs:
            blocks.append(
                Text(f"Note: the runs of {p.label} differ in {', '.join(diffs)}; their numbers are combined as given.")
            )
    return Section(
        "runs",
        "Policies and runs",
        [
            Text(
                "Runs are grouped per policy by the policy's name (its `/metadata`) and identity (image digest, "
                "`--policy-cmd` command or `--policy` URL). A policy's runs at the same replan steps are combined into "
                "one set of episodes (an episode in two runs counts once, from the run given first); its runs at its "
                "own replan steps are its standard results."
            ),
            *blocks,
        ],
    )


def _provenance_differences(runs: Sequence[Run]) -> list[str]:
    fields = {
        "evaluator version": lambda r: r.header.evaluator_version,
        "simulator stack": lambda r: sorted(r.header.stack.items()),
        "horizon cap": lambda r: r.header.max_steps,
        "render size": lambda r: r.header.render_size,
        "policy metadata": lambda r: sorted((k, str(v)) for k, v in r.header.metadata.items()),
    }
    return [name for name, get in fields.items() if len({repr(get(r)) for r in runs}) > 1]


def _standard(policies: list[Policy]) -> list[tuple[Policy, Condition]]:
    return [(p, p.standard) for p in policies if p.standard is not None]


def _landscape_section(policies: list[Policy]) -> Section:
    std = _standard(policies)
    sec = Section("landscape", "Overall landscape")
    sec.blocks.append(
        Text(
            "Standard conditions (live observations, no recovery, the policy's own replan steps). Nominal: Wilson 95% "
            "interval; means over cases (overall, static, runtime, each category): percentile bootstrap over tasks and "
            "episodes; n = valid episodes behind the number."
        )
    )
    missing = [p.label for p in policies if p.standard is None]
    if missing:
        sec.blocks.append(
            Text(
                f"No run at its own replan steps (only `--replan-steps` overrides): {', '.join(missing)}; "
                "see the replan-steps sweep."
            )
        )
    if not std:
        return sec
    sec.blocks.append(
        Table(
            "landscape-headline",
            "Nominal and mean success rates per policy",
            ["policy", "nominal", "overall (all single shifts)", "static mean", "runtime mean"],
            [
                [p.label, *(fmt_rate(c.view.metrics[k]) for k in ("nominal", "overall", "static_mean", "runtime_mean"))]
                for p, c in std
            ],
        )
    )
    for kind in ("static", "runtime"):
        sec.blocks.append(
            Table(
                f"landscape-{kind}",
                f"Mean success rate per category, {kind} shifts",
                ["policy", *CATEGORIES],
                [[p.label, *(fmt_rate(c.view.metrics[f"{kind}.{cat}"]) for cat in CATEGORIES)] for p, c in std],
            )
        )
    sec.blocks.append(
        Figure(
            "fig-categories",
            categories_chart(
                [(p.label, c.view.metrics) for p, c in std],
                "Mean success rate per category, static and runtime, per policy, with 95% intervals",
            ),
        )
    )
    points = [(p.label, c.view.metrics["static_mean"], c.view.metrics["runtime_mean"]) for p, c in std]
    if any(s.value is not None and r.value is not None for _, s, r in points):
        sec.blocks.append(Figure("fig-static-runtime", static_runtime_chart(points, "policy")))
    return sec


def _case_notes(std: Any) -> list[str]:
    """The per-case notes under the shift table: runtime shifts not fired, unproved instances scored
    apart, episodes ended ``shift_blocked`` (in the rate) and invalid episodes (in no rate)."""
    kinds: list[tuple[Callable[[Any], Any], Callable[[Any], str]]] = [
        (
            lambda c: c.not_fired,
            lambda c: (
                f"{c.not_fired} episode(s) ended before the runtime shift fired (counted with "
                "their outcome; raise --max-steps)"
            ),
        ),
        (
            lambda c: c.unproved is not None,
            lambda c: (
                f"{c.unproved.instances} unproved instance(s) (the oracle could not be shown to solve "
                f"them) scored apart, in no rate: {c.unproved.successes} of {c.unproved.episodes} valid episode(s) "
                "succeeded"
            ),
        ),
        (
            lambda c: c.blocked,
            lambda c: (
                f"{c.blocked} episode(s) ended shift_blocked (a shift could not be realised after the "
                "policy acted; failures of the policy, counted in the rate)"
            ),
        ),
        (
            lambda c: c.invalid,
            lambda c: (
                f"{c.invalid} invalid episode(s) (the shift could not be realised; in no rate): "
                + "; ".join(r if len(r) <= 200 else r[:197] + "..." for r in c.invalid_reasons[:3])
            ),
        ),
    ]
    cases = [(p, c) for p, cond in std for c in cond.view.cases]
    return [f"{p.label}, {c.case}: {text(c)}" for keep, text in kinds for p, c in cases if keep(c)]


def _shifts_section(policies: list[Policy]) -> Section:
    std = _standard(policies)
    sec = Section("shifts", "Per-shift success rates and paired drops from nominal")
    sec.blocks.append(
        Text(
            "Per case: the success rate (mean over tasks of per-task rates) with its Wilson 95% interval, and the drop "
            "from the policy's own nominal, SR(nominal) - SR(case), over the same tasks, init states and seeds with a "
            "paired bootstrap 95% interval (positive: the shift costs success)."
        )
    )
    cases = sorted(
        {c.case for _, cond in std for c in cond.view.cases if c.standard and len(c.shift_ids) <= 1}, key=_case_order
    )
    if not cases:
        sec.blocks.append(Text("No single-shift case was run."))
        return sec
    headers = ["case"]
    for p, _ in std:
        headers += [f"{p.label}: success rate", f"{p.label}: drop from nominal (paired)"]
    rows = []
    for case in cases:
        first = next(c for _, cond in std for c in cond.view.cases if c.case == case)
        row = [first.label if case != "nominal" else "nominal"]
        for _, cond in std:
            c = cond.view.row(case)
            row += [case_cell(c), "-" if case == "nominal" else fmt_diff(c.drop) if c else "not run"]
        rows.append(row)
    sec.blocks.append(Table("shift-rates", "Success rate per case and paired drop from nominal", headers, rows))
    sec.blocks += [Text("Note: " + n) for n in _case_notes(std)]
    singles = [c for c in cases if c != "nominal"]
    labels = [next(c for _, cond in std for c in cond.view.cases if c.case == case).label for case in singles]
    if singles:
        sec.blocks.append(
            Figure(
                "fig-drops",
                difference_chart(
                    "Paired drop from nominal per shift, with 95% intervals",
                    labels,
                    [
                        (p.label, [(lambda r: r.drop if r else None)(cond.view.row(case)) for case in singles])
                        for p, cond in std
                    ],
                    "SR(nominal) - SR(shift), percentage points, paired (positive: the shift costs success)",
                ),
            )
        )
    static_ids = sorted(
        {c.shift_ids[0] for _, cond in std for c in cond.view.cases if c.single and c.kind == "static"},
        key=shift_sort_key,
    )
    runtime_ids = sorted(
        {c.shift_ids[0] for _, cond in std for c in cond.view.cases if c.single and c.kind == "runtime"},
        key=shift_sort_key,
    )
    names = {c.shift_ids[0]: c.shift_names[0] for _, cond in std for c in cond.view.cases if c.single}
    if len(std) > 1:
        sec.blocks.append(
            Figure(
                "fig-heatmap",
                heatmap_chart(
                    [(p.label, {c.shift_ids[0]: c.rate for c in cond.view.cases if c.single}) for p, cond in std],
                    static_ids,
                    runtime_ids,
                    names,
                    "policy",
                ),
            )
        )
    for p, cond in std:
        sec.blocks.append(
            Figure(
                f"fig-shifts-{_slug(p.label)}",
                _titled(shift_chart([_case_rate(c) for c in cond.view.cases], cond.view.metrics["nominal"]), p.label),
            )
        )
    return sec


def _titled(chart: Chart, label: str) -> Chart:
    return Chart(f"{label}: {chart.title[0].lower()}{chart.title[1:]}", f"{label}. {chart.alt}", chart.draw, chart.size)


def _pairs_section(policies: list[Policy]) -> Section:
    std = _standard(policies)
    sec = Section("paired", "Paired comparisons between policies")
    sec.blocks.append(
        Text(
            "Per case both policies ran: SR(A) - SR(B) over the episodes with the same task, init state and seed, with a "
            "paired bootstrap 95% interval (tasks, then episodes resampled jointly for both policies); each side's rate "
            "is over those paired episodes (Wilson 95%). Static and runtime means: the mean over those single-shift "
            "cases of the difference, over the starts common to every case. Pairing needs the same instances: the same "
            "manifest (content hash) or, without one, the same instance ids and seeds."
        )
    )
    if len(std) < 2:
        sec.blocks.append(Text("One policy only: nothing to compare."))
        return sec
    for (pa, ca), (pb, cb) in itertools.combinations(std, 2):
        sec.blocks.append(Heading(f"{pa.label} versus {pb.label}", f"pair-{_slug(pa.label)}-{_slug(pb.label)}"))
        try:
            cmp = compare_runs(
                ca.records,
                cb.records,
                a_manifests=ca.manifests,
                b_manifests=cb.manifests,
                a_label=pa.label,
                b_label=pb.label,
            )
        except PairingError as exc:
            sec.blocks.append(Text(f"Not paired: {exc}"))
            continue
        caps = [sorted({str(r.header.max_steps or "suite horizon") for r in c.runs}) for c in (ca, cb)]
        if caps[0] != caps[1]:
            sec.blocks.append(
                Text(
                    f"Caution: the runs stopped episodes at different step limits ({pa.label}: {', '.join(caps[0])}; "
                    f"{pb.label}: {', '.join(caps[1])}), so a difference also measures the limits, not only the "
                    "policies. Run both with the same `--max-steps` (or none: the suite horizon) to compare them."
                )
            )
        rows = [
            [
                r.case,
                fmt_rate(_side_rate(r.a)),
                fmt_rate(_side_rate(r.b)),
                fmt_diff(_difference(r.difference)),
            ]
            for r in cmp.rows
        ]
        for kind in ("static", "runtime"):
            m = cmp.means[kind]
            if m:
                rows.append([f"mean over {kind} single shifts", "-", "-", fmt_diff(_difference(m), m.cases)])
        sec.blocks.append(
            Table(
                f"pair-{_slug(pa.label)}-{_slug(pb.label)}-table",
                f"{pa.label} minus {pb.label}, paired per case",
                ["case", f"{pa.label} (paired episodes)", f"{pb.label} (paired episodes)", f"{pa.label} - {pb.label}"],
                rows,
            )
        )
        for side, only in ((pa.label, cmp.only_a), (pb.label, cmp.only_b)):
            if only:
                sec.blocks.append(Text(f"Run by {side} only (not compared): {', '.join(only)}."))
        singles = [r for r in cmp.rows if r.single or r.case == "nominal"]
        if singles:
            sec.blocks.append(
                Figure(
                    f"fig-pair-{_slug(pa.label)}-{_slug(pb.label)}",
                    difference_chart(
                        f"{pa.label} minus {pb.label} per case, paired, with 95% intervals",
                        [r.case for r in singles],
                        [(f"{pa.label} - {pb.label}", [_difference(r.difference) for r in singles])],
                        f"SR({pa.label}) - SR({pb.label}), percentage points, paired",
                    ),
                )
            )
    return sec


def _frozen_section(policies: list[Policy]) -> Section:
    sec = Section("frozen", "Feedback utilisation: live versus frozen observations")
    sec.blocks.append(
        Text(
            "Under frozen observations the policy keeps receiving its first observation (`--observations live,frozen`). "
            "Gap = SR(live) - SR(frozen) over the starts both ran, paired bootstrap 95% interval; a gap near zero means "
            "the policy barely uses its feedback."
        )
    )
    shown = []
    for p, cond in _standard(policies):
        v = cond.view
        if not v.frozen:
            continue
        shown.append((p, cond))
        rows = []
        for case in sorted(v.frozen, key=_case_order):
            live, frozen = v.row(case), v.row(case, observations="frozen")
            rows.append([live.label if live else case, case_cell(live), case_cell(frozen), fmt_diff(v.frozen[case])])
        if v.frozen_mean is not None:
            rows.append(["mean over cases", "-", "-", fmt_diff(v.frozen_mean, v.frozen_mean_cases)])
        sec.blocks += [
            Heading(p.label, f"frozen-{_slug(p.label)}"),
            Table(
                f"frozen-{_slug(p.label)}-table",
                f"{p.label}: live versus frozen observations",
                ["case", "live", "frozen", "live - frozen (paired)"],
                rows,
            ),
        ]
    if not shown:
        sec.blocks.append(Text("No run with `--observations live,frozen`."))
        return sec
    cases = sorted({c for _, cond in shown for c in cond.view.frozen}, key=_case_order)
    sec.blocks.append(
        Figure(
            "fig-frozen",
            difference_chart(
                "Live minus frozen success rate per case, paired, with 95% intervals",
                cases,
                [(p.label, [cond.view.frozen.get(c) for c in cases]) for p, cond in shown],
                "SR(live) - SR(frozen), percentage points, paired",
            ),
        )
    )
    return sec


def _sweep_section(policies: list[Policy]) -> Section:
    sec = Section("replan", "Closed-loop update frequency: replan-steps sweep")
    sec.blocks.append(
        Text(
            "Success rate when the evaluator executes K actions of every chunk before asking the policy again "
            "(`--replan-steps K`, or `--replan-steps @sweep` for the committed values); the policy's own K is marked. "
            "Rates with Wilson (one case) or bootstrap (means) 95% intervals."
        )
    )
    any_sweep = False
    for p in policies:
        swept = [(k, c) for k, c in p.conditions.items() if k is not None]
        if len(swept) < 2:
            continue
        any_sweep = True
        values = [k for k, _ in swept]
        conds = [c for _, c in swept]
        head = [f"K={k}" + (" (own)" if k == p.own_replan else "") for k in values]
        keys = [
            ("nominal", "nominal"),
            ("overall", "overall"),
            ("static_mean", "static mean"),
            ("runtime_mean", "runtime mean"),
        ]
        rows = [[label, *(fmt_rate(c.view.metrics[k]) for c in conds)] for k, label in keys]
        cases = sorted({c.case for cond in conds for c in cond.view.cases if c.single}, key=_case_order)
        for case in cases:
            row_of = [cond.view.row(case) for cond in conds]
            label = next(r.label for r in row_of if r)
            rows.append([label, *(case_cell(r) for r in row_of)])
        sec.blocks += [
            Heading(p.label, f"replan-{_slug(p.label)}"),
            Table(
                f"replan-{_slug(p.label)}-table", f"{p.label}: success rate per replan steps K", ["case", *head], rows
            ),
        ]
        instances = {c.replan: frozenset(r.instance_id for r in c.records) for c in conds}
        if len(set(instances.values())) > 1:
            sec.blocks.append(
                Text(
                    f"Note: {p.label}'s runs at different K evaluated different instances (K="
                    + "; K=".join(f"{k}: {len(v)} instances" for k, v in instances.items())
                    + "): compare the rates of one case across K only where it ran on the same tasks."
                )
            )
        sec.blocks.append(
            Figure(
                f"fig-replan-{_slug(p.label)}",
                sweep_chart(
                    f"{p.label}: success rate against replan steps, with 95% intervals",
                    values,
                    [(label, [c.view.metrics[k] for c in conds]) for k, label in keys if k != "overall"],
                    p.own_replan,
                ),
            )
        )
    if not any_sweep:
        sec.blocks.append(Text("No policy was run at two or more replan-steps values."))
    return sec


def _recovery_gains(cond: Condition) -> dict[str, dict[str, PairedDifference | None]]:
    """Per protocol and case: SR(protocol) - SR(none), paired (computed from the episodes)."""
    rows: dict[tuple[str, str], dict[Any, bool]] = defaultdict(dict)  # (case, protocol) -> pair -> success
    for r in cond.records:
        if r.valid and r.observations == "live":
            rows[(r.case, r.recovery.get("protocol", "none"))][r.pair_key] = r.success
    out: dict[str, dict[str, PairedDifference | None]] = defaultdict(dict)
    for (case, proto), outcomes in rows.items():
        if proto != "none" and (case, "none") in rows:
            d = paired_difference(outcomes, rows[(case, "none")])
            out[proto][case] = _paired_dict(d)
    return out


def _recovery_section(policies: list[Policy]) -> Section:
    sec = Section("recovery", "Post-perturbation recovery: Hold, Retry, Restore")
    sec.blocks.append(
        Text(
            "After a runtime shift fires: Hold (the arm holds still, then the policy resumes), Retry (a fresh start of "
            "the policy's chunking and extra steps), Restore (the arm returned to its starting pose). Gain = SR(protocol) "
            "- SR(none) over the starts both ran, paired bootstrap 95% interval; the mean gain is over the cases run "
            "both ways (`--recovery none,hold,retry,restore`)."
        )
    )
    shown = []
    for p, cond in _standard(policies):
        v = cond.view
        if not v.recovery:
            continue
        shown.append((p, cond))
        gains = _recovery_gains(cond)
        protos = [x for x in RECOVERY_PROTOCOLS if x in v.recovery]
        sec.blocks += [
            Heading(p.label, f"recovery-{_slug(p.label)}"),
            Table(
                f"recovery-{_slug(p.label)}-mean",
                f"{p.label}: mean recovery gain per protocol",
                ["protocol", "mean gain over none (paired)", "cases"],
                [[x, fmt_diff(v.recovery[x][0]), str(v.recovery[x][1])] for x in protos],
            ),
        ]
        cases = sorted({c for x in protos for c in gains.get(x, {})}, key=_case_order)
        rows = []
        for case in cases:
            base = v.row(case)
            row = [base.label if base else case, case_cell(base)]
            for x in protos:
                r = v.row(case, recovery=x)
                row += [case_cell(r), fmt_diff(gains.get(x, {}).get(case))]
            rows.append(row)
        sec.blocks.append(
            Table(
                f"recovery-{_slug(p.label)}-cases",
                f"{p.label}: success rate and gain per case",
                ["case", "none", *(h for x in protos for h in (x, f"{x} gain (paired)"))],
                rows,
            )
        )
        sec.blocks.append(
            Figure(
                f"fig-recovery-{_slug(p.label)}",
                difference_chart(
                    f"{p.label}: recovery gain per case and protocol, paired, with 95% intervals",
                    cases,
                    [(x, [gains.get(x, {}).get(c) for c in cases]) for x in protos],
                    "SR(protocol) - SR(none), percentage points, paired",
                ),
            )
        )
    if not shown:
        sec.blocks.append(Text("No run with `--recovery none,hold,retry,restore`."))
    return sec


def _compositions_section(policies: list[Policy]) -> Section:
    sec = Section("compositions", "Compositions and weakest-single gaps")
    sec.blocks.append(
        Text(
            "Gap = SR(C) - min over constituents SR(c_i), every rate over the composition's own tasks and starts "
            "(paired; a constituent not run leaves no gap). Negative: lower than the weakest constituent alone, which by "
            "itself does not prove an interaction. SR(C) own: over all the composition's valid episodes (Wilson 95%). "
            "`--shifts @compositions` runs the committed set with its constituents and nominal."
        )
    )
    shown = []
    for p, cond in _standard(policies):
        v = cond.view
        if not v.compositions:
            continue
        shown.append((p, cond))
        rows = []
        for comp in sorted(v.compositions, key=lambda c: (c.group, _case_order(c.case))):
            own = v.row(comp.case)
            weakest = f"{comp.weakest}: {fmt_rate(comp.weakest_paired)}" if comp.weakest else "constituent not run"
            rows.append(
                [comp.case, comp.group, case_cell(own), fmt_rate(comp.composition_paired), weakest, fmt_diff(comp.gap)]
            )
        sec.blocks += [
            Heading(p.label, f"compositions-{_slug(p.label)}"),
            Table(
                f"compositions-{_slug(p.label)}-table",
                f"{p.label}: compositions and weakest-single gaps",
                [
                    "composition",
                    "group",
                    "SR(C) own",
                    "SR(C) paired",
                    "weakest constituent (paired SR)",
                    "gap SR(C) - min SR(c_i) (paired)",
                ],
                rows,
            ),
        ]
    if not shown:
        sec.blocks.append(Text("No composition was run."))
        return sec
    cases = sorted({c.case for _, cond in shown for c in cond.view.compositions}, key=_case_order)
    sec.blocks.append(
        Figure(
            "fig-compositions",
            difference_chart(
                "Weakest-single gap per composition, paired, with 95% intervals",
                cases,
                [
                    (p.label, [next((c.gap for c in cond.view.compositions if c.case == case), None) for case in cases])
                    for p, cond in shown
                ],
                "SR(C) - min SR(c_i), percentage points, paired (negative: below the weakest constituent)",
            ),
        )
    )
    return sec


def build_document(policies: list[Policy], title: str = "LIBERO-Pro2.0 report") -> Document:
    """The report of ``policies`` (:func:`liberopro.report.runs.group_policies`)."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    intro = [
        f"Generated {now} by `liberopro report` (evaluator {EVALUATOR_VERSION}) from "
        f"{_count(sum(len(p.runs) for p in policies), 'run')} of "
        f"{len(policies)} {'policy' if len(policies) == 1 else 'policies'}: "
        + ", ".join(p.label for p in policies)
        + ".",
        "Success rate = mean over tasks of the per-task rate. Every rate carries its 95% interval and n, the valid "
        "episodes behind it; every difference carries its paired 95% interval and n, the paired episodes "
        "(docs/evaluator.md, Metrics and Reports).",
    ]
    sections = [
        _runs_section(policies),
        _landscape_section(policies),
        _shifts_section(policies),
        _pairs_section(policies),
        _frozen_section(policies),
        _sweep_section(policies),
        _recovery_section(policies),
        _compositions_section(policies),
    ]
    return Document(title=title, intro=intro, sections=sections)
