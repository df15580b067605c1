"""Submission spec v1 without the simulator: models, both encodings, the SDK server, the client's
checks, the committed OpenAPI document and the conformance checker."""

from __future__ import annotations

import json
import time

import msgpack
import numpy as np
import pytest
from pydantic import ValidationError
from submission_spec.codec import decode, encode
from submission_spec.conformance import check_policy, synthetic_observation
from submission_spec.models import ActResponse, CameraSpec, ObservationMessage, ResetRequest
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
    # What to check, for any caller (a platform's container as a local server): the evaluator's own
    # command line adds its --policy-cmd advice where it reports this (liberopro.cli).
    assert "connection refused" in info.value.detail and "is the policy server started" in info.value.detail


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


def test_a_server_that_never_answers_health_gets_a_fix_for_any_server():
    """The health check's detail and fix hold for a container on a platform as for a local server:
    no advice about the evaluator's command line (``--policy-cmd``), which a submitter cannot use."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused
        report = check_policy(f"http://127.0.0.1:{port}", health_timeout=0.5, request_timeout=0.5)
    (health,) = report.checks
    assert not health.ok and "/health did not answer 200" in health.detail
    assert "--policy-cmd" not in health.detail + health.hint and "$PORT" in health.hint


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


# --------------------------------------------------------------------------- spec 1.1: concurrent episodes
class _EchoBatchPolicy:
    """Answers each episode with its own number (the action's first entry) and records the
    batches it was given: (B, H, W, 3) images and (B, 8) states."""

    def __init__(self, concurrent: int) -> None:
        self.metadata = PolicyMetadata(
            policy_name="echo",
            cameras=[CameraSpec(name="agentview", height=32, width=32)],
            chunk_length=2,
            replan_steps=2,
            max_concurrent_episodes=concurrent,
        )
        self.numbers: dict[str, int] = {}
        self.batches: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def reset(self, episode_id: str, instruction: str) -> None:
        self.numbers[episode_id] = len(self.numbers)

    def act(self, obs):
        return np.full((2, 7), float(self.numbers[obs.episode_id]))

    def act_batch(self, batch):
        self.batches.append((batch.images("agentview").shape, batch.state().shape))
        return np.stack([np.full((2, 7), float(self.numbers[e])) for e in batch.episode_ids])


def test_metadata_declares_concurrency_only_in_spec_1_1():
    assert PolicyMetadata(policy_name="p").concurrent_episodes == 1
    assert PolicyMetadata(policy_name="p", max_concurrent_episodes=4).spec_version == "1.1"
    with pytest.raises(ValidationError, match="spec 1.1 field: declare spec_version '1.1'"):
        PolicyMetadata(policy_name="p", spec_version="1.0", max_concurrent_episodes=2)
    # a spec-1.0 policy's metadata (no such field) is read as before: one episode at a time
    old = PolicyMetadata.model_validate({"spec_version": "1.0", "policy_name": "old"})
    assert old.concurrent_episodes == 1 and old.max_concurrent_episodes is None


def test_a_one_episode_server_refuses_the_episode_a_later_reset_replaced(serve_app):
    meta = ZeroPolicy().metadata.model_copy(update={"max_concurrent_episodes": None})  # as a spec-1.0 policy
    url = serve_app(create_app(lambda obs: np.zeros((1, 7)), meta))
    with PolicyClient(url) as client:
        client.reset("first", "put the bowl on the plate")
        client.reset("second", "put the bowl on the plate")
        assert client.act(_obs(meta, episode="second"), 1).actions.shape == (1, 7)
        with pytest.raises(PolicyError) as info:
            client.act(_obs(meta, episode="first"), 1)
    assert "409" in info.value.detail and "a /reset of episode 'second' replaced it" in info.value.detail
    assert "serves 1 episode(s) at a time" in info.value.detail


def test_concurrent_episodes_are_batched_into_one_call_and_each_gets_its_own_chunk():
    """Three episodes' /act calls arriving together become one act_batch call of three stacked
    observations (waiting up to 2 s for them); each answer is its own episode's."""
    import asyncio

    import httpx

    from submission_spec import BatchConfig

    policy = _EchoBatchPolicy(concurrent=3)
    app = create_app(policy, batch=BatchConfig(max_batch_size=3, max_wait_ms=2000))

    async def run() -> list[float]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://policy") as http:
            for e in ("a", "b", "c"):
                r = await http.post(
                    "/reset",
                    content=encode(ResetRequest(episode_id=e, instruction="x"), "json"),
                    headers={"content-type": "application/json"},
                )
                assert r.status_code == 200, r.text

            async def act(e: str) -> float:
                body = encode(_obs(policy.metadata, episode=e), "json")
                r = await http.post("/act", content=body, headers={"content-type": "application/json"})
                assert r.status_code == 200, r.text
                return float(decode(r.content, ActResponse, "json").actions.to_numpy()[0, 0])

            return await asyncio.gather(*(act(e) for e in ("a", "b", "c")))

    assert asyncio.run(run()) == [0.0, 1.0, 2.0]
    assert policy.batches == [((3, 32, 32, 3), (3, 8))] and app.state.batcher.batch_sizes == [3]


def test_conformance_checks_the_declared_concurrency(serve_app):
    from submission_spec import BatchConfig

    good = _EchoBatchPolicy(concurrent=2)
    report = check_policy(serve_app(create_app(good, batch=BatchConfig(2, 50))), health_timeout=5)
    assert report.ok, report.lines()
    assert "concurrency (2 episodes at once)" in {c.name for c in report.checks}
    # A server that declares 2 episodes but keeps only one active (its metadata says more than it does)
    liar = _EchoBatchPolicy(concurrent=1)
    app = create_app(liar)
    liar.metadata = _EchoBatchPolicy(concurrent=2).metadata
    report = check_policy(serve_app(app), health_timeout=5)
    (failed,) = [c for c in report.checks if not c.ok]
    assert failed.name == "concurrency (2 episodes at once)" and "409" in failed.detail
    assert "declares max_concurrent_episodes=2" in failed.hint


def test_a_dead_address_fails_in_seconds_and_a_listening_one_passes(serve_app):
    """fail_fast_if_refused: refused for its grace -> policy_connect_error naming the address;
    a port that accepts returns at once (before any health check)."""
    from submission_spec.client import fail_fast_if_refused

    t0 = time.monotonic()
    with pytest.raises(PolicyError) as info:
        fail_fast_if_refused("http://127.0.0.1:9", grace=1.0)
    assert time.monotonic() - t0 < 10
    assert info.value.reason == "policy_connect_error" and "nothing listens at 127.0.0.1:9" in info.value.detail
    fail_fast_if_refused(serve_app(create_app(ZeroPolicy())), grace=1.0)
    with pytest.raises(ValueError, match="names no host"):
        fail_fast_if_refused("http:///health")
