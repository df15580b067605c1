"""Two submissions side by side: every ranking column and every case they share, with the
difference a - b, its UNPAIRED 95% interval, and whether the two 95% intervals separate (the same
test as the tie rule).

Everything here is computed from the two published results (:class:`PublicResult`) only, never
from stored episodes: per case Newcombe's interval from the two published rates and valid-episode
counts, per column the MOVER interval from the two published intervals
(:mod:`liberopro.metrics`, "Intervals from published counts"). A paired comparison (the same
starts in both runs) would be narrower, but its interval depends on which hidden episodes each
policy solved, and a team that controls two policies could steer that per episode: the public
site does not pair. ``liberopro report`` pairs local runs (:func:`liberopro.runs.comparison.compare_runs`).
"""

from __future__ import annotations

from typing import Any

from liberopro.metrics import interval_difference, newcombe_difference
from liberopro.schema.public import COLUMNS, PublicResult, Rate, SubmissionMeta, shift_sort_key
from pydantic import BaseModel, Field

from liberopro_leaderboard.ranking import separated

#: The comparison's note (a fixed text: it quotes nothing of either run).
UNPAIRED_NOTE = (
    "Unpaired: each difference and its 95% interval are computed from the two published rates and their "
    "episode counts only (per shift Newcombe's interval from the two Wilson intervals; per column the MOVER "
    "interval from the two published intervals). The leaderboard never pairs two submissions' episodes: a paired "
    "interval would publish which hidden episodes each policy solved. Use liberopro report for a paired "
    "comparison of local runs."
)


class RateComparison(BaseModel):
    """One number of both submissions."""

    key: str = Field(..., description="Column key (metrics) or case id (cases).")
    label: str
    kind: str = Field(..., description="headline, static, runtime or nominal.")
    a: Rate | None
    b: Rate | None
    difference: float | None = Field(
        ..., description="a - b (success-rate points as a fraction); null when either is missing."
    )
    difference_ci95: tuple[float, float] | None = Field(
        None,
        description="Unpaired 95% interval of a - b from the two published rates and counts (a case: Newcombe; "
        "a column: MOVER from the two intervals); null when either is missing.",
    )
    excludes_zero: bool = Field(False, description="difference_ci95 lies wholly above or below 0.")
    separated: bool = Field(..., description="The two 95% intervals do not overlap.")


class CompareResponse(BaseModel):
    """Submission ``a`` next to submission ``b``."""

    a: SubmissionMeta
    b: SubmissionMeta
    metrics: list[RateComparison]
    cases: list[RateComparison] = Field(
        ..., description="Nominal and every single-shift case either ran (standard conditions), in catalog order."
    )
    differences_in_provenance: list[str] = Field(
        ..., description="Provenance fields whose values differ (the numbers may then not be strictly comparable)."
    )
    note: str = Field(UNPAIRED_NOTE, description="How the differences' intervals are made (a fixed text).")


def _difference(a: Rate, a_value: float, b: Rate, b_value: float, case: bool) -> tuple[float | None, Any]:
    """(a - b, its unpaired 95% interval or None) of two published rates with values."""
    if case:  # Wilson rates: Newcombe from the published rate and valid episodes
        d = newcombe_difference(a.published, b.published)
    elif a.ci95 is None or b.ci95 is None:
        return round(a_value - b_value, 6), None
    else:
        d = interval_difference((a_value, *a.ci95), (b_value, *b.ci95))
    return d["value"], d["ci95"]


def _pair(key: str, label: str, kind: str, a: Rate | None, b: Rate | None, case: bool) -> RateComparison:
    value, ci, apart = None, None, False
    if a is not None and b is not None and a.value is not None and b.value is not None:
        value, ci = _difference(a, a.value, b, b.value, case)
        apart = separated(a, b)
    return RateComparison(
        key=key,
        label=label,
        kind=kind,
        a=a,
        b=b,
        difference=value,
        difference_ci95=(ci[0], ci[1]) if ci else None,
        excludes_zero=ci is not None and (ci[0] > 0 or ci[1] < 0),
        separated=apart,
    )


def compare(a: PublicResult, b: PublicResult) -> CompareResponse:
    """The comparison of ``a`` and ``b``, from their published views only."""
    metrics = [
        _pair(
            c.key,
            c.label if c.group == "headline" else f"{c.group} {c.label}",
            "headline" if c.group == "headline" else c.group,
            a.metrics.get(c.key),
            b.metrics.get(c.key),
            case=c.method == "wilson",
        )
        for c in COLUMNS
    ]
    singles_a = {c.case: c for c in a.cases if c.standard and len(c.shift_ids) <= 1}
    singles_b = {c.case: c for c in b.cases if c.standard and len(c.shift_ids) <= 1}
    cases = []
    for case in sorted(set(singles_a) | set(singles_b), key=lambda k: (k != "nominal", shift_sort_key(k))):
        row = singles_a.get(case) or singles_b[case]
        label = "nominal" if case == "nominal" else f"{row.shift_names[0]} ({row.categories[0]})"
        cases.append(
            _pair(
                case,
                label,
                row.kind,
                singles_a[case].rate if case in singles_a else None,
                singles_b[case].rate if case in singles_b else None,
                case=True,
            )
        )
    diff = [
        name
        for name, va, vb in (
            ("evaluator version", a.meta.evaluator_version, b.meta.evaluator_version),
            ("spec version", a.meta.spec_version, b.meta.spec_version),
            ("evaluation manifest", a.meta.manifest_sha256, b.meta.manifest_sha256),
            ("simulator stack", a.meta.stack, b.meta.stack),
            ("episodes per instance", a.meta.episodes_per_instance, b.meta.episodes_per_instance),
            ("horizon cap", a.meta.max_steps, b.meta.max_steps),
        )
        if va != vb
    ]
    return CompareResponse(a=a.meta, b=b.meta, metrics=metrics, cases=cases, differences_in_provenance=diff)
