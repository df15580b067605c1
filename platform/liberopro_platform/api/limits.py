"""Request body limits, enforced before a body is read (plain ASGI middleware).

Every route gets ``max_request_bytes`` (small: the JSON routes take a few kilobytes), except the
archive upload, which gets ``max_upload_bytes`` plus room for the multipart framing and the note.
A declared ``Content-Length`` over the limit is answered 413 at once, before the application
runs (so before authentication, and nothing of the body is read); a body without a length
(chunked) is counted as it arrives and cut with 413 at the limit. The upload route itself
authenticates before it reads a byte (``routes/submissions.py``), so an unauthenticated upload
of any size costs the server one read of the headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Room for the multipart boundaries, part headers and the note around an uploaded archive.
UPLOAD_FRAMING_BYTES = 64 * 1024


class BodyTooLarge(HTTPException):
    """A request body over its route's limit (413, with the limit and what to do)."""

    def __init__(self, limit: int, what: str) -> None:
        super().__init__(413, detail={"error": "body_too_large", "message": too_large_message(limit, what)})


def too_large_message(limit: int, what: str) -> str:
    """The 413 message: the limit in readable units and what to do."""
    size = (
        f"{limit / 2**30:.1f} GiB"
        if limit >= 2**30
        else f"{limit / 1024:.0f} KiB"
        if limit >= 1024
        else f"{limit} bytes"
    )
    return f"the request body is larger than the {size} allowed for {what}: send less"


class BodyLimitMiddleware:
    """Answer 413 for a request whose body exceeds ``limit_for(method, path)`` bytes.

    ``limit_for`` returns ``(limit in bytes, what the limit applies to)``."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str, str], tuple[int, str]]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, what = self.limit_for(scope["method"], scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _reply(
                    scope,
                    receive,
                    send,
                    400,
                    {"error": "bad_content_length", "message": f"Content-Length {declared[:40]!r} is not a number"},
                )
                return
            if int(declared) > limit:
                await _reply(scope, receive, send, 413, BodyTooLarge(limit, what).detail)
                return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit, what)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as exc:  # raised where no exception handler turned it into the 413 answer
            if started:
                raise
            await _reply(scope, receive, send, 413, exc.detail)


async def _reply(scope: Scope, receive: Receive, send: Send, status: int, detail: Any) -> None:
    # Connection: close, since the unread rest of the body cannot be skipped on a kept-alive connection.
    await JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})(scope, receive, send)
