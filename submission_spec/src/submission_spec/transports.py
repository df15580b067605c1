"""Which wire protocol a policy speaks, and the evaluator-side client for each.

=============  =============================================  ==============================
protocol       wire                                           client
=============  =============================================  ==============================
``liberopro``  our spec v1: HTTP ``/health`` ``/metadata``     :class:`~submission_spec.client.PolicyClient`
               ``/reset`` ``/act``, JSON or msgpack
``openpi``     openpi websocket, msgpack-numpy, metadata      :class:`~submission_spec.adapters.openpi.OpenPIClient`
               frame, ``/healthz``
``openvla``    OpenVLA / OpenVLA-OFT REST ``POST /act``,       :class:`~submission_spec.adapters.openvla.OpenVLAClient`
               json-numpy
=============  =============================================  ==============================

Every client offers the same methods (``health``, ``wait_healthy``, ``metadata``, ``reset``,
``act``, ``close``) and raises :class:`submission_spec.client.PolicyError` with the same reason
codes, so the episode runner does not know which protocol is behind it. Their time limits are
wall-clock deadlines (:mod:`submission_spec.deadline`).

A submitted image declares its protocol with the label :data:`PROTOCOL_LABEL`
(``LABEL org.liberopro.protocol="openpi"``); no label means ``liberopro``. Options for its
client may travel as labels ``org.liberopro.protocol-option.KEY=VALUE``
(:func:`protocol_options_from_labels`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from submission_spec.client import PolicyClient
from submission_spec.deadline import DEFAULT_MAX_REPLY_BYTES

Protocol = Literal["liberopro", "openpi", "openvla"]
PROTOCOLS: tuple[str, ...] = ("liberopro", "openpi", "openvla")

#: Image label naming the protocol the container's server speaks (read by the platform).
PROTOCOL_LABEL = "org.liberopro.protocol"
DEFAULT_PROTOCOL = "liberopro"


class LiberoProOptions(BaseModel):
    """Options of the ``liberopro`` client (:class:`~submission_spec.client.PolicyClient`)."""

    model_config = ConfigDict(extra="forbid")
    encoding: Literal["msgpack", "json"] = "msgpack"
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, ge=1024)


def _check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown policy protocol {protocol!r}; supported: {', '.join(PROTOCOLS)}")
    return protocol


def make_client(url: str, protocol: str = "liberopro", **options: Any):
    """A client for ``url`` speaking ``protocol``.

    ``options`` are the client's settings, typed or as strings (from ``--protocol-option
    KEY=VALUE``): ``encoding``, ``connect_timeout``, ``request_timeout``, ``max_reply_bytes`` for
    ``liberopro``;
    :class:`~submission_spec.adapters.openpi.OpenPIOptions` and
    :class:`~submission_spec.adapters.openvla.OpenVLAOptions` for the others. Raises
    ``ValueError`` for an unknown protocol or option, naming the valid ones.
    """
    _check_protocol(protocol)
    if protocol == "openpi":
        from submission_spec.adapters.openpi import OpenPIClient

        return OpenPIClient(url, **options)
    if protocol == "openvla":
        from submission_spec.adapters.openvla import OpenVLAClient

        return OpenVLAClient(url, **options)
    from submission_spec.adapters._common import parse_options

    return PolicyClient(url, **parse_options(LiberoProOptions, options, "liberopro").model_dump())


def parse_protocol_options(items: list[str] | None) -> dict[str, str]:
    """``["chunk_length=10", "variant=oft"]`` -> ``{"chunk_length": "10", "variant": "oft"}``.
    ``ValueError`` for an item without ``=`` or a repeated key."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"protocol option {item!r} is not KEY=VALUE")
        if key in out:
            raise ValueError(f"protocol option {key!r} given twice")
        out[key] = value.strip()
    return out


#: Prefix of image labels carrying protocol options: ``org.liberopro.protocol-option.chunk_length=10``.
PROTOCOL_OPTION_LABEL_PREFIX = "org.liberopro.protocol-option."


def protocol_options_from_labels(labels: dict[str, str] | None) -> dict[str, str]:
    """Protocol options an image declares with labels
    ``org.liberopro.protocol-option.KEY=VALUE`` (strings, as from the CLI)."""
    n = len(PROTOCOL_OPTION_LABEL_PREFIX)
    return {
        k[n:].replace("-", "_"): v
        for k, v in (labels or {}).items()
        if k.startswith(PROTOCOL_OPTION_LABEL_PREFIX) and len(k) > n
    }


def protocol_from_labels(labels: dict[str, str] | None) -> str:
    """The protocol an image declares with :data:`PROTOCOL_LABEL` (``liberopro`` when absent);
    ``ValueError`` for an unknown value."""
    value = (labels or {}).get(PROTOCOL_LABEL, DEFAULT_PROTOCOL).strip().lower()
    return _check_protocol(value)
