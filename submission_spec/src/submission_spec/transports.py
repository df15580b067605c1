"""Which wire protocol a policy speaks, and the evaluator-side client for each.

Every client offers the same methods as :class:`submission_spec.client.PolicyClient`
(``health``, ``wait_healthy``, ``metadata``, ``reset``, ``act``, ``close``) and raises
:class:`submission_spec.client.PolicyError` with the same reason codes, so the episode runner
does not know which protocol is behind it.
"""

from __future__ import annotations

from typing import Any, Literal

from submission_spec.client import PolicyClient

Protocol = Literal["liberopro", "openpi", "openvla"]
PROTOCOLS: tuple[str, ...] = ("liberopro",)


def make_client(url: str, protocol: str = "liberopro", **options: Any):
    """A client for ``url`` speaking ``protocol``.

    ``options`` are the client's keyword arguments (``encoding``, ``connect_timeout``,
    ``request_timeout`` for ``liberopro``). Raises ``ValueError`` for an unknown protocol.
    """
    if protocol == "liberopro":
        return PolicyClient(url, **options)
    raise ValueError(f"unknown policy protocol {protocol!r}; supported: {', '.join(PROTOCOLS)}")
