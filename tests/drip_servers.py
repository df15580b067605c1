"""Real local servers that answer too slowly in the ways a hostile policy can: a reply whose
bytes trickle in (each byte well inside any per-read timeout, the whole far past any deadline),
a reply that never completes, a server that stops reading the request, a reply that never ends.

One raw TCP server speaks just enough HTTP/1.1 and RFC 6455 websocket for the three protocols
(``liberopro``, ``openpi``, ``openvla``): the cheap paths (``/health``, ``/metadata``,
``/reset``, ``/healthz``, the websocket handshake and openpi's metadata frame) answer at once,
the action path (``POST /act``, or every websocket request after the metadata frame)
misbehaves as ``mode`` says. It is raw sockets on purpose: a framework would not let a test
dribble a header byte by byte or stop reading mid-request.

Modes:
    ``body``        status line and headers at once, then one body byte per ``interval``.
    ``headers``     the status line and headers one byte per ``interval``.
    ``silent``      read the request, answer nothing.
    ``stall_read``  read the request headers, never read its body, answer nothing.
    ``slow_read``   read the request body 1 KiB per ``interval``, answer nothing.
    ``huge``        a reply that never ends, sent as fast as the socket takes it.
    ``frame``       (websocket) one binary frame whose payload trickles in.
    ``fragments``   (websocket) a message of 1-byte non-final frames, one per ``interval``.
    ``ws_handshake`` (websocket) the 101 handshake answer trickles in.
    ``ws_metadata`` (websocket) openpi's metadata frame trickles in.
    ``health``      the health paths (``/health``, ``/healthz``, ``/``) answer one byte per ``interval``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
from typing import Self

import msgpack

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_frame(payload: bytes, opcode: int = 0x2, fin: bool = True, length: int | None = None) -> bytes:
    """An unmasked server frame header (+ payload); ``length`` may claim more than is sent."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


class DripServer:
    """A threaded raw TCP server on 127.0.0.1 (see the module docstring).

    Args:
        mode: how the action path misbehaves.
        interval: seconds between trickled bytes/frames.
        metadata: the ``liberopro`` ``/metadata`` answer (a JSON-able dict).
        limit_s: every trickle stops after this long (so a test of broken code fails instead of
            hanging).
    """

    def __init__(self, mode: str, *, interval: float = 0.1, metadata: dict | None = None, limit_s: float = 15.0):
        self.mode, self.interval, self.limit_s = mode, interval, limit_s
        self.metadata = metadata or {}
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if mode in ("stall_read", "slow_read"):  # small buffers: the client's request cannot all sit in the kernel
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.act_requests = 0
        #: set when the client closed the connection of a misbehaving answer
        self.peer_closed = threading.Event()
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ plumbing
    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                buf = b""
                while not self.stop.is_set():
                    head, buf = self._read_head(conn, buf)
                    if head is None:
                        return
                    lines = head.decode("latin-1").split("\r\n")
                    method, path, _ = lines[0].split(" ", 2)
                    headers = {
                        k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                    }
                    if headers.get("upgrade", "").lower() == "websocket":
                        return self._websocket(conn, headers)
                    if method == "POST" and path.endswith("/act"):
                        self.act_requests += 1
                        return self._misbehave_http(conn, headers, buf)
                    length = int(headers.get("content-length", 0))
                    while len(buf) < length:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    buf = buf[length:]
                    if self.mode == "health" and path in ("/", "/health", "/healthz"):
                        return self._trickle(conn, b"HTTP/1.1 200 OK\r\ncontent-length: 2000\r\n\r\n" + b"x" * 2000)
                    self._answer_quickly(conn, method, path)
        except OSError:
            return

    @staticmethod
    def _read_head(conn: socket.socket, buf: bytes) -> tuple[bytes | None, bytes]:
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return None, b""
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        return head, rest

    def _answer_quickly(self, conn: socket.socket, method: str, path: str) -> None:
        if path == "/health" or path == "/healthz":
            self._send_json(conn, 200, {"status": "ok"})
        elif path == "/metadata":
            self._send_json(conn, 200, self.metadata)
        elif path == "/reset":
            self._send_json(conn, 200, {"ok": True})
        else:
            self._send_json(conn, 404, {"detail": "Not Found"})

    @staticmethod
    def _send_json(conn: socket.socket, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        conn.sendall(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    def _trickle(self, conn: socket.socket, data: bytes) -> None:
        """Send ``data`` one byte per ``interval`` (until ``limit_s`` or stop)."""
        end = time.monotonic() + self.limit_s
        for i in range(len(data)):
            if self.stop.is_set() or time.monotonic() > end:
                return
            if not self._send(conn, data[i : i + 1]):
                return
            time.sleep(self.interval)

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        """False (and ``peer_closed`` set) when the client has closed the connection."""
        try:
            conn.sendall(data)
            return True
        except OSError:
            self.peer_closed.set()
            return False

    def _idle(self) -> None:
        self.stop.wait(self.limit_s)

    def _read_slowly(self, conn: socket.socket) -> None:
        """``stall_read``: read nothing more; ``slow_read``: 1 KiB per ``interval``."""
        if self.mode == "stall_read":
            return self._idle()
        end = time.monotonic() + self.limit_s
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                if not conn.recv(1024):
                    break
            except OSError:
                break
            time.sleep(self.interval)
        else:
            return
        self.peer_closed.set()

    # ------------------------------------------------------------------ HTTP action path
    def _misbehave_http(self, conn: socket.socket, headers: dict, buf: bytes) -> None:
        mode = self.mode
        if mode in ("stall_read", "slow_read"):
            return self._read_slowly(conn)
        length = int(headers.get("content-length", 0))
        while len(buf) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        body = b"x" * 4096
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        if mode == "body":
            conn.sendall(head)
            self._trickle(conn, body)
        elif mode == "headers":
            self._trickle(conn, head + body)
        elif mode == "silent":
            self._idle()
        elif mode == "huge":
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
            end = time.monotonic() + self.limit_s
            while not self.stop.is_set() and time.monotonic() < end and self._send(conn, chunk):
                pass
        else:
            raise ValueError(mode)

    # ------------------------------------------------------------------ websocket (openpi)
    def _websocket(self, conn: socket.socket, headers: dict) -> None:
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + WS_GUID).digest()).decode()
        answer = (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
        ).encode()
        if self.mode == "ws_handshake":
            return self._trickle(conn, answer)
        conn.sendall(answer)
        metadata = ws_frame(msgpack.packb({"pad": "x" * 4096}))
        if self.mode == "ws_metadata":
            return self._trickle(conn, metadata)
        conn.sendall(metadata)
        if self.mode in ("stall_read", "slow_read"):
            self.act_requests += 1
            return self._read_slowly(conn)
        first = conn.recv(65536)  # the start of the request (masked frame); its rest is drained below
        if not first:
            return
        self.act_requests += 1
        threading.Thread(target=self._drain, args=(conn,), daemon=True).start()
        if self.mode == "frame":
            conn.sendall(ws_frame(b"", length=4096))
            self._trickle(conn, b"x" * 4096)
        elif self.mode == "fragments":
            conn.sendall(ws_frame(b"\x80", fin=False))  # the start of a msgpack map, never finished
            end = time.monotonic() + self.limit_s
            while (
                not self.stop.is_set()
                and time.monotonic() < end
                and self._send(conn, ws_frame(b"\x00", opcode=0x0, fin=False))
            ):
                time.sleep(self.interval)
        elif self.mode == "huge":
            conn.sendall(ws_frame(b"", length=1 << 40))
            end = time.monotonic() + self.limit_s
            while not self.stop.is_set() and time.monotonic() < end and self._send(conn, b" " * (1 << 20)):
                pass
        elif self.mode == "silent":
            self._idle()
        else:
            raise ValueError(self.mode)

    def _drain(self, conn: socket.socket) -> None:
        try:
            while not self.stop.is_set() and conn.recv(65536):
                pass
        except OSError:
            pass
        if not self.stop.is_set():
            self.peer_closed.set()
