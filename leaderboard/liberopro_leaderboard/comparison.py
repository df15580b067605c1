"""Two submissions side by side: every ranking column and every case they share, with the
difference and whether the two 95% intervals separate (the same test as the tie rule), and, where
both ran the same evaluation manifest, the paired difference per case: SR(a) - SR(b) over the
episodes both ran from the same start (task, init state, seed), with a paired bootstrap interval
(:func:`liberopro.comparison.compare_runs`, ``docs/leaderboard.md``). Pairing removes the
variation that the two policies share (the same hard starts), so it separates differences that
overlapping intervals cannot. Only these per-case aggregates are published: never an episode."""

from __future__ import annotations

from typing import Any

from liberopro.schema.public import COLUMNS, PublicResult, Rate, SubmissionMeta, shift_sort_key
from pydantic import BaseModel, Field

from liberopro_leaderboard.ranking import separated


class PairedDifference(BaseModel):
    """SR(a) - SR(b) over the paired episodes of one case (or a mean over cases)."""

    value: float | None = Field(..., description="Difference of task-averaged success rates, a fraction.")
    ci95: list[float] | None = Field(..., description="Paired bootstrap 95% interval [low, high].")
    pairs: int = Field(..., description="Episodes paired (same task, init state and seed in both).")
    excludes_zero: bool = Field(..., description="The interval lies wholly above or below 0.")

    @classmethod
    def of(cls, d: dict[str, Any]) -> PairedDifference:
        ci = d.get("ci95")
        return cls(
            value=d.get("value"),
            ci95=ci,
            pairs=int(d.get("pairs") or 0),
            excludes_zero=bool(ci) and (ci[0] > 0 or ci[1] < 0),
        )


class Pairing(BaseModel):
    """What was paired: per case (key: case id) and the static/runtime means, or why nothing."""

    paired: bool
    note: str = Field(..., description="How the episodes were paired, or why they could not be.")
    cases: dict[str, PairedDifference] = Field(default_factory=dict)
    means: dict[str, PairedDifference] = Field(
        default_factory=dict, description="static / runtime: mean over single-shift cases of the paired difference."
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
    separated: bool = Field(..., description="The two 95% intervals do not overlap.")
    paired: PairedDifference | None = Field(
        None, description="The paired difference over the episodes both ran (same manifest only); null otherwise."
    )


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
    pairing: Pairing = Field(
        default_factory=lambda: Pairing(paired=False, note="not computed"),
        description="Whether the cases' differences are paired, and the static/runtime means of the paired ones.",
    )


def pair_episodes(a: PublicResult, b: PublicResult, a_records: list, b_records: list) -> Pairing:
    """The paired differences of ``a`` and ``b`` from their stored episode records
    (:class:`liberopro.results.EpisodeRecord`). Refused (``paired`` false, the reason in
    ``note``) when the two ran different evaluation manifests, or when no episode pairs."""
    from liberopro.comparison import PairingError, compare_runs

    if not a_records or not b_records:
        return Pairing(paired=False, note="not paired: the episodes of one submission are not stored")
    try:
        out = compare_runs(
            a_records,
            b_records,
            a_manifests=[a.meta.manifest_sha256],
            b_manifests=[b.meta.manifest_sha256],
            a_label=a.meta.policy_name,
            b_label=b.meta.policy_name,
        )
    except PairingError as exc:
        reason = str(exc).split(": ")[-1] if "different manifests" not in str(exc) else "different evaluation manifests"
        return Pairing(paired=False, note=f"not paired: {reason}")
    cases = {
        r["case"]: PairedDifference.of(r["difference"]) for r in out["rows"] if r["single"] or r["case"] == "nominal"
    }
    means = {k: PairedDifference.of(v) for k, v in (out.get("means") or {}).items() if v}
    pairs = max((c.pairs for c in cases.values()), default=0)
    return Pairing(
        paired=True,
        note=f"paired on (task, init state, seed): up to {pairs} episodes per case, same evaluation manifest",
        cases=cases,
        means=means,
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


def compare(a: PublicResult, b: PublicResult, pairing: Pairing | None = None) -> CompareResponse:
    """The comparison of ``a`` and ``b``; ``pairing`` (:func:`pair_episodes`) adds the paired
    difference to each case it covers."""
    pairing = pairing or Pairing(paired=False, note="not paired: the episodes were not read")
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
    for row in cases:
        row.paired = pairing.cases.get(row.key)
    return CompareResponse(
        a=a.meta, b=b.meta, metrics=metrics, cases=cases, differences_in_provenance=diff, pairing=pairing
    )
