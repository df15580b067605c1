"""The server SDK: :func:`serve` turns a :class:`~submission_spec.policy.Policy` (or a callable
plus metadata) into an HTTP server that conforms to spec v1.

The policy runs in a worker thread, one call at a time (a lock), so a slow model never blocks
``/health`` and two requests never interleave inside the model.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable

import numpy as np
from pydantic import ValidationError

from submission_spec import codec
from submission_spec.arrays import NDArray
from submission_spec.models import (
    SPEC_VERSION,
    ActResponse,
    ErrorResponse,
    Health,
    ObservationMessage,
    PolicyMetadata,
    ResetRequest,
    ResetResponse,
    ServerTiming,
)
from submission_spec.policy import Observation, Policy, as_action_chunk, as_policy

#: How to install what this module needs; the package itself installs without it (the client side).
SERVER_EXTRA = "pip install 'liberopro-submission-spec[server]'"

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from starlette.concurrency import run_in_threadpool
except ModuleNotFoundError as exc:  # installed without the server extra
    raise ModuleNotFoundError(
        f"the submission_spec server SDK needs {exc.name}, which is not installed: {SERVER_EXTRA}", name=exc.name
    ) from exc

log = logging.getLogger("submission_spec.server")

_BOTH_ENCODINGS: dict[str, dict] = {codec.JSON: {}, codec.MSGPACK: {}}


def _body_doc(model_name: str) -> dict:
    ref = {"$ref": f"#/components/schemas/{model_name}"}
    return {
        "requestBody": {
            "required": True,
            "content": {codec.JSON: {"schema": ref}, codec.MSGPACK: {"schema": ref}},
        }
    }


def _error(status: int, error: str, detail: str | None, encoding: codec.Encoding) -> Response:
    body = codec.encode(ErrorResponse(error=error, detail=detail), encoding)
    return Response(body, status_code=status, media_type=codec.media_type(encoding))


def create_app(
    policy: Policy | Callable[[Observation], np.ndarray],
    metadata: PolicyMetadata | None = None,
) -> FastAPI:
    """Build the FastAPI app for ``policy``.

    Error answers (body :class:`ErrorResponse`, in the request's encoding): 415 for an unknown
    Content-Type, 422 for a body that does not fit the model, 409 for ``/act`` before any
    ``/reset`` of that episode, 500 when the policy raises or returns a malformed chunk.
    """
    pol = as_policy(policy, metadata)
    lock = threading.Lock()
    state: dict[str, str | None] = {"episode_id": None}
    app = FastAPI(
        title="LIBERO-Pro2.0 policy server",
        version=SPEC_VERSION,
        description="Submission spec v1: the HTTP contract between the LIBERO-Pro2.0 evaluator "
        "and a policy. POST bodies are JSON or msgpack, chosen by Content-Type; answers use the "
        "request's encoding.",
    )

    async def _decode(request: Request, model):
        try:
            enc = codec.encoding_of(request.headers.get("content-type"))
        except codec.UnsupportedMediaType as exc:
            return None, _error(415, "unsupported_media_type", str(exc), "json"), "json"
        body = await request.body()
        try:
            return codec.decode(body, model, enc), None, enc
        except (ValidationError, ValueError) as exc:
            return None, _error(422, "invalid_body", str(exc)[:2000], enc), enc

    @app.get("/health", response_model=Health, summary="Liveness: 200 once the policy can act")
    def health() -> Health:
        return Health()

    @app.get("/metadata", response_model=PolicyMetadata, summary="What the policy wants and sends")
    def get_metadata() -> PolicyMetadata:
        return pol.metadata

    @app.post(
        "/reset",
        response_model=ResetResponse,
        responses={200: {"content": _BOTH_ENCODINGS}, 422: {"model": ErrorResponse}},
        openapi_extra=_body_doc("ResetRequest"),
        summary="Start an episode",
    )
    async def reset(request: Request) -> Response:
        msg, err, enc = await _decode(request, ResetRequest)
        if err is not None:
            return err

        def run() -> None:
            with lock:
                pol.reset(msg.episode_id, msg.instruction)
                state["episode_id"] = msg.episode_id

        try:
            await run_in_threadpool(run)
        except Exception as exc:  # the policy's own failure, reported to the evaluator
            log.exception("policy reset failed")
            return _error(500, "policy_reset_failed", f"{exc!r}\n{traceback.format_exc()}"[:4000], enc)
        body = codec.encode(ResetResponse(), enc)
        return Response(body, media_type=codec.media_type(enc))

    @app.post(
        "/act",
        response_model=ActResponse,
        responses={200: {"content": _BOTH_ENCODINGS}, 422: {"model": ErrorResponse}},
        openapi_extra=_body_doc("ObservationMessage"),
        summary="One observation in, one action chunk out",
    )
    async def act(request: Request) -> Response:
        msg, err, enc = await _decode(request, ObservationMessage)
        if err is not None:
            return err
        if state["episode_id"] != msg.episode_id:
            return _error(409, "unknown_episode", f"POST /reset episode {msg.episode_id!r} first", enc)
        obs = Observation.from_message(msg)

        def run():
            with lock:
                t0 = time.perf_counter()
                chunk = as_action_chunk(pol.act(obs))
                return chunk, (time.perf_counter() - t0) * 1e3

        try:
            chunk, infer_ms = await run_in_threadpool(run)
        except Exception as exc:
            log.exception("policy act failed")
            return _error(500, "policy_act_failed", f"{exc!r}\n{traceback.format_exc()}"[:4000], enc)
        resp = ActResponse(
            episode_id=msg.episode_id,
            step=msg.step,
            actions=NDArray.from_numpy(chunk),
            server_timing=ServerTiming(infer_ms=round(infer_ms, 3)),
        )
        return Response(codec.encode(resp, enc), media_type=codec.media_type(enc))

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:  # pragma: no cover
        return JSONResponse({"error": "internal_error", "detail": repr(exc)}, status_code=500)

    return app


def serve(
    policy: Policy | Callable[[Observation], np.ndarray],
    metadata: PolicyMetadata | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str = "warning",
    protocol: str = "liberopro",
) -> None:
    """Serve ``policy`` until SIGINT/SIGTERM.

    ``host`` defaults to env ``HOST`` or ``127.0.0.1`` (containers set ``HOST=0.0.0.0``);
    ``port`` to env ``PORT`` or 8000. Blocks. ``protocol``: ``liberopro`` (this spec),
    ``openpi`` (openpi's websocket protocol, :mod:`submission_spec.adapters.openpi_server`) or
    ``openvla`` (OpenVLA's REST ``/act``, :mod:`submission_spec.adapters.openvla_server`): the
    same policy, another wire.
    """
    import sys

    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"serve() needs uvicorn, which is not installed: {SERVER_EXTRA}", name="uvicorn"
        ) from exc

    host = host or os.environ.get("HOST", "127.0.0.1")
    port = int(port or os.environ.get("PORT") or 8000)
    name = getattr(metadata, "policy_name", None) or getattr(getattr(policy, "metadata", None), "policy_name", "policy")
    scheme = "ws" if protocol == "openpi" else "http"
    print(
        f"serving {name} ({protocol} protocol) on {scheme}://{host}:{port}; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    if protocol == "openpi":
        from submission_spec.adapters.openpi_server import serve_openpi

        return serve_openpi(policy, metadata, host=host, port=port)
    if protocol == "openvla":
        from submission_spec.adapters.openvla_server import create_openvla_app

        app = create_openvla_app(policy, metadata)
    elif protocol == "liberopro":
        app = create_app(policy, metadata)
    else:
        raise ValueError(f"unknown protocol {protocol!r}; serve liberopro, openpi or openvla")
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
    )
