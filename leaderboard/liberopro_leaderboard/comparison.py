"""Two submissions side by side: every ranking column and every case they share, with the
difference and whether the two 95% intervals separate (the same test as the tie rule)."""

from __future__ import annotations

from liberopro.schema.public import COLUMNS, PublicResult, Rate, SubmissionMeta, shift_sort_key
from pydantic import BaseModel, Field

from liberopro_leaderboard.ranking import separated


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


def _pair(key: str, label: str, kind: str, a: Rate | None, b: Rate | None) -> RateComparison:
    both = a is not None and b is not None and a.value is not None and b.value is not None
    return RateComparison(
        key=key,
        label=label,
        kind=kind,
        a=a,
        b=b,
        difference=round(a.value - b.value, 6) if both else None,  # type: ignore[union-attr,operator]
        separated=both and separated(a, b),
    )  # type: ignore[arg-type]


def compare(a: PublicResult, b: PublicResult) -> CompareResponse:
    """The comparison of ``a`` and ``b``."""
    metrics = [
        _pair(
            c.key,
            c.label if c.group == "headline" else f"{c.group} {c.label}",
            "headline" if c.group == "headline" else c.group,
            a.metrics.get(c.key),
            b.metrics.get(c.key),
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
