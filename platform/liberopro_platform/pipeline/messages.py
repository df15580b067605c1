"""How a stage hands work to the next one (:class:`Enqueue`: Celery in production) and what the
broker holds of those task messages (:class:`BrokerView`, read by the stuck sweep)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class BrokerView:
    """The pipeline's task messages that the broker holds, keyed ``(kind, argument)``: kind is
    ``validate``, ``run_shard`` or ``aggregate`` (the :class:`Enqueue` method that sent it), the
    argument its submission or shard id as a string.

    ``waiting``: in a queue, not handed to a worker yet. ``delivered``: handed to a worker and
    not acknowledged (running, or held by the worker until its countdown ends), with the later
    of the hand-over time and the countdown's end (UTC). A message delivered to a worker that
    died stays "delivered" until the broker's visibility timeout, so for work the database
    says is still queued only a recent delivery counts (:func:`.sweep.find_stuck`).
    """

    waiting: set[tuple[str, str]] = field(default_factory=set)
    delivered: dict[tuple[str, str], dt.datetime] = field(default_factory=dict)

    def holds(self, kind: str, arg: object, delivered_after: dt.datetime | None = None) -> bool:
        """True when the broker holds a message ``kind(arg)``: waiting, or delivered (after
        ``delivered_after`` when given)."""
        key = (kind, str(arg))
        if key in self.waiting:
            return True
        at = self.delivered.get(key)
        return at is not None and (delivered_after is None or at >= delivered_after)


class Enqueue(Protocol):
    """How a stage hands work to the next one (Celery in production)."""

    def validate(self, submission_id: str, countdown: float = 0) -> None: ...
    def run_shard(self, shard_id: int, countdown: float = 0) -> None: ...
    def aggregate(self, submission_id: str, countdown: float = 0) -> None: ...

    def pending(self) -> BrokerView | None:
        """What the broker holds now; None when it cannot be inspected (down, or not Redis)."""
