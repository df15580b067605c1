"""Serve a :class:`~submission_spec.policy.Policy` over openpi's websocket protocol, so a team
can switch between our protocol and openpi's without changing code:
``serve(policy, protocol="openpi")``.

It speaks what ``openpi_client.websocket_client_policy.WebsocketClientPolicy`` expects (see
:mod:`submission_spec.adapters.openpi` for the wire): ``GET /healthz`` -> 200, a metadata frame
on connect, msgpack-numpy request/answer, and on any error a text frame with the traceback
followed by close code 1011.

Mapping a request to an :class:`~submission_spec.policy.Observation` uses the policy's own
:class:`~submission_spec.models.PolicyMetadata`: each camera it asks for comes from its key
(``observation/image`` = agentview, ``observation/wrist_image`` = wrist, configurable), the
state vector (``observation/state``) is cut into the metadata's ``state_fields`` by their
lengths, ``prompt`` is the instruction. Images are passed as they arrive (the client is expected
to send the size and orientation the metadata asks for; a LIBERO-Pro2.0 evaluator does).

The metadata frame is ``{"liberopro/metadata": <the PolicyMetadata>, "liberopro/echo": true,
"policy_name": ...}``: the evaluator's openpi client evaluates with those conventions, and adds
``liberopro/episode_id`` and ``liberopro/step`` to its requests, which this server echoes.

Episodes: openpi has no reset message. The policy's ``reset(episode_id, instruction)`` is
called before the first request of each connection, and again whenever the request's
``liberopro/episode_id`` changes. Without that key (a plain openpi client) the episode id is a
fresh random id per connection and ``step`` counts the connection's requests from 0.

The policy runs in a worker thread, one call at a time across all connections, so a slow model
never blocks ``/healthz`` or the websocket pings (openpi's own server runs inference on its
event loop).
"""

from __future__ import annotations

import asyncio
import http
import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from submission_spec.adapters import msgpack_numpy
from submission_spec.adapters._common import (
    ECHO_FLAG,
    EPISODE_KEY,
    METADATA_KEY,
    STEP_KEY,
    split_state,
)
from submission_spec.models import PolicyMetadata
from submission_spec.policy import Observation, Policy, as_action_chunk, as_policy

log = logging.getLogger("submission_spec.openpi_server")

#: RFC 6455 close code 1011, what openpi's server sends after an error frame.
INTERNAL_ERROR = 1011


@dataclass(frozen=True)
class OpenPIKeys:
    """Request keys (openpi's LIBERO names by default)."""

    image: str = "observation/image"
    wrist_image: str = "observation/wrist_image"
    state: str = "observation/state"
    prompt: str = "prompt"

    def camera(self, name: str) -> str:
        return self.image if name == "agentview" else self.wrist_image


class OpenPIPolicyServer:
    """An openpi-protocol websocket server for ``policy``.

    Args:
        policy: a :class:`Policy`, or a callable with ``metadata``.
        metadata: overrides the policy's metadata.
        host: default env ``HOST`` or 127.0.0.1; port: default env ``PORT`` or 8000 (0: any
            free port; read :attr:`port` after start).
        keys: request key names.
        max_message_bytes: largest frame accepted.
    """

    def __init__(
        self,
        policy: Policy | Callable[[Observation], np.ndarray],
        metadata: PolicyMetadata | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        keys: OpenPIKeys | None = None,
        max_message_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.policy = as_policy(policy, metadata)
        self.host = host or os.environ.get("HOST", "127.0.0.1")
        self.port = int(port if port is not None else os.environ.get("PORT", "8000"))
        self.keys = keys or OpenPIKeys()
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ protocol
    def metadata_frame(self) -> dict[str, Any]:
        meta = self.policy.metadata
        return {METADATA_KEY: meta.model_dump(mode="json"), ECHO_FLAG: True, "policy_name": meta.policy_name}

    def observation(self, req: dict[str, Any], episode_id: str, step: int) -> Observation:
        """Map an openpi request to an :class:`Observation` (``ValueError`` naming the problem)."""
        meta = self.policy.metadata
        images: dict[str, np.ndarray] = {}
        for cam in meta.cameras:
            key = self.keys.camera(cam.name)
            img = req.get(key)
            if not isinstance(img, np.ndarray) or img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
                got = f"{img.dtype} {img.shape}" if isinstance(img, np.ndarray) else type(img).__name__
                raise ValueError(f"request key {key!r} ({cam.name} camera) must be an (H, W, 3) uint8 image; got {got}")
            images[cam.name] = img
        proprio = {}
        if meta.state_fields:
            if self.keys.state not in req:
                raise ValueError(f"request lacks {self.keys.state!r} (state {list(meta.state_fields)})")
            proprio = split_state(np.asarray(req[self.keys.state]), list(meta.state_fields))
        prompt = req.get(self.keys.prompt, "")
        if not isinstance(prompt, str):
            raise TypeError(f"request key {self.keys.prompt!r} must be a string")
        return Observation(episode_id=episode_id, step=step, instruction=prompt, images=images, proprio=proprio)

    def _infer(self, req: dict[str, Any], conn_state: dict[str, Any]) -> dict[str, Any]:
        episode_id = req.get(EPISODE_KEY, conn_state["episode_id"])
        step = req.get(STEP_KEY, conn_state["requests"])
        if not isinstance(episode_id, str) or not isinstance(step, int):
            raise TypeError(f"{EPISODE_KEY} must be a string and {STEP_KEY} an int")
        obs = self.observation(req, episode_id, step)
        with self._lock:
            if conn_state["reset_for"] != episode_id:
                self.policy.reset(episode_id, obs.instruction)
                conn_state["reset_for"] = episode_id
            t0 = time.perf_counter()
            chunk = as_action_chunk(self.policy.act(obs))
            infer_ms = (time.perf_counter() - t0) * 1e3
        answer: dict[str, Any] = {"actions": chunk, "server_timing": {"infer_ms": infer_ms}}
        if EPISODE_KEY in req:
            answer[EPISODE_KEY] = episode_id
        if STEP_KEY in req:
            answer[STEP_KEY] = step
        return answer

    async def _handler(self, ws: ServerConnection) -> None:
        conn_state: dict[str, Any] = {"episode_id": uuid.uuid4().hex, "requests": 0, "reset_for": None}
        await ws.send(msgpack_numpy.packb(self.metadata_frame()))
        while True:
            try:
                message = await ws.recv()
            except ConnectionClosed:
                return
            try:
                if isinstance(message, str):
                    raise TypeError("expected a binary msgpack frame, got a text frame")
                req = msgpack_numpy.unpackb(message)
                if not isinstance(req, dict):
                    raise TypeError(f"request must be a msgpack map, got {type(req).__name__}")
                answer = await asyncio.to_thread(self._infer, req, conn_state)
                conn_state["requests"] += 1
                await ws.send(msgpack_numpy.packb(answer))
            except ConnectionClosed:
                return
            except Exception:
                log.exception("openpi request failed")
                try:
                    await ws.send(traceback.format_exc())
                    await ws.close(
                        code=INTERNAL_ERROR, reason="Internal server error. Traceback included in previous frame."
                    )
                except ConnectionClosed:
                    pass
                return

    @staticmethod
    def _health(conn: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return conn.respond(http.HTTPStatus.OK, "OK\n")
        return None

    # ------------------------------------------------------------------ running
    async def run(self, started: threading.Event | None = None) -> None:
        """Serve until cancelled (or :meth:`stop`)."""
        async with serve(
            self._handler,
            self.host,
            self.port,
            compression=None,
            max_size=self.max_message_bytes,
            process_request=self._health,
        ) as server:
            self._server = server
            self._loop = asyncio.get_running_loop()
            self.port = server.sockets[0].getsockname()[1]
            if started is not None:
                started.set()
            await server.serve_forever()

    def serve_forever(self) -> None:
        """Block serving (SIGINT/SIGTERM end the process)."""
        log.info("openpi-protocol server for %s on ws://%s:%d", self.policy.metadata.policy_name, self.host, self.port)
        try:
            asyncio.run(self.run())
        except KeyboardInterrupt:
            pass

    def start(self) -> Self:
        """Serve in a daemon thread (tests, benchmarks); returns once listening."""
        started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run_until_closed(started)), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("openpi-protocol server did not start within 10 s")
        return self

    async def _run_until_closed(self, started: threading.Event) -> None:
        try:
            await self.run(started)
        except asyncio.CancelledError:
            pass

    def stop(self) -> None:
        """Stop a server started with :meth:`start`."""
        if self._server is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_openpi(
    policy: Policy | Callable[[Observation], np.ndarray],
    metadata: PolicyMetadata | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    keys: OpenPIKeys | None = None,
) -> None:
    """Serve ``policy`` over openpi's protocol until SIGINT/SIGTERM (host: env ``HOST`` or
    127.0.0.1; port: env ``PORT`` or 8000). Blocks."""
    OpenPIPolicyServer(policy, metadata, host=host, port=port, keys=keys).serve_forever()
