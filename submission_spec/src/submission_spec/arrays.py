"""Numpy arrays on the wire.

One wire shape serves both encodings of the spec:

* JSON (``application/json``): ``{"dtype": "uint8", "shape": [224, 224, 3], "data": "<base64>"}``,
  ``data`` in standard base64 (RFC 4648 section 4, with padding; the URL-safe alphabet is
  accepted on input).
* msgpack (``application/msgpack``): the same map with ``data`` as a msgpack ``bin`` holding the
  raw bytes.

Bytes are always little-endian and C-ordered. Only the dtypes in :data:`WIRE_DTYPES` travel:
object, void, complex and string arrays are refused, so decoding never runs pickle.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Annotated, Any, Literal, cast

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

#: dtype names allowed on the wire, mapped to little-endian numpy dtypes.
WIRE_DTYPES: dict[str, np.dtype] = {
    "uint8": np.dtype("<u1"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "bool": np.dtype("?"),
}

WireDType = Literal["uint8", "int32", "int64", "float32", "float64", "bool"]

#: Largest array accepted from the wire, in bytes (a 1024x1024x3 image is 3 MiB).
MAX_ARRAY_BYTES = 64 * 1024 * 1024

#: numpy dtype kinds any codec accepts: bool, signed and unsigned integers, floats (the spec's
#: own encoding narrows them further to :data:`WIRE_DTYPES`).
ALLOWED_KINDS = "biuf"


class RefusedArray(ValueError):
    """An array (or numpy scalar) from the wire that is malformed, too large or of a refused dtype."""


def descr_dtype(value: Any) -> np.dtype:
    """The numpy dtype of a wire descriptor string (``dtype.str``: ``'<f4'``, ``'|u1'``; bytes
    are read as ASCII), as openpi's msgpack-numpy and json-numpy send it. Raises
    :class:`RefusedArray` for a non-string, one over 8 characters or one numpy does not know;
    whether the dtype may travel is :func:`check_array`'s question."""
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    if not isinstance(value, str) or len(value) > 8:
        raise RefusedArray(f"array dtype must be a short descriptor string like '<f4', got {value!r}")
    try:
        return np.dtype(value)
    except TypeError as exc:
        raise RefusedArray(f"unknown array dtype {value!r}") from exc


def check_array(dtype: np.dtype, shape: Any, nbytes: int) -> None:
    """The one check every codec runs on an array it decodes (the spec's JSON and msgpack
    :class:`NDArray`, openpi's msgpack-numpy, json-numpy), before any numpy view is made.

    Args:
        dtype: the array's numpy dtype; a plain bool, int, uint or float (:data:`ALLOWED_KINDS`,
            no structured or sub-array dtype).
        shape: a list (or tuple) of non-negative ints.
        nbytes: the byte count of the data received; must be ``prod(shape) * dtype.itemsize``,
            which must not exceed :data:`MAX_ARRAY_BYTES`.

    Raises :class:`RefusedArray` (a ``ValueError``) naming the first rule broken.
    """
    if dtype.kind not in ALLOWED_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise RefusedArray(f"array dtype {dtype.str!r} is refused (only bool, int, uint, float travel)")
    if not isinstance(shape, (list, tuple)) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise RefusedArray(f"array shape must be a list of non-negative ints, got {shape!r}")
    need = math.prod(shape) * dtype.itemsize
    if need > MAX_ARRAY_BYTES:
        raise RefusedArray(f"array of shape {list(shape)} exceeds {MAX_ARRAY_BYTES} bytes")
    if nbytes != need:
        raise RefusedArray(f"array data has {nbytes} bytes but dtype {dtype.name} and shape {list(shape)} need {need}")


def _bytes_from_wire(value: Any) -> Any:
    """bytes stay bytes (msgpack); str is base64 (JSON)."""
    if isinstance(value, str):
        try:
            text = value.replace("-", "+").replace("_", "/")
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"array data is not valid base64: {exc}") from exc
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _bytes_to_json(value: bytes, info: Any) -> Any:
    if info.mode == "json":
        return base64.b64encode(value).decode("ascii")
    return value


WireBytes = Annotated[
    bytes,
    BeforeValidator(_bytes_from_wire),
    PlainSerializer(_bytes_to_json, when_used="always"),
    WithJsonSchema(
        {
            "type": "string",
            "contentEncoding": "base64",
            "description": "Raw little-endian C-order array bytes: standard base64 in JSON, a msgpack bin in msgpack.",
        }
    ),
]


class NDArray(BaseModel):
    """A numpy array as it travels: dtype name, shape and raw bytes.

    ``len(data)`` must equal ``prod(shape) * itemsize``; a mismatch is a validation error.
    Convert with :meth:`from_numpy` and :meth:`to_numpy`.
    """

    model_config = ConfigDict(frozen=True)

    dtype: WireDType
    shape: list[Annotated[int, "dimension"]]
    data: WireBytes

    @model_validator(mode="after")
    def _check_size(self) -> NDArray:
        check_array(WIRE_DTYPES[self.dtype], self.shape, len(self.data))
        return self

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> NDArray:
        """Wrap ``array``; raises ``TypeError`` for a dtype outside :data:`WIRE_DTYPES`."""
        array = np.asarray(array)
        name = array.dtype.name
        if name not in WIRE_DTYPES:
            raise TypeError(f"dtype {array.dtype} cannot travel; use one of {sorted(WIRE_DTYPES)}")
        data = np.ascontiguousarray(array, dtype=WIRE_DTYPES[name]).tobytes()
        return cls.model_construct(dtype=cast(Any, name), shape=list(array.shape), data=data)  # name is in WIRE_DTYPES

    def to_numpy(self) -> np.ndarray:
        """A read-only numpy view of the bytes, in native byte order."""
        arr = np.frombuffer(self.data, dtype=WIRE_DTYPES[self.dtype]).reshape(self.shape)
        return arr.astype(arr.dtype.newbyteorder("="), copy=False)
