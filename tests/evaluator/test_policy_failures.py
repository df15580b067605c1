"""A broken policy ends only its own episode, with a named reason, and the next episode runs.

The misbehaving server is a real HTTP server (FastAPI) built for the test, misbehaving in a
different way at each episode: NaN actions, a wrong shape, HTTP 500, HTTP 200 with the body
"error", an answer after the timeout, an answer trickled byte by byte (each byte inside any
per-read timeout, the whole past the request timeout), a first answer that uses up most of the
episode's policy budget and a second one trickled past what is left of it, a step echo from
the past; then it behaves.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from liberopro.episode.runner import EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance
from submission_spec.codec import decode, encode, encoding_of
from submission_spec.models import ActResponse, ObservationMessage

from submission_spec import NDArray, PolicyClient

from .policies import metadata

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

BEHAVIOURS = ["nan", "shape", "http500", "error200", "slow", "drip", "budget", "stale_step", "ok"]
EXPECTED = [
    "policy_nonfinite_action",
    "policy_bad_action_shape",
    "policy_http_error",
    "policy_bad_response",
    "policy_timeout",
    "policy_timeout",
    "policy_episode_timeout",
    "policy_step_mismatch",
    "horizon",
]
REQUEST_TIMEOUT_S = 1.0
BUDGET_S = 1.6  # episode policy budget: "budget" spends 0.8 s on its first answer, 0.8 s are left


async def trickle(body: bytes, interval: float = 0.25):
    """``body`` one byte per ``interval`` seconds (an answer of ~100 bytes takes ~30 s)."""
    for i in range(len(body)):
        yield body[i : i + 1]
        await asyncio.sleep(interval)


def misbehaving_app():
    app = FastAPI()
    meta = metadata("misbehaving")
    state = {"episode": -1}

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.get("/metadata")
    def get_metadata():
        return meta.model_dump(mode="json")

    @app.post("/reset")
    async def reset(request: Request):
        state["episode"] += 1
        return {"ok": True}

    @app.post("/act")
    async def act(request: Request):
        enc = encoding_of(request.headers.get("content-type"))
        obs = decode(await request.body(), ObservationMessage, enc)
        behaviour = BEHAVIOURS[state["episode"]]
        actions = np.zeros((1, 7))
        step = obs.step
        if behaviour == "nan":
            actions[0, 2] = np.nan
        elif behaviour == "shape":
            actions = np.zeros((1, 6))
        elif behaviour == "http500":
            return JSONResponse({"error": "model crashed"}, status_code=500)
        elif behaviour == "error200":
            return JSONResponse("error")
        elif behaviour == "slow":
            await asyncio.sleep(3.0)
        elif behaviour == "budget" and obs.step == 0:
            await asyncio.sleep(0.8)
        elif behaviour == "stale_step" and obs.step >= 1:
            step = obs.step - 1
        body = encode(ActResponse(episode_id=obs.episode_id, step=step, actions=NDArray.from_numpy(actions)), enc)
        if behaviour == "drip" or (behaviour == "budget" and obs.step == 1):
            return StreamingResponse(trickle(body), media_type=request.headers.get("content-type"))
        return Response(body, media_type=request.headers.get("content-type"))

    return app, meta


def test_each_failure_ends_its_own_episode_with_a_named_reason(serve_app, scenes):
    app, meta = misbehaving_app()
    url = serve_app(app)
    inst = Instance(instance_id="test-nominal", suite="libero_goal", task_index=8)
    with PolicyClient(url, request_timeout=REQUEST_TIMEOUT_S) as client:
        runner = EpisodeRunner(
            client, meta, RunSettings(render_size=64, max_steps=3, episode_policy_budget_s=BUDGET_S), scenes=scenes
        )
        records = [runner.run_episode(EpisodePlan(inst, e, e, e)) for e in range(len(BEHAVIOURS))]
    assert [r.termination_reason for r in records] == EXPECTED
    assert all(r.valid and not r.success for r in records)
    assert "HTTP 500" in records[2].detail and "model crashed" in records[2].detail
    assert "'\"error\"'" in records[3].detail  # the body is quoted back to the submitter
    assert records[-1].steps == 3  # the episode after all the failures ran to its horizon
    assert records[7].steps == 1  # step 0 answered correctly, step 1 echoed step 0
    drip, budget = records[5], records[6]
    # the trickled answer was cut at the request timeout (wall clock), not after its last byte
    # (wall_s also holds the scene's reset and settling, a few seconds at most)
    assert drip.steps == 0 and "no complete answer within 1.0 s" in drip.detail
    assert drip.wall_s < 10, drip.wall_s
    # the second answer was cut at what the first left of the budget, not at the request timeout
    assert budget.steps == 1 and "budget ran out" in budget.detail
    assert budget.latency.requests == 1 and budget.latency.max_ms >= 800 and budget.wall_s < 10
