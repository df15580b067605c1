"""Paired comparison of two policies run on the same instances (``docs/evaluator.md``, "Reports").

Per row (a case with its diagnostic conditions, :attr:`liberopro.runs.summary.EpisodeRecord.row_key`)
the difference SR(A) - SR(B) over the episodes both ran from the same start (task, init state,
seed: :data:`liberopro.metrics.PairKey`), with a paired bootstrap interval
(:func:`liberopro.metrics.paired_difference`); and the mean difference over the static and over
the runtime single-shift cases (:func:`liberopro.metrics.mean_paired_difference`).

Pairing is refused (:class:`PairingError`) when the two runs did not evaluate the same instances:
different manifests (their content hashes differ, or one has a manifest and the other not), or,
for runs without a manifest, a case whose instance on some task differs (other shift parameters:
another ``--seed``), or no episode at all with a common start (other seeds or init states).

Light (numpy only, through :mod:`liberopro.metrics`): ``liberopro report`` calls
:func:`compare_runs` with the records of two run directories. The public leaderboard does not
pair: its comparison is unpaired, from the two published views (``docs/leaderboard.md``), since
paired intervals of two hidden-stage runs would publish which episodes each policy solved.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from liberopro.metrics import PairKey, mean_paired_difference, paired_table, wilson

if TYPE_CHECKING:
    from liberopro.schema.results import EpisodeRecord


class PairingError(ValueError):
    """Two runs whose episodes cannot be paired; the message says why and what to do."""


@dataclass(frozen=True)
class SideRate:
    """One policy's task-averaged success rate over the paired episodes of a row, with its
    Wilson 95% interval at n = ``episodes`` (the pairs)."""

    success_rate: float
    ci95: tuple[float, float]
    episodes: int


@dataclass(frozen=True)
class Difference:
    """SR(A) - SR(B) with its paired bootstrap 95% interval
    (:func:`liberopro.metrics.paired_bootstrap`): ``value`` and ``ci95`` are None without pairs;
    ``tasks`` and ``pairs`` count what entered."""

    value: float | None
    ci95: tuple[float, float] | None
    tasks: int
    pairs: int

    @classmethod
    def of(cls, d: dict[str, Any]) -> Difference:
        """From :func:`liberopro.metrics.paired_bootstrap`'s dict."""
        ci = d["ci95"]
        return cls(value=d["value"], ci95=(ci[0], ci[1]) if ci else None, tasks=d["tasks"], pairs=d["pairs"])


@dataclass(frozen=True)
class MeanDifference(Difference):
    """The mean over ``cases`` single-shift rows of SR(A) - SR(B), over the starts common to every
    case (:func:`liberopro.metrics.mean_paired_difference`)."""

    cases: int = 0


@dataclass(frozen=True)
class RowComparison:
    """One row both runs ran: ``case`` (with its diagnostic conditions), ``kind`` (nominal,
    static, runtime or mixed), ``single`` (one shift, standard conditions), each side's rate over
    the paired episodes (None without pairs) and their ``difference``."""

    case: str
    kind: str
    single: bool
    a: SideRate | None
    b: SideRate | None
    difference: Difference


@dataclass(frozen=True)
class RunComparison:
    """What :func:`compare_runs` returns: ``rows`` in case order, ``means`` (``static`` and
    ``runtime``: None without such single-shift rows), and the rows one side did not run."""

    rows: list[RowComparison]
    means: dict[str, MeanDifference | None]
    only_a: list[str]
    only_b: list[str]


def _short(h: str | None) -> str:
    return "no manifest" if h is None else f"manifest {h[:12]}"


def check_manifests(
    a_manifests: Iterable[str | None], b_manifests: Iterable[str | None], a_label: str = "A", b_label: str = "B"
) -> None:
    """Raise :class:`PairingError` unless both sides ran the same manifests (content hashes,
    ``summary.json``'s ``manifest_sha256``; None for a run without a manifest). Runs without a
    manifest on both sides pass here and are checked instance by instance
    (:func:`compare_runs`)."""
    a, b = set(a_manifests), set(b_manifests)
    if a == b:
        return
    raise PairingError(
        f"cannot pair {a_label} ({', '.join(sorted(map(_short, a)))}) with {b_label} "
        f"({', '.join(sorted(map(_short, b)))}): the runs evaluated different manifests, so their episodes are not "
        "the same instances. Run both policies with the same --manifest (liberopro instances generate writes one), "
        "or both without a manifest with the same --tasks, --shifts, --episodes and --seed."
    )


def _by_row(
    records: Iterable[EpisodeRecord],
) -> tuple[dict[str, dict[PairKey, bool]], dict[tuple[str, str], set[str]], dict[str, EpisodeRecord]]:
    outcomes: dict[str, dict[PairKey, bool]] = defaultdict(dict)
    instances: dict[tuple[str, str], set[str]] = defaultdict(set)
    first: dict[str, EpisodeRecord] = {}
    for r in records:
        first.setdefault(r.row_key, r)
        instances[(r.row_key, r.task_key)].add(r.instance_id)
        if r.valid:
            outcomes[r.row_key][r.pair_key] = r.success
    return dict(outcomes), dict(instances), first


def _tasks(records: Iterable[EpisodeRecord]) -> set[str]:
    """``SUITE:INDEX`` of every task the records ran."""
    return {f"{r.suite}:{r.task_index}" for r in records}


def _starts(records: Iterable[EpisodeRecord]) -> str:
    starts = sorted({r.pair_key[1:] for r in records})
    return ", ".join(map(str, starts[:4])) + (" ..." if len(starts) > 4 else "")


def _row_order(row: str) -> tuple:
    case, _, diag = row.partition(" [")
    ids = [] if case == "nominal" else case.split("+")
    return (bool(diag), len(ids), [(i[:1] != "S", int(i[1:]) if i[1:].isdigit() else 999) for i in ids], diag)


def _check_instances(
    a_inst: dict[tuple[str, str], set[str]], b_inst: dict[tuple[str, str], set[str]], a_label: str, b_label: str
) -> None:
    """Runs without a manifest: raise :class:`PairingError` where a row ran other instances on a
    task in the two runs."""
    for (row, task), ids in sorted(a_inst.items(), key=lambda kv: (_row_order(kv[0][0]), kv[0][1])):
        other = b_inst.get((row, task))
        if other is not None and other != ids:
            raise PairingError(
                f"cannot pair {a_label} with {b_label}: case {row} on {task} ran instance "
                f"{', '.join(sorted(ids))} in {a_label} but {', '.join(sorted(other))} in {b_label} (other shift "
                "parameters: a different --seed or evaluator version). Run both with the same --seed, or "
                "both with one --manifest."
            )


def _compare_row(row: str, rec: EpisodeRecord, a: dict[PairKey, bool], b: dict[PairKey, bool]) -> RowComparison:
    """One row: each side's rate over the paired episodes and the paired difference."""
    import numpy as np

    from liberopro.metrics import paired_bootstrap

    kinds = {s.kind for s in rec.shifts}
    kind = "nominal" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
    single = len(rec.shifts) == 1 and not rec.diagnostic_label
    table = paired_table({"a": a, "b": b})
    diff = Difference.of(paired_bootstrap(table, lambda r: r[..., 0] - r[..., 1]))
    n = diff.pairs
    sides: list[SideRate | None] = [None, None]
    if table["tasks"]:
        rates = np.mean([x.mean(axis=0) for x in table["tasks"].values()], axis=0)
        for i, rate in enumerate(rates):
            lo, hi = wilson(float(rate) * n, n)
            sides[i] = SideRate(success_rate=round(float(rate), 6), ci95=(round(lo, 6), round(hi, 6)), episodes=n)
    return RowComparison(case=row, kind=kind, single=single, a=sides[0], b=sides[1], difference=diff)


def _no_pairs(
    a_records: Sequence[EpisodeRecord], b_records: Sequence[EpisodeRecord], a_label: str, b_label: str
) -> PairingError:
    """The error for two runs with rows in common but no episode that pairs: no task in common,
    or other starts."""
    a_tasks, b_tasks = _tasks(a_records), _tasks(b_records)
    if not a_tasks & b_tasks:
        return PairingError(
            f"no episode of {a_label} can pair with one of {b_label}: they ran no task in common "
            f"({a_label}: {', '.join(sorted(a_tasks))}; {b_label}: {', '.join(sorted(b_tasks))}). "
            "Run both on the same --tasks (and the same --episodes and --seed)."
        )
    return PairingError(
        f"no episode of {a_label} starts like one of {b_label} (same task, init state and seed): "
        f"{a_label} ran (init state, seed) {_starts(a_records)}, {b_label} {_starts(b_records)}. "
        "Run both with the same --episodes and --seed."
    )


def compare_runs(
    a_records: Sequence[EpisodeRecord],
    b_records: Sequence[EpisodeRecord],
    *,
    a_manifests: Iterable[str | None] = (None,),
    b_manifests: Iterable[str | None] = (None,),
    a_label: str = "A",
    b_label: str = "B",
) -> RunComparison:
    """Paired differences SR(A) - SR(B) per row both ran, pairing episodes on (task, init state,
    seed).

    Args:
        a_records, b_records: episode records (:class:`liberopro.runs.summary.EpisodeRecord`) of the
            two policies; invalid episodes count in no rate.
        a_manifests, b_manifests: the manifest content hashes the records come from (None: a run
            without a manifest).
        a_label, b_label: names used in error messages.

    Returns a :class:`RunComparison`: per row (:class:`RowComparison`) each side's task-averaged
    SR over the paired episodes with a Wilson 95% interval at n = pairs and the paired
    difference (:class:`Difference`); the means over the static and over the runtime
    single-shift rows (:class:`MeanDifference`); the rows one side did not run.

    Raises :class:`PairingError` (see the module docstring).
    """
    a_manifests, b_manifests = list(a_manifests), list(b_manifests)
    check_manifests(a_manifests, b_manifests, a_label, b_label)
    a_out, a_inst, a_first = _by_row(a_records)
    b_out, b_inst, b_first = _by_row(b_records)
    common = sorted(set(a_first) & set(b_first), key=_row_order)
    if not common:
        raise PairingError(f"{a_label} and {b_label} ran no case in common: nothing to pair")
    if None in a_manifests:  # without a manifest, the instances themselves must agree
        _check_instances(a_inst, b_inst, a_label, b_label)
    rows = []
    singles: dict[str, dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]]] = {"static": {}, "runtime": {}}
    for row in common:
        a, b = a_out.get(row, {}), b_out.get(row, {})
        compared = _compare_row(row, a_first[row], a, b)
        rows.append(compared)
        if compared.single and compared.difference.pairs:
            singles[compared.kind][row] = (a, b)
    if not any(r.difference.pairs for r in rows):
        raise _no_pairs(a_records, b_records, a_label, b_label)
    means: dict[str, MeanDifference | None] = {}
    for kind, pairs in singles.items():
        if pairs:
            m = mean_paired_difference(pairs)
            ci = m["ci95"]
            means[kind] = MeanDifference(
                value=m["value"],
                ci95=(ci[0], ci[1]) if ci else None,
                tasks=m["tasks"],
                pairs=m["pairs"],
                cases=m["cases"],
            )
        else:
            means[kind] = None
    return RunComparison(
        rows=rows,
        means=means,
        only_a=sorted(set(a_first) - set(b_first), key=_row_order),
        only_b=sorted(set(b_first) - set(a_first), key=_row_order),
    )
