"""Evaluator-side client for policies served with openpi's websocket protocol (pi0, pi0-FAST,
pi0.5 and everything built on ``openpi.serving.websocket_policy_server``).

The wire (openpi ``src/openpi/serving/websocket_policy_server.py`` and
``packages/openpi-client``):

* one websocket per client, no compression, default port 8000; ``GET /healthz`` answers 200;
* right after the handshake the server sends one binary frame: msgpack of a metadata dict
  (often empty);
* then strictly request/answer: the client sends msgpack(observation dict), the server answers
  msgpack(action dict) with ``"actions"`` and ``"server_timing": {"infer_ms": ...}``; arrays in
  openpi's msgpack-numpy (:mod:`submission_spec.adapters.msgpack_numpy`);
* on a server error: a TEXT frame with the traceback, then close code 1011;
* optional header ``Authorization: Api-Key <key>``.

The LIBERO request of openpi's ``examples/libero/main.py`` (what the public LIBERO checkpoints
were evaluated with), and this client's defaults:

========================== ==============================================================
``observation/image``      agentview, (224, 224, 3) uint8, rotated 180 deg
                           (``img[::-1, ::-1]``), resized with padding from the 256 render
``observation/wrist_image`` robot0_eye_in_hand, same treatment
``observation/state``      (8,) float64: eef_pos (3) + axis-angle of eef_quat (3) +
                           gripper_qpos (2)
``prompt``                 the instruction (str)
answer ``actions``         (H, 7) float: H = 50 (pi0) or 10 (pi0-FAST, pi0.5); gripper in
                           LIBERO's convention (-1 opens, +1 closes), executed unbinarised
========================== ==============================================================

openpi's LIBERO client executes the first 5 actions of each chunk, then asks again. The
defaults here are ``chunk_length=50`` (an upper bound: an answer holds 1..50 actions, so pi0,
pi0-FAST and pi0.5 all work unconfigured) and ``replan_steps=5``. Interpolation differs:
openpi resizes with PIL bilinear, the evaluator with OpenCV (see ``docs/adapters.md``).

What ``reset`` means: openpi has no reset message, and its servers keep no episode state on
the wire; the only episode boundary the protocol has is the connection. ``reset`` therefore
opens a fresh connection (closing the previous one) unless the current connection has not
served any request yet, and reads the metadata frame again. This re-establishes a lost
connection for the next episode, fires the per-connection hooks some openpi servers have, and
guarantees that no answer of an earlier episode can be read in this one. The instruction
travels as ``prompt`` in every request. Set ``reconnect_each_episode=false`` to keep one
connection across episodes (openpi's own LIBERO client does that); a lost connection is still
re-opened at the next reset.

Time limits are wall-clock (:mod:`submission_spec.deadline`): ``connect_timeout`` bounds the
handshake and the metadata frame together, ``request_timeout`` (or the episode's remaining
budget) bounds sending the request and receiving the whole answer, however slowly its bytes or
frames arrive; a server that stops reading the request cannot hold the call either. Answers
are capped at ``max_message_bytes``.

Stale answers: the protocol has no request ids, so a timed-out request closes the connection
at once, without a closing handshake (an answer that arrives late is never read as the answer
to a later request). When the server is a LIBERO-Pro2.0 SDK server (its metadata frame says
``"liberopro/echo": true``), requests also carry ``liberopro/episode_id`` and
``liberopro/step`` and the answer must echo them.

Errors become :class:`~submission_spec.client.PolicyError`: the text frame + close 1011 ->
``policy_http_error`` (detail: the end of the server's traceback); connection refused, lost or
closed otherwise -> ``policy_connect_error``; no complete answer in time -> ``policy_timeout``
(or ``policy_episode_timeout``); an answer over ``max_message_bytes`` or not a msgpack map with
``actions`` -> ``policy_bad_response``; wrong shape -> ``policy_bad_action_shape``; NaN/inf ->
``policy_nonfinite_action``; a wrong echo -> ``policy_step_mismatch``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Self

import httpx
import numpy as np
from pydantic import Field
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from submission_spec.adapters import msgpack_numpy
from submission_spec.adapters._common import (
    ECHO_FLAG,
    EPISODE_KEY,
    METADATA_KEY,
    STEP_KEY,
    ConventionOptions,
    build_metadata,
    check_chunk,
    finite_ms,
    parse_options,
    snippet,
    state_vector,
    time_left,
    timeout_error,
)
from submission_spec.client import HEALTH_REPLY_BYTES, ActResult, PolicyError
from submission_spec.deadline import DEFAULT_MAX_REPLY_BYTES, DeadlineExceeded, HTTPSession, LoopRunner, ReplyTooLarge
from submission_spec.models import LIBERO_STATE8, CameraSpec, ObservationMessage, PolicyMetadata
from submission_spec.polling import poll_until

#: Close code of a server error (RFC 6455 1011, "internal error").
INTERNAL_ERROR = 1011
#: Close code for a message over the size limit (RFC 6455 1009, "message too big").
MESSAGE_TOO_BIG = 1009

#: openpi's LIBERO conventions (``examples/libero/main.py``); see the module docstring.
OPENPI_LIBERO_DEFAULTS = PolicyMetadata(
    policy_name="openpi",
    cameras=[CameraSpec(name="agentview", height=224, width=224), CameraSpec(name="wrist", height=224, width=224)],
    image_orientation="rotate_180",
    resize_mode="resize_with_pad",
    state_fields=list(LIBERO_STATE8),
    gripper_convention="libero",
    binarize_gripper=False,
    chunk_length=50,
    replan_steps=5,
)


class _connect_here(connect):
    """websockets' ``connect`` that never follows a redirect: the evaluator talks to the URL it
    was given, and a policy server answering the handshake with a 3xx cannot send the connection
    elsewhere (websockets follows up to 10 by default). A redirect fails the handshake, which
    ends the episode as ``policy_connect_error``."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class OpenPIOptions(ConventionOptions):
    """Options of :class:`OpenPIClient` (all may be given as strings).

    Attributes:
        connect_timeout: wall-clock seconds to open the websocket and read the metadata frame.
        request_timeout: wall-clock seconds for one inference: sending the request and
            receiving the whole answer, however slowly its bytes or frames arrive.
        image_key / wrist_image_key / state_key / prompt_key: request keys (openpi LIBERO
            names by default; other openpi configs, e.g. DROID, use other names).
        api_key: sent as ``Authorization: Api-Key <key>``.
        max_message_bytes: largest frame accepted from the server.
        reconnect_each_episode: a fresh connection per episode (see the module docstring).
    """

    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    image_key: str = "observation/image"
    wrist_image_key: str = "observation/wrist_image"
    state_key: str = "observation/state"
    prompt_key: str = "prompt"
    api_key: str | None = None
    max_message_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, ge=1024)
    reconnect_each_episode: bool = True


def ws_url(url: str) -> str:
    """``http://h:p`` -> ``ws://h:p`` (``https`` -> ``wss``); ``ws(s)://`` kept; a bare
    ``host:port`` gets ``ws://``."""
    url = url.rstrip("/")
    if url.startswith("http://"):
        return "ws://" + url[len("http://") :]
    if url.startswith("https://"):
        return "wss://" + url[len("https://") :]
    if url.startswith(("ws://", "wss://")):
        return url
    return "ws://" + url


def http_url(url: str) -> str:
    """The HTTP form of a websocket URL (for ``GET /healthz``)."""
    url = ws_url(url)
    return ("https://" + url[len("wss://") :]) if url.startswith("wss://") else "http://" + url[len("ws://") :]


class OpenPIClient:
    """One policy behind openpi's websocket protocol, with the methods of
    :class:`~submission_spec.client.PolicyClient` (``health``, ``wait_healthy``, ``metadata``,
    ``reset``, ``act``, ``close``).

    Args:
        url: ``ws://host:port`` (``http://`` is accepted and converted).
        **options: see :class:`OpenPIOptions`; ``ValueError`` for an unknown or invalid one.
    """

    def __init__(self, url: str, **options: Any) -> None:
        self.options: OpenPIOptions = parse_options(OpenPIOptions, options, "openpi")
        build_metadata(OPENPI_LIBERO_DEFAULTS, None, self.options)  # inconsistent options fail here (ValueError)
        self.url = ws_url(url)
        self._ws: ClientConnection | None = None
        self._used = False  # the current connection has served a request
        self._server_meta: dict | None = None
        self._echo = False
        self._meta: PolicyMetadata | None = None
        self._io = LoopRunner()  # the websocket and the /healthz probe share one event loop
        self._http = HTTPSession(http_url(self.url), runner=self._io)

    # ------------------------------------------------------------------ connection
    def _keys(self) -> dict[str, str]:
        return {"agentview": self.options.image_key, "wrist": self.options.wrist_image_key}

    async def _open(self) -> tuple[ClientConnection, Any]:
        """Handshake, then the metadata frame (bounded as one call by the caller's deadline)."""
        headers = {"Authorization": f"Api-Key {self.options.api_key}"} if self.options.api_key else None
        ws = await _connect_here(
            self.url,
            compression=None,
            max_size=self.options.max_message_bytes,
            additional_headers=headers,
            open_timeout=None,
            ping_interval=None,
            close_timeout=1.0,
            proxy=None,
        )
        try:
            return ws, await ws.recv()
        except BaseException:
            ws.transport.abort()
            raise

    def _connect(self, timeout: float, clipped: bool = False) -> None:
        self._disconnect()
        try:
            ws, first = self._io.run(self._open, timeout=timeout)
        except DeadlineExceeded as exc:
            if clipped:
                raise PolicyError(
                    "policy_episode_timeout",
                    f"openpi {self.url}: the episode's policy time budget ran "
                    f"out while connecting ({timeout:.1f} s were left)",
                ) from exc
            raise PolicyError(
                "policy_connect_error",
                f"openpi {self.url}: no websocket handshake and metadata frame within {timeout:.1f} s",
            ) from exc
        except ConnectionClosed as exc:
            raise PolicyError(
                "policy_connect_error", f"openpi {self.url}: no metadata frame after connecting ({exc!r})"
            ) from exc
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise PolicyError("policy_connect_error", f"openpi {self.url}: cannot connect: {exc!r}") from exc
        if isinstance(first, str):
            self._abort(ws)
            raise PolicyError(
                "policy_http_error",
                f"openpi {self.url}: server sent an error instead of its metadata: {snippet(first)}",
            )
        try:
            meta = msgpack_numpy.unpackb(first)
        except ValueError as exc:
            self._abort(ws)
            raise PolicyError(
                "policy_bad_response", f"openpi {self.url}: metadata frame is not msgpack-numpy: {exc}"
            ) from exc
        if not isinstance(meta, dict):
            self._abort(ws)
            raise PolicyError(
                "policy_bad_response", f"openpi {self.url}: metadata frame is a {type(meta).__name__}, not a map"
            )
        self._ws, self._used = ws, False
        self._server_meta = meta
        self._echo = meta.get(ECHO_FLAG) is True

    def _abort(self, ws: ClientConnection) -> None:
        """Close ``ws`` at once, without a closing handshake (after a timeout or a protocol fault)."""
        if self._ws is ws:
            self._ws = None

        async def abort() -> None:
            ws.transport.abort()
            await asyncio.sleep(0)  # let the transport close its socket now

        with contextlib.suppress(Exception):
            self._io.run(abort, timeout=1.0)

    def _disconnect(self) -> None:
        """Close the current connection with a closing handshake (at most ``close_timeout``, 1 s)."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may raise; it is gone either way
                self._io.run(ws.close, timeout=2.0)

    def close(self) -> None:
        self._disconnect()
        self._http.close()
        self._io.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ client methods
    def health(self, timeout: float = 2.0) -> bool:
        """True when ``GET /healthz`` answers 200 within ``timeout`` wall-clock seconds, or, for
        servers older than openpi's ``/healthz`` (they answer it with a failed handshake, e.g.
        426), when a websocket handshake and the metadata frame succeed."""
        try:
            status = self._http.request("GET", "/healthz", timeout=timeout, max_bytes=HEALTH_REPLY_BYTES).status_code
        except (httpx.HTTPError, DeadlineExceeded, ReplyTooLarge):
            return False
        if status == 200:
            return True
        if self._ws is not None:
            return True
        try:
            self._connect(timeout)
        except PolicyError:
            return False
        return True

    def wait_healthy(self, timeout: float, poll: float = 0.2) -> None:
        """Poll ``/healthz``; ``policy_connect_error`` after ``timeout`` seconds."""
        if poll_until(lambda left: self.health(timeout=min(2.0, max(0.1, left))), timeout, poll):
            return
        raise PolicyError(
            "policy_connect_error",
            f"{http_url(self.url)}/healthz did not answer 200 within {timeout:.0f} s "
            "and no openpi websocket handshake succeeded (is the server up, and does it speak openpi?)",
        )

    def metadata(self) -> PolicyMetadata:
        """The conventions to evaluate with: openpi's LIBERO defaults, else what a LIBERO-Pro2.0
        SDK server advertises in its metadata frame, overridden by explicit options. Connects
        (and reads the metadata frame) if not connected."""
        if self._ws is None:
            self._connect(self.options.connect_timeout)
        if self._meta is None:
            advertised = (self._server_meta or {}).get(METADATA_KEY)
            try:
                self._meta = build_metadata(
                    OPENPI_LIBERO_DEFAULTS, advertised if isinstance(advertised, dict) else None, self.options
                )
            except ValueError as exc:
                raise PolicyError("policy_bad_response", f"openpi {self.url}: {exc}") from exc
        return self._meta

    @property
    def server_metadata(self) -> dict | None:
        """The raw metadata frame of the current connection."""
        return self._server_meta

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None:
        """Start an episode: a fresh connection (see the module docstring). ``instruction``
        needs no message: it travels as ``prompt`` with every request."""
        timeout, clipped = time_left(self.options.connect_timeout, deadline)
        if self._ws is None or (self._used and self.options.reconnect_each_episode):
            self._connect(timeout, clipped)

    def request(self, observation: ObservationMessage) -> dict[str, Any]:
        """The openpi request dict for ``observation`` (keys as configured)."""
        meta = self.metadata()
        keys = self._keys()
        req: dict[str, Any] = {}
        for cam in meta.cameras:
            if cam.name not in observation.images:
                raise PolicyError("policy_bad_response", f"observation lacks camera {cam.name!r}")
            req[keys[cam.name]] = np.ascontiguousarray(observation.images[cam.name].to_numpy())
        if meta.state_fields:
            req[self.options.state_key] = state_vector(observation.proprio, list(meta.state_fields))
        req[self.options.prompt_key] = observation.instruction
        if self._echo:
            req[EPISODE_KEY] = observation.episode_id
            req[STEP_KEY] = observation.step
        return req

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult:
        """Send one observation, return the validated chunk (T, 7) float64.

        On a timeout the connection is closed, so a late answer is never read; the episode
        ends (the runner stops at the error) and the next :meth:`reset` reconnects.
        """
        if self._ws is None:
            raise PolicyError(
                "policy_connect_error",
                f"openpi {self.url}: not connected (the connection was lost "
                "earlier in this episode; the next episode reconnects)",
            )
        data = msgpack_numpy.packb(self.request(observation))
        timeout, clipped = time_left(self.options.request_timeout, deadline)
        ws = self._ws
        self._used = True
        t0 = time.perf_counter()
        try:
            reply = self._io.run(self._exchange, ws, data, timeout=timeout)
        except DeadlineExceeded as exc:
            self._abort(ws)
            sent = ws.protocol.close_sent
            if sent is not None and sent.code == MESSAGE_TOO_BIG:  # the server went on sending after 1009
                raise self._too_big() from exc
            raise timeout_error(f"openpi {self.url} step {observation.step}", timeout, clipped) from exc
        except ConnectionClosed as exc:
            self._abort(ws)
            raise self._closed_error(exc) from exc
        except OSError as exc:
            self._abort(ws)
            raise PolicyError("policy_connect_error", f"openpi {self.url}: {exc!r}") from exc
        latency_ms = (time.perf_counter() - t0) * 1e3
        if isinstance(reply, str):
            code = self._close_code(ws)
            self._disconnect()
            raise PolicyError(
                "policy_http_error",
                f"openpi server reported an error (text frame, close code {code}):\n{snippet(reply)}",
            )
        try:
            answer = msgpack_numpy.unpackb(reply)
        except ValueError as exc:
            self._abort(ws)
            raise PolicyError("policy_bad_response", f"openpi answer is not msgpack-numpy: {exc}") from exc
        if not isinstance(answer, dict) or "actions" not in answer:
            self._abort(ws)
            keys = sorted(map(str, answer)) if isinstance(answer, dict) else type(answer).__name__
            raise PolicyError("policy_bad_response", f"openpi answer has no 'actions' (got {keys})")
        if self._echo and (
            answer.get(EPISODE_KEY) != observation.episode_id or answer.get(STEP_KEY) != observation.step
        ):
            self._abort(ws)
            raise PolicyError(
                "policy_step_mismatch",
                f"answer echoes episode {answer.get(EPISODE_KEY)!r} step "
                f"{answer.get(STEP_KEY)!r}, request was episode {observation.episode_id!r} step {observation.step}",
            )
        actions = check_chunk(answer["actions"], chunk_length, "openpi answer")
        timing = answer.get("server_timing")
        server_ms = finite_ms(timing.get("infer_ms")) if isinstance(timing, dict) else None
        return ActResult(actions=actions, latency_ms=latency_ms, server_ms=server_ms)

    @staticmethod
    async def _exchange(ws: ClientConnection, data: bytes) -> Any:
        await ws.send(data)
        return await ws.recv()

    # ------------------------------------------------------------------ errors
    def _close_code(self, ws: ClientConnection) -> int | None:
        """Wait briefly (1 s) for the close that follows an error frame; its code, if any."""
        try:
            self._io.run(ws.recv, timeout=1.0)
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else None
        except Exception:  # noqa: BLE001  (any other failure: the code is unknown)
            return None
        return None

    def _too_big(self) -> PolicyError:
        return PolicyError(
            "policy_bad_response",
            f"openpi {self.url}: the answer is larger than max_message_bytes ({self.options.max_message_bytes} bytes)",
        )

    def _closed_error(self, exc: ConnectionClosed) -> PolicyError:
        if exc.sent is not None and exc.sent.code == MESSAGE_TOO_BIG:
            return self._too_big()
        code = exc.rcvd.code if exc.rcvd is not None else None
        reason = exc.rcvd.reason if exc.rcvd is not None else ""
        if code == INTERNAL_ERROR:
            return PolicyError(
                "policy_http_error", f"openpi server closed the connection with 1011 (internal error): {reason}"
            )
        return PolicyError(
            "policy_connect_error", f"openpi {self.url}: connection closed (code {code}) {reason}".strip()
        )
