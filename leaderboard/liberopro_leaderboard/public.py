"""What of a published result may be shown in public, as typed models.

A :class:`liberopro_platform.models.Result` row holds the whole ``summary.json`` of a run. This
module copies out of it, field by field, only what the leaderboard shows: aggregate success
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

from liberopro.catalog import CATEGORIES  # the six categories in the benchmark's order (no simulator)
from pydantic import BaseModel, Field

KINDS: tuple[str, ...] = ("static", "runtime")
SHORT: dict[str, str] = {"Condition": "Cond.", "Environment": "Env.", "Observation": "Obs.", "Execution": "Exec.",
                         "Robot": "Robot", "Language": "Lang."}

SUBMISSION_PAGE = "/leaderboard/submissions/{id}"
SUBMISSION_API = "/api/leaderboard/submissions/{id}"


class Rate(BaseModel):
    """A success rate (a fraction in [0, 1]) with its 95% interval and what stands behind it."""

    value: float | None = Field(..., description="Success rate in [0, 1]; null when no episode was run.")
    ci95: tuple[float, float] | None = Field(
        ..., description="95% interval [low, high]: Wilson for one case, percentile bootstrap over tasks "
        "and episodes for a mean over cases.")
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
        Column(key="overall", label="Overall", short="Overall", group="headline", method="bootstrap",
               description="Mean success rate over every single-shift case, static and runtime (the ranking score)."),
        Column(key="nominal", label="Nominal", short="Nominal", group="headline", method="wilson",
               description="Success rate on the evaluation tasks without any shift."),
        Column(key="static_mean", label="Static mean", short="Static mean", group="headline", method="bootstrap",
               description="Mean success rate over the static single-shift cases."),
        Column(key="runtime_mean", label="Runtime mean", short="Runtime mean", group="headline", method="bootstrap",
               description="Mean success rate over the runtime single-shift cases."),
    ]
    for kind in KINDS:
        cols += [Column(key=f"{kind}.{cat}", label=cat, short=SHORT[cat], group=kind, method="bootstrap",
                        description=f"Mean success rate over the {kind} {cat} cases.") for cat in CATEGORIES]
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
        None, description="SR(nominal) - SR(case) over the same tasks, init states and seeds (positive: the shift costs).")

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
    constituents: dict[str, float | None] = Field(..., description="Each constituent's SR over its own tasks (context).")
    weakest_constituent: str | None = None
    weakest_single: float | None = Field(None, description="The weakest constituent's SR over the composition's episodes.")
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
    manifest_sha256: str = Field(..., description="Hash of the (hidden) evaluation manifest: equal hashes, same instances.")
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


def wilson_rate(raw: dict[str, Any] | None) -> Rate:
    """A :func:`liberopro.metrics.success_rate` dict as a :class:`Rate` (``per_task`` dropped)."""
    if not raw or raw.get("success_rate") is None:
        return MISSING_WILSON.model_copy(update={"episodes": int((raw or {}).get("episodes") or 0)})
    return Rate(value=float(raw["success_rate"]), ci95=_interval(raw.get("ci95")), episodes=int(raw.get("episodes") or 0),
                method="wilson", tasks=raw.get("tasks"), successes=raw.get("successes"))


def bootstrap_rate(raw: dict[str, Any] | None) -> Rate:
    """A :func:`liberopro.metrics.bootstrap_mean_of_rates` dict as a :class:`Rate`."""
    if not raw or raw.get("mean") is None:
        return MISSING_BOOTSTRAP
    return Rate(value=float(raw["mean"]), ci95=_interval(raw.get("ci95")), episodes=int(raw.get("episodes") or 0),
                method="bootstrap", cases=raw.get("cases"))


def metrics_of(summary: dict[str, Any]) -> dict[str, Rate]:
    """The ranking columns of one summary (missing parts become rates with value None)."""
    head = summary.get("headline") or {}
    out = {
        "overall": bootstrap_rate(head.get("overall")),
        "nominal": wilson_rate(head.get("nominal")),
        "static_mean": bootstrap_rate(head.get("static_mean")),
        "runtime_mean": bootstrap_rate(head.get("runtime_mean")),
    }
    cats = head.get("categories") or {}
    for kind in KINDS:
        for cat in CATEGORIES:
            out[f"{kind}.{cat}"] = bootstrap_rate((cats.get(kind) or {}).get(cat))
    return out


def _case(raw: dict[str, Any]) -> CaseRate:
    return CaseRate(
        case=str(raw.get("case")), shift_ids=list(raw.get("shift_ids") or []),
        shift_names=list(raw.get("shift_names") or []), categories=list(raw.get("categories") or []),
        kind=str(raw.get("kind") or "nominal"), observations=str(raw.get("observations") or "live"),
        recovery=str(raw.get("recovery") or "none"), rate=wilson_rate(raw),
        invalid_episodes=int(raw.get("invalid_episodes") or 0),
        drop_from_nominal=_paired(raw.get("drop_from_nominal")),
    )


def _paired(raw: dict[str, Any] | None) -> PairedDifference | None:
    if not raw or raw.get("value") is None:
        return None
    return PairedDifference(value=float(raw["value"]), ci95=_interval(raw.get("ci95")), pairs=int(raw.get("pairs") or 0))


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def public_result(row: Any) -> PublicResult:
    """The public content of a :class:`~liberopro_platform.models.Result` row."""
    summary: dict[str, Any] = row.summary or {}
    head = summary.get("headline") or {}
    settings = summary.get("settings") or {}
    episodes = summary.get("episodes") or {}
    meta = SubmissionMeta(
        submission_id=row.submission_id, team=row.team_name, policy_name=row.policy_name,
        image_digest=row.image_digest, spec_version=row.spec_version, evaluator_version=row.evaluator_version,
        results_schema_version=_int_or_none(summary.get("schema_version")),
        stack={str(k): (None if v is None else str(v)) for k, v in (row.stack or {}).items()},
        manifest_sha256=row.manifest_sha256, published_at=row.published_at,
        episodes=EpisodeCounts(**{k: int(episodes.get(k) or 0) for k in ("total", "valid", "invalid", "successes")}),
        instances=_int_or_none(summary.get("instances")),
        episodes_per_instance=_int_or_none(settings.get("episodes_per_instance")),
        max_steps=_int_or_none(settings.get("max_steps")),
        page_url=SUBMISSION_PAGE.format(id=row.submission_id), api_url=SUBMISSION_API.format(id=row.submission_id),
    )
    lmf = head.get("live_minus_frozen") or {}
    diagnostics = Diagnostics(
        live_minus_frozen=[FrozenGap(**{k: f[k] for k in ("case", "live", "frozen", "gap")}, ci95=_interval(f.get("ci95")))
                           for f in lmf.get("cases") or []],
        live_minus_frozen_mean_gap=lmf.get("mean_gap"),
        live_minus_frozen_mean_gap_ci95=_interval(lmf.get("mean_gap_ci95")),
        recovery_gain={p: RecoveryGain(mean_gain=g["mean_gain"], cases=g["cases"], ci95=_interval(g.get("ci95")))
                       for p, g in (head.get("recovery_gain") or {}).items() if g.get("mean_gain") is not None},
    )
    compositions = [Composition(**{k: c.get(k) for k in ("case", "success_rate", "constituents", "weakest_constituent",
                                                          "weakest_single", "weakest_single_gap")},
                                gap_ci95=_interval(c.get("gap_ci95")), paired_episodes=int(c.get("paired_episodes") or 0))
                    for c in head.get("compositions") or []]
    return PublicResult(
        meta=meta, metrics=metrics_of(summary), cases=[_case(c) for c in summary.get("cases") or []],
        compositions=compositions, diagnostics=diagnostics,
        termination_reasons={str(k): int(v) for k, v in (summary.get("termination_reasons") or {}).items()},
    )


def shift_sort_key(shift_id: str) -> tuple[int, int, str]:
    """S01..S22 before D01..D20, numerically; anything else after."""
    kind = {"S": 0, "D": 1}.get(shift_id[:1], 2)
    num = int(shift_id[1:]) if shift_id[1:].isdigit() else 999
    return kind, num, shift_id
