"""Reading published results from the platform's ``results`` table, with a cache.

A published result never changes (only its ``hidden`` flag does), so its listed view
(:func:`~liberopro_leaderboard.trial.listed_result`: the public view and whether it is a trial
run) is computed once per result and kept. Every
request still asks the database which results are visible, so hiding a result takes effect at
once. A page costs at most two queries whatever the number of results: one narrow query for the
visible ids, and one for the summaries not yet cached (no query per row).
"""

from __future__ import annotations

import datetime as dt
import threading

from cachetools import LRUCache
from liberopro_platform.api.deps import plausible_id
from liberopro_platform.models import Result
from sqlalchemy import select
from sqlalchemy.orm import Session

from liberopro_leaderboard.trial import ListedResult, listed_result

#: A result's identity in the cache: its row id and publication time (a re-published row is a new entry).
ResultKey = tuple[int, dt.datetime]


class ResultStore:
    """Visible results as :class:`~liberopro_leaderboard.trial.ListedResult`, cached per result
    (LRU, ``max_entries``). Only the ``results`` table is read: never a submission's episodes."""

    def __init__(self, max_entries: int = 5000) -> None:
        self._lock = threading.Lock()
        self._views: LRUCache[ResultKey, ListedResult] = LRUCache(max_entries)
        self.loaded = 0  # results converted so far (tests use it to see the cache work)

    @property
    def max_entries(self) -> int:
        """Results kept at most (the least recently used goes first)."""
        return int(self._views.maxsize)

    def _cached(self, key: ResultKey) -> ListedResult | None:
        with self._lock:  # an LRUCache is not thread-safe (a hit reorders it)
            return self._views.get(key)

    def _keep(self, key: ResultKey, view: ListedResult) -> None:
        with self._lock:
            self._views[key] = view
            self.loaded += 1

    def _views_for(self, session: Session, keys: list[ResultKey]) -> dict[ResultKey, ListedResult]:
        out = {k: v for k in keys if (v := self._cached(k)) is not None}
        missing = [k[0] for k in keys if k not in out]
        if missing:
            for row in session.scalars(select(Result).where(Result.id.in_(missing))):
                key = (row.id, row.published_at)
                view = listed_result(row)
                self._keep(key, view)
                out[key] = view
        return out

    def visible(self, session: Session) -> list[ListedResult]:
        """Every result not hidden, in publication order."""
        keys = [
            (rid, at)
            for rid, at in session.execute(
                select(Result.id, Result.published_at)
                .where(Result.hidden.is_(False))
                .order_by(Result.published_at, Result.id)
            )
        ]
        views = self._views_for(session, keys)
        return [views[k] for k in keys if k in views]

    def get(self, session: Session, submission_id: str) -> ListedResult | None:
        """The visible result of ``submission_id``; None when there is none or it is hidden, and for
        a string that cannot be an id (a NUL byte, which PostgreSQL refuses, or other junk)."""
        if not plausible_id(submission_id):
            return None
        row = session.execute(
            select(Result.id, Result.published_at).where(
                Result.submission_id == submission_id, Result.hidden.is_(False)
            )
        ).first()
        if row is None:
            return None
        key = (row[0], row[1])
        return self._views_for(session, [key]).get(key)
