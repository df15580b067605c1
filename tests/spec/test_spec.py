"""Submission spec v1 without the simulator: models, both encodings, the SDK server, the client's
checks, the committed OpenAPI document and the conformance checker."""

from __future__ import annotations

import json

import msgpack
import numpy as np
import pytest
from pydantic import ValidationError
from submission_spec.codec import decode, encode
from submission_spec.conformance import check_policy, synthetic_observation
from submission_spec.models import ActResponse, CameraSpec, ObservationMessage
from submission_spec.openapi import OPENAPI_PATH, render

from submission_spec import NDArray, PolicyClient, PolicyError, PolicyMetadata, create_app
from submission_spec.examples import RandomPolicy, ZeroPolicy


def test_committed_openapi_matches_the_models():
    assert OPENAPI_PATH.read_text() == render(), (
        "submission_spec/openapi.json is stale: run `python -m submission_spec.openapi`"
    )
    doc = json.loads(OPENAPI_PATH.read_text())
    assert set(doc["paths"]) == {"/health", "/metadata", "/reset", "/act"}
    body = doc["paths"]["/act"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/msgpack"}


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("encoding", ["json", "msgpack"])
def test_arrays_round_trip_in_both_encodings(dtype, encoding):
    arr = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    msg = ActResponse(episode_id="e", step=3, actions=NDArray.from_numpy(arr))
    back = decode(encode(msg, encoding), ActResponse, encoding)
    assert back.actions.to_numpy().dtype == arr.dtype
    np.testing.assert_array_equal(back.actions.to_numpy(), arr)


def test_json_arrays_are_standard_base64_and_msgpack_raw_bytes():
    arr = np.array([[250, 251, 252]], dtype=np.uint8)
    msg = ActResponse(episode_id="e", step=0, actions=NDArray.from_numpy(arr))
    as_json = json.loads(encode(msg, "json"))
    assert as_json["actions"] == {"dtype": "uint8", "shape": [1, 3], "data": "+vv8"}
    as_msgpack = msgpack.unpackb(encode(msg, "msgpack"))
    assert as_msgpack["actions"]["data"] == bytes([250, 251, 252])


def test_array_size_mismatch_and_unknown_dtype_are_refused():
    with pytest.raises(ValidationError, match="need 12"):
        NDArray(dtype="float32", shape=[3], data=b"\x00" * 8)
    with pytest.raises(ValidationError):
        NDArray(dtype="object", shape=[1], data=b"\x00")
    with pytest.raises(TypeError, match="cannot travel"):
        NDArray.from_numpy(np.zeros(2, dtype=np.complex64))


def test_metadata_rejects_replan_beyond_chunk():
    with pytest.raises(ValidationError, match="replan_steps"):
        PolicyMetadata(policy_name="p", chunk_length=4, replan_steps=5)


def _obs(meta, step=0, episode="ep1"):
    return synthetic_observation(meta, episode, step, np.random.default_rng(0)).to_message()


@pytest.mark.parametrize("encoding", ["json", "msgpack"])
def test_sdk_server_and_client_round_trip(serve_app, encoding):
    policy = RandomPolicy()
    url = serve_app(create_app(policy))
    with PolicyClient(url, encoding=encoding) as client:
        client.wait_healthy(5)
        meta = client.metadata()
        assert meta == policy.metadata
        client.reset("ep1", "put the bowl on the plate")
        result = client.act(_obs(meta), meta.chunk_length)
        assert result.actions.shape == (8, 7) and result.actions.dtype == np.float64
        assert result.server_ms is not None and result.latency_ms > 0


def test_act_before_reset_is_refused_with_a_reason(serve_app):
    url = serve_app(create_app(ZeroPolicy()))
    with PolicyClient(url) as client, pytest.raises(PolicyError) as info:
        client.act(_obs(ZeroPolicy().metadata, episode="never-reset"), 1)
    assert info.value.reason == "policy_http_error" and "409" in info.value.detail


def test_a_failing_policy_is_reported_readably_under_msgpack(serve_app):
    """The SDK answers a policy exception with HTTP 500 in the request's encoding; the client
    shows that body decoded (not msgpack bytes as text), and a URL without scheme is refused."""
    meta = ZeroPolicy().metadata

    def broken(obs):
        raise ValueError("weights not loaded")

    url = serve_app(create_app(broken, meta))
    with PolicyClient(url, encoding="msgpack") as client, pytest.raises(PolicyError) as info:
        client.reset("ep1", "put the bowl on the plate")
        client.act(_obs(meta), meta.chunk_length)
    assert info.value.reason == "policy_http_error" and "500" in info.value.detail
    assert "weights not loaded" in info.value.detail and "\ufffd" not in info.value.detail
    with pytest.raises(ValueError, match="no scheme"):
        PolicyClient("127.0.0.1:8000")
    with PolicyClient("http://127.0.0.1:9") as client, pytest.raises(PolicyError) as info:
        client.wait_healthy(0.5)
    assert "connection refused" in info.value.detail and "--policy-cmd" in info.value.detail


def test_conformance_checker_passes_the_examples(serve_app):
    for policy in (ZeroPolicy(), RandomPolicy()):
        report = check_policy(serve_app(create_app(policy)), health_timeout=5)
        assert report.ok, report.lines()
        assert {c.name for c in report.checks} >= {"health", "metadata", "reset (json)", "act (msgpack, step 1)"}


def test_conformance_checker_names_what_is_wrong(serve_app):
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.get("/metadata")
    def metadata():
        return {"policy_name": "broken", "chunk_length": 1, "replan_steps": 1}

    @app.post("/reset")
    def reset():
        return {"ok": True}

    @app.post("/act")
    def act():
        return "error"

    report = check_policy(serve_app(app), health_timeout=5)
    assert not report.ok
    failed = [c for c in report.checks if not c.ok]
    assert failed and failed[0].name.startswith("act") and "policy_bad_response" in failed[0].detail
    assert "echoing episode_id and step" in failed[0].hint


def test_observation_carries_units_and_frames():
    meta = PolicyMetadata(policy_name="p", cameras=[CameraSpec(name="agentview", height=32, width=48)])
    msg: ObservationMessage = _obs(meta)
    assert msg.images["agentview"].shape == [32, 48, 3]
    assert msg.proprio["eef_pos"].unit == "m" and msg.proprio["eef_pos"].frame == "world"
    assert msg.proprio["eef_axis_angle"].unit == "rad"


def test_importing_the_package_loads_no_web_stack_until_serve_is_used():
    """The evaluator's client side imports ``submission_spec``: no FastAPI or uvicorn then; the
    server SDK loads on first use of ``serve``/``create_app``."""
    import subprocess
    import sys

    code = (
        "import sys, submission_spec; assert not {'fastapi', 'uvicorn'} & set(sys.modules), 'web stack'; "
        "from submission_spec import serve; assert 'fastapi' in sys.modules and callable(serve)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
