"""How many simulator streams a shard's evaluator container gets when LIBEROPRO_EVALUATOR_STREAMS
is not set (``DockerBackend.auto_streams``), against a stand-in for the Docker engine: what the
engine reports and the sandbox containers running on it. No services."""

from __future__ import annotations

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.docker.labels import LABEL, LABEL_WORKER
from liberopro_platform.sandbox.docker_backend import DockerBackend

GIB = 2**30


class _Container:
    def __init__(self, worker: str, memory: int, nano_cpus: int = 0) -> None:
        self.labels = {LABEL: "1", LABEL_WORKER: worker}
        self.attrs = {"HostConfig": {"Memory": memory, "NanoCpus": nano_cpus}}


class _Engine:
    """``info()`` and ``containers.list(filters=...)`` of a 64-CPU, 256 GiB engine."""

    def __init__(self, running: list[_Container]) -> None:
        self.running = running
        self.containers = self

    def info(self):
        return {"NCPU": 64, "MemTotal": 256 * GIB}

    def list(self, filters=None, **_):
        assert filters == {"label": [f"{LABEL}=1"], "status": "running"}, filters
        return list(self.running)


def _backend(running: list[_Container]) -> DockerBackend:
    backend = DockerBackend.__new__(DockerBackend)  # no engine: only auto_streams is asked
    backend.settings = Settings(
        policy_memory="16g", policy_cpus=4, evaluator_memory="8g", evaluator_stream_memory="3g", evaluator_cpus=1
    )
    backend.worker, backend.deployment, backend.client = "w1@node", None, _Engine(running)
    return backend


def test_streams_fit_what_other_workers_on_the_engine_leave():
    """Alone: min(64 - 4 CPUs, 1 + (256 - 16 - 8) GiB / 3 GiB) = 60. A second worker on the same
    engine (one per GPU) running a 16 GiB policy and a 60-stream evaluator (8 + 59 * 3 GiB, 60
    CPUs) leaves little: its limits are taken off first, so the two never ask for several times
    the engine. This worker's own containers (its node sandbox) are not counted twice."""
    assert _backend([]).auto_streams() == 60
    mine = [_Container("w1@node", 16 * GIB, 4 * 10**9)]
    assert _backend(mine).auto_streams() == 60
    other = [_Container("w2@node", 16 * GIB, 4 * 10**9), _Container("w2@node", (8 + 59 * 3) * GIB, 60 * 10**9)]
    assert _backend(mine + other).auto_streams() == 1  # 64 - 64 - 4 CPUs: none left, at least 1
    half = [_Container("w2@node", 16 * GIB, 4 * 10**9), _Container("w2@node", (8 + 9 * 3) * GIB, 10 * 10**9)]
    # CPUs: 64 - 14 - 4 = 46; memory: 1 + (256 - 16 - 35 - 16 - 8) // 3 = 61
    assert _backend(half).auto_streams() == 46
    memory_bound = [_Container("w2@node", 200 * GIB)]  # no CPU quota: only its memory counts
    assert _backend(memory_bound).auto_streams() == 1 + (256 - 200 - 16 - 8) // 3
