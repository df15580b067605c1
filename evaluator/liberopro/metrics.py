"""Success rates with their uncertainty (``benchmark.md``, "Metrics").

SR_m(c) = 1/|T_c| sum_{t in T_c} [1/N_tc sum_i 1[episode i succeeded]]: the mean over the tasks
compatible with case c of each task's success rate. Invalid episodes (a shift whose
post-condition failed) count in no denominator; they are reported beside the rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion (successes may be fractional: n * rate).

    Returns (low, high) in [0, 1]; (0, 1) when n == 0.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def success_rate(outcomes: Iterable[tuple[str, bool]]) -> dict:
    """SR over (task key, success) pairs, task-averaged.

    Returns ``success_rate`` (None without episodes), ``ci95`` (Wilson at the rate with n = all
    episodes; exact for equal episodes per task), ``episodes``, ``successes``, ``tasks`` and
    ``per_task`` rates.
    """
    by_task: dict[str, list[bool]] = defaultdict(list)
    for task, ok in outcomes:
        by_task[task].append(bool(ok))
    n = sum(len(v) for v in by_task.values())
    if n == 0:
        return {"success_rate": None, "ci95": None, "episodes": 0, "successes": 0, "tasks": 0, "per_task": {}}
    per_task = {t: sum(v) / len(v) for t, v in sorted(by_task.items())}
    sr = sum(per_task.values()) / len(per_task)
    lo, hi = wilson(sr * n, n)
    return {
        "success_rate": round(sr, 6),
        "ci95": [round(lo, 6), round(hi, 6)],
        "episodes": n,
        "successes": sum(sum(v) for v in by_task.values()),
        "tasks": len(per_task),
        "per_task": {t: round(r, 6) for t, r in per_task.items()},
    }


# ---------------------------------------------------------------------------------------------
# Averages over cases (category means, static/runtime means) with bootstrap intervals.

#: Bootstrap replicates and seed: fixed, so a summary is a pure function of its records.
BOOTSTRAP_REPLICATES = 1000
BOOTSTRAP_SEED = 0


def bootstrap_mean_of_rates(
    outcomes_by_case: dict[str, dict[str, list[bool]]],
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """The mean over cases of the task-averaged success rate, with a percentile bootstrap
    interval that resamples tasks (the same draw for every case, since cases share tasks) and
    episodes within each (case, task).

    Resampling n binary outcomes with k successes, with replacement, gives Binomial(n, k/n)
    successes: the episode level is drawn that way, vectorised over replicates, cases and tasks
    (one summary of 1,441 episodes took 75 s with the loop this replaces).

    Args:
        outcomes_by_case: case -> task -> episode successes.

    Returns ``mean``, ``ci95`` ([2.5, 97.5] percentiles; None without data), ``cases``,
    ``episodes``.
    """
    import numpy as np

    cases = {c: {t: v for t, v in tasks.items() if v} for c, tasks in outcomes_by_case.items()}
    cases = {c: t for c, t in cases.items() if t}
    if not cases:
        return {"mean": None, "ci95": None, "cases": 0, "episodes": 0}
    point = sum(sum(sum(v) / len(v) for v in t.values()) / len(t) for t in cases.values()) / len(cases)
    all_tasks = sorted({t for tasks in cases.values() for t in tasks})
    tix = {t: i for i, t in enumerate(all_tasks)}
    n = np.zeros((len(cases), len(all_tasks)))
    k = np.zeros_like(n)
    for ci, tasks in enumerate(cases.values()):
        for t, v in tasks.items():
            n[ci, tix[t]], k[ci, tix[t]] = len(v), sum(v)
    present = n > 0
    p = np.divide(k, n, out=np.zeros_like(k), where=present)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(all_tasks), size=(replicates, len(all_tasks)))
    weight = np.zeros((replicates, len(all_tasks)))
    np.add.at(weight, (np.repeat(np.arange(replicates), len(all_tasks)), draws.ravel()), 1.0)
    rates = rng.binomial(n.astype(np.int64)[None], p[None], size=(replicates, *n.shape)) / np.where(present, n, 1)[None]
    w = weight[:, None, :] * present[None]  # (B, cases, tasks)
    wsum = w.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        case_rates = (w * rates).sum(axis=2) / wsum  # NaN where a case drew none of its tasks
    stats = np.nanmean(np.where(wsum > 0, case_rates, np.nan), axis=1)
    stats = stats[~np.isnan(stats)]
    lo, hi = (float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))) if len(stats) else (None, None)
    return {
        "mean": round(point, 6),
        "ci95": None if lo is None else [round(lo, 6), round(hi, 6)],
        "cases": len(cases),
        "episodes": int(n.sum()),
    }
