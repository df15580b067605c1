"""Receiving an uploaded ``docker save`` archive: the multipart body is parsed as it streams
(python-multipart's push parser) and the ``file`` part written straight to its destination, so
nothing is buffered whole in memory or in a temporary directory, and the route can authenticate
before it reads the first byte (FastAPI reads a declared ``File``/``Form`` body before any
dependency runs, so the route declares none and calls :func:`receive_archive` itself).

Fields: ``file`` (the archive, required, at most ``max_upload_bytes``), ``note`` (text, at most
2000 characters). Anything else is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from fastapi import HTTPException, Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from liberopro_platform.api.limits import BodyTooLarge
from liberopro_platform.api.schemas import text_problem

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

NOTE_MAX_CHARS = 2000
TAR_FIX = "create it with `docker save IMAGE -o policy.tar` and send it as the multipart field 'file'"

#: The upload's request body, for the OpenAPI document (the route reads the stream itself).
UPLOAD_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "docker save IMAGE -o policy.tar",
                        },
                        "note": {
                            "type": "string",
                            "maxLength": NOTE_MAX_CHARS,
                            "description": "Stored with the submission.",
                        },
                    },
                }
            }
        },
    },
}


def _refused(status: int, error: str, message: str) -> HTTPException:
    return HTTPException(status, detail={"error": error, "message": message})


@dataclass
class ReceivedArchive:
    """What :func:`receive_archive` wrote: the archive's size in bytes, its client-side file
    name (base name, at most 200 characters, control characters removed) and the note."""

    size: int
    filename: str
    note: str


class _Parts:
    """Callbacks of the push parser: routes each part's bytes and enforces the limits."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.header_field = b""
        self.header_value = b""
        self.headers: dict[bytes, bytes] = {}
        self.name: str | None = None
        self.filename = ""
        self.file_parts = 0
        self.size = 0
        self.head = b""
        self.pending: list[bytes] = []  # file bytes parsed but not yet written
        self.note = bytearray()
        self.file_done = False

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.part_begin,
            "on_header_field": self.header_field_data,
            "on_header_value": self.header_value_data,
            "on_header_end": self.header_end,
            "on_headers_finished": self.headers_finished,
            "on_part_data": self.part_data,
            "on_part_end": self.part_end,
        }

    def part_begin(self) -> None:
        self.headers, self.name = {}, None

    def header_field_data(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def header_value_data(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def header_end(self) -> None:
        self.headers[self.header_field.lower()] = self.header_value
        self.header_field = self.header_value = b""

    def headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get(b"content-disposition", b""))
        self.name = options.get(b"name", b"").decode("latin-1")
        if self.name == "file":
            self.file_parts += 1
            if self.file_parts > 1:
                raise _refused(422, "bad_upload", "the upload holds more than one 'file' part: send one archive")
            raw = options.get(b"filename", b"").decode("utf-8", errors="replace")
            base = os.path.basename(raw.replace("\\", "/"))
            self.filename = "".join(ch for ch in base if ch.isprintable())[:200] or "archive.tar"
        elif self.name != "note":
            raise _refused(
                422,
                "bad_upload",
                f"unexpected multipart field {self.name[:50]!r}: send 'file' (the archive) and optionally 'note'",
            )

    def part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self.name == "note":
            self.note += chunk
            if len(self.note) > 4 * NOTE_MAX_CHARS:
                raise _refused(422, "bad_upload", f"the note is longer than {NOTE_MAX_CHARS} characters")
            return
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise BodyTooLarge(self.max_bytes, "an uploaded archive (make the image smaller)")
        if len(self.head) < 512:
            self.head += chunk[: 512 - len(self.head)]
            if len(self.head) == 512:
                self._check_tar()
        self.pending.append(chunk)

    def part_end(self) -> None:
        if self.name == "file":
            self.file_done = True
            if len(self.head) < 512:
                self._check_tar()

    def _check_tar(self) -> None:
        if len(self.head) < 512 or self.head[257:262] != b"ustar":
            raise _refused(422, "not_a_tar", f"the upload is not a tar archive: {TAR_FIX}")


async def receive_archive(request: Request, dest: Path, max_bytes: int) -> ReceivedArchive:
    """Stream the request's multipart body: the ``file`` part into ``dest``, the ``note`` into
    memory. Raises :class:`fastapi.HTTPException`: 422 (not multipart, no or several ``file``
    parts, not a tar archive, another field, a bad note), 413 (the archive exceeds ``max_bytes``).
    ``dest`` is removed when it raises."""
    ctype, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if ctype != b"multipart/form-data" or not boundary:
        raise _refused(422, "bad_upload", f"send the archive as multipart/form-data: {TAR_FIX}")
    parts = _Parts(max_bytes)
    try:
        parser = MultipartParser(boundary, parts.callbacks())
    except FormParserError as exc:
        raise _refused(422, "bad_upload", f"the multipart body cannot be parsed ({exc})") from None
    try:
        with dest.open("wb") as out:
            async for chunk in request.stream():
                try:
                    parser.write(chunk)
                except FormParserError as exc:
                    raise _refused(422, "bad_upload", f"the multipart body cannot be parsed ({exc})") from None
                if parts.pending:
                    data = b"".join(parts.pending)
                    parts.pending.clear()
                    await anyio.to_thread.run_sync(out.write, data)
        if not parts.file_done:
            raise _refused(422, "bad_upload", f"the upload holds no complete 'file' part: {TAR_FIX}")
        try:
            note = parts.note.decode("utf-8")
        except UnicodeDecodeError:
            raise _refused(422, "bad_upload", "the note is not UTF-8 text") from None
        problem = text_problem(note, newlines=True)
        if problem or len(note) > NOTE_MAX_CHARS:
            raise _refused(422, "bad_upload", f"the note {problem or f'is longer than {NOTE_MAX_CHARS} characters'}")
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return ReceivedArchive(size=parts.size, filename=parts.filename, note=note)
