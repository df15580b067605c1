"""Body encodings of the spec, chosen by Content-Type: JSON or msgpack.

Both carry the same message models; they differ only in how array bytes travel (base64 text
versus raw ``bin``). :func:`encode` and :func:`decode` are the only places that know this.
"""

from __future__ import annotations

from typing import Literal, TypeVar

import msgpack
from pydantic import BaseModel

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_ALIASES = {MSGPACK, "application/x-msgpack", "application/vnd.msgpack"}

Encoding = Literal["json", "msgpack"]
M = TypeVar("M", bound=BaseModel)


class UnsupportedMediaType(ValueError):
    """The Content-Type names neither JSON nor msgpack."""


def encoding_of(content_type: str | None) -> Encoding:
    """Map a Content-Type header to ``"json"`` or ``"msgpack"``.

    A missing header means JSON. Raises :class:`UnsupportedMediaType` for anything else.
    """
    media = (content_type or JSON).split(";", 1)[0].strip().lower()
    if media == JSON or media == "":
        return "json"
    if media in _MSGPACK_ALIASES:
        return "msgpack"
    raise UnsupportedMediaType(f"Content-Type {content_type!r} is not supported; send {JSON} or {MSGPACK}")


def media_type(encoding: Encoding) -> str:
    """The Content-Type header value for ``encoding``."""
    return JSON if encoding == "json" else MSGPACK


def encode(message: BaseModel, encoding: Encoding) -> bytes:
    """Serialise a spec message to body bytes."""
    if encoding == "json":
        return message.model_dump_json(exclude_none=True).encode()
    return msgpack.packb(message.model_dump(mode="python", exclude_none=True), use_bin_type=True)


def decode(body: bytes, model: type[M], encoding: Encoding) -> M:
    """Parse body bytes into ``model``.

    Raises ``pydantic.ValidationError`` when the content does not fit the model, and
    ``ValueError`` when the bytes are not JSON / msgpack at all.
    """
    if encoding == "json":
        return model.model_validate_json(body)
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ValueError(f"body is not valid msgpack: {exc}") from exc
    return model.model_validate(obj)
