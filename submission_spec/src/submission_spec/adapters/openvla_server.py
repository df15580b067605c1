"""Serve a :class:`~submission_spec.policy.Policy` as an OpenVLA-style REST server
(``serve(policy, protocol="openvla")``), answering what OpenVLA's and OpenVLA-OFT's clients send
(see :mod:`submission_spec.adapters.openvla` for the wire).

* ``POST /act``: a JSON body with json-numpy arrays, or ``{"encoded": "<json-numpy text>"}``.
  The agentview image comes from ``image`` or ``full_image``, the wrist image from
  ``wrist_image``, the state from ``state`` (cut into the metadata's ``state_fields``), the
  instruction from ``instruction``. The answer is rendered like deploy.py renders numpy (a
  json-numpy object): a bare 7-vector when the policy returns one action, else OpenVLA-OFT's
  list of T 7-vectors; a double-encoded request gets a double-encoded answer. With the
  LIBERO-Pro2.0 keys ``liberopro/episode_id`` / ``liberopro/step`` in the request, the answer
  is a map ``{"actions": (T, 7), "liberopro/episode_id", "liberopro/step", "server_timing"}``.
* Any failure answers HTTP 200 with ``"error"``, as deploy.py does (the traceback goes to the log).
* ``GET /liberopro/metadata``: the policy's :class:`~submission_spec.models.PolicyMetadata`,
  so the evaluator's OpenVLA client evaluates with the policy's own conventions.
* ``GET /health``: ``{"status": "ok"}``.

Episodes: the protocol has none. ``reset`` is called before the first request, whenever
``liberopro/episode_id`` changes, and, without that key (a plain OpenVLA client), whenever the
instruction changes; ``step`` is then the count of requests since that reset.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from starlette.concurrency import run_in_threadpool
except ModuleNotFoundError as exc:  # installed without the server extra
    raise ModuleNotFoundError(
        f"the OpenVLA server adapter needs {exc.name}, which is not installed: "
        "pip install 'liberopro-submission-spec[server]'",
        name=exc.name,
    ) from exc

from submission_spec.adapters import json_numpy
from submission_spec.adapters._common import EPISODE_KEY, STEP_KEY, split_state
from submission_spec.adapters.openvla import METADATA_PATH
from submission_spec.models import PolicyMetadata
from submission_spec.policy import Observation, Policy, as_action_chunk, as_policy

log = logging.getLogger("submission_spec.openvla_server")


def _images(meta: PolicyMetadata, payload: dict[str, Any]) -> dict[str, np.ndarray]:
    """The metadata's cameras from ``payload``: agentview from ``full_image`` or ``image``, the wrist
    from ``wrist_image``; each an (H, W, 3) uint8 array (ValueError otherwise)."""
    images: dict[str, np.ndarray] = {}
    for cam in meta.cameras:
        keys = ("full_image", "image") if cam.name == "agentview" else ("wrist_image",)
        img = next((payload[k] for k in keys if k in payload), None)
        if not isinstance(img, np.ndarray) or img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
            raise ValueError(f"payload key {'/'.join(keys)} ({cam.name}) must be an (H, W, 3) uint8 image")
        images[cam.name] = img
    return images


class _Session:
    """The one episode an OpenVLA-style server knows: its id, instruction, the requests since its
    reset and whether the policy was reset for it (module docstring, "Episodes"). Every call into
    the policy holds ``lock``."""

    def __init__(self, pol: Policy) -> None:
        self.pol = pol
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {"episode_id": None, "instruction": None, "requests": 0, "reset": False}

    def observation(self, payload: dict[str, Any]) -> tuple[Observation, bool]:
        """Map a payload to an Observation, deciding the episode (call under ``lock``); the flag:
        the payload carries the LIBERO-Pro2.0 episode key (the answer echoes it)."""
        meta, state = self.pol.metadata, self.state
        images = _images(meta, payload)
        proprio = split_state(np.asarray(payload["state"]), list(meta.state_fields)) if meta.state_fields else {}
        instruction = payload.get("instruction")
        if not isinstance(instruction, str):
            raise TypeError("payload key 'instruction' must be a string")
        echo = EPISODE_KEY in payload
        if echo:
            if payload[EPISODE_KEY] != state["episode_id"]:
                state.update(episode_id=payload[EPISODE_KEY], requests=0, reset=False)
        elif instruction != state["instruction"] or state["episode_id"] is None:
            state.update(episode_id=uuid.uuid4().hex, requests=0, reset=False)
        episode_id, step = state["episode_id"], payload.get(STEP_KEY, state["requests"])
        if not isinstance(episode_id, str) or not isinstance(step, int):
            raise TypeError(f"{EPISODE_KEY} must be a string and {STEP_KEY} an int")
        return Observation(
            episode_id=episode_id, step=step, instruction=instruction, images=images, proprio=proprio
        ), echo

    def handle(self, payload: dict[str, Any]) -> tuple[Observation, bool, np.ndarray, float]:
        """The observation, the echo flag, the policy's action chunk and its inference time (ms)."""
        with self.lock:
            obs, echo = self.observation(payload)
            if not self.state["reset"]:
                self.pol.reset(obs.episode_id, obs.instruction)
                self.state["reset"] = True
            self.state["instruction"] = obs.instruction
            t0 = time.perf_counter()
            chunk = as_action_chunk(self.pol.act(obs))
            self.state["requests"] += 1
            return obs, echo, chunk, (time.perf_counter() - t0) * 1e3


def _answer(obs: Observation, echo: bool, chunk: np.ndarray, infer_ms: float) -> Any:
    """What ``/act`` answers (before json-numpy): the echoing map, a bare 7-vector or T 7-vectors."""
    if echo:
        return {
            "actions": chunk,
            EPISODE_KEY: obs.episode_id,
            STEP_KEY: obs.step,
            "server_timing": {"infer_ms": round(infer_ms, 3)},
        }
    return chunk[0] if len(chunk) == 1 else list(chunk)


def create_openvla_app(
    policy: Policy | Callable[[Observation], np.ndarray], metadata: PolicyMetadata | None = None
) -> FastAPI:
    """The FastAPI app (serve it with uvicorn)."""
    pol = as_policy(policy, metadata)
    session = _Session(pol)
    app = FastAPI(title="OpenVLA-style policy server (LIBERO-Pro2.0 SDK)")

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get(METADATA_PATH)
    def get_metadata() -> PolicyMetadata:
        return pol.metadata

    @app.post("/act")
    async def act(request: Request) -> Response:
        try:
            payload = json_numpy.loads(await request.body())
            double = isinstance(payload, dict) and set(payload) == {"encoded"}
            if double:
                payload = json_numpy.loads(payload["encoded"])
            if not isinstance(payload, dict):
                raise TypeError("payload must be a JSON object")
            obs, echo, chunk, infer_ms = await run_in_threadpool(session.handle, payload)
            text = json_numpy.dumps(_answer(obs, echo, chunk, infer_ms))
            if double:
                text = json.dumps(text)
            return Response(text, media_type="application/json")
        except Exception:
            log.exception("openvla /act failed")
            return JSONResponse("error")

    return app
