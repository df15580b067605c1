"""The ranking: sort by any column, and ranks that the 95% intervals cannot separate shown as ties.

Tie rule (also printed on the page and in ``/api/leaderboard``): a submission's rank under a
metric is 1 + the number of submissions whose whole 95% interval lies above its own (their lower
bound exceeds its upper bound). Two submissions whose intervals overlap never get different ranks
because of each other, so a rank difference is always backed by separated intervals. The rule is
the one Chatbot Arena uses; it is conservative (overlapping 95% intervals do not prove equality)
and it is not transitive in general: A may share rank with B, and B with C, while A ranks above C.
Submissions without a value for the metric come last and share the last rank.

Trial runs (:mod:`liberopro_leaderboard.trial`) are ranked apart: the ranks are computed over the
full results only, and every trial row comes after every full row, in the same order among
themselves, with no rank (``rank`` null).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Literal

from liberopro.schema.public import COLUMN_BY_KEY, COLUMNS, Column, Rate
from pydantic import BaseModel, Field

from liberopro_leaderboard.trial import ListedResult

TIE_RULE = (
    "Rank = 1 + the number of submissions whose entire 95% interval lies above this one's (their lower "
    "bound is higher than this one's upper bound). Submissions whose intervals overlap therefore share a "
    "rank, marked '='. Overlap does not prove equality; it means this benchmark's episodes cannot tell "
    "them apart. Submissions without a value for the metric come last. Trial runs are not ranked: they are "
    "listed after every full result."
)

#: Columns besides the metrics that the table can be sorted by (key -> label).
TEXT_SORTS: dict[str, str] = {"team": "Team", "policy": "Policy", "published": "Published"}
DEFAULT_SORT = "overall"
Order = Literal["desc", "asc"]


def sort_keys() -> list[str]:
    """Every valid value of the ``sort`` parameter."""
    return [c.key for c in COLUMNS] + list(TEXT_SORTS)


def default_order(sort: str) -> Order:
    """The order a first click on a column header asks for: best first for rates, A-Z for names,
    newest first for dates."""
    return "asc" if sort in ("team", "policy") else "desc"


def separated(a: Rate, b: Rate) -> bool:
    """True when the two 95% intervals do not overlap (the benchmark can tell the two apart)."""
    ia, ib = a.interval, b.interval
    if ia is None or ib is None:
        return False
    return ia[0] > ib[1] or ib[0] > ia[1]


def interval_ranks(rates: list[Rate]) -> list[int]:
    """Rank of each rate under the tie rule (:data:`TIE_RULE`)."""
    ranks = []
    # a rate with a value always has an interval (its ci95, or the point itself)
    with_value = [i for r in rates if r.value is not None and (i := r.interval) is not None]
    last = 1 + len(with_value)
    for r in rates:
        interval = r.interval
        if r.value is None or interval is None:
            ranks.append(last)
            continue
        high = interval[1]
        ranks.append(1 + sum(1 for o in with_value if o[0] > high))
    return ranks


class RankedRow(BaseModel):
    """One row of the ranking."""

    rank: int | None = Field(
        ..., description="Rank under the tie rule, by ``rank_by``, among the full results; null for a trial run."
    )
    tied: bool = Field(..., description="Another row shares this rank (never a trial run).")
    submission_id: str
    team: str
    policy_name: str
    published_at: dt.datetime
    evaluator_version: str
    spec_version: str
    page_url: str
    api_url: str
    metrics: dict[str, Rate] = Field(..., description="Column key -> rate (keys in ``columns``).")
    unproved_instances: int = Field(
        0,
        description="Instances the solvability proof left unproved: in no rate and no rank, shown apart on "
        "the submission page.",
    )
    trial: bool = Field(False, description="A trial run: listed after every full result, with no rank.")
    trial_reasons: list[str] = Field(
        [], description="Why it is a trial run (e.g. 'horizon capped at 10 steps'); empty for a full result."
    )


class LeaderboardResponse(BaseModel):
    """The ranking as the page shows it: same rows, same order, same numbers."""

    sort: str
    order: Order
    rank_by: str = Field(
        ...,
        description="The metric the ranks are computed from (the sort column, or "
        "overall when sorting by a name or date).",
    )
    tie_rule: str = TIE_RULE
    columns: list[Column]
    rows: list[RankedRow]
    notes: list[str] = Field(
        [], description="Caveats about comparing these rows (different evaluator versions or manifests)."
    )


class SortError(ValueError):
    """An unknown sort column or order."""


def _rows(results: list[ListedResult], rank_by: str) -> list[RankedRow]:
    """One row per result, in ``results``' order: the full results ranked among themselves under
    the tie rule by ``rank_by``, the trial runs without a rank."""
    full_ranks = interval_ranks([r.metrics[rank_by] for r in results if not r.trial])
    counts = Counter(full_ranks)
    ranks = iter(full_ranks)
    rank_of = [None if r.trial else next(ranks) for r in results]
    return [
        RankedRow(
            rank=rank,
            tied=rank is not None and counts[rank] > 1,
            submission_id=r.meta.submission_id,
            team=r.meta.team,
            policy_name=r.meta.policy_name,
            published_at=r.meta.published_at,
            evaluator_version=r.meta.evaluator_version,
            spec_version=r.meta.spec_version,
            page_url=r.meta.page_url,
            api_url=r.meta.api_url,
            metrics=r.metrics,
            unproved_instances=r.unproved.instances,
            trial=r.trial,
            trial_reasons=r.trial_reasons,
        )
        for r, rank in zip(results, rank_of, strict=True)
    ]


def _ordered(rows: list[RankedRow], sort: str, order: str) -> list[RankedRow]:
    """``rows`` ordered by ``sort`` in ``order``; rows without a value for a metric last in either
    order; ties by the earlier publication, then by submission id."""
    rows = sorted(rows, key=lambda row: (row.published_at, row.submission_id))
    if sort in COLUMN_BY_KEY:
        present = [(value, row) for row in rows if (value := row.metrics[sort].value) is not None]
        absent = [row for row in rows if row.metrics[sort].value is None]
        present.sort(key=lambda pair: pair[0], reverse=order == "desc")
        return [row for _, row in present] + absent  # no value: last in either order
    text = {
        "team": lambda row: row.team.casefold(),
        "policy": lambda row: row.policy_name.casefold(),
        "published": lambda row: row.published_at,
    }[sort]
    return sorted(rows, key=text, reverse=order == "desc")


def _notes(full: list[ListedResult], trials: int) -> list[str]:
    """The caveats about comparing the full results, and where the trial runs are."""
    notes = []
    versions = sorted({r.meta.evaluator_version for r in full})
    if len(versions) > 1:
        notes.append(
            f"These rows were produced by {len(versions)} evaluator versions ({', '.join(versions)}); "
            "compare rows of different versions with care."
        )
    manifests = {r.meta.manifest_sha256 for r in full}
    if len(manifests) > 1:
        notes.append(
            f"These rows were evaluated on {len(manifests)} different evaluation manifests; rows on "
            "different manifests ran different instances."
        )
    if trials:
        notes.append(
            f"{trials} trial run{' is' if trials == 1 else 's are'} listed after the full results, without a rank: "
            "a trial ran with a capped horizon, fewer episodes per instance or fewer tasks than the protocol, "
            "so its numbers are not comparable with a full result's."
        )
    return notes


def rank_table(results: list[ListedResult], sort: str = DEFAULT_SORT, order: str | None = None) -> LeaderboardResponse:
    """Rank and order ``results`` by ``sort`` (a column key or team/policy/published): the full
    results first, ranked under the tie rule, then the trial runs, unranked, in the same order.

    Raises :class:`SortError` naming the valid values."""
    if sort not in sort_keys():
        raise SortError(f"unknown sort column {sort!r}; use one of: {', '.join(sort_keys())}")
    order = order or default_order(sort)
    if order not in ("asc", "desc"):
        raise SortError(f"unknown order {order!r}; use asc or desc")
    rank_by = sort if sort in COLUMN_BY_KEY else DEFAULT_SORT
    rows = _rows(results, rank_by)
    full = _ordered([row for row in rows if not row.trial], sort, order)
    trials = _ordered([row for row in rows if row.trial], sort, order)
    return LeaderboardResponse(
        sort=sort,
        order=order,
        rank_by=rank_by,
        columns=COLUMNS,
        rows=full + trials,
        notes=_notes([r for r in results if not r.trial], len(trials)),
    )
