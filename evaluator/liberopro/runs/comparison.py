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
from typing import Any, Protocol

from liberopro.metrics import PairKey, mean_paired_difference, paired_table, wilson


class PairingError(ValueError):
    """Two runs whose episodes cannot be paired; the message says why and what to do."""


class _Record(Protocol):  # what of an EpisodeRecord the comparison reads
    instance_id: str
    success: bool
    valid: bool
    shifts: list[dict[str, Any]]

    @property
    def diagnostic_label(self) -> str: ...
    @property
    def row_key(self) -> str: ...
    @property
    def task_key(self) -> str: ...
    @property
    def pair_key(self) -> PairKey: ...


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
    records: Iterable[_Record],
) -> tuple[dict[str, dict[PairKey, bool]], dict[tuple[str, str], set[str]], dict[str, _Record]]:
    outcomes: dict[str, dict[PairKey, bool]] = defaultdict(dict)
    instances: dict[tuple[str, str], set[str]] = defaultdict(set)
    first: dict[str, _Record] = {}
    for r in records:
        first.setdefault(r.row_key, r)
        instances[(r.row_key, r.task_key)].add(r.instance_id)
        if r.valid:
            outcomes[r.row_key][r.pair_key] = r.success
    return dict(outcomes), dict(instances), first


def _tasks(records) -> set[str]:
    """``SUITE:INDEX`` of every task the records ran."""
    return {f"{r.suite}:{r.task_index}" for r in records}


def _starts(records: Iterable[_Record]) -> str:
    starts = sorted({r.pair_key[1:] for r in records})
    return ", ".join(map(str, starts[:4])) + (" ..." if len(starts) > 4 else "")


def _row_order(row: str) -> tuple:
    case, _, diag = row.partition(" [")
    ids = [] if case == "nominal" else case.split("+")
    return (bool(diag), len(ids), [(i[:1] != "S", int(i[1:]) if i[1:].isdigit() else 999) for i in ids], diag)


def compare_runs(
    a_records: Sequence[_Record],
    b_records: Sequence[_Record],
    *,
    a_manifests: Iterable[str | None] = (None,),
    b_manifests: Iterable[str | None] = (None,),
    a_label: str = "A",
    b_label: str = "B",
) -> dict[str, Any]:
    """Paired differences SR(A) - SR(B) per row both ran, pairing episodes on (task, init state,
    seed).

    Args:
        a_records, b_records: episode records (:class:`liberopro.runs.summary.EpisodeRecord`) of the
            two policies; invalid episodes count in no rate.
        a_manifests, b_manifests: the manifest content hashes the records come from (None: a run
            without a manifest).
        a_label, b_label: names used in error messages.

    Returns ``rows`` (per row: ``case``, ``kind`` (nominal/static/runtime/mixed), ``single``
    (one shift, standard conditions), ``a`` and ``b`` (each side's task-averaged SR over the
    paired episodes with a Wilson 95% interval at n = pairs), ``difference`` (``value``,
    ``ci95``, ``tasks``, ``pairs`` of :func:`liberopro.metrics.paired_difference`)), ``means``
    (``static`` and ``runtime``: mean over those single-shift rows of the difference, with its
    paired interval, ``cases``, ``pairs``; None without such rows), ``only_a`` / ``only_b``
    (rows one side did not run).

    Raises :class:`PairingError` (see the module docstring).
    """
    import numpy as np

    from liberopro.metrics import paired_bootstrap

    a_manifests, b_manifests = list(a_manifests), list(b_manifests)
    check_manifests(a_manifests, b_manifests, a_label, b_label)
    a_out, a_inst, a_first = _by_row(a_records)
    b_out, b_inst, b_first = _by_row(b_records)
    common = sorted(set(a_first) & set(b_first), key=_row_order)
    if not common:
        raise PairingError(f"{a_label} and {b_label} ran no case in common: nothing to pair")
    if None in a_manifests:  # without a manifest, the instances themselves must agree
        for (row, task), ids in sorted(a_inst.items(), key=lambda kv: (_row_order(kv[0][0]), kv[0][1])):
            other = b_inst.get((row, task))
            if other is not None and other != ids:
                raise PairingError(
                    f"cannot pair {a_label} with {b_label}: case {row} on {task} ran instance "
                    f"{', '.join(sorted(ids))} in {a_label} but {', '.join(sorted(other))} in {b_label} (other shift "
                    "parameters: a different --seed or evaluator version). Run both with the same --seed, or "
                    "both with one --manifest."
                )
    rows = []
    singles: dict[str, dict[str, tuple[dict, dict]]] = {"static": {}, "runtime": {}}
    for row in common:
        rec = a_first[row]
        kinds = {s.kind for s in rec.shifts}
        kind = "nominal" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
        single = len(rec.shifts) == 1 and not rec.diagnostic_label
        a, b = a_out.get(row, {}), b_out.get(row, {})
        table = paired_table({"a": a, "b": b})
        diff = paired_bootstrap(table, lambda r: r[..., 0] - r[..., 1])
        n = diff["pairs"]
        sides = {}
        if table["tasks"]:
            rates = np.mean([x.mean(axis=0) for x in table["tasks"].values()], axis=0)
            for name, rate in zip(("a", "b"), rates, strict=True):
                lo, hi = wilson(float(rate) * n, n)
                sides[name] = {
                    "success_rate": round(float(rate), 6),
                    "ci95": [round(lo, 6), round(hi, 6)],
                    "episodes": n,
                }
        else:
            sides = {"a": None, "b": None}
        rows.append({"case": row, "kind": kind, "single": single, **sides, "difference": diff})
        if single and n:
            singles[kind][row] = (a, b)
    if not any(r["difference"]["pairs"] for r in rows):
        a_tasks, b_tasks = _tasks(a_records), _tasks(b_records)
        if not a_tasks & b_tasks:
            raise PairingError(
                f"no episode of {a_label} can pair with one of {b_label}: they ran no task in common "
                f"({a_label}: {', '.join(sorted(a_tasks))}; {b_label}: {', '.join(sorted(b_tasks))}). "
                "Run both on the same --tasks (and the same --episodes and --seed)."
            )
        raise PairingError(
            f"no episode of {a_label} starts like one of {b_label} (same task, init state and seed): "
            f"{a_label} ran (init state, seed) {_starts(a_records)}, {b_label} {_starts(b_records)}. "
            "Run both with the same --episodes and --seed."
        )
    means = {}
    for kind, pairs in singles.items():
        if pairs:
            m = mean_paired_difference(pairs)
            means[kind] = {
                "value": m["value"],
                "ci95": m["ci95"],
                "cases": m["cases"],
                "pairs": m["pairs"],
                "tasks": m["tasks"],
            }
        else:
            means[kind] = None
    return {
        "rows": rows,
        "means": means,
        "only_a": sorted(set(a_first) - set(b_first), key=_row_order),
        "only_b": sorted(set(b_first) - set(a_first), key=_row_order),
    }
