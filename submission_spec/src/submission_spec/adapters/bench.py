"""Per-request latency of each protocol on loopback: ``python -m submission_spec.adapters.bench``.

One policy (returns a (10, 7) chunk, no model) served in-process by the SDK in each protocol;
the evaluator-side client of each protocol sends the same observation N times: two 224x224x3
uint8 images (agentview, wrist) and the 8-number state, the openpi / OpenVLA-OFT LIBERO payload.
Prints median, p95 and mean round-trip milliseconds, and the server's own time per request.
Not a test: figures depend on the machine.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import typer

from submission_spec.conformance import synthetic_observation
from submission_spec.models import CameraSpec, PolicyMetadata
from submission_spec.transports import make_client


class _Chunk:
    def __init__(self) -> None:
        self.metadata = PolicyMetadata(
            policy_name="bench",
            cameras=[CameraSpec(name="agentview"), CameraSpec(name="wrist")],
            chunk_length=10,
            replan_steps=5,
        )

    def reset(self, episode_id: str, instruction: str) -> None:
        pass

    def act(self, observation) -> np.ndarray:
        return np.zeros((10, 7), dtype=np.float32)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Uvicorn:
    def __init__(self, app) -> None:
        import uvicorn

        self.port = _free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error", access_log=False)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def _measure(client, n: int) -> tuple[np.ndarray, list[float]]:
    meta = client.metadata()
    client.reset("bench", "pick up the black bowl")
    obs = [synthetic_observation(meta, "bench", i, np.random.default_rng(i)).to_message() for i in range(n + 20)]
    lat, server = [], []
    for i, o in enumerate(obs):
        r = client.act(o, meta.chunk_length)
        if i >= 20:  # warm-up excluded
            lat.append(r.latency_ms)
            if r.server_ms is not None:
                server.append(r.server_ms)
    return np.asarray(lat), server


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the command line ``argv`` (default: ``sys.argv``)."""
    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help=__doc__.splitlines()[0])(_bench)
    app(args=argv, prog_name="python -m submission_spec.adapters.bench")


def _bench(n: int = typer.Option(300, "-n", help="requests per protocol")) -> None:
    """Measure ``n`` requests per protocol and print the table."""
    from submission_spec.adapters.openpi_server import OpenPIPolicyServer
    from submission_spec.adapters.openvla_server import create_openvla_app
    from submission_spec.server import create_app

    policy = _Chunk()
    rows = []
    for enc in ("msgpack", "json"):
        with _Uvicorn(create_app(policy)) as url, make_client(url, "liberopro", encoding=enc) as c:
            rows.append((f"liberopro ({enc})", *_measure(c, n)))
    with OpenPIPolicyServer(policy, port=0) as srv, make_client(srv.url, "openpi") as c:
        rows.append(("openpi (websocket, msgpack-numpy)", *_measure(c, n)))
    with _Uvicorn(create_openvla_app(policy)) as url, make_client(url, "openvla", variant="oft") as c:
        rows.append(("openvla (REST, json-numpy)", *_measure(c, n)))
    print(f"loopback round trip, {n} requests, 2 x 224x224x3 uint8 + state(8) -> (10, 7)")
    print(f"{'protocol':36s} {'median ms':>10s} {'p95 ms':>8s} {'mean ms':>8s} {'server ms':>10s}")
    for name, lat, server in rows:
        print(
            f"{name:36s} {np.median(lat):10.2f} {np.percentile(lat, 95):8.2f} {lat.mean():8.2f} "
            f"{np.mean(server) if server else float('nan'):10.3f}"
        )


if __name__ == "__main__":
    main()
