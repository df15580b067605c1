"""The evaluator's side of the spec: an HTTP client for a policy server.

Every failure of the policy surfaces as :class:`PolicyError` with a stable ``reason`` code, so
the evaluator can end that one episode with a named reason and go on.
"""

from __future__ import annotations

import socket
import time
import urllib.parse
from dataclasses import dataclass
from typing import Literal

import httpx
import numpy as np
from pydantic import BaseModel, ValidationError

from submission_spec import codec
from submission_spec.deadline import DEFAULT_MAX_REPLY_BYTES, DeadlineExceeded, HTTPSession, Reply, ReplyTooLarge
from submission_spec.models import (
    ActResponse,
    ObservationMessage,
    PolicyMetadata,
    ResetRequest,
    ResetResponse,
)
from submission_spec.polling import poll_until

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

#: Largest ``/health`` answer read (bytes).
HEALTH_REPLY_BYTES = 64 * 1024
#: Longest single ``/health`` attempt of :meth:`PolicyClient.wait_healthy` (seconds).
_HEALTH_ATTEMPT_S = 2.0
#: How a health attempt that ran out of time is told (its budget follows).
_NO_ANSWER = "no complete answer within"


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
        latency_ms: wall time of the round trip as the evaluator saw it (ms).
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


def time_left(request_timeout: float, deadline: float | None) -> tuple[float, bool]:
    """Seconds one request may take: ``request_timeout``, or less when the episode's deadline
    (``time.monotonic()`` seconds) comes first; and whether the deadline is the limit.

    Raises :class:`PolicyError` ``policy_episode_timeout`` when the deadline has passed."""
    if deadline is None:
        return request_timeout, False
    left = deadline - time.monotonic()
    if left <= 0:
        raise PolicyError("policy_episode_timeout", "the episode's policy time budget is spent")
    return min(request_timeout, left), left < request_timeout


def timeout_error(what: str, timeout: float, clipped: bool) -> PolicyError:
    """The :class:`PolicyError` for a call cut at its deadline: ``policy_episode_timeout`` when
    the episode budget was the limit (``clipped``), else ``policy_timeout``."""
    if clipped:
        return PolicyError(
            "policy_episode_timeout", f"{what}: the episode's policy time budget ran out ({timeout:.1f} s were left)"
        )
    return PolicyError("policy_timeout", f"{what}: no complete answer within {timeout:.1f} s")


class PolicyClient:
    """HTTP client for one policy server.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        encoding: body encoding of ``/reset`` and ``/act``: ``"msgpack"`` (default, raw array
            bytes) or ``"json"`` (base64 arrays).
        connect_timeout: seconds to open a TCP connection.
        request_timeout: wall-clock seconds for one request, from sending it to the last byte
            of the answer (connection included), however slowly the bytes arrive.
        max_reply_bytes: largest answer body read; a larger one is ``policy_bad_response``.

    Every call is bounded by a wall-clock deadline (:mod:`submission_spec.deadline`): the
    request timeout, or less when the episode's budget (``deadline`` of :meth:`reset` and
    :meth:`act`) ends first. The connection is kept alive with TCP_NODELAY set (without it a
    request costs 40-90 ms of Nagle/delayed-ACK stalls on loopback). After a timeout or
    transport error the connection is dropped, so a late answer can never be read as the
    answer to a later request; the ``step`` echo check guards the same thing. Calls from
    several threads run one at a time.
    """

    def __init__(
        self,
        base_url: str,
        *,
        encoding: codec.Encoding = "msgpack",
        connect_timeout: float = 5.0,
        request_timeout: float = 30.0,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"policy URL {base_url!r} has no scheme: give it as http://HOST:PORT")
        self.base_url = base_url.rstrip("/")
        self.encoding = encoding
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._http = HTTPSession(self.base_url, max_reply_bytes=max_reply_bytes)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, body: bytes | None = None, deadline: float | None = None) -> Reply:
        timeout, clipped = time_left(self.request_timeout, deadline)
        headers = {}
        if body is not None:
            headers["content-type"] = codec.media_type(self.encoding)
            headers["accept"] = codec.media_type(self.encoding)
        where = f"{method} {path}"
        try:
            resp = self._http.request(
                method, path, content=body, headers=headers, timeout=timeout, connect_timeout=self.connect_timeout
            )
        except (DeadlineExceeded, httpx.TimeoutException) as exc:
            raise timeout_error(where, timeout, clipped) from exc
        except ReplyTooLarge as exc:
            raise PolicyError("policy_bad_response", f"{where}: {exc}") from exc
        except httpx.DecodingError as exc:
            raise PolicyError("policy_bad_response", f"{where}: undecodable answer body: {exc}") from exc
        except httpx.HTTPError as exc:
            raise PolicyError("policy_connect_error", f"{where}: {exc!r}") from exc
        if resp.status_code != 200:
            raise PolicyError(
                "policy_http_error",
                f"{where} answered HTTP {resp.status_code}: "
                f"{_snippet(resp.content, 600, resp.headers.get('content-type'))}",
            )
        return resp

    def _parse(self, resp: Reply, model: type[BaseModel], path: str):
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
        """None when ``GET /health`` answers 200 within ``timeout`` wall-clock seconds, else
        what it got."""
        try:
            r = self._http.request("GET", "/health", timeout=timeout, max_bytes=HEALTH_REPLY_BYTES)
        except httpx.ConnectError:
            return "connection refused (nothing listens there)"
        except DeadlineExceeded:
            return f"{_NO_ANSWER} {timeout:.1f} s"
        except (httpx.HTTPError, ReplyTooLarge) as exc:
            return type(exc).__name__
        return None if r.status_code == 200 else f"HTTP {r.status_code}"

    def health(self, timeout: float = 2.0) -> bool:
        """True when ``GET /health`` answers 200 within ``timeout`` wall-clock seconds."""
        return self._probe_health(timeout) is None

    def wait_healthy(self, timeout: float, poll: float = 0.2) -> None:
        """Poll ``/health`` until it answers 200, ``poll`` seconds apart; raises :class:`PolicyError`
        (``policy_connect_error``) when no attempt within ``timeout`` wall-clock seconds got it
        (:func:`submission_spec.polling.poll_until`)."""
        last: str | None = "no attempt"

        def probe(left: float) -> str | None:
            nonlocal last
            budget = min(_HEALTH_ATTEMPT_S, max(0.1, left))
            why = self._probe_health(budget)
            # An attempt cut short by the end of the wait says less than an earlier one's answer:
            # a refusal stays the reason given when the last, shortened attempt runs out of time.
            cut_short = why is not None and why.startswith(_NO_ANSWER) and budget < _HEALTH_ATTEMPT_S
            if not cut_short or last == "no attempt":
                last = why
            return why

        poll_until(probe, timeout, poll, done=lambda why: why is None)
        if last is None:
            return
        raise PolicyError(
            "policy_connect_error",
            f"{self.base_url}/health did not answer 200 within {timeout:.0f} s "
            f"(last attempt: {last}): is the policy server started, and on this host and port?",
        )

    def metadata(self) -> PolicyMetadata:
        """``GET /metadata``, validated, within ``request_timeout`` wall-clock seconds."""
        return self._parse(self._request("GET", "/metadata"), PolicyMetadata, "/metadata")

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None:
        """``POST /reset`` before an episode; ``deadline`` (``time.monotonic()`` seconds): the
        end of the episode's policy time budget (see :meth:`act`)."""
        body = codec.encode(ResetRequest(episode_id=episode_id, instruction=instruction), self.encoding)
        self._parse(self._request("POST", "/reset", body=body, deadline=deadline), ResetResponse, "/reset")

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult:
        """``POST /act``; returns the validated chunk.

        The call ends within ``request_timeout`` wall-clock seconds, or at ``deadline``
        (``time.monotonic()`` seconds, the end of the episode's policy time budget) when that
        comes first, however slowly the answer arrives.

        Raises :class:`PolicyError` with ``policy_timeout`` / ``policy_episode_timeout`` when cut
        at the request timeout / the episode deadline, ``policy_step_mismatch`` when the echo
        is not this request's, ``policy_bad_action_shape`` unless the chunk is (T, 7) with
        1 <= T <= ``chunk_length``, ``policy_nonfinite_action`` for NaN/inf.
        """
        body = codec.encode(observation, self.encoding)
        t0 = time.perf_counter()
        resp = self._request("POST", "/act", body=body, deadline=deadline)
        latency_ms = (time.perf_counter() - t0) * 1e3
        msg: ActResponse = self._parse(resp, ActResponse, "/act")
        if msg.step != observation.step or msg.episode_id != observation.episode_id:
            self._http.drop()
            raise PolicyError(
                "policy_step_mismatch",
                f"answer echoes episode {msg.episode_id!r} step {msg.step}, request was "
                f"episode {observation.episode_id!r} step {observation.step}",
            )
        actions = msg.actions.to_numpy()
        if (
            actions.dtype.kind != "f"
            or actions.ndim != 2
            or actions.shape[1] != 7
            or not (1 <= actions.shape[0] <= chunk_length)
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


def fail_fast_if_refused(url: str, grace: float = 5.0, poll: float = 0.2) -> None:
    """Raise at once-ish when nothing listens at ``url``: a TCP connection to its host and port
    refused for ``grace`` wall-clock seconds (every attempt, ``poll`` seconds apart) raises
    :class:`PolicyError` (``policy_connect_error``) naming the address. Returns as soon as one
    connection is accepted, or when an attempt fails otherwise (a timeout, an unreachable host):
    a server that is starting, or one behind a slow network, is left to the caller's longer
    health wait (``wait_healthy``). Works for every protocol (``http``, ``https``, ``ws``, ``wss``:
    the port defaults to 80 or 443); raises ``ValueError`` for a URL without a host."""
    parts = urllib.parse.urlsplit(url)
    if grace <= 0:
        return
    if not parts.hostname:
        raise ValueError(f"{url!r} names no host")
    port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)

    def attempt(left: float) -> str | None:
        try:
            with socket.create_connection((parts.hostname, port), timeout=min(1.0, max(0.1, left))):
                return "accepted"
        except ConnectionRefusedError:
            return None
        except OSError as exc:
            return type(exc).__name__

    if poll_until(attempt, grace, poll, done=lambda outcome: outcome is not None) is None:
        raise PolicyError(
            "policy_connect_error",
            f"nothing listens at {parts.hostname}:{port} (every connection refused for {grace:.0f} s): "
            "is the policy server started, and on this host and port?",
        )
