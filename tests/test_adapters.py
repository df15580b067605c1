"""Protocol adapters without the simulator, each against a real peer where one exists.

* openpi: ``openpi_client.websocket_client_policy.WebsocketClientPolicy`` (PyPI) drives our
  openpi-protocol server; our openpi client talks to a server built to openpi's published
  behaviour with openpi's own codec (``tests/test_adapters_peers.py``).
* OpenVLA: our client talks to a deploy.py-shaped server that runs the real ``json_numpy.patch()``
  in its own process; our OpenVLA-protocol server is driven with the real ``json_numpy`` codec.
* Both codecs are checked byte-for-byte against the libraries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import json_numpy
import numpy as np
import pytest
from openpi_client import msgpack_numpy as openpi_msgpack
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from submission_spec.adapters import json_numpy as our_json_numpy
from submission_spec.adapters import msgpack_numpy as our_msgpack
from submission_spec.adapters.openpi import OpenPIClient
from submission_spec.adapters.openpi_server import OpenPIPolicyServer
from submission_spec.adapters.openvla import OpenVLAClient
from submission_spec.adapters.openvla_server import create_openvla_app
from submission_spec.conformance import synthetic_observation
from submission_spec.models import CameraSpec
from submission_spec.transports import (
    PROTOCOL_LABEL,
    PROTOCOLS,
    make_client,
    parse_protocol_options,
    protocol_from_labels,
    protocol_options_from_labels,
)

from submission_spec import PolicyError, PolicyMetadata
from submission_spec.examples import RandomPolicy
from tests.test_adapters_peers import OBS_LOG, OpenPIReferenceServer

PEERS = Path(__file__).with_name("test_adapters_peers.py")
DTYPES = ["uint8", "int32", "int64", "float32", "float64", "bool"]


pytestmark = pytest.mark.filterwarnings(
    "ignore:connect\\(\\) must be used as a context manager:DeprecationWarning"
)  # inside openpi-client


class Recorder:
    """A policy that records its resets and observations and answers with ``fn(obs)``."""

    def __init__(self, meta: PolicyMetadata, fn) -> None:
        self.metadata, self.fn = meta, fn
        self.resets: list[tuple[str, str]] = []
        self.observations: list = []

    def reset(self, episode_id: str, instruction: str) -> None:
        self.resets.append((episode_id, instruction))

    def act(self, observation):
        self.observations.append(observation)
        return self.fn(observation)


def _obs(meta: PolicyMetadata, step: int = 0, episode: str = "ep1", seed: int = 0):
    return synthetic_observation(meta, episode, step, np.random.default_rng(seed)).to_message()


def _free_port() -> int:
    from liberopro.episode.policy_process import free_port

    return free_port()


# ---------------------------------------------------------------------- codecs vs the libraries


@pytest.mark.parametrize("dtype", DTYPES)
def test_msgpack_numpy_matches_openpi_codec_both_ways(dtype):
    arr = (np.arange(60).reshape(3, 4, 5) % 7).astype(dtype)
    msg = {"observation/image": arr, "prompt": "pick", "n": 3, "nested": {"x": arr[0], "s": np.float32(1.5)}}
    ours = our_msgpack.packb(msg)
    assert ours == openpi_msgpack.packb(msg), "our bytes differ from openpi's for the same message"
    back = openpi_msgpack.unpackb(ours)
    np.testing.assert_array_equal(back["observation/image"], arr)
    assert back["observation/image"].dtype == arr.dtype and back["nested"]["s"] == np.float32(1.5)
    again = our_msgpack.unpackb(openpi_msgpack.packb(msg))
    np.testing.assert_array_equal(again["nested"]["x"], arr[0])
    assert again["nested"]["x"].dtype == arr.dtype and again["prompt"] == "pick"
    assert isinstance(again["nested"]["s"], np.float32)


def test_msgpack_numpy_refuses_what_could_run_code_or_lie_about_size():
    with pytest.raises(TypeError):
        our_msgpack.packb({"a": np.array([1 + 2j])})
    with pytest.raises(TypeError):
        our_msgpack.packb({"a": np.array([object()], dtype=object)})
    good = {b"__ndarray__": True, b"data": b"\x00" * 8, b"dtype": "<f4", b"shape": [2]}
    import msgpack

    for bad, why in [
        ({**good, b"dtype": "|O"}, "refused"),
        ({**good, b"dtype": "<c8", b"data": b"\x00" * 16}, "refused"),
        ({**good, b"dtype": "(2,)<f4"}, "refused"),
        ({**good, b"shape": [3]}, "need 12"),
        ({**good, b"shape": [-2]}, "non-negative"),
        ({**good, b"shape": [1 << 20, 1 << 20]}, "exceeds"),
        ({**good, b"dtype": "V8"}, "refused"),
        ({**good, b"dtype": "<U2"}, "refused"),
    ]:
        with pytest.raises(ValueError, match=why):
            our_msgpack.unpackb(msgpack.packb({"x": bad}, use_bin_type=True))
    with pytest.raises(ValueError, match="msgpack"):
        our_msgpack.unpackb(b"\xc1garbage")


@pytest.mark.parametrize("dtype", DTYPES)
def test_json_numpy_matches_the_library_both_ways(dtype):
    arr = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    payload = {"image": arr, "instruction": "open the drawer", "strided": arr[:, ::2], "scalar": np.float64(2.5)}
    ours = our_json_numpy.dumps(payload)
    assert json.loads(ours) == json.loads(json_numpy.dumps(payload)), "our text differs from json-numpy's"
    back = json_numpy.loads(ours)
    np.testing.assert_array_equal(back["image"], arr)
    np.testing.assert_array_equal(back["strided"], arr[:, ::2])
    assert back["image"].dtype == arr.dtype and back["scalar"] == 2.5
    again = our_json_numpy.loads(json_numpy.dumps(payload))
    np.testing.assert_array_equal(again["strided"], arr[:, ::2])
    assert again["image"].dtype == arr.dtype and again["scalar"] == 2.5 and again["instruction"] == "open the drawer"


def test_json_numpy_refuses_bad_objects():
    good = {"__numpy__": "AAAAAAAAAAA=", "dtype": "<f4", "shape": [2]}
    for bad, why in [
        ({**good, "dtype": "|O"}, "refused"),
        ({**good, "shape": [3]}, "need 12"),
        ({**good, "__numpy__": "!!"}, "base64"),
        ({**good, "dtype": [["a", "<f4"]]}, "descriptor"),
        ({**good, "shape": [1 << 20, 1 << 20]}, "exceeds"),
    ]:
        with pytest.raises(ValueError, match=why):
            our_json_numpy.loads(json.dumps(bad))
    with pytest.raises(TypeError):
        our_json_numpy.dumps(np.array([1j]))


# ---------------------------------------------------------------------- openpi: our server, real client


@pytest.fixture
def recorder():
    meta = PolicyMetadata(
        policy_name="recorder",
        cameras=[CameraSpec(name="agentview", height=32, width=32), CameraSpec(name="wrist", height=32, width=32)],
        chunk_length=4,
        replan_steps=2,
    )
    return Recorder(meta, fn=lambda obs: np.tile([0.1, 0, 0, 0, 0, 0, -1.0], (4, 1)))


def test_openpi_client_from_pypi_drives_our_openpi_server(recorder):
    with OpenPIPolicyServer(recorder, port=0) as server:
        assert httpx.get(f"http://127.0.0.1:{server.port}/healthz").status_code == 200
        client = WebsocketClientPolicy("127.0.0.1", server.port)
        meta = client.get_server_metadata()
        assert PolicyMetadata.model_validate(meta["liberopro/metadata"]) == recorder.metadata
        img = np.full((32, 32, 3), 7, np.uint8)
        state = np.arange(8, dtype=np.float64)
        obs = {
            "observation/image": img,
            "observation/wrist_image": img,
            "observation/state": state,
            "prompt": "put the bowl on the plate",
        }
        out = client.infer(obs)
        assert out["actions"].shape == (4, 7) and out["actions"].dtype == np.float32
        assert out["server_timing"]["infer_ms"] >= 0
        client.infer(obs)
        seen = recorder.observations[-1]
        np.testing.assert_array_equal(seen.images["agentview"], img)
        np.testing.assert_array_equal(seen.state(), state)
        assert seen.proprio["gripper_qpos"].tolist() == [6.0, 7.0] and seen.step == 1
        assert seen.instruction == "put the bowl on the plate"
        assert len(recorder.resets) == 1 and recorder.resets[0][1] == "put the bowl on the plate"
        # a new connection is a new episode
        client2 = WebsocketClientPolicy("127.0.0.1", server.port)
        client2.infer(obs)
        assert len(recorder.resets) == 2 and recorder.resets[1][0] != recorder.resets[0][0]
        assert recorder.observations[-1].step == 0
        # a bad request: the text frame with the traceback, then close 1011
        with pytest.raises(RuntimeError, match="must be an \\(H, W, 3\\) uint8 image"):
            client2.infer({**obs, "observation/image": img[..., 0]})
        from websockets.exceptions import ConnectionClosed

        with pytest.raises(ConnectionClosed) as closed:
            client2._ws.recv(timeout=2)
        assert closed.value.rcvd.code == 1011


def test_openpi_server_keeps_healthz_responsive_while_the_model_thinks():
    meta = PolicyMetadata(
        policy_name="slow", cameras=[CameraSpec(name="agentview", height=16, width=16)], state_fields=[]
    )
    slow = Recorder(meta, fn=lambda obs: (time.sleep(4.0), np.zeros((1, 7)))[1])
    with OpenPIPolicyServer(slow, port=0) as server:
        client = WebsocketClientPolicy("127.0.0.1", server.port)
        import threading

        t = threading.Thread(
            target=client.infer, args=({"observation/image": np.zeros((16, 16, 3), np.uint8), "prompt": "x"},)
        )
        t.start()
        time.sleep(0.5)
        with httpx.Client() as http:
            assert http.get(f"http://127.0.0.1:{server.port}/healthz", timeout=3.0).status_code == 200
        assert t.is_alive(), "/healthz waited for the inference to finish"
        t.join()


# ---------------------------------------------------------------------- openpi: our client, reference peer


@pytest.fixture
def openpi_peer():
    OBS_LOG.clear()
    with OpenPIReferenceServer() as peer:
        yield peer


def test_openpi_client_uses_libero_defaults_and_sends_what_openpi_expects(openpi_peer):
    with make_client(openpi_peer.url.replace("ws://", "http://"), "openpi", api_key="k3y") as client:
        client.wait_healthy(5)
        meta = client.metadata()
        assert [(c.name, c.height, c.width) for c in meta.cameras] == [("agentview", 224, 224), ("wrist", 224, 224)]
        assert meta.image_orientation == "rotate_180" and meta.resize_mode == "resize_with_pad"
        assert meta.state_fields == ["eef_pos", "eef_axis_angle", "gripper_qpos"]
        assert (meta.gripper_convention, meta.binarize_gripper, meta.chunk_length, meta.replan_steps) == (
            "libero",
            False,
            50,
            5,
        )
        client.reset("ep1", "pick up the bowl")
        result = client.act(_obs(meta), meta.chunk_length)
    assert result.actions.shape == (10, 7) and result.actions.dtype == np.float64
    assert result.server_ms is not None and result.latency_ms > 0
    assert OBS_LOG[-1]["observation/image"] == ((224, 224, 3), "|u1")
    assert OBS_LOG[-1]["observation/state"] == ((8,), "<f8")
    assert set(OBS_LOG[-1]) == {"observation/image", "observation/wrist_image", "observation/state", "prompt"}
    assert openpi_peer.headers[-1]["authorization"] == "Api-Key k3y"


def test_openpi_error_frame_is_a_named_failure_and_the_next_episode_reconnects(openpi_peer):
    with OpenPIClient(openpi_peer.url) as client:
        meta = client.metadata()
        client.reset("ep1", "x")
        bad = _obs(meta).model_copy(update={"instruction": "please fail"})
        with pytest.raises(PolicyError) as err:
            client.act(bad, meta.chunk_length)
        assert err.value.reason == "policy_http_error"
        assert "close code 1011" in err.value.detail and "scripted failure" in err.value.detail
        with pytest.raises(PolicyError) as err2:  # the rest of this episode: no connection
            client.act(_obs(meta, 1), meta.chunk_length)
        assert err2.value.reason == "policy_connect_error"
        client.reset("ep2", "x")
        assert client.act(_obs(meta, 0, "ep2"), meta.chunk_length).actions.shape == (10, 7)
    assert openpi_peer.connections == 2


def test_openpi_timeout_closes_the_connection_so_a_late_answer_is_never_read(openpi_peer):
    with OpenPIClient(openpi_peer.url, request_timeout="0.5") as client:
        meta = client.metadata()
        client.reset("ep1", "x")
        slow = _obs(meta).model_copy(update={"instruction": "please sleep"})
        with pytest.raises(PolicyError) as err:
            client.act(slow, meta.chunk_length)
        assert err.value.reason == "policy_timeout"
        client.reset("ep2", "x")
        fresh = _obs(meta, 0, "ep2", seed=5)
        want = fresh.proprio["eef_pos"].value[0]
        result = client.act(fresh, meta.chunk_length)  # the peer is still busy with the slow one
        assert result.actions[0, 0] == pytest.approx(want), "an answer to another request was read"


@pytest.mark.parametrize(
    "prompt,reason", [("please nan", "policy_nonfinite_action"), ("please shape", "policy_bad_action_shape")]
)
def test_openpi_bad_answers_are_named(openpi_peer, prompt, reason):
    with OpenPIClient(openpi_peer.url) as client:
        meta = client.metadata()
        client.reset("ep1", "x")
        with pytest.raises(PolicyError) as err:
            client.act(_obs(meta).model_copy(update={"instruction": prompt}), meta.chunk_length)
        assert err.value.reason == reason


def test_openpi_chunk_longer_than_declared_and_missing_actions():
    with OpenPIReferenceServer(infer=lambda obs: {"action": np.zeros((10, 7))}) as peer:
        client = OpenPIClient(peer.url, cameras="agentview", state_fields="")
        meta = client.metadata()
        assert [c.name for c in meta.cameras] == ["agentview"] and meta.state_fields == []
        client.reset("e", "x")
        with pytest.raises(PolicyError, match="no 'actions'") as err:
            client.act(_obs(meta), meta.chunk_length)
        assert err.value.reason == "policy_bad_response"
        client.close()
    with OpenPIReferenceServer(infer=lambda obs: {"actions": np.zeros((50, 7))}) as peer:
        client = OpenPIClient(peer.url, chunk_length="10", state_fields="")
        meta = client.metadata()
        assert (meta.chunk_length, meta.replan_steps) == (10, 5)
        client.reset("e", "x")
        with pytest.raises(PolicyError, match="chunk_length") as err:
            client.act(_obs(meta), meta.chunk_length)
        assert err.value.reason == "policy_bad_action_shape"
        client.close()


def test_openpi_lost_server_is_a_connect_error_and_reconnects_when_back():
    port = _free_port()
    peer = OpenPIReferenceServer(port=port).__enter__()
    client = OpenPIClient(f"ws://127.0.0.1:{port}", connect_timeout=2)
    meta = client.metadata()
    client.reset("e1", "x")
    assert client.act(_obs(meta), meta.chunk_length).actions.shape == (10, 7)
    peer.__exit__()
    with pytest.raises(PolicyError) as err:
        client.act(_obs(meta, 5), meta.chunk_length)
    assert err.value.reason == "policy_connect_error"
    with pytest.raises(PolicyError) as err:
        client.reset("e2", "x")
    assert err.value.reason == "policy_connect_error"
    assert not client.health(0.5)
    with OpenPIReferenceServer(port=port):
        client.reset("e3", "x")
        assert client.act(_obs(meta, 0, "e3"), meta.chunk_length).actions.shape == (10, 7)
    client.close()


def test_openpi_server_without_healthz_is_healthy_once_it_hands_out_metadata():
    class NoHealthz(OpenPIReferenceServer):
        @staticmethod
        def _health_check(connection, request):
            return None  # openpi before /healthz existed: every path is a websocket handshake

    with NoHealthz() as peer:
        assert httpx.get(peer.url.replace("ws://", "http://") + "/healthz").status_code != 200
        with OpenPIClient(peer.url) as client:
            client.wait_healthy(5)
            meta = client.metadata()
            client.reset("e", "x")
            assert client.act(_obs(meta), meta.chunk_length).actions.shape == (10, 7)
        assert peer.connections == 1  # the health check's connection serves the first episode


def test_openpi_echo_mismatch_is_caught():
    def wrong_step(obs):
        return {
            "actions": np.zeros((1, 7)),
            "liberopro/episode_id": obs["liberopro/episode_id"],
            "liberopro/step": obs["liberopro/step"] + 1,
        }

    with OpenPIReferenceServer(infer=wrong_step, metadata={"liberopro/echo": True}) as peer:
        client = OpenPIClient(peer.url, state_fields="", cameras="agentview")
        meta = client.metadata()
        client.reset("e", "x")
        with pytest.raises(PolicyError) as err:
            client.act(_obs(meta, 3), meta.chunk_length)
        assert err.value.reason == "policy_step_mismatch"
        client.close()


def test_our_openpi_client_and_server_carry_the_policys_conventions_and_echo():
    policy = RandomPolicy()
    with OpenPIPolicyServer(policy, port=0) as server:
        with OpenPIClient(server.url) as client:
            meta = client.metadata()
            # advertised in the first frame; a foreign protocol is served one episode at a time
            assert meta == policy.metadata.model_copy(update={"max_concurrent_episodes": None})
            for episode in ("a", "b"):
                client.reset(episode, "x")
                first = client.act(_obs(meta, 0, episode), meta.chunk_length).actions
                assert first.shape == (8, 7)
            # RandomPolicy reseeds at every reset: episode b starts like episode a
            client.reset("c", "x")
            np.testing.assert_array_equal(client.act(_obs(meta, 0, "c"), 8).actions, first)
        with OpenPIClient(server.url, use_server_metadata="false") as client:
            assert client.metadata().policy_name == "openpi"


# ---------------------------------------------------------------------- OpenVLA: deploy.py-shaped peer


@pytest.fixture(scope="module", params=["openvla", "oft"])
def openvla_peer(request):
    port = _free_port()
    env = {**os.environ, "PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, str(PEERS), "openvla", "--variant", request.param],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    client = OpenVLAClient(url)
    try:
        client.wait_healthy(30)
        yield request.param, url
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


def _seen(url: str) -> dict:
    return httpx.get(url + "/_seen").json()


def test_openvla_client_against_deploy_py_behaviour(openvla_peer):
    variant, url = openvla_peer
    with make_client(url, "openvla", variant=variant, unnorm_key="libero_goal") as client:
        meta = client.metadata()
        client.reset("e", "open the drawer")
        obs = _obs(meta)
        result = client.act(obs, meta.chunk_length)
        seen = _seen(url)
    agent = obs.images["agentview"].to_numpy()
    if variant == "oft":
        assert [(c.name, c.height) for c in meta.cameras] == [("agentview", 256), ("wrist", 256)]
        assert (meta.chunk_length, meta.replan_steps) == (8, 8) and result.actions.shape == (8, 7)
        assert seen["full_image"] == [[256, 256, 3], "|u1"] and seen["wrist_image"] == [[256, 256, 3], "|u1"]
        assert seen["state"] == [[8], "<f8"]
    else:
        assert [(c.name, c.height) for c in meta.cameras] == [("agentview", 224)] and meta.state_fields == []
        assert result.actions.shape == (1, 7) and seen["image"] == [[224, 224, 3], "|u1"]
        assert "state" not in seen
    assert seen["instruction"] == obs.instruction and seen["unnorm_key"] == "libero_goal"
    assert not any(k.startswith("liberopro") for k in seen), "a third-party server got our private keys"
    assert (meta.gripper_convention, meta.binarize_gripper) == ("unit_open_is_one", True)
    assert result.actions[0, 6] == 1.0 and result.actions[0, 0] == pytest.approx(agent[0, 0, 0] / 255)


def test_openvla_double_encoding_and_plain_number_answers(openvla_peer):
    variant, url = openvla_peer
    with OpenVLAClient(url, variant=variant, double_encode=True) as client:
        meta = client.metadata()
        assert client.act(_obs(meta), meta.chunk_length).actions.shape == ((8, 7) if variant == "oft" else (1, 7))
    if variant == "openvla":
        with OpenVLAClient(url) as client:
            obs = _obs(client.metadata()).model_copy(update={"instruction": "tolist"})
            assert client.act(obs, 1).actions.shape == (1, 7)


@pytest.mark.parametrize(
    "instruction,reason",
    [
        ("please fail", "policy_http_error"),
        ("please nan", "policy_nonfinite_action"),
        ("please shape", "policy_bad_action_shape"),
    ],
)
def test_openvla_errors_are_named(openvla_peer, instruction, reason):
    variant, url = openvla_peer
    with OpenVLAClient(url, variant=variant) as client:
        meta = client.metadata()
        with pytest.raises(PolicyError) as err:
            client.act(_obs(meta).model_copy(update={"instruction": instruction}), meta.chunk_length)
        assert err.value.reason == reason
        if reason == "policy_http_error":
            assert '200 "error"' in err.value.detail
        assert client.act(_obs(meta, 1), meta.chunk_length).actions.shape[1] == 7  # the server is fine after


def test_openvla_timeout_drops_the_connection_and_reads_no_late_answer(openvla_peer):
    variant, url = openvla_peer
    with OpenVLAClient(url, variant=variant, request_timeout=0.5) as client:
        meta = client.metadata()
        with pytest.raises(PolicyError) as err:
            client.act(_obs(meta).model_copy(update={"instruction": "please sleep"}), meta.chunk_length)
        assert err.value.reason == "policy_timeout"
        fresh = _obs(meta, 0, "e2", seed=9)
        client.options.request_timeout = 10
        result = client.act(fresh, meta.chunk_length)
        assert result.actions[0, 0] == pytest.approx(fresh.images["agentview"].to_numpy()[0, 0, 0] / 255)


def test_openvla_unreachable_server_is_a_connect_error():
    with OpenVLAClient(f"http://127.0.0.1:{_free_port()}", use_server_metadata=False) as client:
        assert not client.health(0.5)
        meta = client.metadata()
        with pytest.raises(PolicyError) as err:
            client.act(_obs(meta), 1)
        assert err.value.reason == "policy_connect_error"


# ---------------------------------------------------------------------- OpenVLA: our server


def test_our_openvla_server_speaks_json_numpy_to_a_plain_client(serve_app, recorder):
    url = serve_app(create_openvla_app(recorder))
    img = np.full((32, 32, 3), 3, np.uint8)
    payload = {"full_image": img, "wrist_image": img, "state": np.arange(8.0), "instruction": "close the drawer"}
    resp = httpx.post(url + "/act", content=json_numpy.dumps(payload), headers={"content-type": "application/json"})
    actions = json_numpy.loads(resp.text)  # the library reads our answer
    assert isinstance(actions, list) and len(actions) == 4 and actions[0].shape == (7,)
    seen = recorder.observations[-1]
    np.testing.assert_array_equal(seen.images["wrist"], img)
    assert seen.proprio["eef_axis_angle"].tolist() == [3.0, 4.0, 5.0] and seen.instruction == "close the drawer"
    double = httpx.post(url + "/act", json={"encoded": json_numpy.dumps(payload)})
    assert len(json_numpy.loads(json.loads(double.text))) == 4
    bad = httpx.post(url + "/act", content=json_numpy.dumps({**payload, "state": np.arange(5.0)}))
    assert bad.status_code == 200 and bad.json() == "error"
    assert len(recorder.resets) == 1  # same instruction, no episode key: one episode
    httpx.post(url + "/act", content=json_numpy.dumps({**payload, "instruction": "other"}))
    assert len(recorder.resets) == 2


def test_our_openvla_client_and_server_carry_conventions_and_echo(serve_app):
    policy = RandomPolicy()
    url = serve_app(create_openvla_app(policy))
    with OpenVLAClient(url) as client:
        assert client.health()
        meta = client.metadata()
        assert meta == policy.metadata.model_copy(update={"max_concurrent_episodes": None})  # one at a time
        outs = []
        for ep in ("a", "b"):
            client.reset(ep, "x")
            outs.append(client.act(_obs(meta, 0, ep), meta.chunk_length).actions)
        np.testing.assert_array_equal(outs[0], outs[1])  # reset reached the policy (it reseeds)


# ---------------------------------------------------------------------- transports


def test_make_client_options_and_labels():
    assert PROTOCOLS == ("liberopro", "openpi", "openvla")
    assert isinstance(make_client("http://x:1", "openpi", chunk_length="10"), OpenPIClient)
    assert type(make_client("http://x:1", "liberopro", encoding="json")).__name__ == "PolicyClient"
    with pytest.raises(ValueError, match="unknown policy protocol"):
        make_client("http://x:1", "grpc")
    with pytest.raises(ValueError, match="chunk_lenght.*Valid options:.*chunk_length"):
        make_client("http://x:1", "openpi", chunk_lenght="10")
    with pytest.raises(ValueError, match="variant"):
        make_client("http://x:1", "openvla", variant="rt2")
    with pytest.raises(ValueError, match="replan_steps"):
        make_client("http://x:1", "openvla", replan_steps="5", chunk_length="2")
    assert parse_protocol_options(["chunk_length=10", "variant = oft"]) == {"chunk_length": "10", "variant": "oft"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_protocol_options(["chunk_length"])
    assert protocol_from_labels({PROTOCOL_LABEL: "openpi"}) == "openpi"
    assert protocol_from_labels({}) == "liberopro"
    with pytest.raises(ValueError):
        protocol_from_labels({PROTOCOL_LABEL: "ros"})
    labels = {
        PROTOCOL_LABEL: "openvla",
        "org.liberopro.protocol-option.variant": "oft",
        "org.liberopro.protocol-option.unnorm-key": "libero_goal",
        "maintainer": "x",
    }
    assert protocol_options_from_labels(labels) == {"variant": "oft", "unnorm_key": "libero_goal"}
