"""Peers for the adapter tests, built to each protocol's published behaviour (no tests here).

* :class:`OpenPIReferenceServer`: what openpi's ``WebsocketPolicyServer``
  (``src/openpi/serving/websocket_policy_server.py``) does, written against openpi's own codec
  (``openpi_client.msgpack_numpy``): ``/healthz``, metadata frame, inference on the event loop,
  ``server_timing``, a traceback TEXT frame then close 1011 on any error.
* ``python tests/test_adapters_peers.py openvla [--variant oft]``: what OpenVLA's and
  OpenVLA-OFT's ``vla-scripts/deploy.py`` do, run as a separate process because it calls
  ``json_numpy.patch()`` (the real PyPI ``json-numpy``, patching the ``json`` module globally):
  FastAPI ``POST /act`` with a ``Dict[str, Any]`` payload, ``{"encoded": ...}`` double
  encoding, ``JSONResponse(action)`` (rendered by json-numpy), ``"error"`` with HTTP 200 on any
  failure, no health endpoint.
* ``python tests/test_adapters_peers.py openpi``: the openpi reference server as a process.

The scripted "models" check what LIBERO's clients send (keys, shapes, dtypes) and fail like a
model would (an exception) when it is wrong; their instruction/prompt can ask for a failure:
``fail`` (raise), ``sleep`` (answer after 2 s), ``nan``, ``shape`` (a (3, 5) answer).
"""

import asyncio
import http
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Self

import numpy as np

OBS_LOG: list[dict[str, Any]] = []


def scripted_openpi(obs: dict) -> dict:
    """An openpi LIBERO "model": checks the request as openpi's LiberoInputs would read it and
    returns a (10, 7) chunk (pi0.5's H) in LIBERO's gripper convention; ``actions[:, 0]``
    carries ``state[0]`` so tests can tell which request an answer belongs to."""
    img, wrist, state, prompt = (
        obs["observation/image"],
        obs["observation/wrist_image"],
        obs["observation/state"],
        obs["prompt"],
    )
    for im in (img, wrist):
        assert im.shape == (224, 224, 3) and im.dtype == np.uint8, (im.shape, im.dtype)
    assert state.shape == (8,) and state.dtype == np.float64, (state.shape, state.dtype)
    assert isinstance(prompt, str)
    OBS_LOG.append({k: (v.shape, v.dtype.str) if isinstance(v, np.ndarray) else v for k, v in obs.items()})
    if "fail" in prompt:
        raise RuntimeError("scripted failure requested by the prompt")
    if "sleep" in prompt:
        time.sleep(2.0)
    actions = np.zeros((10, 7))
    actions[:, 6] = -1.0  # LIBERO: -1 opens
    actions[:, 0] = state[0]
    if "nan" in prompt:
        actions[0, 0] = np.nan
    if "shape" in prompt:
        actions = np.zeros((3, 5))
    return {"actions": actions}


class OpenPIReferenceServer:
    """openpi's published server behaviour around ``infer(obs) -> dict``, in a thread."""

    def __init__(
        self, infer: Callable[[dict], dict] = scripted_openpi, metadata: dict | None = None, port: int = 0
    ) -> None:
        self.infer = infer
        self.metadata = metadata or {}
        self.port = port
        self.headers: list[dict[str, str]] = []
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None

    async def _handler(self, websocket) -> None:
        import websockets
        import websockets.frames
        from openpi_client import msgpack_numpy

        self.connections += 1
        self.headers.append(dict(websocket.request.headers))
        packer = msgpack_numpy.Packer()
        await websocket.send(packer.pack(self.metadata))
        while True:
            try:
                obs = msgpack_numpy.unpackb(await websocket.recv())
                t = time.monotonic()
                action = self.infer(obs)  # on the event loop, as openpi does
                action["server_timing"] = {"infer_ms": (time.monotonic() - t) * 1000}
                await websocket.send(packer.pack(action))
            except websockets.ConnectionClosed:
                break
            except Exception:  # noqa: BLE001  (openpi's behaviour: any failure goes to the client)
                await websocket.send(traceback.format_exc())
                await websocket.close(
                    code=websockets.frames.CloseCode.INTERNAL_ERROR,
                    reason="Internal server error. Traceback included in previous frame.",
                )
                break

    @staticmethod
    def _health_check(connection, request):
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    async def run(self, started: threading.Event | None = None) -> None:
        import websockets.asyncio.server as _server

        # close_timeout 1 s (openpi keeps the library's 10 s): a blocking client answers a close
        # handshake only during its next call, so shutting the peer down would wait it out.
        async with _server.serve(
            self._handler,
            "127.0.0.1",
            self.port,
            compression=None,
            max_size=None,
            process_request=self._health_check,
            close_timeout=1,
        ) as server:
            self._server, self._loop = server, asyncio.get_running_loop()
            self.port = server.sockets[0].getsockname()[1]
            if started is not None:
                started.set()
            try:
                await server.serve_forever()
            except asyncio.CancelledError:
                pass

    def __enter__(self) -> Self:
        started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self.run(started)), daemon=True)
        self._thread.start()
        assert started.wait(10), "reference openpi server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


# ---------------------------------------------------------------------- OpenVLA deploy.py-style


def scripted_openvla(payload: dict, variant: str) -> Any:
    """An OpenVLA / OpenVLA-OFT "model" that checks the payload like deploy.py's model code reads
    it. Gripper: 1 = open (OpenVLA's convention). OpenVLA answers a (7,) array; OFT a list of 8
    (7,) arrays (``get_vla_action`` returns ``[action[i] for i in range(len(action))]``)."""
    instruction = payload["instruction"]
    assert isinstance(instruction, str)
    if variant == "oft":
        img, wrist, state = payload["full_image"], payload["wrist_image"], payload["state"]
        for im in (img, wrist):
            assert isinstance(im, np.ndarray) and im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8
        assert state.shape == (8,), state.shape
    else:
        img = payload["image"]
        assert img.shape == (224, 224, 3) and img.dtype == np.uint8, (img.shape, img.dtype)
    if "fail" in instruction:
        raise RuntimeError("scripted failure requested by the instruction")
    if "sleep" in instruction:
        time.sleep(2.0)
    action = np.zeros(7, dtype=np.float64)
    action[6] = 1.0  # open
    action[0] = float(img[0, 0, 0]) / 255.0  # which request this answers
    if "nan" in instruction:
        action[1] = np.nan
    if "shape" in instruction:
        return np.zeros((3, 5))
    if variant == "oft":
        chunk = np.tile(action, (8, 1))
        return [chunk[i] for i in range(len(chunk))]
    if "tolist" in instruction:
        return action.tolist()
    return action


def openvla_main(variant: str) -> None:
    """A deploy.py-shaped server on $PORT: json_numpy.patch(), FastAPI, POST /act."""
    import os

    import json_numpy

    json_numpy.patch()
    import json
    import logging

    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    seen: dict[str, Any] = {}

    def predict_action(payload: dict[str, Any]) -> Any:
        try:
            if double_encode := "encoded" in payload:
                assert len(payload.keys()) == 1, "Only uses encoded payload!"
                payload = json.loads(payload["encoded"])
            seen.clear()
            seen.update(
                {k: [list(v.shape), v.dtype.str] if isinstance(v, np.ndarray) else v for k, v in payload.items()}
            )
            action = scripted_openvla(payload, variant)
            if double_encode:
                return JSONResponse(json_numpy.dumps(action))
            return JSONResponse(action)
        except:  # noqa: E722  (deploy.py's own handling)
            logging.getLogger("deploy").error(traceback.format_exc())
            return "error"

    app = FastAPI()
    app.post("/act")(predict_action)
    app.get("/_seen")(lambda: seen)  # test-only introspection: the last payload's keys and shapes
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["PORT"]), log_level="warning")


def openpi_main() -> None:
    import os

    server = OpenPIReferenceServer(port=int(os.environ["PORT"]))
    asyncio.run(server.run())


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["openvla"]:
        openvla_main("oft" if "--variant" in args and args[args.index("--variant") + 1] == "oft" else "openvla")
    elif args[:1] == ["openpi"]:
        openpi_main()
    else:
        raise SystemExit("usage: test_adapters_peers.py openvla [--variant oft] | openpi")
