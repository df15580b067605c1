"""Polling a check until it passes or a wall-clock timeout ends (``tenacity``).

One rule for every wait on a server (the clients' ``wait_healthy``, the evaluator's policy
process start, the platform's wait for a restarted policy): attempts ``interval`` seconds apart,
and no attempt starts once ``timeout`` seconds (``time.monotonic``) have passed since the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")


def poll_until(
    check: Callable[[float], T], timeout: float, interval: float, done: Callable[[T], bool] = bool
) -> T | None:
    """Call ``check(left)`` until ``done(result)`` holds; return the last result.

    Args:
        check: one attempt; ``left`` is the wall-clock seconds from the attempt's start to the
            end of ``timeout`` (for a per-attempt timeout). An exception it raises ends the wait
            at once and propagates (it is not retried).
        timeout: seconds after the first attempt's start at or after which no attempt starts
            (``tenacity.stop_before_delay``); ``<= 0``: no attempt at all.
        interval: seconds slept between the end of one attempt and the start of the next
            (``tenacity.wait_fixed``); the wait gives up rather than sleep past ``timeout``.
        done: whether a result passes (default: truthiness).

    Returns:
        the passing result, else the last failing one (None when no attempt ran). Raises
        nothing of its own.
    """
    if timeout <= 0:
        return None
    end = time.monotonic() + timeout
    retrying = tenacity.Retrying(
        stop=tenacity.stop_before_delay(timeout),
        wait=tenacity.wait_fixed(interval),
        retry=tenacity.retry_if_not_result(done),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    return retrying(lambda: check(end - time.monotonic()))
