"""LIBERO-Pro2.0 submission spec v1.

The contract between the evaluator and a policy server, with no simulator dependency:
pydantic models (:mod:`.models`), array and body codecs (:mod:`.arrays`, :mod:`.codec`), a
server SDK (:func:`serve`), an evaluator-side client (:class:`PolicyClient`) and a conformance
checker (:func:`check_policy`).

The server SDK (:func:`serve`, :func:`create_app`) is imported on first use: importing the
package loads no FastAPI or uvicorn, so the evaluator's client side and the light tools stay light
(``from submission_spec import serve`` works as before). The web stack is the ``server`` extra
(``pip install 'liberopro-submission-spec[server]'``); without it, :func:`serve` and
:func:`create_app` raise ``ModuleNotFoundError`` naming that command.
"""

from typing import TYPE_CHECKING, Any

from submission_spec.arrays import NDArray
from submission_spec.client import ActResult, PolicyClient, PolicyError
from submission_spec.conformance import check_policy
from submission_spec.models import (
    LIBERO_STATE8,
    PROPRIO_FIELDS,
    SPEC_VERSION,
    ActResponse,
    CameraSpec,
    ObservationMessage,
    PolicyMetadata,
    ResetRequest,
)
from submission_spec.policy import Observation, ObservationBatch, Policy, as_action_chunk

if TYPE_CHECKING:
    from submission_spec.server import BatchConfig, create_app, serve

_SERVER = ("BatchConfig", "create_app", "serve")


def __getattr__(name: str) -> Any:
    if name in _SERVER:  # the web stack, on first use only
        from submission_spec import server

        return getattr(server, name)
    raise AttributeError(f"module 'submission_spec' has no attribute {name!r}")


__all__ = [
    "LIBERO_STATE8",
    "PROPRIO_FIELDS",
    "SPEC_VERSION",
    "ActResponse",
    "ActResult",
    "BatchConfig",
    "CameraSpec",
    "NDArray",
    "Observation",
    "ObservationBatch",
    "ObservationMessage",
    "Policy",
    "PolicyClient",
    "PolicyError",
    "PolicyMetadata",
    "ResetRequest",
    "as_action_chunk",
    "check_policy",
    "create_app",
    "serve",
]
