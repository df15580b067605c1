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
    rng = np.random.default_rng(seed)
    arrays = {c: {t: np.asarray(v, dtype=float) for t, v in tasks.items()} for c, tasks in cases.items()}
    stats = np.empty(replicates)
    for b in range(replicates):
        drawn = rng.choice(len(all_tasks), size=len(all_tasks), replace=True)
        case_rates = []
        for tasks in arrays.values():
            rates = []
            for i in drawn:
                v = tasks.get(all_tasks[i])
                if v is not None:
                    rates.append(v[rng.integers(0, len(v), size=len(v))].mean())
            if rates:
                case_rates.append(float(np.mean(rates)))
        stats[b] = np.mean(case_rates) if case_rates else np.nan
    stats = stats[~np.isnan(stats)]
    lo, hi = (float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))) if len(stats) else (None, None)
    return {
        "mean": round(point, 6),
        "ci95": None if lo is None else [round(lo, 6), round(hi, 6)],
        "cases": len(cases),
        "episodes": sum(len(v) for t in cases.values() for v in t.values()),
    }
