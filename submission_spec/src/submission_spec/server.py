"""The server SDK: :func:`serve` turns a :class:`~submission_spec.policy.Policy` (or a callable
plus metadata) into an HTTP server that conforms to spec v1.

The policy runs in a worker thread, one call at a time (a lock), so a slow model never blocks
``/health`` and two requests never interleave inside the model.

Concurrent episodes (spec 1.1): the server keeps the ``max_concurrent_episodes`` most recently
reset episodes (1 when the metadata does not declare it) and answers 409 to an ``/act`` of any
other. With ``batch=BatchConfig(...)`` the ``/act`` calls of concurrent episodes are gathered -
up to ``max_batch_size``, waiting at most ``max_wait_ms`` after the first - into one call of the
policy's ``act_batch`` (an :class:`~submission_spec.policy.ObservationBatch` with stacked arrays),
as batching model servers do; the wait is part of each request's round trip, so it counts in each
episode's policy time. A policy without ``act_batch`` gets the batch's observations one by one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

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
from submission_spec.policy import Observation, ObservationBatch, Policy, as_action_chunk, as_policy

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


@dataclass(frozen=True)
class BatchConfig:
    """How :func:`create_app` gathers concurrent ``/act`` calls into one ``act_batch`` call.

    Attributes:
        max_batch_size: most observations per call (>= 1).
        max_wait_ms: how long to wait for more after the first observation arrived (>= 0, ms);
            each request's round trip includes it.
    Raises ``ValueError`` for values outside those ranges.
    """

    max_batch_size: int = 8
    max_wait_ms: float = 5.0

    def __post_init__(self) -> None:
        if self.max_batch_size < 1 or self.max_wait_ms < 0:
            raise ValueError(
                f"BatchConfig(max_batch_size={self.max_batch_size}, max_wait_ms={self.max_wait_ms}): "
                "the batch size must be at least 1 and the wait at least 0 ms"
            )


class _Batcher:
    """One thread that runs the policy on batches of observations (see the module docstring).
    :meth:`submit` returns a future of (chunk (T, 7) float32, inference ms of the whole batch)."""

    def __init__(self, pol: Policy, config: BatchConfig, lock: threading.Lock) -> None:
        self.pol, self.config, self.lock = pol, config, lock
        self.requests: queue.Queue[tuple[Observation, Future]] = queue.Queue()
        self.batch_sizes: list[int] = []  # diagnostics: the size of every batch run
        threading.Thread(target=self._run, name="policy-batcher", daemon=True).start()

    def submit(self, obs: Observation) -> Future:
        fut: Future = Future()
        self.requests.put((obs, fut))
        return fut

    def _gather(self) -> list[tuple[Observation, Future]]:
        batch = [self.requests.get()]
        deadline = time.monotonic() + self.config.max_wait_ms / 1e3
        while len(batch) < self.config.max_batch_size:
            left = deadline - time.monotonic()
            try:
                batch.append(self.requests.get(timeout=left) if left > 0 else self.requests.get_nowait())
            except queue.Empty:
                break
        return batch

    def _run(self) -> None:
        while True:
            batch = self._gather()
            observations = [obs for obs, _ in batch]
            try:
                with self.lock:
                    t0 = time.perf_counter()
                    act_batch = getattr(self.pol, "act_batch", None)
                    if act_batch is not None:
                        out = act_batch(ObservationBatch(observations))
                    else:
                        out = [self.pol.act(o) for o in observations]
                    infer_ms = (time.perf_counter() - t0) * 1e3
                if len(out) != len(batch):
                    raise ValueError(f"act_batch returned {len(out)} action chunks for {len(batch)} observations")
                chunks = [as_action_chunk(a) for a in out]
            except Exception as exc:  # noqa: BLE001 - every request of the batch gets the policy's failure
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            self.batch_sizes.append(len(batch))
            for (_, fut), chunk in zip(batch, chunks, strict=True):
                fut.set_result((chunk, infer_ms))


async def _decode(request: Request, model: type) -> tuple[Any, Response | None, codec.Encoding]:
    """``(message, None, encoding)`` of the request's body as ``model``; ``(None, error, encoding)``
    with a 415 (unknown Content-Type) or 422 (a body that does not fit) answer otherwise."""
    try:
        enc = codec.encoding_of(request.headers.get("content-type"))
    except codec.UnsupportedMediaType as exc:
        return None, _error(415, "unsupported_media_type", str(exc), "json"), "json"
    body = await request.body()
    try:
        return codec.decode(body, model, enc), None, enc
    except (ValidationError, ValueError) as exc:
        return None, _error(422, "invalid_body", str(exc)[:2000], enc), enc


class _Episodes:
    """The episodes a policy serves: the active ones, oldest first (at most ``capacity``, the
    policy's ``concurrent_episodes``), and the ones a reset pushed out (the last 1024, with the
    episode whose reset did). Every call into the policy holds ``lock``."""

    def __init__(self, pol: Policy, lock: threading.Lock) -> None:
        self.pol = pol
        self.lock = lock
        self.capacity = pol.metadata.concurrent_episodes
        self.active: OrderedDict[str, None] = OrderedDict()
        self.replaced: OrderedDict[str, str] = OrderedDict()

    def reset(self, episode_id: str, instruction: str) -> None:
        """Reset the policy for ``episode_id`` and make it the newest active episode."""
        with self.lock:
            self.pol.reset(episode_id, instruction)
            self.active.pop(episode_id, None)
            self.active[episode_id] = None
            while len(self.active) > self.capacity:
                gone, _ = self.active.popitem(last=False)
                self.replaced[gone] = episode_id
                while len(self.replaced) > 1024:
                    self.replaced.popitem(last=False)

    def refusal(self, episode_id: str) -> str | None:
        """Why ``/act`` of ``episode_id`` is refused (never reset, or replaced); None when it is active."""
        if episode_id in self.active:
            return None
        if episode_id in self.replaced:
            return (
                f"episode {episode_id!r} is no longer active: a /reset of episode {self.replaced[episode_id]!r} "
                f"replaced it (this policy serves {self.capacity} episode(s) at a time: max_concurrent_episodes)"
            )
        return f"POST /reset episode {episode_id!r} first"

    def act(self, obs: Observation) -> tuple[np.ndarray, float]:
        """The policy's action chunk for ``obs`` and its inference time in milliseconds."""
        with self.lock:
            t0 = time.perf_counter()
            chunk = as_action_chunk(self.pol.act(obs))
            return chunk, (time.perf_counter() - t0) * 1e3


def _policy_failed(what: str, exc: Exception, enc: codec.Encoding) -> Response:
    log.exception("policy %s failed", what)
    return _error(500, f"policy_{what}_failed", f"{exc!r}\n{traceback.format_exc()}"[:4000], enc)


def create_app(
    policy: Policy | Callable[[Observation], np.ndarray],
    metadata: PolicyMetadata | None = None,
    batch: BatchConfig | None = None,
) -> FastAPI:
    """Build the FastAPI app for ``policy``; ``batch`` gathers the ``/act`` calls of concurrent
    episodes into ``act_batch`` calls (see the module docstring; ``app.state.batcher``).

    Error answers (body :class:`ErrorResponse`, in the request's encoding): 415 for an unknown
    Content-Type, 422 for a body that does not fit the model, 409 for ``/act`` of an episode
    that is not active (never reset, or replaced by later resets beyond
    ``max_concurrent_episodes``), 500 when the policy raises or returns a malformed chunk.
    """
    pol = as_policy(policy, metadata)
    lock = threading.Lock()
    episodes = _Episodes(pol, lock)
    batcher = _Batcher(pol, batch, lock) if batch is not None else None
    app = FastAPI(
        title="LIBERO-Pro2.0 policy server",
        version=SPEC_VERSION,
        description="Submission spec v1: the HTTP contract between the LIBERO-Pro2.0 evaluator "
        "and a policy. POST bodies are JSON or msgpack, chosen by Content-Type; answers use the "
        "request's encoding.",
    )

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
        try:
            await run_in_threadpool(episodes.reset, msg.episode_id, msg.instruction)
        except Exception as exc:  # the policy's own failure, reported to the evaluator
            return _policy_failed("reset", exc, enc)
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
        refusal = episodes.refusal(msg.episode_id)
        if refusal is not None:
            return _error(409, "unknown_episode", refusal, enc)
        obs = Observation.from_message(msg)
        try:
            if batcher is not None:
                chunk, infer_ms = await asyncio.wrap_future(batcher.submit(obs))
            else:
                chunk, infer_ms = await run_in_threadpool(episodes.act, obs)
        except Exception as exc:
            return _policy_failed("act", exc, enc)
        resp = ActResponse(
            episode_id=msg.episode_id,
            step=msg.step,
            actions=NDArray.from_numpy(chunk),
            server_timing=ServerTiming(infer_ms=round(infer_ms, 3)),
        )
        return Response(codec.encode(resp, enc), media_type=codec.media_type(enc))

    app.state.batcher = batcher

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
    batch: BatchConfig | None = None,
) -> None:
    """Serve ``policy`` until SIGINT/SIGTERM; ``batch`` batches the ``/act`` calls of concurrent
    episodes (our protocol only: ``ValueError`` with another; declare
    ``max_concurrent_episodes`` in the metadata, or there is never more than one episode).

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

    if batch is not None and protocol != "liberopro":
        raise ValueError(f"batch= is for the liberopro protocol; the {protocol} protocol serves one request at a time")
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
        app = create_app(policy, metadata, batch=batch)
    else:
        raise ValueError(f"unknown protocol {protocol!r}; serve liberopro, openpi or openvla")
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
    )
