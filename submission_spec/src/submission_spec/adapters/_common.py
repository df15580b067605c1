"""What the protocol adapters share: option parsing, metadata assembly, chunk checks, deadlines.

Conventions (camera sizes, orientation, state layout, gripper, chunking) are expressed as a
:class:`~submission_spec.models.PolicyMetadata`, the same object a ``liberopro``-protocol server
answers on ``GET /metadata``; the evaluator then prepares observations and maps actions from it
exactly as for our own protocol. A foreign protocol's client assembles that metadata from three
layers, later ones winning:

1. the protocol's published LIBERO defaults (per protocol / variant, see each adapter);
2. the metadata a LIBERO-Pro2.0 SDK server advertises over that protocol (openpi: in its first
   frame; OpenVLA: ``GET /liberopro/metadata``), unless ``use_server_metadata=false``;
3. explicit options (``--protocol-option KEY=VALUE``).
"""

from __future__ import annotations

import math
from typing import Any, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from submission_spec.client import PolicyError, time_left, timeout_error  # noqa: F401 - re-exported for the adapters
from submission_spec.models import (
    PROPRIO_FIELDS,
    CameraName,
    CameraSpec,
    GripperConvention,
    ImageOrientation,
    PolicyMetadata,
    ProprioName,
    ResizeMode,
)

#: Request keys that carry the episode id and step when both ends are LIBERO-Pro2.0 code; the
#: answer must echo them. Sent only to servers that advertise support (``ECHO_FLAG``), so a
#: third-party server never sees a key it does not know.
EPISODE_KEY = "liberopro/episode_id"
STEP_KEY = "liberopro/step"
#: Key of the server-advertised :class:`PolicyMetadata` (openpi first frame).
METADATA_KEY = "liberopro/metadata"
#: Key whose true value says the server echoes :data:`EPISODE_KEY` and :data:`STEP_KEY`.
ECHO_FLAG = "liberopro/echo"


def _split_list(value: Any) -> Any:
    """``"a,b"`` -> ``["a", "b"]`` (CLI options arrive as strings); ``""`` -> ``[]``."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


class ConventionOptions(BaseModel):
    """Options that override the policy's conventions (every field optional; unset keeps the
    protocol default or the server-advertised value). Values may be strings, as from the CLI.

    Attributes:
        policy_name: name recorded with results.
        cameras: cameras to send, e.g. ``agentview,wrist``.
        image_size: square side (px) of every camera image sent.
        image_orientation: ``rotate_180`` (LIBERO datasets), ``upright`` or ``as_rendered``.
        resize_mode: ``resize_with_pad`` or ``stretch``.
        state_fields: the state vector's parts in order, e.g.
            ``eef_pos,eef_axis_angle,gripper_qpos`` (the 8-number LIBERO state); empty: none.
        gripper_convention: ``libero``, ``open_positive``, ``unit_open_is_one``,
            ``unit_close_is_one`` (see :data:`submission_spec.models.GripperConvention`).
        binarize_gripper: map the gripper to exactly -1/+1 after the convention.
        chunk_length: most actions one answer may hold.
        replan_steps: actions executed from each answer before asking again.
        use_server_metadata: take conventions a LIBERO-Pro2.0 SDK server advertises.
    """

    model_config = ConfigDict(extra="forbid")

    policy_name: str | None = None
    cameras: list[CameraName] | None = None
    image_size: int | None = Field(None, ge=16, le=1024)
    image_orientation: ImageOrientation | None = None
    resize_mode: ResizeMode | None = None
    state_fields: list[ProprioName] | None = None
    gripper_convention: GripperConvention | None = None
    binarize_gripper: bool | None = None
    chunk_length: int | None = Field(None, ge=1, le=1000)
    replan_steps: int | None = Field(None, ge=1, le=1000)
    use_server_metadata: bool = True

    _split = field_validator("cameras", "state_fields", mode="before")(_split_list)


def parse_options(model: type[BaseModel], options: dict[str, Any], protocol: str) -> Any:
    """Validate client options; ``ValueError`` naming the bad option and the valid ones."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(options)'}: {e['msg']}" for e in exc.errors())
        raise ValueError(
            f"invalid {protocol} protocol option(s): {problems}. Valid options: {', '.join(sorted(model.model_fields))}"
        ) from None


def build_metadata(defaults: PolicyMetadata, advertised: dict | None, options: ConventionOptions) -> PolicyMetadata:
    """Defaults <- server-advertised metadata <- explicit options (see the module docstring).

    Raises ``ValueError`` when the result is inconsistent (e.g. ``replan_steps`` above
    ``chunk_length``), naming the fields.
    """
    base = defaults
    if advertised is not None and options.use_server_metadata:
        base = PolicyMetadata.model_validate(advertised)
    d = base.model_dump()
    set_fields = (options.model_fields_set & set(ConventionOptions.model_fields)) - {
        "use_server_metadata",
        "cameras",
        "image_size",
    }
    for name in set_fields:
        value = getattr(options, name)
        if value is not None:
            d[name] = value
    if options.cameras is not None or options.image_size is not None:
        sizes = {c["name"]: (c["height"], c["width"]) for c in d["cameras"]}
        names = options.cameras if options.cameras is not None else list(sizes)
        cams = []
        for n in names:
            h, w = sizes.get(n, (224, 224))
            if options.image_size is not None:
                h = w = options.image_size
            cams.append(CameraSpec(name=n, height=h, width=w).model_dump())
        d["cameras"] = cams
    # Chunking given only in part: keep the pair consistent rather than fail.
    if "chunk_length" in set_fields and "replan_steps" not in set_fields:
        d["replan_steps"] = min(d["replan_steps"], d["chunk_length"])
    if "replan_steps" in set_fields and "chunk_length" not in set_fields:
        d["chunk_length"] = max(d["chunk_length"], d["replan_steps"])
    # A foreign protocol's server is served one episode at a time (openpi's websocket server and
    # OpenVLA's deploy.py keep one model state; docs/adapters.md), whatever an SDK server behind
    # it advertises: the evaluator runs one stream against it.
    d["max_concurrent_episodes"] = None
    try:
        return PolicyMetadata.model_validate(d)
    except ValidationError as exc:
        raise ValueError(f"inconsistent policy conventions: {exc.errors()[0]['msg']}") from None


def state_vector(proprio: dict[str, Any], fields: list[str]) -> np.ndarray:
    """Concatenate proprioception values (``ProprioValue`` or arrays) in ``fields`` order into a
    float64 vector; LIBERO's 8-number state for the default fields."""
    parts = []
    for f in fields:
        v = proprio[f]
        parts.append(np.asarray(getattr(v, "value", v), dtype=np.float64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def split_state(vector: np.ndarray, fields: list[str]) -> dict[str, np.ndarray]:
    """Inverse of :func:`state_vector`: cut a flat vector into named fields by their lengths
    (:data:`~submission_spec.models.PROPRIO_FIELDS`). ``ValueError`` on a length mismatch."""
    v = np.asarray(vector, dtype=np.float64).ravel()
    need = sum(PROPRIO_FIELDS[f][0] for f in fields)
    if v.size != need:
        raise ValueError(f"state has {v.size} numbers but the policy's state_fields {fields} need {need}")
    out, i = {}, 0
    for f in fields:
        n = PROPRIO_FIELDS[f][0]
        out[f] = v[i : i + n]
        i += n
    return out


def check_chunk(actions: Any, chunk_length: int, where: str) -> np.ndarray:
    """Validate an action answer: a (7,) vector (taken as T = 1) or a (T, 7) float array with
    1 <= T <= ``chunk_length``, every value finite. Returns (T, 7) float64.

    Raises :class:`PolicyError` ``policy_bad_action_shape`` or ``policy_nonfinite_action``.
    """
    try:
        arr = np.asarray(actions)
    except Exception as exc:  # ragged lists and the like
        raise PolicyError("policy_bad_action_shape", f"{where}: actions are not an array ({exc})") from exc
    if arr.dtype.kind in "iu" and arr.size:
        arr = arr.astype(np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.dtype.kind != "f" or arr.ndim != 2 or arr.shape[1] != 7 or not 1 <= arr.shape[0] <= chunk_length:
        raise PolicyError(
            "policy_bad_action_shape",
            f"{where}: actions must be a (7,) or (T, 7) number array with 1 <= T <= {chunk_length} "
            f"(chunk_length); got {arr.dtype} {tuple(np.shape(actions))}",
        )
    if not np.all(np.isfinite(arr)):
        raise PolicyError("policy_nonfinite_action", f"{where}: the action chunk contains NaN or infinity")
    return arr.astype(np.float64)


def snippet(text: str | bytes, limit: int = 600) -> str:
    """The last ``limit`` characters (a traceback's end says the most)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def finite_ms(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


CAMERA_NAMES: tuple[str, ...] = get_args(CameraName)
