"""The ``json-numpy`` encoding (PyPI ``json-numpy`` 2.x) that OpenVLA's REST servers use,
implemented without importing that package and with size and dtype checks.

Wire format: a numpy array or scalar is the JSON object
``{"__numpy__": "<standard base64 of the raw C-order bytes>", "dtype": "<descr, e.g. '|u1',
'<f4'>", "shape": [...]}``; a scalar has ``"shape": []``. Everything else is plain JSON.
OpenVLA's ``vla-scripts/deploy.py`` calls ``json_numpy.patch()``, so FastAPI both parses request
bodies and renders answers with it: the answer of ``/act`` is such an object (or a list of them,
OpenVLA-OFT's chunk), not a list of numbers, although servers that call ``.tolist()`` send plain
numbers, which :func:`loads` reads too.

:func:`loads` refuses (``ValueError``) dtypes other than bool/int/uint/float, structured
descriptors, a byte count that does not match dtype and shape, and arrays over
:data:`MAX_ARRAY_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, cast

import numpy as np

from submission_spec.arrays import ALLOWED_KINDS, RefusedArray, check_array, descr_dtype


def default(obj: Any) -> dict[str, Any]:
    """``json.dumps(..., default=default)`` hook: numpy array or scalar -> json-numpy object."""
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind not in ALLOWED_KINDS:
            raise TypeError(f"dtype {obj.dtype} cannot travel in json-numpy; use bool, int, uint or float")
        return {
            "__numpy__": base64.b64encode(np.ascontiguousarray(obj).tobytes()).decode("ascii"),
            "dtype": np.lib.format.dtype_to_descr(obj.dtype),
            "shape": list(np.shape(obj)),
        }
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """JSON text with numpy arrays and scalars as json-numpy objects."""
    return json.dumps(obj, default=default)


def object_hook(d: dict) -> Any:
    """``json.loads(..., object_hook=object_hook)``: json-numpy object -> read-only array
    (a numpy scalar for shape ``[]``)."""
    if "__numpy__" not in d:
        return d
    descr, shape, data = d.get("dtype"), d.get("shape"), d.get("__numpy__")
    dt = descr_dtype(descr)
    if not isinstance(data, str):
        raise RefusedArray("json-numpy __numpy__ must be a base64 string")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RefusedArray(f"json-numpy data is not valid base64: {exc}") from exc
    check_array(dt, shape, len(raw))
    arr = np.frombuffer(raw, dtype=dt).reshape(cast(list[int], shape))  # check_array validated it
    return arr[()] if shape == [] else arr


def loads(text: str | bytes) -> Any:
    """Parse JSON text, turning json-numpy objects into arrays. ``ValueError`` on bad input."""
    try:
        return json.loads(text, object_hook=object_hook)
    except RefusedArray:
        raise
    except Exception as exc:  # JSONDecodeError, RecursionError, ...
        raise ValueError(f"not valid JSON: {exc!r}") from exc
