"""Adapters for the policy servers people already run.

* :mod:`.openpi` / :mod:`.openpi_server`: openpi's websocket protocol (pi0, pi0-FAST, pi0.5),
  msgpack-numpy frames (:mod:`.msgpack_numpy`); client for the evaluator, server for the SDK.
* :mod:`.openvla` / :mod:`.openvla_server`: OpenVLA's and OpenVLA-OFT's REST ``POST /act`` with
  json-numpy bodies (:mod:`.json_numpy`); client for the evaluator, server for the SDK.

Clients offer the methods of :class:`submission_spec.client.PolicyClient` and raise its
:class:`~submission_spec.client.PolicyError` reason codes; pick one with
:func:`submission_spec.transports.make_client`. The conventions of each protocol (camera keys,
sizes, orientation, state layout, gripper, chunking) and how to change them are in
``docs/adapters.md``.
"""

from submission_spec.adapters.openpi import OPENPI_LIBERO_DEFAULTS, OpenPIClient, OpenPIOptions
from submission_spec.adapters.openvla import (
    OFT_DEFAULTS,
    OPENVLA_DEFAULTS,
    OpenVLAClient,
    OpenVLAOptions,
)

__all__ = [
    "OFT_DEFAULTS",
    "OPENPI_LIBERO_DEFAULTS",
    "OPENVLA_DEFAULTS",
    "OpenPIClient",
    "OpenPIOptions",
    "OpenVLAClient",
    "OpenVLAOptions",
]
