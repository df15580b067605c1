"""Success rates with their uncertainty (``docs/definition.md``, "Metrics").

SR_m(c) = 1/|T_c| sum_{t in T_c} [1/N_tc sum_i 1[episode i succeeded]]: the mean over the tasks
compatible with case c of each task's success rate. Invalid episodes (a shift whose
post-condition failed) count in no denominator; they are reported beside the rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

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

    Degenerate data: when the replicates cannot vary (every episode has the same outcome: all
    failed, or all succeeded) the percentile interval is zero-width ([0, 0]), which claims a
    certainty no finite run gives. ``ci95`` is then the Wilson score interval (:func:`wilson`) at
    the mean with n = all episodes: [0, z^2/(n+z^2)] for all failures (0 of 40: [0, 0.088]), its
    mirror for all successes.
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
    interval: tuple[float, float] | None = None
    if len(stats):
        lo, hi = float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))
        if hi - lo < 1e-12 or k.sum() in (0, n.sum()):  # cannot vary (docstring)
            lo, hi = wilson(point * n.sum(), int(n.sum()))
        interval = (lo, hi)
    return {
        "mean": round(point, 6),
        "ci95": None if interval is None else [round(interval[0], 6), round(interval[1], 6)],
        "cases": len(cases),
        "episodes": int(n.sum()),
    }


# ---------------------------------------------------------------------------------------------
# Paired differences (composition gaps, drops from nominal, live minus frozen, recovery gains).

#: An episode's pairing key: (task key, init state, env seed). Episode ``e`` of every case starts
#: from init state ``e`` with seed ``seed + e`` (docs/evaluator.md), so the same key in two cases
#: is the same start: the difference of their outcomes is free of the start's difficulty.
PairKey = tuple[str, int, int]


def paired_table(conditions: dict[str, dict[PairKey, bool]]) -> dict[str, Any]:
    """Align the outcomes of several conditions on the episodes they ALL ran.

    Args:
        conditions: condition name -> pairing key -> success (valid episodes only).

    Returns ``{"names": [...], "tasks": {task: (n_pairs, K) float array of 0/1}}`` with the
    columns in the order of ``names``; a task keeps only its keys present in every condition, and
    a task with none drops out.
    """
    import numpy as np

    names = list(conditions)
    common = set.intersection(*(set(v) for v in conditions.values())) if conditions else set()
    by_task: dict[str, list[PairKey]] = defaultdict(list)
    for key in sorted(common):
        by_task[key[0]].append(key)
    tasks = {
        t: np.array([[float(conditions[n][k]) for n in names] for k in keys]) for t, keys in sorted(by_task.items())
    }
    return {"names": names, "tasks": tasks}


def paired_bootstrap(
    table: dict[str, Any],
    stat: Callable[[Any], Any],
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """A statistic of task-averaged success rates of paired conditions, with a percentile
    bootstrap interval that resamples tasks, then episodes within each task JOINTLY across the
    conditions (a resampled episode keeps its outcome in every condition: that is the pairing).

    Args:
        table: :func:`paired_table` output.
        stat: maps an array (..., K) of per-condition success rates (task-averaged, in [0, 1]) to
            the statistic (...,), e.g. ``lambda r: r[..., 0] - r[..., 1]``.

    Returns ``value`` (the statistic at the observed rates; None without pairs), ``ci95``
    ([2.5, 97.5] percentiles; None without pairs), ``tasks`` and ``pairs`` (episodes per
    condition that entered).

    Degenerate data: when the statistic is the same in every replicate (no paired episode whose
    outcomes move it: e.g. every start fails in every condition, or the composition fails exactly
    where its weakest constituent does) the percentile interval is zero-width. A difference of
    paired success rates is bounded in size by the share of pairs whose outcomes differ, so
    ``ci95`` is then ``[value - u, value + u]`` (within [-1, 1]), ``u`` the exact
    (Clopper-Pearson) 97.5% upper bound on that share with 0 of n pairs seen:
    ``u = 1 - 0.025 ** (1 / n)`` (n = 40: 0.088; about 3.7/n), :func:`discordance_bound`.
    """
    import numpy as np

    tasks = list(table["tasks"].values())
    if not tasks:
        return {"value": None, "ci95": None, "tasks": 0, "pairs": 0}
    point_rates = np.mean([x.mean(axis=0) for x in tasks], axis=0)
    value = float(stat(point_rates[None])[0])
    rng = np.random.default_rng(seed)
    n_tasks = len(tasks)
    draws = rng.integers(0, n_tasks, size=(replicates, n_tasks))
    weight = np.zeros((replicates, n_tasks))
    np.add.at(weight, (np.repeat(np.arange(replicates), n_tasks), draws.ravel()), 1.0)
    per_task = np.stack([x[rng.integers(0, len(x), size=(replicates, len(x)))].mean(axis=1) for x in tasks], axis=1)
    rates = (weight[:, :, None] * per_task).sum(axis=1) / n_tasks  # (B, K)
    stats = np.asarray(stat(rates), dtype=float)
    lo, hi = float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))
    n_pairs = int(sum(len(x) for x in tasks))
    if hi - lo < 1e-12:  # the statistic cannot vary (docstring)
        u = discordance_bound(n_pairs)
        lo, hi = max(-1.0, value - u), min(1.0, value + u)
    return {
        "value": round(value, 6),
        "ci95": [round(lo, 6), round(hi, 6)],
        "tasks": n_tasks,
        "pairs": int(sum(len(x) for x in tasks)),
    }


def discordance_bound(n: int, alpha: float = 0.05) -> float:
    """The exact (Clopper-Pearson) one-sided ``1 - alpha/2`` upper bound on a proportion when 0 of
    ``n`` trials were positive: ``1 - (alpha/2) ** (1/n)`` (1.0 for n = 0). 0 of 40 gives 0.0880,
    0 of 100 gives 0.0362."""
    return 1.0 if n <= 0 else 1.0 - (alpha / 2) ** (1.0 / n)


def paired_difference(a: dict[PairKey, bool], b: dict[PairKey, bool], **kwargs: Any) -> dict:
    """SR(a) - SR(b) over the episodes both ran, with its paired bootstrap interval
    (:func:`paired_bootstrap`)."""
    return paired_bootstrap(paired_table({"a": a, "b": b}), lambda r: r[..., 0] - r[..., 1], **kwargs)


def weakest_single_gap(
    composition: dict[PairKey, bool], constituents: dict[str, dict[PairKey, bool]], **kwargs: Any
) -> dict:
    """Delta(C) = SR(C) - min_i SR(c_i) (``docs/evaluator.md``, "Metrics"), every rate over the
    SAME episodes: the composition's tasks and starts that each constituent also ran. Comparing
    SR(C) with a constituent's rate over its own, different task set would mix task difficulty
    into the gap. Returns :func:`paired_bootstrap`'s dict plus ``weakest_single`` (the id of the
    weakest constituent at the observed rates) and ``constituent_rates``."""
    import numpy as np

    table = paired_table({"__composition__": composition, **constituents})
    out = paired_bootstrap(table, lambda r: r[..., 0] - r[..., 1:].min(axis=-1), **kwargs)
    if table["tasks"]:
        rates = np.mean([x.mean(axis=0) for x in table["tasks"].values()], axis=0)
        names = table["names"][1:]
        out["constituent_rates"] = {n: round(float(r), 6) for n, r in zip(names, rates[1:], strict=True)}
        out["composition_rate"] = round(float(rates[0]), 6)
        out["weakest_single"] = names[int(np.argmin(rates[1:]))]
    else:
        out.update(constituent_rates={}, composition_rate=None, weakest_single=None)
    return out


def mean_paired_difference(pairs: dict[str, tuple[dict[PairKey, bool], dict[PairKey, bool]]], **kwargs: Any) -> dict:
    """The mean over cases of SR(a_c) - SR(b_c) (e.g. live minus frozen, recovery minus none),
    over the tasks and starts common to every case, with a paired bootstrap interval."""
    flat: dict[str, dict[PairKey, bool]] = {}
    for case, (a, b) in pairs.items():
        flat[f"{case}\x1fa"], flat[f"{case}\x1fb"] = a, b
    out = paired_bootstrap(paired_table(flat), lambda r: (r[..., 0::2] - r[..., 1::2]).mean(axis=-1), **kwargs)
    out["cases"] = len(pairs)
    return out


# ---------------------------------------------------------------------------------------------
# Intervals from published counts (the public view, ``liberopro.schema.public``).
#
# The leaderboard publishes, per case, the success rate and its counts (successes, valid
# episodes); everything else it shows must be a function of those numbers alone. The intervals
# above are not: the bootstrap resamples tasks (the per-task split of a case's successes, which
# is per-instance data) and paired episodes (which starts succeeded), and a policy can steer
# both per episode. The functions below take published rates and counts only. They combine the
# cases' Wilson intervals with MOVER ("method of variance estimates recovery": Zou and Donner,
# Statistics in Medicine 27 (2008) 1693-1702; for linear functions of binomial proportions, Zou,
# Huang and Zhang, Computational Statistics & Data Analysis 53 (2009) 1080-1085); for one
# difference of two proportions MOVER with Wilson intervals is Newcombe's hybrid score interval
# (method 10 of Newcombe, Statistics in Medicine 17 (1998) 873-890). No random numbers, no seed.

#: A point estimate with its 95% interval: (value, low, high).
Estimate = tuple[float, float, float]


def _r6(x: float) -> float:
    return round(x, 6) + 0.0  # + 0.0: no "-0.0" in the JSON


def wilson_estimate(rate: float, n: int) -> Estimate:
    """A published case's rate with its Wilson score interval (:func:`wilson` at ``rate * n``
    successes: the interval the public view shows for the case)."""
    lo, hi = wilson(rate * n, n)
    return rate, lo, hi


def mover(terms: Iterable[tuple[float, Estimate]]) -> Estimate:
    """A linear combination ``sum_i c_i * theta_i`` of independent estimates with its MOVER
    interval (Zou and Donner 2008; Zou, Huang and Zhang 2009).

    Args:
        terms: ``(c_i, (theta_i, l_i, u_i))``: each estimate's coefficient, value and 95% interval.

    Returns ``(value, low, high)`` with ``value = sum c_i theta_i`` and

        low  = value - sqrt(sum_{c_i > 0} c_i^2 (theta_i - l_i)^2 + sum_{c_i < 0} c_i^2 (u_i - theta_i)^2)
        high = value + sqrt(sum_{c_i > 0} c_i^2 (u_i - theta_i)^2 + sum_{c_i < 0} c_i^2 (theta_i - l_i)^2)

    Method: each ``theta_i - l_i`` (``u_i - theta_i``) is read as z times the standard error the
    interval implies on that side, and the variances of the combination are recovered side by
    side. With asymmetric intervals (Wilson's) the combination stays asymmetric where the rates
    are near 0 or 1, and it is never zero-width while every term has width. Since
    ``sqrt(sum a_i^2) <= sum a_i``, the interval lies within ``[sum c_i l_i, sum c_i u_i]`` (with
    l and u swapped for negative c_i): a mean of rates in [0, 1] stays in [0, 1], a difference in
    [-1, 1], without clipping. Unrounded.
    """
    value = below = above = 0.0
    for c, (theta, lo, hi) in terms:
        value += c * theta
        down, up = (theta - lo, hi - theta) if c >= 0 else (hi - theta, theta - lo)
        below += (c * down) ** 2
        above += (c * up) ** 2
    return value, value - math.sqrt(below), value + math.sqrt(above)


def _published(rates: Iterable[tuple[float | None, int]]) -> list[tuple[float, int]]:
    return [(float(p), int(n)) for p, n in rates if p is not None and n > 0]


def mean_of_rates_ci(rates: Iterable[tuple[float | None, int]]) -> dict:
    """The mean over cases of their success rates, with a 95% interval computed from each case's
    published rate and valid-episode count only: the public interval of the headline means
    (overall, static and runtime means, category means).

    Args:
        rates: per case ``(rate, valid episodes)`` as published (``Rate.value``,
            ``Rate.episodes``); cases without a rate (no valid episode) are left out, as they are
            of the mean.

    Returns ``value`` (the mean of the given rates), ``ci95`` (``[low, high]``), ``cases``,
    ``episodes`` (their sum); ``value`` and ``ci95`` None without a case. Rounded to 6 places.

    Method: MOVER (:func:`mover`) over the cases' Wilson intervals with coefficients ``1/m``:
    ``low = mean - sqrt(sum (p_i - l_i)^2) / m`` and ``high = mean + sqrt(sum (u_i - p_i)^2) / m``.
    It treats the cases as independent binomial samples, which ignores that every case runs on
    the same tasks (a task hard under one shift tends to be hard under others); the bootstrap of
    a local run's ``summary.json`` (:func:`bootstrap_mean_of_rates`) resamples tasks and is wider
    when tasks differ much in difficulty, but it reads the per-task split, which is per-instance
    data and is never published. Within ``[mean of l_i, mean of u_i]``, so in [0, 1]; never
    zero-width (all 0 of 40 in each of 2 cases: [0, 0.062]).
    """
    cases = _published(rates)
    if not cases:
        return {"value": None, "ci95": None, "cases": 0, "episodes": 0}
    m = len(cases)
    value, lo, hi = mover((1.0 / m, wilson_estimate(p, n)) for p, n in cases)
    return {
        "value": _r6(value),
        "ci95": [_r6(max(0.0, lo)), _r6(min(1.0, hi))],
        "cases": m,
        "episodes": sum(n for _, n in cases),
    }


def newcombe_difference(a: tuple[float | None, int], b: tuple[float | None, int]) -> dict:
    """The difference of two published success rates, ``SR(a) - SR(b)``, with Newcombe's hybrid
    score interval: UNPAIRED, from the two rates and their valid-episode counts only (the public
    drop from nominal, composition gap, live minus frozen, and a comparison of two submissions'
    cases).

    Args:
        a, b: ``(rate, valid episodes)`` of each side as published.

    Returns ``value`` and ``ci95`` (``[low, high]`` within [-1, 1]), None when a side has no rate;
    rounded to 6 places.

    Method: Newcombe (1998), method 10: with (l_a, u_a) and (l_b, u_b) the two Wilson intervals,
    ``low = d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)``, ``high = d + sqrt((u_a - p_a)^2 +
    (p_b - l_b)^2)`` (:func:`mover` with coefficients +1 and -1). Treating the sides as
    independent ignores that both ran the same starts; a paired interval
    (:func:`paired_difference`, ``liberopro report``) is narrower when the starts' difficulty is
    shared, but it reads which episodes succeeded.
    """
    sides = _published([a, b])
    if len(sides) < 2:
        return {"value": None, "ci95": None}
    value, lo, hi = mover([(1.0, wilson_estimate(*sides[0])), (-1.0, wilson_estimate(*sides[1]))])
    return {"value": _r6(value), "ci95": [_r6(max(-1.0, lo)), _r6(min(1.0, hi))]}


def mean_difference_ci(pairs: Iterable[tuple[tuple[float | None, int], tuple[float | None, int]]]) -> dict:
    """The mean over cases of ``SR(a_c) - SR(b_c)`` (live minus frozen, recovery minus none), with
    an UNPAIRED 95% interval from the published rates and counts of both sides of every case.

    Args:
        pairs: per case ``((rate, valid episodes) of a, (rate, valid episodes) of b)`` as
            published; a case where either side has no rate is left out.

    Returns ``value``, ``ci95`` (within [-1, 1]) and ``cases``; None values without a case;
    rounded to 6 places.

    Method: :func:`mover` over the 2m Wilson intervals with coefficients ``+1/m`` (a) and ``-1/m``
    (b): Newcombe's interval generalised to a mean of differences (Zou, Huang and Zhang 2009).
    """
    published = [(_published([a]), _published([b])) for a, b in pairs]
    kept = [(a[0], b[0]) for a, b in published if a and b]
    if not kept:
        return {"value": None, "ci95": None, "cases": 0}
    m = len(kept)
    terms = [t for a, b in kept for t in ((1.0 / m, wilson_estimate(*a)), (-1.0 / m, wilson_estimate(*b)))]
    value, lo, hi = mover(terms)
    return {"value": _r6(value), "ci95": [_r6(max(-1.0, lo)), _r6(min(1.0, hi))], "cases": m}


def interval_difference(a: Estimate, b: Estimate) -> dict:
    """``a - b`` of two independent published estimates with their 95% intervals, with the MOVER
    interval of the difference (:func:`mover`, coefficients +1 and -1): the public comparison of
    two submissions' headline and category columns, from their published values and intervals
    only. For two Wilson intervals it is :func:`newcombe_difference`; for two means built by
    :func:`mean_of_rates_ci` it is MOVER over all their cases at once.

    Returns ``value`` and ``ci95`` (within [-1, 1] for estimates in [0, 1]), rounded to 6 places.
    """
    value, lo, hi = mover([(1.0, a), (-1.0, b)])
    return {"value": _r6(value), "ci95": [_r6(max(-1.0, lo)), _r6(min(1.0, hi))]}
