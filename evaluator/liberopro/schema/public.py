"""What of a published result may be shown in public, as typed models (light: no simulator, no
web stack; the leaderboard, the platform's submitter-facing routes and the report all read it).

A :class:`liberopro_platform.models.Result` row holds the whole ``summary.json`` of a run, read
here as :class:`liberopro.schema.results.Summary`. This module copies out of it, field by field, only what the leaderboard shows: aggregate success
rates with their intervals and episode counts, and the provenance of the number (image digest,
spec, evaluator and simulator versions, date). Everything else stays behind, in particular what
could describe a hidden evaluation instance: per-task rates within a case (``per_task``: one
task under one shift is one instance), the reasons an instance was invalid (they quote measured
parameters), the episode seed, the submitted image reference, per-episode records and any media.
The copy is a whitelist: a field added to the summary later is not published until it is added
here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field

from liberopro.catalog import CATEGORIES  # the six categories in the benchmark's order (no simulator)
from liberopro.schema.results import CaseSummary, MeanRate, SuccessRate, Summary
from liberopro.schema.results import PairedDifference as SummaryPairedDifference

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
        description="95% interval [low, high]: Wilson for one case, percentile bootstrap over tasks "
        "and episodes for a mean over cases.",
    )
    episodes: int = Field(..., description="Valid episodes behind the rate.")
    method: Literal["wilson", "bootstrap"]
    cases: int | None = Field(None, description="Cases averaged (means over cases only).")
    tasks: int | None = Field(None, description="Tasks averaged (one case only).")
    successes: int | None = Field(None, description="Successful episodes (one case only).")

    @property
    def interval(self) -> tuple[float, float] | None:
        """``ci95``, or the point itself when a value has no interval."""
        if self.ci95 is not None:
            return self.ci95
        return None if self.value is None else (self.value, self.value)


MISSING_BOOTSTRAP = Rate(value=None, ci95=None, episodes=0, method="bootstrap", cases=0)
MISSING_WILSON = Rate(value=None, ci95=None, episodes=0, method="wilson", tasks=0, successes=0)


class Column(BaseModel):
    """One metric column of the ranking."""

    key: str = Field(..., description="Key in every row's ``metrics`` and the ``sort`` parameter.")
    label: str
    short: str = Field(..., description="The label in the page's narrow column header.")
    group: Literal["headline", "static", "runtime"]
    method: Literal["wilson", "bootstrap"]
    description: str


def _columns() -> list[Column]:
    cols = [
        Column(
            key="overall",
            label="Overall",
            short="Overall",
            group="headline",
            method="bootstrap",
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
            method="bootstrap",
            description="Mean success rate over the static single-shift cases.",
        ),
        Column(
            key="runtime_mean",
            label="Runtime mean",
            short="Runtime mean",
            group="headline",
            method="bootstrap",
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
                method="bootstrap",
                description=f"Mean success rate over the {kind} {cat} cases.",
            )
            for cat in CATEGORIES
        ]
    return cols


#: The ranking's metric columns, in page order.
COLUMNS: list[Column] = _columns()
COLUMN_BY_KEY: dict[str, Column] = {c.key: c for c in COLUMNS}


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
    drop_from_nominal: PairedDifference | None = Field(
        None,
        description="SR(nominal) - SR(case) over the same tasks, init states and seeds (positive: the shift costs).",
    )

    @property
    def standard(self) -> bool:
        return self.observations == "live" and self.recovery == "none"

    @property
    def label(self) -> str:
        return "nominal" if not self.shift_names else " + ".join(self.shift_names)


class PairedDifference(BaseModel):
    """A difference of success rates over the same tasks, init states and seeds, with its paired
    bootstrap interval (``liberopro.metrics.paired_bootstrap``)."""

    value: float | None
    ci95: tuple[float, float] | None = None
    pairs: int = Field(0, description="Episodes per side that entered.")


class Composition(BaseModel):
    """A composition of shifts and its weakest-single gap SR(C) - min_i SR(c_i), every rate over
    the composition's own tasks and starts (paired)."""

    case: str
    success_rate: float | None
    constituents: dict[str, float | None] = Field(
        ..., description="Each constituent's SR over its own tasks (context)."
    )
    weakest_constituent: str | None = None
    weakest_single: float | None = Field(
        None, description="The weakest constituent's SR over the composition's episodes."
    )
    weakest_single_gap: float | None
    gap_ci95: tuple[float, float] | None = None
    paired_episodes: int = 0


class FrozenGap(BaseModel):
    case: str
    live: float
    frozen: float
    gap: float = Field(..., description="SR(live) - SR(frozen) over the starts both ran.")
    ci95: tuple[float, float] | None = None


class RecoveryGain(BaseModel):
    mean_gain: float
    cases: int
    ci95: tuple[float, float] | None = None


class Diagnostics(BaseModel):
    """The diagnostic studies of the run, when it ran them (aggregates only)."""

    live_minus_frozen: list[FrozenGap] = []
    live_minus_frozen_mean_gap: float | None = None
    live_minus_frozen_mean_gap_ci95: tuple[float, float] | None = None
    recovery_gain: dict[str, RecoveryGain] = {}


class EpisodeCounts(BaseModel):
    total: int = 0
    valid: int = 0
    invalid: int = 0
    successes: int = 0


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


def bootstrap_rate(raw: MeanRate | None) -> Rate:
    """A :func:`liberopro.metrics.bootstrap_mean_of_rates` result as a :class:`Rate`."""
    if raw is None or raw.mean is None:
        return MISSING_BOOTSTRAP
    return Rate(value=raw.mean, ci95=_interval(raw.ci95), episodes=raw.episodes, method="bootstrap", cases=raw.cases)


def _summary(summary: Summary | dict[str, Any] | None) -> Summary:
    """A stored summary as the model (:meth:`Summary.load`: tolerant of older summaries)."""
    return summary if isinstance(summary, Summary) else Summary.load(summary)


def metrics_of(summary: Summary | dict[str, Any] | None) -> dict[str, Rate]:
    """The ranking columns of one summary (missing parts become rates with value None)."""
    head = _summary(summary).headline
    out = {
        "overall": bootstrap_rate(head.overall),
        "nominal": wilson_rate(head.nominal),
        "static_mean": bootstrap_rate(head.static_mean),
        "runtime_mean": bootstrap_rate(head.runtime_mean),
    }
    for kind in KINDS:
        for cat in CATEGORIES:
            out[f"{kind}.{cat}"] = bootstrap_rate(head.category(kind, cat))
    return out


def _case(raw: CaseSummary) -> CaseRate:
    return CaseRate(
        case=raw.case,
        shift_ids=raw.shift_ids,
        shift_names=raw.shift_names,
        categories=raw.categories,
        kind=raw.kind or "nominal",
        observations=raw.observations or "live",
        recovery=raw.recovery or "none",
        rate=wilson_rate(raw),
        invalid_episodes=raw.invalid_episodes,
        drop_from_nominal=_paired(raw.drop_from_nominal),
    )


def _paired(raw: SummaryPairedDifference | None) -> PairedDifference | None:
    if raw is None or raw.value is None:
        return None
    return PairedDifference(value=raw.value, ci95=_interval(raw.ci95), pairs=raw.pairs)


def public_result(row: Any) -> PublicResult:
    """The public content of a :class:`~liberopro_platform.models.Result` row (its ``summary``
    read as :class:`liberopro.schema.results.Summary`)."""
    summary = _summary(row.summary)
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
            total=episodes.total, valid=episodes.valid, invalid=episodes.invalid, successes=episodes.successes
        ),
        instances=summary.instances,
        episodes_per_instance=settings.episodes_per_instance,
        max_steps=settings.max_steps,
        page_url=SUBMISSION_PAGE.format(id=row.submission_id),
        api_url=SUBMISSION_API.format(id=row.submission_id),
    )
    lmf = head.live_minus_frozen
    diagnostics = Diagnostics(
        live_minus_frozen=[
            FrozenGap(case=f.case, live=f.live, frozen=f.frozen, gap=f.gap, ci95=_interval(f.ci95)) for f in lmf.cases
        ],
        live_minus_frozen_mean_gap=lmf.mean_gap,
        live_minus_frozen_mean_gap_ci95=_interval(lmf.mean_gap_ci95),
        recovery_gain={
            p: RecoveryGain(mean_gain=g.mean_gain, cases=g.cases, ci95=_interval(g.ci95))
            for p, g in head.recovery_gain.items()
            if g.mean_gain is not None
        },
    )
    compositions = [
        Composition(
            case=c.case,
            success_rate=c.success_rate,
            constituents=c.constituents,
            weakest_constituent=c.weakest_constituent,
            weakest_single=c.weakest_single,
            weakest_single_gap=c.weakest_single_gap,
            gap_ci95=_interval(c.gap_ci95),
            paired_episodes=c.paired_episodes,
        )
        for c in head.compositions
    ]
    return PublicResult(
        meta=meta,
        metrics=metrics_of(summary),
        cases=[_case(c) for c in summary.cases],
        compositions=compositions,
        diagnostics=diagnostics,
        termination_reasons=dict(summary.termination_reasons),
    )


def shift_sort_key(shift_id: str) -> tuple[int, int, str]:
    """S01..S22 before D01..D20, numerically; anything else after."""
    kind = {"S": 0, "D": 1}.get(shift_id[:1], 2)
    num = int(shift_id[1:]) if shift_id[1:].isdigit() else 999
    return kind, num, shift_id
