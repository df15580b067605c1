"""A deliberately hostile policy server; $BEHAVIOR picks the misbehaviour.

egress        tries to reach the internet, the API, Redis and PostgreSQL (for at most 3 s),
              prints each outcome ("EGRESS <name> <target>: blocked (...)" or "...: CONNECTED"),
              then serves like the zero policy
forkbomb      forks until the pids limit stops it, prints how far it got, and never serves
memory        serves; from step 2 of an episode allocates memory until the OOM killer ends it
slow          serves; from step 2 answers /act after 5 s
crash         serves; exits with code 3 at step 2 of every episode
never_healthy listens on $PORT but answers /health with 503 forever
volume        (volume.Dockerfile, which declares VOLUMEs) writes 1 MiB blocks into each of
              $WRITE_PATHS until a write fails or $WRITE_CAP_MIB is reached, prints
              "VOLUME <path> wrote <n> MiB: <outcome>" per path, then serves like the zero policy
canary        serves like the zero policy during validation; on every other episode (the hidden
              stage: any instruction but the validation check's) prints CANARY-STDOUT and
              CANARY-STDERR lines echoing the instruction it received, and fails /act with an
              error body (HTTP 500) quoting it
batching      not hostile: serves like the zero policy but declares 2 episodes at once (spec 1.1)
              and batches concurrent /act calls (at most 2, waiting up to $BATCH_WAIT_MS ms for
              the second), printing "BATCH size=<n> episodes=<k>" for each batch
canary_metadata  (local backend only: $CANARY_STATE counts its starts) serves like the zero policy
              when first started (validation); every later start (a shard) prints
              CANARY-SHARD-START and answers GET /metadata with HTTP 500 and a CANARY-METADATA body
neighbour     serves like the zero policy and prints "PEER <ip> <method> <path>" for every request
              it receives (who reached it); its probe, below, is run inside it with docker exec
pagecache     (pagecache.Dockerfile: an 8 MiB /blob its user owns) prints which of 256 pages of /blob
              the host's page cache holds ("PAGECACHE cached <n> of 256, <e> differ from the
              pattern"), then serves like the zero policy; `python /app/hostile.py pagecache write`
              leaves the pattern (what a policy in a hidden shard could do), `... pagecache read`
              reads it back

`python /app/hostile.py probe NAME=HOST:PORT ...` (any image built from here, run inside a
container: docker exec shares its network namespace, user and capabilities) resolves each HOST
(IPv4), prints "RESOLVE <name> <host>: <addresses>", connects to every address at once (1.5 s
each) and prints one line per attempt: "PROBE <name> <host>:<port> -> <address>: <verdict>",
the verdict "CONNECTED (<HTTP status line of GET /health>)", "REACHED (refused: ...)" (a host
answered: the packet got through although nothing listens) or "blocked (...)"; a name that does
not resolve gives "PROBE <name> <host>:<port> -> -: blocked (unresolved: ...)". "PROBE done" last.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time

BEHAVIOR = os.environ.get("BEHAVIOR", "")


_LOG_LOCK = threading.Lock()


def log(msg: str) -> None:
    """One whole line per call, even from several threads."""
    with _LOG_LOCK:
        sys.stdout.write(msg + "\n")
        sys.stdout.flush()


def sandbox_gateway() -> str | None:
    """The host's address on this container's network (first host of the on-link subnet)."""
    try:
        with open("/proc/net/route") as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                dest, mask = int(f[1], 16), int(f[7], 16)
                if dest and mask:
                    parts = socket.inet_ntoa(struct.pack("<I", dest)).split(".")
                    parts[3] = str(int(parts[3]) + 1)
                    return ".".join(parts)
    except OSError:
        return None
    return None


def try_connect(name: str, host: str, port: int) -> None:
    target = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=2.0):
            log(f"EGRESS {name} {target}: CONNECTED")
    except OSError as exc:
        log(f"EGRESS {name} {target}: blocked ({exc.__class__.__name__}: {exc})")


def egress() -> None:
    gw = sandbox_gateway()
    log(f"EGRESS sandbox gateway: {gw}")
    targets = [("internet", "pypi.org", 443)]
    for item in filter(None, os.environ.get("EGRESS_TARGETS", "").split(",")):
        name, host, port = item.split(":")
        targets.append((name, gw if host == "GATEWAY" and gw else host, int(port)))
    for name, host in (("api", "api"), ("redis", "redis"), ("postgres", "postgres")):
        targets.append((name, host, {"api": 8000, "redis": 6379, "postgres": 5432}[name]))
    threads = [(t, threading.Thread(target=try_connect, args=t, daemon=True)) for t in targets]
    for _, th in threads:
        th.start()
    deadline = time.monotonic() + 3.0
    for (name, host, port), th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
        if th.is_alive():  # e.g. a DNS lookup that never gets an answer
            log(f"EGRESS {name} {host}:{port}: blocked (no answer within 3 s)")
    log("EGRESS done")


PROBE_TIMEOUT_S = 1.5


def probe_address(name: str, host: str, port: int, addr: str) -> None:
    where = f"PROBE {name} {host}:{port} -> {addr}"
    try:
        with socket.create_connection((addr, port), timeout=PROBE_TIMEOUT_S) as conn:
            conn.sendall(b"GET /health HTTP/1.0\r\nHost: neighbour\r\n\r\n")
            status = conn.recv(256).split(b"\r\n", 1)[0].decode("ascii", "replace")
            log(f"{where}: CONNECTED ({status})")
    except ConnectionRefusedError as exc:
        log(f"{where}: REACHED (refused: {exc})")
    except OSError as exc:
        log(f"{where}: blocked ({exc.__class__.__name__}: {exc})")


def probe_target(name: str, host: str, port: int) -> list[threading.Thread]:
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:
        log(f"PROBE {name} {host}:{port} -> -: blocked (unresolved: {exc})")
        return []
    addrs = sorted({info[4][0] for info in infos})
    log(f"RESOLVE {name} {host}: {' '.join(addrs)}")
    threads = [threading.Thread(target=probe_address, args=(name, host, port, a), daemon=True) for a in addrs]
    for th in threads:
        th.start()
    return threads


def probe(specs: list[str]) -> None:
    """Probe every NAME=HOST:PORT of ``specs`` at once (name resolution included); see the docstring."""
    resolvers, connects = [], []
    for spec in specs:
        name, target = spec.split("=", 1)
        host, port = target.rsplit(":", 1)
        th = threading.Thread(target=lambda a=(name, host, int(port)): connects.extend(probe_target(*a)), daemon=True)
        th.start()
        resolvers.append(th)
    deadline = time.monotonic() + 3 * PROBE_TIMEOUT_S + 5.0
    for th in resolvers:
        th.join(max(0.0, deadline - time.monotonic()))
    for th in list(connects):
        th.join(max(0.0, deadline - time.monotonic()))
    if any(th.is_alive() for th in resolvers + connects):
        log("PROBE incomplete: an attempt did not finish in time")
    log("PROBE done")


def serve_neighbour() -> None:
    import uvicorn
    from submission_spec.server import create_app

    from submission_spec.examples import ZeroPolicy

    app = create_app(ZeroPolicy())

    @app.middleware("http")
    async def peer(request, call_next):
        log(f"PEER {request.client.host if request.client else '?'} {request.method} {request.url.path}")
        return await call_next(request)

    host, port = os.environ.get("HOST", "0.0.0.0"), int(os.environ.get("PORT", "8000"))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def forkbomb() -> None:
    n = 0
    while True:
        try:
            pid = os.fork()
        except OSError as exc:
            log(f"FORKBOMB fork failed after {n} forks: {exc}")
            break
        if pid == 0:
            while True:  # every child keeps trying too
                try:
                    if os.fork() == 0:
                        continue
                except OSError:
                    time.sleep(0.05)
        n += 1
    while True:
        time.sleep(1)


def never_healthy() -> None:
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"still loading")

        def log_message(self, *args) -> None:
            pass

    log("NEVER_HEALTHY serving 503 forever")
    HTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8000"))), Handler).serve_forever()


def fill_disk() -> None:
    cap = int(os.environ.get("WRITE_CAP_MIB", "256"))
    block = b"\xa5" * 2**20
    for path in os.environ.get("WRITE_PATHS", "").split():
        n, outcome = 0, "cap reached"
        try:
            with open(os.path.join(path, "filler.bin"), "wb", buffering=0) as fh:
                while n < cap:
                    fh.write(block)
                    n += 1
        except OSError as exc:
            outcome = f"{exc.__class__.__name__}: {exc.strerror}"
        log(f"VOLUME {path} wrote {n} MiB: {outcome}")
    log("VOLUME done")


#: The instruction of the validation stage's conformance check (public: submission_spec.conformance).
VALIDATION_INSTRUCTION = "put the bowl on the plate"


def one_episode_at_a_time(metadata):
    """The example's metadata as a spec-1.0 policy declares it (no max_concurrent_episodes): these
    images misbehave in episodes, not under the conformance check's concurrent episodes."""
    return metadata.model_copy(update={"max_concurrent_episodes": None})


def serve_canary() -> None:
    from submission_spec.server import serve

    from submission_spec.examples import ZeroPolicy

    class Canary(ZeroPolicy):
        def __init__(self) -> None:
            super().__init__()
            self.metadata = one_episode_at_a_time(self.metadata)

        def reset(self, episode_id, instruction):
            if instruction != VALIDATION_INSTRUCTION:
                log(f"CANARY-STDOUT saw {instruction!r}")
                print(f"CANARY-STDERR saw {instruction!r}", file=sys.stderr, flush=True)

        def act(self, observation):
            if observation.instruction != VALIDATION_INSTRUCTION:
                raise RuntimeError(f"CANARY-ERRBODY saw {observation.instruction!r}")
            return super().act(observation)

    serve(Canary())


def canary_metadata() -> None:
    from http.server import BaseHTTPRequestHandler, HTTPServer

    state = os.environ["CANARY_STATE"]
    starts = int(open(state).read()) + 1 if os.path.exists(state) else 1
    with open(state, "w") as fh:
        fh.write(str(starts))
    if starts == 1:
        serve_misbehaving()
        return
    log("CANARY-SHARD-START a hidden-stage start")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/health"
            body = b'{"status": "ok"}' if ok else b"CANARY-METADATA-ERRBODY the policy's own words"
            self.send_response(200 if ok else 500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    HTTPServer((os.environ.get("HOST", "0.0.0.0"), int(os.environ.get("PORT", "8000"))), Handler).serve_forever()


def serve_batching() -> None:
    from submission_spec.server import BatchConfig, serve

    from submission_spec.examples import ZeroPolicy

    class Batching(ZeroPolicy):
        def __init__(self) -> None:
            super().__init__()
            self.metadata = self.metadata.model_copy(update={"max_concurrent_episodes": 2})

        def act_batch(self, batch):
            log(f"BATCH size={len(batch.observations)} episodes={len(set(batch.episode_ids))}")
            return [self.act(o) for o in batch.observations]

    wait_ms = float(os.environ.get("BATCH_WAIT_MS", "60000"))
    serve(Batching(), batch=BatchConfig(max_batch_size=2, max_wait_ms=wait_ms))


def serve_misbehaving() -> None:
    from submission_spec.server import serve

    from submission_spec.examples import ZeroPolicy

    class Hostile(ZeroPolicy):
        def __init__(self) -> None:
            super().__init__()
            self.metadata = one_episode_at_a_time(self.metadata)

        def act(self, observation):
            if observation.step >= 2:
                if BEHAVIOR == "memory":
                    log("MEMORY allocating until killed")
                    hog = []
                    while True:
                        hog.append(bytearray(32 * 2**20))
                if BEHAVIOR == "slow":
                    time.sleep(5.0)
                if BEHAVIOR == "crash":
                    log("CRASH exiting with code 3")
                    os._exit(3)
            return super().act(observation)

    serve(Hostile())


#: The file of the pagecache image whose pages carry the pattern (pagecache.Dockerfile: 8 MiB,
#: owned by the policy's user, so that mincore(2) reports its pages).
BLOB = "/blob"


def pagecache_pattern() -> list[tuple[int, bool]]:
    """(page, bit): 256 pages of BLOB, each to be cached (True) or not: the same every run."""
    import random

    rng = random.Random(20)
    pages = sorted(rng.sample(range(os.path.getsize(BLOB) // 4096), 256))
    return [(page, rng.random() < 0.5) for page in pages]


def pagecache(mode: str) -> None:
    """``write``: read one byte of each page whose bit is set (read-ahead off), as a policy in a
    hidden shard would to leave a pattern; ``read``: which of the 256 pages are in the host's page
    cache, from mincore(2) without reading any (a later policy of an image sharing the layer):
    prints "PAGECACHE cached <n> of 256, <e> differ from the pattern"."""
    import ctypes
    import mmap

    fd = os.open(BLOB, os.O_RDONLY)
    pattern = pagecache_pattern()
    if mode == "write":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for page, bit in pattern:
            if bit:
                os.pread(fd, 1, page * 4096)
        log(f"PAGECACHE wrote {sum(b for _, b in pattern)} pages")
        return
    size = os.fstat(fd).st_size
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    base = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    vec = (ctypes.c_ubyte * (size // 4096))()
    if libc.mincore(ctypes.c_void_p(base), ctypes.c_size_t(size), vec) != 0:
        log(f"PAGECACHE mincore failed: errno {ctypes.get_errno()}")
        return
    cached = [bool(vec[page] & 1) for page, _ in pattern]
    differ = sum(c != bit for c, (_, bit) in zip(cached, pattern, strict=True))
    log(f"PAGECACHE cached {sum(cached)} of {len(pattern)}, {differ} differ from the pattern")


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"]:
        probe(sys.argv[2:])
        sys.exit(0)
    if sys.argv[1:2] == ["pagecache"]:
        pagecache(sys.argv[2])
        sys.exit(0)
    log(f"hostile policy: {BEHAVIOR}")
    if BEHAVIOR == "egress":
        egress()  # about 3 s, before serving: the validation log holds every attempt
        serve_misbehaving()
    elif BEHAVIOR == "forkbomb":
        forkbomb()
    elif BEHAVIOR == "never_healthy":
        never_healthy()
    elif BEHAVIOR == "volume":
        fill_disk()
        serve_misbehaving()
    elif BEHAVIOR in ("memory", "slow", "crash"):
        serve_misbehaving()
    elif BEHAVIOR == "pagecache":
        pagecache("read")  # what the host's page cache holds of the image, printed before serving
        serve_misbehaving()
    elif BEHAVIOR == "canary":
        serve_canary()
    elif BEHAVIOR == "batching":
        serve_batching()
    elif BEHAVIOR == "canary_metadata":
        canary_metadata()
    elif BEHAVIOR == "neighbour":
        serve_neighbour()
    else:
        sys.exit(f"unknown BEHAVIOR {BEHAVIOR!r}")
