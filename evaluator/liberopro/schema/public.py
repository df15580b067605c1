"""What of a published result may be shown in public, as typed models (light: no simulator, no
web stack; the leaderboard, the platform's submitter-facing routes and the report all read it).

A :class:`liberopro_platform.models.Result` row holds the whole ``summary.json`` of a run, read
here as :class:`liberopro.schema.results.Summary`. This module copies out of it, field by field, only what the leaderboard shows: per case the success
rate with its counts (successes, valid and invalid episodes), the termination-reason totals, and
the provenance of the number (image digest, spec, evaluator and simulator versions, date). Every
other number is COMPUTED HERE from those published per-case numbers (:mod:`liberopro.metrics`,
"Intervals from published counts"): the headline and category means keep the summary's value
with an interval from the cases' rates and counts, and the drops from nominal, composition gaps,
live-minus-frozen gaps and recovery gains are differences of published rates with unpaired
intervals. The summary's own intervals (bootstrap over tasks, paired over episodes) are never
copied: they depend on how a case's successes split over tasks and on which episodes succeeded,
which a policy can steer per episode (``docs/platform.md``, "What remains observable"). Everything else stays behind, in particular what
could describe a hidden evaluation instance: per-task rates within a case (``per_task``: one
task under one shift is one instance), the reasons an instance was invalid (they quote measured
parameters), the episode seed, the submitted image reference, per-episode records and any media.
The copy is a whitelist: a field added to the summary later is not published until it is added
here. The solvability proof's verdicts are published as counts (instances per verdict, and per case
the unproved instances' episodes and successes): the rates and the ranking are over the instances
that are not unproved, which are shown apart (issue 22, item 4).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field

from liberopro.catalog import CATEGORIES  # the six categories in the benchmark's order (no simulator)
from liberopro.metrics import mean_difference_ci, mean_of_rates_ci, newcombe_difference
from liberopro.schema.results import CaseSummary, MeanRate, SuccessRate, Summary

KINDS: tuple[str, ...] = ("static", "runtime")
SHORT: dict[str, str] = {
    "Condition": "Cond.",
    "Environment": "Env.",
    "Observation": "Obs.",
    "Execution": "Exec.",
    "Robot": "Robot",
    "Language": "Lang.",
}

SUBMISSION_PAGE = "/leaderboard/submissions/{id}"
SUBMISSION_API = "/api/leaderboard/submissions/{id}"


class Rate(BaseModel):
    """A success rate (a fraction in [0, 1]) with its 95% interval and what stands behind it."""

    value: float | None = Field(..., description="Success rate in [0, 1]; null when no episode was run.")
    ci95: tuple[float, float] | None = Field(
        ...,
        description="95% interval [low, high]. wilson: one case, the Wilson score interval at its rate and "
        "valid episodes. mover: a mean over cases, computed from the cases' published rates and valid "
        "episodes only (their Wilson intervals combined, liberopro.metrics.mean_of_rates_ci). bootstrap: "
        "only in local reports (liberopro report), the run's own percentile bootstrap.",
    )
    episodes: int = Field(..., description="Valid episodes behind the rate.")
    method: Literal["wilson", "mover", "bootstrap"]
    cases: int | None = Field(None, description="Cases averaged (means over cases only).")
    tasks: int | None = Field(None, description="Tasks averaged (one case only).")
    successes: int | None = Field(None, description="Successful episodes (one case only).")

    @property
    def interval(self) -> tuple[float, float] | None:
        """``ci95``, or the point itself when a value has no interval."""
        if self.ci95 is not None:
            return self.ci95
        return None if self.value is None else (self.value, self.value)

    @property
    def published(self) -> tuple[float | None, int]:
        """``(value, episodes)``: what the public intervals are computed from
        (:mod:`liberopro.metrics`, "Intervals from published counts")."""
        return self.value, self.episodes


MISSING_MEAN = Rate(value=None, ci95=None, episodes=0, method="mover", cases=0)
MISSING_WILSON = Rate(value=None, ci95=None, episodes=0, method="wilson", tasks=0, successes=0)


class Column(BaseModel):
    """One metric column of the ranking."""

    key: str = Field(..., description="Key in every row's ``metrics`` and the ``sort`` parameter.")
    label: str
    short: str = Field(..., description="The label in the page's narrow column header.")
    group: Literal["headline", "static", "runtime"]
    method: Literal["wilson", "mover"]
    description: str


def _columns() -> list[Column]:
    cols = [
        Column(
            key="overall",
            label="Overall",
            short="Overall",
            group="headline",
            method="mover",
            description="Mean success rate over every single-shift case, static and runtime (the ranking score).",
        ),
        Column(
            key="nominal",
            label="Nominal",
            short="Nominal",
            group="headline",
            method="wilson",
            description="Success rate on the evaluation tasks without any shift.",
        ),
        Column(
            key="static_mean",
            label="Static mean",
            short="Static mean",
            group="headline",
            method="mover",
            description="Mean success rate over the static single-shift cases.",
        ),
        Column(
            key="runtime_mean",
            label="Runtime mean",
            short="Runtime mean",
            group="headline",
            method="mover",
            description="Mean success rate over the runtime single-shift cases.",
        ),
    ]
    for kind in KINDS:
        cols += [
            Column(
                key=f"{kind}.{cat}",
                label=cat,
                short=SHORT[cat],
                group=kind,
                method="mover",
                description=f"Mean success rate over the {kind} {cat} cases.",
            )
            for cat in CATEGORIES
        ]
    return cols


#: The ranking's metric columns, in page order.
COLUMNS: list[Column] = _columns()
COLUMN_BY_KEY: dict[str, Column] = {c.key: c for c in COLUMNS}


class Unproved(BaseModel):
    """Episodes of instances the solvability proof left ``unproved`` (issue 22, item 4): kept out
    of every rate and of the ranking, shown apart. Counts only (no task, no instance)."""

    instances: int = Field(0, description="Unproved instances of the case (or of the run).")
    episodes: int = Field(0, description="Their valid episodes.")
    successes: int = Field(0, description="Successful episodes among them.")
    success_rate: float | None = Field(None, description="successes / episodes; null without episodes.")


class CaseRate(BaseModel):
    """One case (nominal, a single shift, a composition, or a diagnostic condition) of one run,
    aggregated over its tasks and episodes."""

    case: str = Field(..., examples=["S01", "D05+S12", "D10 [frozen]"])
    shift_ids: list[str]
    shift_names: list[str]
    categories: list[str]
    kind: str = Field(..., description="nominal, static, runtime or mixed.")
    observations: str = Field("live", description="live, or frozen (diagnostic: the first observation only).")
    recovery: str = Field("none", description="Recovery protocol (diagnostic): none, hold, retry, restore.")
    rate: Rate
    invalid_episodes: int = Field(0, description="Episodes whose shift could not be realised (in no rate).")
    shift_blocked: int = Field(
        0,
        description="Episodes whose shift could not be realised after the policy acted (shift_blocked): the "
        "policy's failures, counted in the rate.",
    )
    drop_from_nominal: UnpairedDifference | None = Field(
        None,
        description="SR(nominal) - SR(case) of the two published rates (positive: the shift costs), with an "
        "unpaired interval from their counts.",
    )
    unproved: Unproved | None = Field(
        None, description="The case's unproved instances, scored apart (null when it has none)."
    )

    @property
    def standard(self) -> bool:
        return self.observations == "live" and self.recovery == "none"

    @property
    def label(self) -> str:
        return "nominal" if not self.shift_names else " + ".join(self.shift_names)

    @property
    def base_case(self) -> str:
        """The case without its diagnostic conditions: ``D10`` for ``D10 [frozen]``."""
        return self.case.split(" [")[0]


class UnpairedDifference(BaseModel):
    """A difference of two PUBLISHED success rates with an UNPAIRED 95% interval computed from the
    two rates and their valid-episode counts only (:func:`liberopro.metrics.newcombe_difference`).
    Never paired over episodes: a paired interval would publish which hidden episodes succeeded."""

    value: float
    ci95: tuple[float, float] | None = None
    method: Literal["newcombe"] = Field(
        "newcombe", description="Newcombe's hybrid score interval from the two Wilson intervals (unpaired)."
    )


class PairedDifference(BaseModel):
    """A difference of success rates over the same tasks, init states and seeds, with its paired
    bootstrap interval (``liberopro.metrics.paired_bootstrap``). Local reports only
    (``liberopro report``, :mod:`liberopro.report`): the public view never pairs episodes."""

    value: float | None
    ci95: tuple[float, float] | None = None
    pairs: int = Field(0, description="Episodes per side that entered.")


class Composition(BaseModel):
    """A composition of shifts and its weakest-single gap SR(C) - min_i SR(c_i), every rate as
    published (each over its own tasks), with an unpaired interval."""

    case: str
    success_rate: float | None
    constituents: dict[str, float | None] = Field(
        ..., description="Each constituent's published SR (over its own tasks); null when not run."
    )
    weakest_constituent: str | None = None
    weakest_single: float | None = Field(None, description="The weakest constituent's published SR.")
    weakest_single_gap: float | None = Field(
        ..., description="SR(composition) - SR(weakest constituent), both as published; null when one was not run."
    )
    gap_ci95: tuple[float, float] | None = Field(
        None, description="Unpaired (Newcombe) 95% interval of the gap, from the two published rates and counts."
    )


class FrozenGap(BaseModel):
    case: str
    live: float
    frozen: float
    gap: float = Field(..., description="SR(live) - SR(frozen), the two published rates.")
    ci95: tuple[float, float] | None = Field(
        None, description="Unpaired (Newcombe) 95% interval, from the two published rates and counts."
    )


class RecoveryGain(BaseModel):
    mean_gain: float = Field(..., description="Mean over cases of SR(protocol) - SR(none), the published rates.")
    cases: int
    ci95: tuple[float, float] | None = Field(
        None,
        description="Unpaired 95% interval from the published rates and counts (MOVER over their Wilson intervals).",
    )


class Diagnostics(BaseModel):
    """The diagnostic studies of the run, when it ran them (aggregates only)."""

    live_minus_frozen: list[FrozenGap] = []
    live_minus_frozen_mean_gap: float | None = None
    live_minus_frozen_mean_gap_ci95: tuple[float, float] | None = Field(
        None,
        description="Unpaired 95% interval from the published rates and counts (MOVER over their Wilson intervals).",
    )
    recovery_gain: dict[str, RecoveryGain] = {}


class EpisodeCounts(BaseModel):
    total: int = 0
    valid: int = 0
    invalid: int = 0
    successes: int = 0
    shift_blocked: int = 0


class SubmissionMeta(BaseModel):
    """Who submitted what, and everything needed to trace the number."""

    submission_id: str
    team: str
    policy_name: str
    image_digest: str = Field(..., description="Content-addressed id of the image that ran.")
    spec_version: str = Field(..., description="Submission spec version the policy declared.")
    evaluator_version: str
    results_schema_version: int | None = None
    stack: dict[str, str | None] = Field(..., description="Simulator stack versions the evaluator ran on.")
    manifest_sha256: str = Field(
        ..., description="Hash of the (hidden) evaluation manifest: equal hashes, same instances."
    )
    published_at: dt.datetime
    episodes: EpisodeCounts
    instances: int | None = Field(None, description="Number of evaluation instances run.")
    episodes_per_instance: int | None = None
    max_steps: int | None = Field(None, description="Cap on the horizon, when the platform set one.")
    page_url: str
    api_url: str


class PublicResult(BaseModel):
    """The public content of one published result: the submission page's data."""

    meta: SubmissionMeta
    metrics: dict[str, Rate] = Field(..., description="One entry per ranking column (see ``/api/leaderboard``).")
    cases: list[CaseRate]
    compositions: list[Composition] = []
    diagnostics: Diagnostics = Diagnostics()
    termination_reasons: dict[str, int] = Field({}, description="Episodes per termination reason, over the whole run.")
    proof: dict[str, int] = Field(
        {},
        description="Instances per solvability-proof verdict (proved_under_shift, proved_by_nominal, unproved, "
        "not_proved). Every rate and rank is over the instances that are not unproved; empty for results "
        "published before the verdict was recorded.",
    )
    unproved: Unproved = Field(Unproved(), description="The run's unproved instances, scored apart.")

    def standard_case(self, case: str) -> CaseRate | None:
        """The standard-condition row of ``case`` (live observations, no recovery)."""
        for c in self.cases:
            if c.case == case and c.standard:
                return c
        return None

    def single_shift_cases(self) -> list[CaseRate]:
        return [c for c in self.cases if c.standard and len(c.shift_ids) == 1]


# ------------------------------------------------------------------------------ extraction
def _interval(raw: Any) -> tuple[float, float] | None:
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and all(isinstance(v, (int, float)) for v in raw):
        return float(raw[0]), float(raw[1])
    return None


def wilson_rate(raw: SuccessRate | CaseSummary | None) -> Rate:
    """A :func:`liberopro.metrics.success_rate` result (a summary's ``nominal`` or one of its
    cases) as a :class:`Rate` (``per_task`` dropped)."""
    if raw is None or raw.success_rate is None:
        return MISSING_WILSON.model_copy(update={"episodes": raw.episodes if raw is not None else 0})
    return Rate(
        value=raw.success_rate,
        ci95=_interval(raw.ci95),
        episodes=raw.episodes,
        method="wilson",
        tasks=raw.tasks,
        successes=raw.successes,
    )


def mean_rate(raw: MeanRate | None, members: list[CaseRate]) -> Rate:
    """A mean over cases (a headline or category column): the summary's value, cases and episodes,
    with the 95% interval computed from the published rates and valid episodes of ``members``
    (the cases it averages) by :func:`liberopro.metrics.mean_of_rates_ci`, never the summary's
    bootstrap interval. The interval is null when the published cases are not the ones the
    summary averaged (another count: a summary that lost rows)."""
    if raw is None or raw.mean is None:
        return MISSING_MEAN
    rated = [c for c in members if c.rate.value is not None]
    ci = mean_of_rates_ci(c.rate.published for c in rated)["ci95"] if len(rated) == raw.cases else None
    return Rate(value=raw.mean, ci95=_interval(ci), episodes=raw.episodes, method="mover", cases=raw.cases)


def column_cases(cases: list[CaseRate], key: str) -> list[CaseRate]:
    """The published single-shift cases that the ranking column ``key`` averages (``overall``,
    ``static_mean``, ``runtime_mean``, ``<kind>.<Category>``; none for ``nominal``)."""
    singles = [c for c in cases if c.standard and len(c.shift_ids) == 1]
    if key == "overall":
        return singles
    if key in ("static_mean", "runtime_mean"):
        return [c for c in singles if c.kind == key.removesuffix("_mean")]
    kind, _, cat = key.partition(".")
    return [c for c in singles if c.kind == kind and c.categories[:1] == [cat]] if cat else []


def _metrics(head: Any, cases: list[CaseRate]) -> dict[str, Rate]:
    out = {
        "overall": mean_rate(head.overall, column_cases(cases, "overall")),
        "nominal": wilson_rate(head.nominal),
        "static_mean": mean_rate(head.static_mean, column_cases(cases, "static_mean")),
        "runtime_mean": mean_rate(head.runtime_mean, column_cases(cases, "runtime_mean")),
    }
    for kind in KINDS:
        for cat in CATEGORIES:
            key = f"{kind}.{cat}"
            out[key] = mean_rate(head.category(kind, cat), column_cases(cases, key))
    return out


def metrics_of(summary: Summary) -> dict[str, Rate]:
    """The ranking columns of one summary as published (missing parts become rates with value
    None): the means' values are the summary's, their intervals come from the published cases
    (:func:`mean_rate`). A stored summary is read with :meth:`Summary.load` first."""
    return _metrics(summary.headline, public_cases(summary))


def _unpaired(a: Rate | None, b: Rate | None) -> UnpairedDifference | None:
    """SR(a) - SR(b) of two published rates with Newcombe's interval; None when either has no rate."""
    if a is None or b is None:
        return None
    d = newcombe_difference(a.published, b.published)
    return None if d["value"] is None else UnpairedDifference(value=d["value"], ci95=_interval(d["ci95"]))


def public_cases(summary: Summary) -> list[CaseRate]:
    """Every row of the summary's ``cases`` as published: its Wilson rate and counts, and its drop
    from nominal computed from the two published rates (:func:`_unpaired`)."""
    rows = [
        CaseRate(
            case=raw.case,
            shift_ids=raw.shift_ids,
            shift_names=raw.shift_names,
            categories=raw.categories,
            kind=raw.kind or "nominal",
            observations=raw.observations or "live",
            recovery=raw.recovery or "none",
            rate=wilson_rate(raw),
            invalid_episodes=raw.invalid_episodes,
            unproved=_unproved(raw.unproved),
            shift_blocked=raw.shift_blocked,
        )
        for raw in summary.cases
    ]
    nominal = next((c.rate for c in rows if c.case == "nominal" and c.standard), None)
    for c in rows:
        if c.shift_ids and c.standard:
            c.drop_from_nominal = _unpaired(nominal, c.rate)
    return rows


def _unproved(raw: Any) -> Unproved | None:
    """The published counts of a summary's ``unproved`` block (None when absent or empty)."""
    if raw is None or not raw.instances:
        return None
    return Unproved(
        instances=raw.instances, episodes=raw.episodes, successes=raw.successes, success_rate=raw.success_rate
    )


def _compositions(cases: list[CaseRate]) -> list[Composition]:
    """Each standard multi-shift case: its published rate, each constituent's, and the gap to the
    weakest constituent with an unpaired interval (all from the published rates); the gap is null
    when a constituent was not run or has no rate."""
    standard = {c.case: c.rate for c in cases if c.standard}
    out = []
    for c in cases:
        if not c.standard or len(c.shift_ids) < 2:
            continue
        rates = {i: standard[i] for i in c.shift_ids if i in standard and standard[i].value is not None}
        weakest = min(rates, key=lambda i: rates[i].value or 0.0) if len(rates) == len(c.shift_ids) else None
        gap = _unpaired(c.rate, rates[weakest]) if weakest is not None else None
        out.append(
            Composition(
                case=c.case,
                success_rate=c.rate.value,
                constituents={i: standard[i].value if i in standard else None for i in c.shift_ids},
                weakest_constituent=weakest if gap is not None else None,
                weakest_single=rates[weakest].value if gap is not None and weakest is not None else None,
                weakest_single_gap=gap.value if gap is not None else None,
                gap_ci95=gap.ci95 if gap is not None else None,
            )
        )
    return out


def _diagnostics(cases: list[CaseRate]) -> Diagnostics:
    """Live minus frozen per case and its mean, and the mean gain of each recovery protocol, from
    the published rates of the diagnostic rows and their standard rows (unpaired intervals)."""
    standard = {c.case: c.rate for c in cases if c.standard and c.rate.value is not None}
    frozen: list[tuple[str, Rate, Rate]] = []
    gains: dict[str, list[tuple[Rate, Rate]]] = {}
    for c in cases:
        live = standard.get(c.base_case)
        if live is None or c.rate.value is None:
            continue
        if c.observations == "frozen" and c.recovery == "none":
            frozen.append((c.base_case, live, c.rate))
        elif c.observations == "live" and c.recovery != "none":
            gains.setdefault(c.recovery, []).append((c.rate, live))
    gaps = [(case, live, fro, _unpaired(live, fro)) for case, live, fro in frozen]
    mean_gap = mean_difference_ci((live.published, fro.published) for _, live, fro in frozen)
    recovery = {}
    for proto, pairs in sorted(gains.items()):
        g = mean_difference_ci((rec.published, base.published) for rec, base in pairs)
        recovery[proto] = RecoveryGain(mean_gain=g["value"], cases=g["cases"], ci95=_interval(g["ci95"]))
    return Diagnostics(
        live_minus_frozen=[
            FrozenGap(case=case, live=live.value, frozen=fro.value, gap=d.value, ci95=d.ci95)
            for case, live, fro, d in gaps
            if d is not None
        ],
        live_minus_frozen_mean_gap=mean_gap["value"],
        live_minus_frozen_mean_gap_ci95=_interval(mean_gap["ci95"]),
        recovery_gain=recovery,
    )


def public_result(row: Any, summary: Summary | None = None) -> PublicResult:
    """The public content of a :class:`~liberopro_platform.models.Result` row (its ``summary``
    read as :class:`liberopro.schema.results.Summary` by :meth:`~liberopro.schema.results.Summary.load`,
    tolerant of older summaries; ``summary``: that reading, when the caller has it already)."""
    summary = Summary.load(row.summary) if summary is None else summary
    head, settings, episodes = summary.headline, summary.settings, summary.episodes
    meta = SubmissionMeta(
        submission_id=row.submission_id,
        team=row.team_name,
        policy_name=row.policy_name,
        image_digest=row.image_digest,
        spec_version=row.spec_version,
        evaluator_version=row.evaluator_version,
        results_schema_version=summary.schema_version if "schema_version" in summary.model_fields_set else None,
        stack={str(k): (None if v is None else str(v)) for k, v in (row.stack or {}).items()},
        manifest_sha256=row.manifest_sha256,
        published_at=row.published_at,
        episodes=EpisodeCounts(
            total=episodes.total,
            valid=episodes.valid,
            invalid=episodes.invalid,
            successes=episodes.successes,
            shift_blocked=episodes.shift_blocked,
        ),
        instances=summary.instances,
        episodes_per_instance=settings.episodes_per_instance,
        max_steps=settings.max_steps,
        page_url=SUBMISSION_PAGE.format(id=row.submission_id),
        api_url=SUBMISSION_API.format(id=row.submission_id),
    )
    cases = public_cases(summary)
    return PublicResult(
        meta=meta,
        metrics=_metrics(head, cases),
        cases=cases,
        compositions=_compositions(cases),
        diagnostics=_diagnostics(cases),
        termination_reasons=dict(summary.termination_reasons),
        proof=dict(head.proof),
        unproved=_unproved(head.unproved) or Unproved(),
    )


def shift_sort_key(shift_id: str) -> tuple[int, int, str]:
    """S01..S22 before D01..D20, numerically; anything else after."""
    kind = {"S": 0, "D": 1}.get(shift_id[:1], 2)
    num = int(shift_id[1:]) if shift_id[1:].isdigit() else 999
    return kind, num, shift_id
