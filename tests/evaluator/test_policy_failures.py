"""A broken policy ends only its own episode, with a named reason, and the next episode runs.

The misbehaving server is a real HTTP server (FastAPI) built for the test, misbehaving in a
different way at each episode: NaN actions, a wrong shape, HTTP 500, HTTP 200 with the body
"error", an answer after the timeout, a step echo from the past; then it behaves.
"""

from __future__ import annotations

import asyncio

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from liberopro.instances import EpisodePlan, Instance
from liberopro.runner import EpisodeRunner, RunSettings
from submission_spec.codec import decode, encode, encoding_of
from submission_spec.models import ActResponse, ObservationMessage

from submission_spec import NDArray, PolicyClient

from .policies import metadata

BEHAVIOURS = ["nan", "shape", "http500", "error200", "slow", "stale_step", "ok"]
EXPECTED = ["policy_nonfinite_action", "policy_bad_action_shape", "policy_http_error", "policy_bad_response",
            "policy_timeout", "policy_step_mismatch", "horizon"]


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
        elif behaviour == "stale_step" and obs.step >= 1:
            step = obs.step - 1
        body = ActResponse(episode_id=obs.episode_id, step=step, actions=NDArray.from_numpy(actions))
        return Response(encode(body, enc), media_type=request.headers.get("content-type"))

    return app, meta


def test_each_failure_ends_its_own_episode_with_a_named_reason(serve_app, scenes):
    app, meta = misbehaving_app()
    url = serve_app(app)
    inst = Instance(instance_id="test-nominal", suite="libero_goal", task_index=8)
    with PolicyClient(url, request_timeout=1.0) as client:
        runner = EpisodeRunner(client, meta, RunSettings(render_size=64, max_steps=3), scenes=scenes)
        records = [runner.run_episode(EpisodePlan(inst, e, e, e)) for e in range(len(BEHAVIOURS))]
    assert [r.termination_reason for r in records] == EXPECTED
    assert all(r.valid and not r.success for r in records)
    assert "HTTP 500" in records[2].detail and "model crashed" in records[2].detail
    assert "'\"error\"'" in records[3].detail  # the body is quoted back to the submitter
    assert records[-1].steps == 3  # the episode after all the failures ran to its horizon
    assert records[5].steps == 1  # step 0 answered correctly, step 1 echoed step 0
