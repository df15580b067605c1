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
