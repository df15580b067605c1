"""Request timeouts and the episode budget are wall-clock deadlines on every transport.

Each client (liberopro HTTP in JSON and msgpack, openpi websocket, OpenVLA REST) talks to a
real local server (:mod:`tests.drip_servers`) that answers slowly in the ways a hostile policy
can: every byte well inside any per-read timeout, the whole far past the deadline; a reply
that never completes; a server that reads the request 1 KiB at a time. The call must end at
its deadline (plus a small slack) with the timeout reason, and the connection must be closed
(the server sees it go), so a late answer can never be read as the answer to a later request.
The conformance checks give their verdict on such a server within their limits.

35 s on the loaded 2-core build machine, ~20 s of it deadlines running out.
"""

from __future__ import annotations

import time

import numpy as np
import psutil
import pytest
from submission_spec.conformance import check_policy, synthetic_observation
from submission_spec.models import CameraSpec
from submission_spec.transports import make_client

from submission_spec import PolicyError, PolicyMetadata
from tests.drip_servers import DripServer

DEADLINE = 0.75  # seconds; the request timeout or the remaining budget under test
SLACK = 0.6  # seconds allowed past the deadline (a loaded 2-core machine)
BIG = 1024  # camera side for the slow-reading server: a request of ~6 MB, more than the socket buffers hold

TRANSPORTS = {
    "liberopro-json": ("liberopro", {"encoding": "json"}),
    "liberopro-msgpack": ("liberopro", {"encoding": "msgpack"}),
    "openpi": ("openpi", {}),
    "openvla": ("openvla", {}),
}


def server_metadata(size: int = 32) -> dict:
    """What the drip server's ``GET /metadata`` answers (liberopro)."""
    return PolicyMetadata(
        policy_name="drip",
        cameras=[
            CameraSpec(name="agentview", height=size, width=size),
            CameraSpec(name="wrist", height=size, width=size),
        ],
        chunk_length=1,
        replan_steps=1,
    ).model_dump(mode="json")


def connect(name: str, server: DripServer, *, big: bool = False, **options):
    """(client, metadata, observation) for transport ``name`` against ``server``."""
    protocol, base = TRANSPORTS[name]
    opts = {"connect_timeout": 5.0, "request_timeout": DEADLINE, **base, **options}
    if big and protocol != "liberopro":
        opts.update(cameras="agentview,wrist", image_size=BIG)
    client = make_client(server.url, protocol, **opts)
    meta = client.metadata()
    client.reset("ep1", "put the bowl on the plate")
    obs = synthetic_observation(meta, "ep1", 0, np.random.default_rng(0)).to_message()
    return client, meta, obs


def open_connections(port: int) -> list:
    """This process's open TCP connections to ``port`` (a closed socket is no longer ours, even
    while the kernel still flushes it to a slow reader)."""
    return [c for c in psutil.Process().net_connections(kind="tcp") if c.raddr and c.raddr.port == port]


def timed_act(client, meta, obs, deadline: float | None = None) -> tuple[PolicyError, float]:
    t0 = time.monotonic()
    with pytest.raises(PolicyError) as err:
        client.act(obs, meta.chunk_length, deadline=deadline)
    return err.value, time.monotonic() - t0


CASES = [
    ("liberopro-json", "body"),
    ("liberopro-json", "headers"),
    ("liberopro-msgpack", "body"),
    ("liberopro-msgpack", "slow_read"),
    ("openvla", "body"),
    ("openvla", "headers"),
    ("openvla", "slow_read"),
    ("openpi", "frame"),
    ("openpi", "fragments"),
    ("openpi", "slow_read"),
]


@pytest.mark.parametrize("transport,mode", CASES, ids=[f"{t}-{m}" for t, m in CASES])
def test_a_trickled_answer_is_cut_at_the_request_timeout_and_its_connection_closed(transport, mode):
    big = mode == "slow_read"
    # slow_read: the ~6 MB request is encoded inside act() before its deadline starts
    slack = 2 * SLACK if big else SLACK
    with DripServer(mode, metadata=server_metadata(BIG if big else 32)) as server:
        client, meta, obs = connect(transport, server, big=big)
        try:
            err, elapsed = timed_act(client, meta, obs)
            assert err.reason == "policy_timeout", err
            assert DEADLINE - 0.05 <= elapsed <= DEADLINE + slack, f"the call took {elapsed:.2f} s"
            assert server.act_requests == 1
            # closed at once, not at close(): a late answer has nowhere to go
            assert open_connections(server.port) == [], "the connection of the timed-out request was left open"
            if not big:  # the server's next byte finds the connection gone
                assert server.peer_closed.wait(2.0)
        finally:
            client.close()


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_the_episode_budget_cuts_a_request_in_flight(transport):
    mode = "frame" if transport == "openpi" else "body"
    with DripServer(mode, metadata=server_metadata()) as server:
        client, meta, obs = connect(transport, server, request_timeout=30.0)
        try:
            err, elapsed = timed_act(client, meta, obs, deadline=time.monotonic() + DEADLINE)
        finally:
            client.close()
    assert err.reason == "policy_episode_timeout", err
    assert DEADLINE - 0.05 <= elapsed <= DEADLINE + SLACK, f"the call took {elapsed:.2f} s"


@pytest.mark.parametrize("mode", ["ws_handshake", "ws_metadata"])
def test_openpi_connecting_is_bounded_by_the_connect_timeout_or_the_budget(mode):
    with DripServer(mode) as server:
        client = make_client(server.url, "openpi", connect_timeout=DEADLINE)
        t0 = time.monotonic()
        with pytest.raises(PolicyError) as err:
            client.reset("ep1", "x")
        elapsed = time.monotonic() - t0
        assert err.value.reason == "policy_connect_error" and "within" in err.value.detail
        assert elapsed <= DEADLINE + SLACK
        with pytest.raises(PolicyError) as err:  # the episode budget ends first
            client.reset("ep2", "x", deadline=time.monotonic() + DEADLINE / 2)
        assert err.value.reason == "policy_episode_timeout"
        client.close()
    assert elapsed >= DEADLINE - 0.05


@pytest.mark.parametrize("transport", ["liberopro-msgpack", "openpi", "openvla"])
def test_a_trickled_health_answer_is_cut(transport):
    with DripServer("health") as server:
        client = make_client(server.url, TRANSPORTS[transport][0])
        t0 = time.monotonic()
        try:
            if transport == "liberopro-msgpack":
                with pytest.raises(PolicyError) as err:
                    client.wait_healthy(DEADLINE)
                assert err.value.reason == "policy_connect_error" and "no complete answer" in err.value.detail
            else:
                assert not client.health(timeout=DEADLINE)
        finally:
            client.close()
        assert time.monotonic() - t0 <= DEADLINE + SLACK


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_an_endless_answer_is_refused_at_the_size_limit(transport):
    limit = {"max_message_bytes": 1 << 20} if transport == "openpi" else {"max_reply_bytes": 1 << 20}
    with DripServer("huge", metadata=server_metadata()) as server:
        # openpi: websockets refuses the frame at its header and closes with 1009; a server
        # that ignores the close and floods on is cut by the deadline, so give it one.
        client, meta, obs = connect(
            transport, server, request_timeout=DEADLINE if transport == "openpi" else 30.0, **limit
        )
        try:
            err, elapsed = timed_act(client, meta, obs)
        finally:
            client.close()
    assert err.reason == "policy_bad_response", err
    assert "larger than" in err.detail
    assert elapsed <= DEADLINE + SLACK


def test_conformance_check_fails_a_trickling_server_within_its_limits():
    with DripServer("body", metadata=server_metadata()) as server:
        t0 = time.monotonic()
        report = check_policy(server.url, health_timeout=5, request_timeout=DEADLINE)
        elapsed = time.monotonic() - t0
    checks = {c.name: c for c in report.checks}
    assert not report.ok
    assert checks["health"].ok and checks["metadata"].ok and checks["reset (json)"].ok
    for enc in ("json", "msgpack"):
        act = checks[f"act ({enc}, step 0)"]
        assert not act.ok and act.detail.startswith("policy_timeout"), act
        assert "wall-clock" in act.hint
    assert elapsed <= 2 * DEADLINE + 2 * SLACK, f"the check took {elapsed:.2f} s"


@pytest.mark.parametrize("protocol,mode", [("openpi", "frame"), ("openvla", "body")])
def test_shard_runner_adapter_check_fails_a_trickling_server_within_its_limits(protocol, mode):
    """The validation check the platform runs in the evaluator container (``liberopro.runs.shard check``)."""
    from liberopro.runs.shard import check
    from liberopro.schema.shard import CheckSpec

    with DripServer(mode) as server:
        t0 = time.monotonic()
        report = check(server.url, CheckSpec(protocol=protocol, health_timeout_s=5, request_timeout_s=DEADLINE))
        elapsed = time.monotonic() - t0
    assert not report["ok"]
    last = report["checks"][-1]
    assert last["name"] == "protocol" and last["detail"].startswith("policy_timeout"), last
    assert "wall-clock" in last["hint"]
    assert elapsed <= DEADLINE + SLACK + 0.5, f"the check took {elapsed:.2f} s"


def test_a_client_called_from_inside_a_running_event_loop_still_works_and_is_bounded():
    """A notebook or an async application calls the (blocking) client from inside its own event
    loop; the client's loop then runs in a helper thread for the call."""
    import asyncio

    async def main(url: str):
        with make_client(url, "liberopro", request_timeout=DEADLINE) as client:
            meta = client.metadata()
            obs = synthetic_observation(meta, "ep1", 0, np.random.default_rng(0)).to_message()
            t0 = time.monotonic()
            with pytest.raises(PolicyError) as err:
                client.act(obs, meta.chunk_length)
            return meta, err.value.reason, time.monotonic() - t0

    from concurrent.futures import ThreadPoolExecutor

    # The application's loop runs in a thread of its own, so that the test does not depend on
    # what the main thread holds (another test's Playwright session keeps a loop marked running).
    with DripServer("body", metadata=server_metadata()) as server, ThreadPoolExecutor(1) as app:
        meta, reason, elapsed = app.submit(asyncio.run, main(server.url)).result()
    assert meta.policy_name == "drip"
    assert reason == "policy_timeout" and elapsed <= DEADLINE + SLACK


def test_openpi_client_does_not_follow_a_handshake_redirect():
    """A server answering the websocket handshake with a redirect cannot send the evaluator's
    connection to another address: nothing connects there, and the call fails as a connect error."""
    import socket
    import threading

    from submission_spec.transports import make_client

    canary = socket.socket()
    canary.bind(("127.0.0.1", 0))
    canary.listen(4)
    canary.settimeout(0.2)
    target = canary.getsockname()[1]
    redirector = socket.socket()
    redirector.bind(("127.0.0.1", 0))
    redirector.listen(4)
    port = redirector.getsockname()[1]
    accepted: list = []
    stop = threading.Event()

    def serve() -> None:
        redirector.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = redirector.accept()
            except OSError:
                continue
            conn.recv(65536)
            conn.sendall(
                f"HTTP/1.1 302 Found\r\nLocation: ws://127.0.0.1:{target}/\r\nContent-Length: 0\r\n\r\n".encode()
            )
            conn.close()

    def watch() -> None:
        while not stop.is_set():
            try:
                accepted.append(canary.accept()[0])
            except OSError:
                continue

    threads = [threading.Thread(target=f, daemon=True) for f in (serve, watch)]
    for t in threads:
        t.start()
    try:
        with make_client(f"ws://127.0.0.1:{port}", "openpi") as client:
            with pytest.raises(PolicyError) as info:
                client.reset("e1", "put the bowl on the plate")
        assert info.value.reason == "policy_connect_error"
        assert not accepted, "the client followed the redirect"
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        canary.close()
        redirector.close()
