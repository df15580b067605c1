"""openpi's msgpack-numpy wire format, implemented without pickle and with size checks.

Wire format (openpi ``openpi_client/msgpack_numpy.py``, the format every openpi server and
client speaks):

* a numpy array is the map ``{b"__ndarray__": True, b"data": <raw bytes, C order>,
  b"dtype": dtype.str (e.g. "<f4", "|u1"), b"shape": [..]}`` (keys are msgpack ``bin``);
* a numpy scalar is ``{b"__npgeneric__": True, b"data": <python number>, b"dtype": dtype.str}``;
* everything else is plain msgpack (str keys and values, ints, floats, lists, maps).

:func:`packb` writes exactly that, so ``openpi_client.msgpack_numpy.unpackb`` reads it.
:func:`unpackb` reads it (map keys as ``bin`` or ``str``) and refuses, with ``ValueError``: dtypes
other than bool/int/uint/float (openpi refuses object, void and complex; we also refuse
strings and structured dtypes), a data length that does not match dtype and shape, a negative
dimension, and arrays over :data:`MAX_ARRAY_BYTES`. Decoded arrays are read-only views of the
message bytes.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from submission_spec.arrays import ALLOWED_KINDS, RefusedArray, check_array, descr_dtype

__all__ = ["ALLOWED_KINDS", "RefusedArray", "packb", "unpackb"]


def _check_dtype(obj: np.ndarray | np.generic) -> None:
    if obj.dtype.kind not in ALLOWED_KINDS:
        raise TypeError(f"dtype {obj.dtype} cannot travel in msgpack-numpy; use bool, int, uint or float")


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj)
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        _check_dtype(obj)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot serialise {type(obj).__name__} to msgpack")


def packb(obj: Any) -> bytes:
    """Serialise ``obj`` (dicts, lists, str, numbers, numpy arrays and scalars) to bytes."""
    return msgpack.packb(obj, default=_default, use_bin_type=True)


def _get(d: dict, name: str) -> Any:
    key = name.encode()
    return d[key] if key in d else d.get(name)


def _hook(d: dict) -> Any:
    if _get(d, "__ndarray__"):
        dt = descr_dtype(_get(d, "dtype"))
        shape = _get(d, "shape")
        data = _get(d, "data")
        if not isinstance(data, (bytes, bytearray)):
            raise RefusedArray("array data must be bytes")
        check_array(dt, shape, len(data))
        return np.frombuffer(bytes(data), dtype=dt).reshape(shape)
    if _get(d, "__npgeneric__"):
        dt = descr_dtype(_get(d, "dtype"))
        check_array(dt, [], dt.itemsize)  # the dtype rule (a scalar is shape [] of one item)
        value = _get(d, "data")
        if not isinstance(value, (bool, int, float)):
            raise RefusedArray(f"numpy scalar data must be a number, got {type(value).__name__}")
        return dt.type(value)
    return d


def unpackb(data: bytes) -> Any:
    """Deserialise bytes written by openpi's ``msgpack_numpy.packb`` (or :func:`packb`).

    Raises ``ValueError`` for bytes that are not msgpack or hold a refused array.
    """
    try:
        return msgpack.unpackb(data, object_hook=_hook, raw=False, strict_map_key=False)
    except RefusedArray:
        raise
    except Exception as exc:  # msgpack raises several unrelated types, some with no message
        raise ValueError(f"not valid msgpack: {exc!r}") from exc
