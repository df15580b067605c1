"""The evaluator's side of the spec: an HTTP client for a policy server.

Every failure of the policy surfaces as :class:`PolicyError` with a stable ``reason`` code, so
the evaluator can end that one episode with a named reason and go on.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Literal

import httpx
import numpy as np
from pydantic import BaseModel, ValidationError

from submission_spec import codec
from submission_spec.models import (
    ActResponse,
    ObservationMessage,
    PolicyMetadata,
    ResetRequest,
    ResetResponse,
)

FailureReason = Literal[
    "policy_connect_error",
    "policy_timeout",
    "policy_episode_timeout",
    "policy_http_error",
    "policy_bad_response",
    "policy_step_mismatch",
    "policy_bad_action_shape",
    "policy_nonfinite_action",
]
"""Why a policy call failed. Each ends only the current episode."""


class PolicyError(Exception):
    """A policy call failed; ``reason`` is a :data:`FailureReason`, ``detail`` says what happened."""

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: FailureReason = reason
        self.detail = detail


@dataclass(frozen=True)
class ActResult:
    """An accepted action chunk.

    Attributes:
        actions: (T, 7) float64, finite, in the policy's declared gripper convention.
        latency_ms: wall time of the HTTP round trip as the evaluator saw it.
        server_ms: the server's own ``infer_ms`` if it sent one.
    """

    actions: np.ndarray
    latency_ms: float
    server_ms: float | None


def _snippet(body: bytes, limit: int = 200, content_type: str | None = None) -> str:
    """Readable start of a response body: a msgpack body (the SDK's errors under msgpack) is
    decoded and shown as JSON; anything else as UTF-8 text."""
    if content_type and "msgpack" in content_type:
        try:
            import json

            import msgpack

            body = json.dumps(msgpack.unpackb(body, raw=False), default=repr).encode()
        except Exception:  # noqa: BLE001 - not valid msgpack: show the bytes as text
            pass
    text = body[:limit].decode("utf-8", errors="replace")
    return text + ("..." if len(body) > limit else "")


class PolicyClient:
    """HTTP client for one policy server.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        encoding: body encoding of ``/reset`` and ``/act``: ``"msgpack"`` (default, raw array
            bytes) or ``"json"`` (base64 arrays).
        connect_timeout: seconds to open a TCP connection.
        request_timeout: seconds for one request, connection included.

    The connection is kept alive with TCP_NODELAY set (without it a request costs 40-90 ms of
    Nagle/delayed-ACK stalls on loopback; ``shared/reference/build-machine.md``). After a
    timeout or transport error the connection is dropped, so a late answer can never be read
    as the answer to a later request; the ``step`` echo check guards the same thing.
    """

    def __init__(
        self,
        base_url: str,
        *,
        encoding: codec.Encoding = "msgpack",
        connect_timeout: float = 5.0,
        request_timeout: float = 30.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"policy URL {base_url!r} has no scheme: give it as http://HOST:PORT")
        self.base_url = base_url.rstrip("/")
        self.encoding = encoding
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._client = self._new_client()

    def _new_client(self) -> httpx.Client:
        transport = httpx.HTTPTransport(
            socket_options=[
                (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
                (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
            ],
            retries=0,
        )
        return httpx.Client(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(self.request_timeout, connect=self.connect_timeout),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop_connection(self) -> None:
        self._client.close()
        self._client = self._new_client()

    def _request(self, method: str, path: str, *, body: bytes | None = None, deadline: float | None = None) -> httpx.Response:
        timeout, clipped = self.request_timeout, False
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PolicyError("policy_episode_timeout", "the episode's policy time budget is spent")
            timeout, clipped = min(timeout, left), left < timeout
        headers = {}
        if body is not None:
            headers["content-type"] = codec.media_type(self.encoding)
            headers["accept"] = codec.media_type(self.encoding)
        try:
            resp = self._client.request(
                method, path, content=body, headers=headers,
                timeout=httpx.Timeout(timeout, connect=min(self.connect_timeout, timeout)),
            )
        except httpx.TimeoutException as exc:
            self._drop_connection()
            if clipped:
                raise PolicyError("policy_episode_timeout", f"{method} {path}: episode time budget spent") from exc
            raise PolicyError("policy_timeout", f"{method} {path}: no answer within {timeout:.1f} s") from exc
        except httpx.TransportError as exc:
            self._drop_connection()
            raise PolicyError("policy_connect_error", f"{method} {path}: {exc!r}") from exc
        if resp.status_code != 200:
            raise PolicyError(
                "policy_http_error", f"{method} {path} answered HTTP {resp.status_code}: "
                f"{_snippet(resp.content, 600, resp.headers.get('content-type'))}"
            )
        return resp

    def _parse(self, resp: httpx.Response, model: type[BaseModel], path: str):
        try:
            enc = codec.encoding_of(resp.headers.get("content-type"))
            return codec.decode(resp.content, model, enc)
        except (ValidationError, ValueError) as exc:
            raise PolicyError(
                "policy_bad_response",
                f"{path} answered HTTP 200 with a body that is not a {model.__name__}: "
                f"{_snippet(resp.content)!r} ({str(exc).splitlines()[0]})",
            ) from exc

    def _probe_health(self, timeout: float) -> str | None:
        """None when ``GET /health`` answers 200 within ``timeout`` seconds, else what it got."""
        try:
            r = self._client.get("/health", timeout=timeout)
        except httpx.ConnectError:
            self._drop_connection()
            return "connection refused (nothing listens there)"
        except httpx.HTTPError as exc:
            self._drop_connection()
            return type(exc).__name__
        return None if r.status_code == 200 else f"HTTP {r.status_code}"

    def health(self, timeout: float = 2.0) -> bool:
        """True when ``GET /health`` answers 200 within ``timeout`` seconds."""
        return self._probe_health(timeout) is None

    def wait_healthy(self, timeout: float, poll: float = 0.2) -> None:
        """Poll ``/health`` until it answers 200; raises :class:`PolicyError`
        (``policy_connect_error``) after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        last = "no attempt"
        while time.monotonic() < end:
            last = self._probe_health(min(2.0, max(0.1, end - time.monotonic())))
            if last is None:
                return
            time.sleep(poll)
        raise PolicyError("policy_connect_error", f"{self.base_url}/health did not answer 200 within {timeout:.0f} s "
                                                  f"(last attempt: {last}); start the policy server first, check the "
                                                  "host and port, or let the evaluator start it with --policy-cmd")

    def metadata(self) -> PolicyMetadata:
        """``GET /metadata``, validated."""
        return self._parse(self._request("GET", "/metadata"), PolicyMetadata, "/metadata")

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None:
        """``POST /reset`` before an episode."""
        body = codec.encode(ResetRequest(episode_id=episode_id, instruction=instruction), self.encoding)
        self._parse(self._request("POST", "/reset", body=body, deadline=deadline), ResetResponse, "/reset")

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult:
        """``POST /act``; returns the validated chunk.

        Raises :class:`PolicyError` with ``policy_step_mismatch`` when the echo is not this
        request's, ``policy_bad_action_shape`` unless the chunk is (T, 7) with
        1 <= T <= ``chunk_length``, ``policy_nonfinite_action`` for NaN/inf.
        """
        body = codec.encode(observation, self.encoding)
        t0 = time.perf_counter()
        resp = self._request("POST", "/act", body=body, deadline=deadline)
        latency_ms = (time.perf_counter() - t0) * 1e3
        msg: ActResponse = self._parse(resp, ActResponse, "/act")
        if msg.step != observation.step or msg.episode_id != observation.episode_id:
            self._drop_connection()
            raise PolicyError(
                "policy_step_mismatch",
                f"answer echoes episode {msg.episode_id!r} step {msg.step}, request was "
                f"episode {observation.episode_id!r} step {observation.step}",
            )
        actions = msg.actions.to_numpy()
        if actions.dtype.kind != "f" or actions.ndim != 2 or actions.shape[1] != 7 or not (
            1 <= actions.shape[0] <= chunk_length
        ):
            raise PolicyError(
                "policy_bad_action_shape",
                f"actions must be a float (T, 7) array with 1 <= T <= {chunk_length}; got "
                f"{actions.dtype} {tuple(actions.shape)}",
            )
        if not np.all(np.isfinite(actions)):
            raise PolicyError("policy_nonfinite_action", "the action chunk contains NaN or infinity")
        server_ms = msg.server_timing.infer_ms if msg.server_timing else None
        return ActResult(actions=actions.astype(np.float64), latency_ms=latency_ms, server_ms=server_ms)
