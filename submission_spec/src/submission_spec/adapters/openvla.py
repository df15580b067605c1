"""Evaluator-side client for OpenVLA-style REST servers (``vla-scripts/deploy.py`` of OpenVLA and
OpenVLA-OFT, and servers that copy them).

The wire:

* ``POST /act`` with a JSON body whose numpy arrays are json-numpy objects
  (:mod:`submission_spec.adapters.json_numpy`), or the double-encoded form
  ``{"encoded": "<json-numpy text of the payload>"}`` (option ``double_encode``);
* the answer is JSON: the action as a json-numpy array (deploy.py renders numpy with
  json-numpy), a plain list of 7 numbers, OpenVLA-OFT's list of 8 arrays, a map with
  ``actions``/``action``, or (double-encoded) a JSON string holding any of these;
* on ANY error the server answers HTTP 200 with the JSON string ``"error"``;
* no health endpoint and no reset: deploy.py loads the model before it starts listening, so any
  HTTP answer (even 404) on ``health_path`` (default ``/``) means ready.

Variants and their defaults (``variant=openvla`` or ``variant=oft``):

============ ================================= ==========================================
             ``openvla`` (OpenVLA 7B)           ``oft`` (OpenVLA-OFT, port 8777)
============ ================================= ==========================================
images       ``image``: agentview 224x224,      ``full_image``: agentview 256x256 and
             rotated 180 deg, stretched         ``wrist_image``: wrist 256x256, rotated 180
                                                deg, sent unresized (the server resizes to
                                                224 with its training pipeline: JPEG round
                                                trip + Lanczos, exactly what OFT's LIBERO
                                                client does; set image_size=224 to resize
                                                in the evaluator instead)
state        none                              ``state``: (8,) eef_pos + axis-angle +
                                                gripper_qpos, float64
text         ``instruction``                   ``instruction``
answer       7 numbers                         8 x 7 chunk, all 8 executed
gripper      0 = close, 1 = open               same
             (``unit_open_is_one``), binarised
============ ================================= ==========================================

The gripper mapping equals OpenVLA's LIBERO script (``normalize_gripper_action(binarize=True)``
then ``invert_gripper_action``): LIBERO g = sign(1 - 2 g_policy), except that an output of
exactly 0.5 becomes -1 (open) here where ``np.sign`` gives 0. ``unnorm_key`` (the dataset
statistics to un-normalise with, e.g. ``libero_spatial`` or ``libero_spatial_no_noops``) is
added to the payload when set; OpenVLA-OFT reads it from its own config instead.

Not done here: OpenVLA's LIBERO checkpoints trained with image augmentation expect a 90 %
centre crop, which OpenVLA's in-process client applies but deploy.py does not; a server that
needs it must apply it.

When the server is a LIBERO-Pro2.0 SDK server (``GET /liberopro/metadata`` answers 200), its
advertised conventions are used, requests carry ``liberopro/episode_id`` and ``liberopro/step``,
and the answer must echo them.

Errors: HTTP 200 ``"error"`` and any non-200 status -> ``policy_http_error``; connection
refused or lost -> ``policy_connect_error``; no answer in time -> ``policy_timeout`` /
``policy_episode_timeout``, wall-clock: the whole answer must arrive in time, however slowly
its bytes trickle (the connection is dropped, so a late answer is never read); an answer over
``max_reply_bytes`` -> ``policy_bad_response``;
unreadable answer -> ``policy_bad_response``; wrong shape -> ``policy_bad_action_shape``;
NaN/inf -> ``policy_nonfinite_action``; wrong echo -> ``policy_step_mismatch``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal, Self

import httpx
import numpy as np
from pydantic import Field

from submission_spec.adapters import json_numpy
from submission_spec.adapters._common import (
    EPISODE_KEY,
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
from submission_spec.deadline import DEFAULT_MAX_REPLY_BYTES, DeadlineExceeded, HTTPSession, Reply, ReplyTooLarge
from submission_spec.models import LIBERO_STATE8, CameraSpec, ObservationMessage, PolicyMetadata
from submission_spec.polling import poll_until

#: Path of the LIBERO-Pro2.0 extension that advertises a policy's conventions.
METADATA_PATH = "/liberopro/metadata"

OPENVLA_DEFAULTS = PolicyMetadata(
    policy_name="openvla",
    cameras=[CameraSpec(name="agentview", height=224, width=224)],
    image_orientation="rotate_180",
    resize_mode="stretch",
    state_fields=[],
    gripper_convention="unit_open_is_one",
    binarize_gripper=True,
    chunk_length=1,
    replan_steps=1,
)

OFT_DEFAULTS = PolicyMetadata(
    policy_name="openvla-oft",
    cameras=[CameraSpec(name="agentview", height=256, width=256), CameraSpec(name="wrist", height=256, width=256)],
    image_orientation="rotate_180",
    resize_mode="stretch",
    state_fields=list(LIBERO_STATE8),
    gripper_convention="unit_open_is_one",
    binarize_gripper=True,
    chunk_length=8,
    replan_steps=8,
)

VARIANT_DEFAULTS = {"openvla": OPENVLA_DEFAULTS, "oft": OFT_DEFAULTS}
VARIANT_IMAGE_KEY = {"openvla": "image", "oft": "full_image"}


class OpenVLAOptions(ConventionOptions):
    """Options of :class:`OpenVLAClient` (all may be given as strings).

    Attributes:
        variant: ``openvla`` or ``oft`` (defaults above).
        connect_timeout: seconds to open the TCP connection (and for ``GET /liberopro/metadata``).
        request_timeout: wall-clock seconds for one ``/act``, from sending it to the last byte of
            the answer, however slowly the bytes arrive.
        max_reply_bytes: largest answer body read; a larger one is ``policy_bad_response``.
        unnorm_key: added to the payload when set.
        double_encode: send ``{"encoded": json-numpy text}``.
        image_key: key of the agentview image (default ``image`` / ``full_image`` by variant).
        wrist_image_key, state_key, instruction_key: other payload keys.
        act_path: the action endpoint; health_path: probed by ``health``.
    """

    variant: Literal["openvla", "oft"] = "openvla"
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, ge=1024)
    unnorm_key: str | None = None
    double_encode: bool = False
    image_key: str | None = None
    wrist_image_key: str = "wrist_image"
    state_key: str = "state"
    instruction_key: str = "instruction"
    act_path: str = "/act"
    health_path: str = "/"


def parse_answer(body: bytes) -> tuple[Any, dict[str, Any]]:
    """An ``/act`` answer body -> (actions as array-like, the rest of a map answer).

    Raises :class:`PolicyError`: ``policy_http_error`` for the ``"error"`` answer,
    ``policy_bad_response`` for anything unreadable.
    """
    if body.strip() in (b"error", b'"error"'):
        raise PolicyError(
            "policy_http_error",
            'OpenVLA server answered HTTP 200 "error" (its error signal; the traceback is in the server\'s log)',
        )
    try:
        obj = json_numpy.loads(body)
        if isinstance(obj, str):  # double-encoded answer
            if obj.strip() == "error":
                raise PolicyError("policy_http_error", 'OpenVLA server answered HTTP 200 "error" (double-encoded)')
            obj = json_numpy.loads(obj)
    except ValueError as exc:
        raise PolicyError(
            "policy_bad_response", f"/act answer is not JSON / json-numpy: {exc}; body {snippet(body, 200)!r}"
        ) from exc
    rest: dict[str, Any] = {}
    if isinstance(obj, dict):
        key = "actions" if "actions" in obj else "action" if "action" in obj else None
        if key is None:
            raise PolicyError(
                "policy_bad_response", f"/act answered a map without 'actions' or 'action': keys {sorted(obj)}"
            )
        rest = {k: v for k, v in obj.items() if k != key}
        obj = obj[key]
    if isinstance(obj, list):
        try:
            obj = (
                np.stack([np.asarray(a, dtype=np.float64) for a in obj])
                if obj and not np.isscalar(obj[0])
                else np.asarray(obj, dtype=np.float64)
            )
        except (ValueError, TypeError) as exc:
            raise PolicyError(
                "policy_bad_action_shape", f"/act answer is not a (7,) or (T, 7) number array: {exc}"
            ) from exc
    if not isinstance(obj, np.ndarray):
        raise PolicyError("policy_bad_response", f"/act answered a {type(obj).__name__}, not actions")
    return obj, rest


class OpenVLAClient:
    """One policy behind an OpenVLA-style REST server, with the methods of
    :class:`~submission_spec.client.PolicyClient`.

    Args:
        url: e.g. ``http://127.0.0.1:8777``.
        **options: see :class:`OpenVLAOptions`; ``ValueError`` for an unknown or invalid one.

    Keep-alive with TCP_NODELAY, one connection; dropped after a timeout or transport error.
    Every call is bounded by a wall-clock deadline (:mod:`submission_spec.deadline`).
    """

    def __init__(self, url: str, **options: Any) -> None:
        self.options: OpenVLAOptions = parse_options(OpenVLAOptions, options, "openvla")
        build_metadata(VARIANT_DEFAULTS[self.options.variant], None, self.options)  # ValueError if inconsistent
        self.base_url = url.rstrip("/")
        self.image_key = self.options.image_key or VARIANT_IMAGE_KEY[self.options.variant]
        self._http = HTTPSession(self.base_url, max_reply_bytes=self.options.max_reply_bytes)
        self._meta: PolicyMetadata | None = None
        self._echo = False

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, timeout: float) -> Reply:
        return self._http.request(
            "GET", path, timeout=timeout, connect_timeout=self.options.connect_timeout, max_bytes=HEALTH_REPLY_BYTES
        )

    def health(self, timeout: float = 2.0) -> bool:
        """True when the server answers HTTP at all (status < 500) on ``health_path`` within
        ``timeout`` wall-clock seconds."""
        try:
            return self._get(self.options.health_path, timeout).status_code < 500
        except (httpx.HTTPError, DeadlineExceeded, ReplyTooLarge):
            return False

    def wait_healthy(self, timeout: float, poll: float = 0.2) -> None:
        if poll_until(lambda left: self.health(timeout=min(2.0, max(0.1, left))), timeout, poll):
            return
        raise PolicyError(
            "policy_connect_error",
            f"{self.base_url}{self.options.health_path} did not answer HTTP within {timeout:.0f} s (is the server up?)",
        )

    def metadata(self) -> PolicyMetadata:
        """The variant's defaults, else what a LIBERO-Pro2.0 SDK server advertises on
        ``GET /liberopro/metadata``, overridden by explicit options."""
        if self._meta is not None:
            return self._meta
        advertised = None
        if self.options.use_server_metadata:
            try:
                resp = self._get(METADATA_PATH, self.options.connect_timeout)
            except DeadlineExceeded as exc:
                raise PolicyError(
                    "policy_timeout",
                    f"GET {self.base_url}{METADATA_PATH}: no complete answer within "
                    f"{self.options.connect_timeout:.1f} s",
                ) from exc
            except (httpx.HTTPError, ReplyTooLarge) as exc:
                raise PolicyError("policy_connect_error", f"{self.base_url}: {exc!r}") from exc
            if resp.status_code == 200:
                try:
                    advertised = json.loads(resp.content)
                except ValueError:
                    advertised = None
                self._echo = isinstance(advertised, dict)
        try:
            self._meta = build_metadata(VARIANT_DEFAULTS[self.options.variant], advertised, self.options)
        except ValueError as exc:
            raise PolicyError("policy_bad_response", f"{self.base_url}: {exc}") from exc
        return self._meta

    def reset(self, episode_id: str, instruction: str, deadline: float | None = None) -> None:
        """No wire message (the protocol has none): checks the budget only. The instruction
        travels with every request; a dropped connection is reopened by the next request."""
        time_left(self.options.request_timeout, deadline)

    def payload(self, observation: ObservationMessage) -> dict[str, Any]:
        """The ``/act`` payload for ``observation`` (before json-numpy encoding)."""
        meta = self.metadata()
        body: dict[str, Any] = {}
        for cam in meta.cameras:
            key = self.image_key if cam.name == "agentview" else self.options.wrist_image_key
            body[key] = np.ascontiguousarray(observation.images[cam.name].to_numpy())
        if meta.state_fields:
            body[self.options.state_key] = state_vector(observation.proprio, list(meta.state_fields))
        body[self.options.instruction_key] = observation.instruction
        if self.options.unnorm_key:
            body["unnorm_key"] = self.options.unnorm_key
        if self._echo:
            body[EPISODE_KEY] = observation.episode_id
            body[STEP_KEY] = observation.step
        return body

    def act(self, observation: ObservationMessage, chunk_length: int, deadline: float | None = None) -> ActResult:
        """``POST /act``; returns the validated chunk (T, 7) float64."""
        payload = self.payload(observation)
        text = json_numpy.dumps(payload)
        if self.options.double_encode:
            text = json.dumps({"encoded": text})
        timeout, clipped = time_left(self.options.request_timeout, deadline)
        where = f"POST {self.base_url}{self.options.act_path} step {observation.step}"
        t0 = time.perf_counter()
        try:
            resp = self._http.request(
                "POST",
                self.options.act_path,
                content=text.encode(),
                headers={"content-type": "application/json"},
                timeout=timeout,
                connect_timeout=self.options.connect_timeout,
            )
        except (DeadlineExceeded, httpx.TimeoutException) as exc:
            raise timeout_error(where, timeout, clipped) from exc
        except ReplyTooLarge as exc:
            raise PolicyError("policy_bad_response", f"{where}: {exc} (option max_reply_bytes)") from exc
        except httpx.DecodingError as exc:
            raise PolicyError("policy_bad_response", f"{where}: undecodable answer body: {exc}") from exc
        except httpx.HTTPError as exc:
            raise PolicyError("policy_connect_error", f"{where}: {exc!r}") from exc
        latency_ms = (time.perf_counter() - t0) * 1e3
        if resp.status_code != 200:
            raise PolicyError(
                "policy_http_error", f"{where} answered HTTP {resp.status_code}: {snippet(resp.content, 300)}"
            )
        actions, rest = parse_answer(resp.content)
        if self._echo and (rest.get(EPISODE_KEY) != observation.episode_id or rest.get(STEP_KEY) != observation.step):
            self._http.drop()
            raise PolicyError(
                "policy_step_mismatch",
                f"answer echoes episode {rest.get(EPISODE_KEY)!r} step "
                f"{rest.get(STEP_KEY)!r}, request was episode {observation.episode_id!r} step {observation.step}",
            )
        chunk = check_chunk(actions, chunk_length, "OpenVLA answer")
        timing = rest.get("server_timing")
        server_ms = finite_ms(timing.get("infer_ms")) if isinstance(timing, dict) else None
        return ActResult(actions=chunk, latency_ms=latency_ms, server_ms=server_ms)
