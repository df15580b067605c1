"""Wall-clock deadlines for the evaluator's calls to a policy server.

Socket-level timeouts bound one read or one write, not a call: httpx's ``timeout`` is per
read/write operation and websockets' are per message or absent (a websocket ``send`` to a
server that stops reading blocks without limit). A server that trickles its answer one byte
at a time, each byte inside the per-operation timeout, can therefore hold a call for as long
as it likes. Every client of this package instead runs the whole of one call (connecting,
sending the request, reading every byte of the answer) as a coroutine on the client's own
asyncio event loop, inside an ``anyio`` cancel scope: at the deadline the call is cancelled
wherever its bytes are, and the connection it used is closed, so nothing of a late answer can
be read as the answer to a later request. The loop runs only during a call, in the calling
thread (no background thread).

See ``submission_spec/README.md`` ("Time limits") for the semantics the evaluator gives these
deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx

T = TypeVar("T")

#: Default cap on one reply body (HTTP) or message (websocket), in bytes. An answer is an
#: action chunk of a few KiB; 64 MiB is also the cap of the array decoders.
DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024

#: Socket options of every policy connection: TCP_NODELAY (without it a request costs 40-90 ms
#: of Nagle/delayed-ACK stalls on loopback) and keep-alive probes.
SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]


class DeadlineExceeded(TimeoutError):
    """A call did not finish within its wall-clock deadline; it was cancelled and its
    connection closed."""


class ReplyTooLarge(Exception):
    """A reply body was larger than the client's limit; it was not read further and its
    connection was closed."""


class LoopRunner:
    """Runs one client's coroutines to completion on that client's private asyncio event loop,
    in the calling thread, each under an optional wall-clock deadline.

    One call at a time (a lock serialises callers from several threads). Called from inside a
    running event loop (a notebook, an async application), the private loop runs in a helper
    thread for the duration of the call instead.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float | None = None) -> T:
        """``await fn(*args)`` with at most ``timeout`` wall-clock seconds (None: no limit).

        Raises :class:`DeadlineExceeded` when the deadline cancelled it, else whatever ``fn``
        raises; ``RuntimeError`` after :meth:`close`.
        """

        async def bounded() -> T:
            if timeout is None:
                return await fn(*args)
            with anyio.move_on_after(max(timeout, 0.0)):
                return await fn(*args)
            raise DeadlineExceeded(f"no complete answer within {timeout:.1f} s")

        with self._lock:
            if self._loop.is_closed():
                raise RuntimeError("the policy client is closed")
            return _outside_running_loop(lambda: self._run_here(bounded()))

    def _run_here(self, coro: Coroutine[Any, Any, T]) -> T:
        task: asyncio.Task[T] = self._loop.create_task(coro)
        try:
            return self._loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # interrupted (KeyboardInterrupt): let the task unwind now
                task.cancel()
                with contextlib.suppress(BaseException):
                    self._loop.run_until_complete(task)
            raise

    def close(self) -> None:
        """Run the callbacks still pending (sockets being closed), then close the loop.
        Idempotent."""

        def finish() -> None:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

        with self._lock:
            if not self._loop.is_closed():
                _outside_running_loop(finish)


def _outside_running_loop(fn: Callable[[], T]) -> T:
    """``fn()`` in this thread, or in a helper thread when this thread runs an event loop
    (another loop cannot run here then)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            out["error"] = exc

    t = threading.Thread(target=target, name="liberopro-policy-io", daemon=True)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


@dataclass(frozen=True)
class Reply:
    """A complete HTTP answer: status, headers, and the whole body (at most the size limit)."""

    status_code: int
    headers: httpx.Headers
    content: bytes


class HTTPSession:
    """One keep-alive HTTP/1.1 connection to a policy server (httpx ``AsyncClient``); every
    request is bounded by a wall-clock deadline and its reply body by a size limit.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        max_reply_bytes: largest reply body read (after any content decoding); ``Accept-Encoding:
            identity`` is asked for, so a compliant server does not compress.
        runner: the event loop to run on (shared with a websocket connection of the same
            client); a private one when None.

    After any failure (deadline, transport error, reply too large) the connection is dropped,
    so a late or unread answer can never be read as the answer to a later request.
    """

    def __init__(
        self, base_url: str, *, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, runner: LoopRunner | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_reply_bytes = max_reply_bytes
        self._own_runner = runner is None
        self.runner = runner if runner is not None else LoopRunner()
        self._client = self._new_client()

    def _new_client(self) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(socket_options=SOCKET_OPTIONS, retries=0)
        return httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            trust_env=False,
            headers={"accept-encoding": "identity"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        connect_timeout: float | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        max_bytes: int | None = None,
    ) -> Reply:
        """Send one request and read its whole answer within ``timeout`` wall-clock seconds.

        Args:
            connect_timeout: a tighter bound on opening the TCP connection (within ``timeout``).
            max_bytes: reply limit for this request (default: the session's).

        Raises:
            DeadlineExceeded: the whole exchange did not finish in ``timeout`` seconds.
            ReplyTooLarge: the body (declared or received) exceeds the limit.
            httpx.ConnectTimeout: no TCP connection within ``connect_timeout``.
            httpx.HTTPError: refused, reset, malformed HTTP, undecodable body.
        """
        limit = self.max_reply_bytes if max_bytes is None else max_bytes
        connect = timeout if connect_timeout is None else min(connect_timeout, timeout)
        try:
            return self.runner.run(self._request, method, path, content, headers, connect, limit, timeout=timeout)
        except BaseException:
            self.drop()
            raise

    async def _request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str] | None,
        connect_timeout: float,
        limit: int,
    ) -> Reply:
        async with self._client.stream(
            method, path, content=content, headers=headers, timeout=httpx.Timeout(None, connect=connect_timeout)
        ) as resp:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise ReplyTooLarge(f"the answer declares {int(declared)} bytes, more than the {limit}-byte limit")
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise ReplyTooLarge(f"the answer is larger than the {limit}-byte limit")
            return Reply(resp.status_code, resp.headers, bytes(body))

    def drop(self) -> None:
        """Close the connection (a fresh one opens with the next request)."""
        old, self._client = self._client, self._new_client()
        with contextlib.suppress(Exception):
            self.runner.run(old.aclose, timeout=1.0)

    def close(self) -> None:
        """Close the connection, and the event loop when it is the session's own."""
        with contextlib.suppress(Exception):
            self.runner.run(self._client.aclose, timeout=1.0)
        if self._own_runner:
            self.runner.close()
