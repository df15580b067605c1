"""A sandbox's resources: :class:`Sandbox` (an internal network and what runs on it, removed on
exit whatever happened), the policy container with every restriction of the sandbox, the
evaluator container, and what the engine is checked for after creating them."""

from __future__ import annotations

import io
import logging
import math
import secrets
import tarfile
from typing import TYPE_CHECKING, Any

from liberopro_platform.config import Settings
from liberopro_platform.sandbox import firewall
from liberopro_platform.sandbox.base import SandboxError
from liberopro_platform.sandbox.docker.images import image_volumes
from liberopro_platform.sandbox.docker.labels import (
    LABEL,
    LABEL_DEPLOYMENT,
    LABEL_ROLE,
    LABEL_SUBMISSION,
    LABEL_WORKER,
    POLICY_HOST,
    SHARD_DIR,
)

if TYPE_CHECKING:
    from liberopro_platform.sandbox.docker_backend import DockerBackend

log = logging.getLogger("liberopro_platform.sandbox.docker")


class Sandbox:
    """One internal network and what runs on it; removed on exit whatever happened."""

    def __init__(self, backend: DockerBackend, submission_id: str, role: str, network: Any | None = None) -> None:
        """``network``: an existing network (a node sandbox's) to put the containers on; it is
        then neither created nor removed here."""
        self.backend = backend
        self.client = backend.client
        self.labels = {
            LABEL: "1",
            LABEL_WORKER: backend.worker,
            LABEL_SUBMISSION: submission_id,
            LABEL_ROLE: role,
            **({LABEL_DEPLOYMENT: backend.deployment} if backend.deployment else {}),
        }
        self.suffix = secrets.token_hex(5)
        self.name = f"lp-{submission_id[:12]}-{role}-{self.suffix}"
        self.containers: list[Any] = []
        self.volumes: list[Any] = []
        self.network = network
        self.own_network = network is None

    @property
    def net(self) -> Any:
        """The sandbox's network (made by ``__enter__`` unless given)."""
        if self.network is None:
            raise SandboxError(f"the sandbox {self.name} has no network")
        return self.network

    def __enter__(self) -> Sandbox:  # noqa: PYI034
        from docker.errors import DockerException

        if not self.own_network:
            return self
        try:
            self.network = self.client.networks.create(
                self.name,
                driver="bridge",
                internal=True,
                labels=self.labels,
                check_duplicate=True,
                options={"com.docker.network.bridge.name": f"{firewall.BRIDGE_PREFIX}{self.suffix}"},
            )
        except DockerException as exc:
            raise SandboxError(f"could not create the sandbox network: {exc}") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        for c in reversed(self.containers):
            try:
                c.remove(force=True, v=True)
            except Exception as e:  # noqa: BLE001 - cleanup goes on; sweep() catches leftovers
                log.warning("could not remove container %s: %s", c.name, e)
        for v in self.volumes:
            try:
                v.remove(force=True)
            except Exception as e:  # noqa: BLE001
                log.warning("could not remove volume %s: %s", v.name, e)
        if self.network is not None and self.own_network:
            try:
                self.network.remove()
            except Exception as e:  # noqa: BLE001
                log.warning("could not remove network %s: %s", self.name, e)

    def start_policy(self, image: str, restarts: int) -> Any:
        """Create and start the policy container (see :meth:`create_policy`)."""
        container = self.create_policy(image, restarts)
        container.start()
        return container

    def create_policy(self, image: str, restarts: int) -> Any:
        """Create the policy container from the image id ``image`` with every restriction of the
        sandbox (not started). Raises :class:`SandboxError` when the engine created anything else
        (another image, a volume)."""
        kwargs = policy_options(self.backend.settings, image_volumes(self.client.images.get(image).attrs), restarts)
        kwargs.update(name=f"{self.name}-policy", labels={**self.labels, LABEL_ROLE: "policy"}, network=self.net.name)
        container = self._create(image, None, kwargs)
        check_created(container, image, "policy")
        # `network=` at create time gives no alias; reconnect with the fixed host name.
        self.net.disconnect(container)
        self.net.connect(container, aliases=[POLICY_HOST])
        return container

    def create_evaluator(self, command: list[str], volume: Any | None = None, stream: int = 0, streams: int = 1) -> Any:
        """Create (not start) the evaluator container on the sandbox network; ``stream`` (the shard
        index) picks its GPU when evaluator GPUs are configured (:func:`evaluator_gpu_options`);
        ``streams`` simulator processes run in it (memory ``evaluator_memory`` plus
        ``evaluator_stream_memory`` per further stream; CPU quota ``evaluator_cpus`` per stream,
        at most the engine's CPUs)."""
        s = self.backend.settings
        kwargs = evaluator_options(s, stream, streams, self.backend.engine_cpus() if s.evaluator_cpus else None)
        kwargs.update(name=f"{self.name}-evaluator", labels={**self.labels, LABEL_ROLE: "evaluator"})
        kwargs["network"] = self.net.name
        if volume is not None:
            kwargs["volumes"] = {volume.name: {"bind": SHARD_DIR, "mode": "rw"}}
        container = self._create(self.backend.evaluator_id, command, kwargs)
        check_created(container, self.backend.evaluator_id, "evaluator", allowed_volumes={SHARD_DIR})
        return container

    def volume(self) -> Any:
        """A volume of this sandbox (the shard file's), removed with it."""
        v = self.client.volumes.create(name=f"{self.name}-shard", labels=self.labels)
        self.volumes.append(v)
        return v

    def _create(self, image: str, command: list[str] | None, kwargs: dict[str, Any]) -> Any:
        from docker.errors import APIError, ImageNotFound

        network = kwargs.pop("network")
        try:
            container = self.client.containers.create(image, command, network=network, **kwargs)
        except ImageNotFound as exc:
            raise SandboxError(
                f"image {image} is not on this Docker engine: build it with docker/build-images.sh"
            ) from exc
        except APIError as exc:
            raise SandboxError(f"could not create a container from {image}: {exc.explanation or exc}") from exc
        self.containers.append(container)
        return container


def policy_options(s: Settings, volumes: list[str], restarts: int) -> dict[str, Any]:
    """The policy container's options (``containers.create`` keywords, without name, labels and
    network): read-only root, a tmpfs at /tmp and at each of the image's ``volumes``, a sized
    /dev/shm, no capabilities, no-new-privileges, a non-root user, memory/CPU/pids/nofile limits,
    capped logs, ``restarts`` engine restarts on failure, the runtime and GPUs configured."""
    tmpfs = {path: f"rw,nosuid,nodev,size={s.policy_volume_tmpfs_size}" for path in volumes}
    tmpfs["/tmp"] = f"rw,nosuid,nodev,size={s.policy_tmpfs_size}"
    kwargs: dict[str, Any] = {
        "detach": True,
        "user": s.policy_user,
        "read_only": True,
        "tmpfs": tmpfs,
        "shm_size": s.policy_shm_size,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "mem_limit": s.policy_memory,
        "memswap_limit": s.policy_memory,
        "nano_cpus": int(s.policy_cpus * 1e9),
        "pids_limit": s.policy_pids,
        "environment": {
            "PORT": str(s.policy_port),
            "HOST": "0.0.0.0",
            "HOME": "/tmp",
            "XDG_CACHE_HOME": "/tmp/.cache",
        },
        "log_config": {"type": "json-file", "config": {"max-size": "10m", "max-file": "1"}},
        "ulimits": [_ulimit("nofile", 4096)],
    }
    if restarts > 0:
        kwargs["restart_policy"] = {"Name": "on-failure", "MaximumRetryCount": restarts}
    if s.runtime:
        kwargs["runtime"] = s.runtime
    if s.gpus:
        kwargs["device_requests"] = [_gpu_request(s.gpus)]
    return kwargs


def evaluator_options(s: Settings, stream: int, streams: int, engine_cpus: int | None) -> dict[str, Any]:
    """The evaluator container's options (without name, labels, network and volumes): read-only
    root, tmpfs /tmp, no capabilities, memory for ``streams`` simulator processes, a CPU quota of
    ``evaluator_cpus`` per stream capped at ``engine_cpus`` (None: no cap known), the GPU of
    ``stream`` (:func:`evaluator_gpu_options`)."""
    from docker.utils import parse_bytes

    memory = parse_bytes(s.evaluator_memory) + (streams - 1) * parse_bytes(s.evaluator_stream_memory)
    kwargs: dict[str, Any] = {
        "detach": True,
        "read_only": True,
        "tmpfs": {"/tmp": "rw,nosuid,nodev,size=2g"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "mem_limit": memory,
        "memswap_limit": memory,
        "pids_limit": 4096,
        "environment": {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", "MUJOCO_GL": "egl"},
        "log_config": {"type": "json-file", "config": {"max-size": "50m", "max-file": "1"}},
    }
    if s.evaluator_cpus:
        # The engine refuses a quota above its CPUs ("Range of CPUs is from 0.01 to N"): with
        # LIBEROPRO_EVALUATOR_STREAMS set beyond them, every shard of a batching policy failed.
        cpus = min(s.evaluator_cpus * streams, engine_cpus or math.inf)
        kwargs["nano_cpus"] = int(cpus * 1e9)
    gpu = evaluator_gpu_options(s, stream)
    kwargs["environment"].update(gpu.pop("environment", {}))
    kwargs.update(gpu)
    return kwargs


def check_created(container: Any, image_id: str, role: str, allowed_volumes: set[str] | None = None) -> None:
    """The engine created ``container`` from ``image_id`` and without an unexpected volume (an
    image VOLUME the sandbox did not cover would be an unbounded writable directory on the host)."""
    attrs = container.attrs
    if attrs.get("Image") != image_id:
        raise SandboxError(
            f"the {role} container was created from {attrs.get('Image')}, not the pinned image "
            f"{image_id}; not starting it"
        )
    volumes = [
        m.get("Destination")
        for m in attrs.get("Mounts") or []
        if m.get("Type") == "volume" and m.get("Destination") not in (allowed_volumes or set())
    ]
    if volumes:
        raise SandboxError(f"the {role} container got volumes at {volumes}; not starting it")


def _ulimit(name: str, value: int) -> Any:
    from docker.types import Ulimit

    return Ulimit(name=name, soft=value, hard=value)


def evaluator_gpu_options(settings: Settings, stream: int) -> dict[str, Any]:
    """Container options that make evaluator stream ``stream`` render on its GPU
    (``settings.evaluator_gpu``); empty for CPU rendering. The container gets that one device
    (a device request with the ``gpu`` capability), the NVIDIA runtime is told to mount the
    driver's graphics libraries (``NVIDIA_DRIVER_CAPABILITIES``: EGL is a ``graphics``
    capability; the default ``compute,utility`` has no EGL), and ``MUJOCO_EGL_DEVICE_ID=0``:
    inside the container the one device it was given is EGL device 0 (an invalid id ends the
    evaluator with one line naming it: ``liberopro.stack.check_rendering``). The image must
    carry NVIDIA's EGL vendor file (``docker/evaluator.Dockerfile``, ``EGL_VENDOR=nvidia``)."""
    device = settings.evaluator_gpu(stream)
    if device is None:
        return {}
    from docker.types import DeviceRequest

    return {
        "device_requests": [DeviceRequest(device_ids=[device], capabilities=[["gpu"]])],
        "environment": {"NVIDIA_DRIVER_CAPABILITIES": "graphics,utility", "MUJOCO_EGL_DEVICE_ID": "0"},
    }


def _gpu_request(spec: str) -> Any:
    from docker.types import DeviceRequest

    spec = spec.strip()
    if spec == "all":
        return DeviceRequest(count=-1, capabilities=[["gpu"]])
    if spec.isdigit():
        return DeviceRequest(count=int(spec), capabilities=[["gpu"]])
    return DeviceRequest(device_ids=[d.strip() for d in spec.split(",") if d.strip()], capabilities=[["gpu"]])


def state(container: Any) -> dict[str, Any]:
    """The container's ``State`` as the engine has it now (``removed`` when it is gone)."""
    try:
        container.reload()
        return dict(container.attrs.get("State", {}))
    except Exception:  # noqa: BLE001 - gone
        return {"Status": "removed", "Running": False}


def logs(
    container: Any, stdout: bool = True, stderr: bool = True, tail: int | str = "all", since: float | None = None
) -> str:
    """The container's output (``since``: only what it wrote from that Unix time on); "" when it is gone."""
    try:
        extra = {"since": since} if since is not None else {}
        return str(container.logs(stdout=stdout, stderr=stderr, tail=tail, **extra).decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001
        return ""


def tar_one(name: str, data: bytes) -> bytes:
    """A tar archive holding one read-only file ``name`` (for ``put_archive``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o444
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
