"""The Docker sandbox: internal networks holding only a submission's policy container and its
evaluator containers.

A validation gets a network of its own with a fresh policy container and the evaluator that runs
the conformance check. A submission's shards on one worker share one policy container on one
network, the *node sandbox* (labelled ``org.liberopro.scope=node``): it is started by the first
shard the worker runs for that submission, serves every later one (model weights load once per
node, not once per shard) and is removed when the worker has nothing of that submission left to
run (:meth:`DockerBackend.release_policy`, called by the pipeline). Each shard adds one evaluator
container to that network, running ``ShardSpec.streams`` simulator processes against the one
policy (spec 1.1 ``max_concurrent_episodes``; the policy may batch their requests), and removes it
on return.

The policy container runs with a read-only root, a tmpfs /tmp, a sized /dev/shm, an empty
size-limited tmpfs at each VOLUME its image declares (so no anonymous volume and no writable
layer: nothing it writes reaches the host's disk), all capabilities dropped, no-new-privileges,
a non-root user, memory/CPU/pids limits and no route out (the internal network plus the host
rule of :mod:`.firewall`); optionally under gVisor (``runtime``) and with GPUs (``gpus``).

Image identity (docs/platform.md): the evaluator image is pinned by id when the backend starts
and every evaluator container's image id is checked before it starts; a policy image is used by
id only, never one of the platform's own images; an uploaded archive is loaded without any of
its names (:mod:`.archive`) and tagged ``liberopro/submission/<id>``; a registry digest is
pulled only from an allowed registry, and a failed pull is reported without the engine's
(network) detail. The shard's slice of the hidden manifest goes into a volume mounted into the
evaluator container only. The evaluator reports through marked stdout lines
(:mod:`liberopro.shard`, the image's entry point); its stderr is kept for admins only.

Every container, volume and network carries ``org.liberopro.sandbox=1`` and the owning
worker's name: :class:`_Sandbox` removes them on every return path, and :meth:`DockerBackend.sweep`
removes what a killed worker left behind.
"""

from __future__ import annotations

import io
import logging
import math
import os
import posixpath
import queue
import secrets
import tarfile
import threading
import time
from collections.abc import Callable
from typing import Any

import tenacity
from liberopro.schema.results import ConformanceEvent, DoneEvent, EpisodeEvent, EpisodeRecord, ErrorEvent
from liberopro.schema.shard import CheckSpec, ShardSpec, parse_event

from liberopro_platform.config import Settings
from liberopro_platform.image_refs import (
    IMAGE_ID,
    SUBMISSION_REPO,
    describe_allowed,
    is_platform_tag,
    parse_repo_digest,
    registry_allowed,
)
from liberopro_platform.sandbox import firewall
from liberopro_platform.sandbox.archive import ArchiveRejected, sanitize_archive
from liberopro_platform.sandbox.base import (
    POLICY_CRASHED,
    POLICY_OUT_OF_MEMORY,
    POLICY_TRANSPORT_FAILURES,
    PolicyRejected,
    PolicySource,
    PreparedImage,
    SandboxError,
    ShardCallbacks,
    ShardOutcome,
    ValidationOutcome,
    dispatch_event,
    policy_error_outcome,
    truncate_log,
)

log = logging.getLogger("liberopro_platform.sandbox.docker")

LABEL = "org.liberopro.sandbox"
LABEL_WORKER = "org.liberopro.worker"
#: The platform's deployment id (``platform_meta``): cleanup touches only its own deployment's
#: sandboxes, whatever else runs on the engine.
LABEL_DEPLOYMENT = "org.liberopro.deployment"
LABEL_SUBMISSION = "org.liberopro.submission"
LABEL_ROLE = "org.liberopro.role"
#: ``node`` on a submission's node sandbox (network and policy container shared by its shards).
LABEL_SCOPE = "org.liberopro.scope"
POLICY_HOST = "policy"
SHARD_DIR = "/shard"

#: At most this many VOLUMEs per policy image (each becomes a tmpfs mount).
MAX_IMAGE_VOLUMES = 16
_FORBIDDEN_VOLUME_ROOTS = ("/proc", "/sys", "/dev")
UPLOAD_AGAIN = "upload it: `liberopro submit IMAGE --upload` (sends `docker save IMAGE`)"

LOCAL_RUN_HINT = (
    "reproduce it locally: `docker run --rm -p 8000:8000 --read-only --tmpfs /tmp "
    "--user 65534:65534 --cap-drop ALL --security-opt no-new-privileges IMAGE`, then "
    "`liberopro check-policy http://127.0.0.1:8000`"
)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _tar_one(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o444
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _PolicyWatch:
    """Collects the policy container's ``die`` and ``oom`` events (a thread on the event stream)."""

    def __init__(self, client, container_id: str) -> None:
        self.deaths: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stream = client.events(
            decode=True, since=int(time.time()) - 1, filters={"container": container_id, "type": "container"}
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        oom_pending = False
        try:
            for ev in self._stream:
                action = ev.get("Action") or ev.get("status")
                if action == "oom":
                    oom_pending = True
                elif action == "die":
                    attrs = ev.get("Actor", {}).get("Attributes", {})
                    with self._lock:
                        self.deaths.append(
                            {
                                "time": ev.get("timeNano", 0) / 1e9,
                                "oom": oom_pending,
                                "exit_code": int(attrs.get("exitCode", -1)),
                            }
                        )
                    oom_pending = False
        except Exception as exc:  # noqa: BLE001 - the stream is closed when the sandbox goes away
            log.debug("policy event stream ended: %r", exc)

    def deaths_since(self, t0: float) -> list[dict[str, Any]]:
        with self._lock:
            return [d for d in self.deaths if d["time"] >= t0]

    def close(self) -> None:
        try:
            self._stream.close()
        except Exception as exc:  # noqa: BLE001
            log.debug("closing the event stream: %r", exc)


class _Sandbox:
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
        self.containers: list = []
        self.volumes: list = []
        self.network = network
        self._own_network = network is None

    def __enter__(self) -> _Sandbox:  # noqa: PYI034
        from docker.errors import DockerException

        if not self._own_network:
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
        if self.network is not None and self._own_network:
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
        s = self.backend.settings
        tmpfs = {
            path: f"rw,nosuid,nodev,size={s.policy_volume_tmpfs_size}"
            for path in image_volumes(self.client.images.get(image).attrs)
        }
        tmpfs["/tmp"] = f"rw,nosuid,nodev,size={s.policy_tmpfs_size}"
        kwargs: dict[str, Any] = {
            "name": f"{self.name}-policy",
            "detach": True,
            "labels": {**self.labels, LABEL_ROLE: "policy"},
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
            "network": self.network.name,
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
        container = self._create(image, None, kwargs)
        _check_created(container, image, "policy")
        self._connect_alias(container)
        return container

    def create_evaluator(self, command: list[str], volume: Any | None = None, stream: int = 0, streams: int = 1) -> Any:
        """Create (not start) the evaluator container on the sandbox network; ``stream`` (the shard
        index) picks its GPU when evaluator GPUs are configured (:func:`evaluator_gpu_options`);
        ``streams`` simulator processes run in it (memory ``evaluator_memory`` plus
        ``evaluator_stream_memory`` per further stream; CPU quota ``evaluator_cpus`` per stream)."""
        s = self.backend.settings
        from docker.utils import parse_bytes

        memory = parse_bytes(s.evaluator_memory) + (streams - 1) * parse_bytes(s.evaluator_stream_memory)
        kwargs: dict[str, Any] = {
            "name": f"{self.name}-evaluator",
            "detach": True,
            "labels": {**self.labels, LABEL_ROLE: "evaluator"},
            "read_only": True,
            "tmpfs": {"/tmp": "rw,nosuid,nodev,size=2g"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "init": True,
            "mem_limit": memory,
            "memswap_limit": memory,
            "pids_limit": 4096,
            "network": self.network.name,
            "environment": {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", "MUJOCO_GL": "egl"},
            "log_config": {"type": "json-file", "config": {"max-size": "50m", "max-file": "1"}},
        }
        if s.evaluator_cpus:
            # The engine refuses a quota above its CPUs ("Range of CPUs is from 0.01 to N"): with
            # LIBEROPRO_EVALUATOR_STREAMS set beyond them, every shard of a batching policy failed.
            cpus = min(s.evaluator_cpus * streams, self.backend.engine_cpus() or math.inf)
            kwargs["nano_cpus"] = int(cpus * 1e9)
        gpu = evaluator_gpu_options(s, stream)
        kwargs["environment"].update(gpu.pop("environment", {}))
        kwargs.update(gpu)
        if volume is not None:
            kwargs["volumes"] = {volume.name: {"bind": SHARD_DIR, "mode": "rw"}}
        container = self._create(self.backend.evaluator_id, command, kwargs)
        _check_created(container, self.backend.evaluator_id, "evaluator", allowed_volumes={SHARD_DIR})
        return container

    def volume(self) -> Any:
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

    def _connect_alias(self, container: Any) -> None:
        # `network=` at create time gives no alias; reconnect with the fixed host name.
        self.network.disconnect(container)
        self.network.connect(container, aliases=[POLICY_HOST])


def image_volumes(attrs: dict[str, Any]) -> list[str]:
    """The VOLUME paths an image's config declares (``docker image inspect`` attributes), normalized."""
    volumes = (attrs.get("Config") or {}).get("Volumes") or {}
    return sorted({posixpath.normpath(v) for v in volumes})


def check_volumes(paths: list[str]) -> None:
    """Raise :class:`PolicyRejected` for VOLUMEs no tmpfs can stand in for."""
    fix = (
        "remove the VOLUME line (files under that path stay readable in the read-only image; write scratch "
        "files to /tmp)"
    )
    if len(paths) > MAX_IMAGE_VOLUMES:
        raise PolicyRejected(f"the image declares {len(paths)} VOLUMEs; at most {MAX_IMAGE_VOLUMES} are accepted", fix)
    for p in paths:
        if not p.startswith("/") or p == "/" or any(p == r or p.startswith(r + "/") for r in _FORBIDDEN_VOLUME_ROOTS):
            raise PolicyRejected(f"the image declares VOLUME {p}, which the sandbox cannot mount", fix)


def _check_created(container: Any, image_id: str, role: str, allowed_volumes: set[str] | None = None) -> None:
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


def _state(container: Any) -> dict[str, Any]:
    try:
        container.reload()
        return container.attrs.get("State", {})
    except Exception:  # noqa: BLE001 - gone
        return {"Status": "removed", "Running": False}


def _logs(
    container: Any, stdout: bool = True, stderr: bool = True, tail: int | str = "all", since: float | None = None
) -> str:
    """The container's output (``since``: only what it wrote from that Unix time on); "" when it is gone."""
    try:
        extra = {"since": since} if since is not None else {}
        return container.logs(stdout=stdout, stderr=stderr, tail=tail, **extra).decode("utf-8", errors="replace")
    except Exception:  # noqa: BLE001
        return ""


class DockerBackend:
    """Runs policies and evaluators as sibling containers on one Docker engine.

    ``worker`` names the owner in every resource's labels; ``deployment`` (the database's
    deployment id, :func:`liberopro_platform.db.deployment_id`) scopes them to this platform, so
    that :meth:`sweep` and :meth:`owners` never see another platform's sandboxes on the same
    engine (None: unscoped, for tools and tests that own the whole engine)."""

    name = "docker"

    def __init__(self, settings: Settings, worker: str, deployment: str | None = None) -> None:
        from docker.errors import DockerException

        import docker

        self.settings = settings
        self.worker = worker
        self.deployment = deployment
        self._engine_cpus: int | None = None
        try:
            self.client = docker.from_env(timeout=300)
            self.client.ping()
        except DockerException as exc:
            raise SandboxError(
                f"the Docker engine does not answer ({exc}): start dockerd "
                "(scripts/start-dockerd.sh) or mount /var/run/docker.sock into the worker"
            ) from exc
        firewall.ensure(settings.sandbox_firewall, self.host_has_firewall_rules)
        #: The evaluator image's id, pinned for this backend's lifetime.
        self.evaluator_id: str = self._pin_platform_image("evaluator_image", required=True)  # type: ignore[assignment]
        #: Ids of the platform's own images, never run as a policy.
        self.platform_ids: set[str] = {self.evaluator_id} | {
            i for i in (self._pin_platform_image(f) for f in ("platform_image", "redis_image", "postgres_image")) if i
        }

    def host_has_firewall_rules(self) -> bool | None:
        """Whether the host's network namespace holds the sandbox firewall rules
        (:mod:`.firewall`), asked of the engine: the platform image runs ``firewall --check``
        there (host network, NET_ADMIN, ~1 s). None when it cannot tell (no
        ``platform_image`` setting, or the check itself failed to run)."""
        from docker.errors import ContainerError, DockerException

        if not self.settings.platform_image:
            return None
        try:
            self.client.containers.run(
                self.settings.platform_image,
                ["python", "-m", "liberopro_platform.sandbox.firewall", "--check"],
                network_mode="host",
                cap_add=["NET_ADMIN", "NET_RAW"],
                user="root",
                remove=True,
            )
        except ContainerError as exc:
            return False if exc.exit_status == 3 else None
        except DockerException as exc:
            log.info("could not check the host's sandbox firewall rules: %s", exc)
            return None
        return True

    def _pin_platform_image(self, field: str, required: bool = False) -> str | None:
        """The image id of the platform image setting ``field`` (an id, or a tag resolved now)."""
        from docker.errors import DockerException, ImageNotFound

        value = getattr(self.settings, field)
        env = f"LIBEROPRO_{field.upper()}"
        if not value:
            return None
        try:
            image_id = self.client.images.get(value).id
        except ImageNotFound:
            if IMAGE_ID.match(value) and not required:
                return value  # not on this engine, yet never to run as a policy here either
            msg = (
                f"{env}={value} is not on this Docker engine: build it (docker/build-images.sh writes the new ids "
                "to .env) and restart the worker"
            )
            if required:
                raise SandboxError(msg) from None
            log.warning(msg)
            return None
        except DockerException as exc:
            raise SandboxError(f"could not inspect {env}={value}: {exc}") from exc
        if not IMAGE_ID.match(value):
            log.warning(
                "%s is the tag %s: pinned to %s for this worker's lifetime; name it by id (docker/"
                "build-images.sh writes the ids to .env)",
                env,
                value,
                image_id,
            )
        return image_id

    # ------------------------------------------------------------ image
    def prepare(self, source: PolicySource, upload_path: str | None = None) -> PreparedImage:
        """Load the uploaded archive (without its names) or find/pull the referenced image, pin it
        to its id and check it: no platform image, size, protocol label, VOLUMEs. An uploaded
        image that passes is tagged ``liberopro/submission/<submission id>``."""
        from submission_spec.transports import PROTOCOL_LABEL, protocol_from_labels

        s = self.settings
        notes: list[str] = []
        added = False
        if upload_path is not None:
            image_id, dropped, added = self._load_archive(upload_path)
            if dropped:
                notes.append(f"the archive's own names ({', '.join(dropped[:5])}) were ignored")
        else:
            image_id = self._resolve_reference(source.image or "")
        image = self.client.images.get(image_id)
        try:
            if image.id in self.platform_ids or any(is_platform_tag(t) for t in image.tags):
                raise PolicyRejected(
                    "the image is one of the platform's own images (evaluator, platform, redis, "
                    "postgres or a base image), which never run as a policy",
                    "submit your policy's own image",
                )
            size = int(image.attrs.get("Size", 0))
            if size > s.max_image_bytes:
                raise PolicyRejected(
                    f"the image is {_gib(size)} uncompressed; the limit is {_gib(s.max_image_bytes)}",
                    "make it smaller: a multi-stage build, no build caches, package caches or "
                    "checkpoints the policy does not load",
                )
            labels = image.labels or {}
            try:
                protocol_from_labels(labels)
            except ValueError as exc:
                raise PolicyRejected(
                    f"the image label {PROTOCOL_LABEL}={labels.get(PROTOCOL_LABEL)!r} is not a "
                    f"protocol this platform speaks ({exc})",
                    f"set LABEL {PROTOCOL_LABEL}=liberopro (or openpi, openvla) in the Dockerfile",
                ) from exc
            volumes = image_volumes(image.attrs)
            check_volumes(volumes)
        except PolicyRejected:
            if added:
                self._remove_refused_upload(image)
            raise
        if volumes:
            notes.append(
                f"the image declares VOLUME {' '.join(volumes)}: the sandbox mounts an empty tmpfs of "
                f"{s.policy_volume_tmpfs_size} at each instead of a volume on the host's disk (files the "
                "image holds under those paths are not visible)"
            )
        if upload_path is not None:
            image.tag(f"{SUBMISSION_REPO}/{source.submission_id}", "latest")
        return PreparedImage(digest=image.id, size=size, labels=labels, notes=notes)

    def ensure_image(self, source: PolicySource) -> None:
        """Make the submission's pinned image (``source.image``, an id) present on this engine: a
        shard may run on another node than its validation (docs/platform.md, "Several nodes").
        Absent, it is loaded again from the uploaded archive (``source.upload_path``, on the data
        directory the nodes share) or pulled again by its registry digest (``source.reference``);
        either must give the same image id. Raises :class:`SandboxError` (a retry may land on a
        node that has it) naming what is missing."""
        from docker.errors import ImageNotFound

        if not source.image:
            raise SandboxError(f"submission {source.submission_id} has no pinned image to run")
        try:
            self.client.images.get(source.image)
            return
        except ImageNotFound:
            pass
        try:
            if source.upload_path and os.path.exists(source.upload_path):
                got = self._load_archive(source.upload_path)[0]
            elif source.reference and parse_repo_digest(source.reference) is not None:
                got = self._resolve_reference(source.reference)
            else:
                where = (
                    f"its uploaded archive is not at {source.upload_path} (share the data directory between the nodes)"
                    if source.upload_path
                    else "no uploaded archive was kept (set LIBEROPRO_KEEP_UPLOADS_UNTIL_DONE=1 and share the data "
                    "directory between the nodes)"
                )
                raise SandboxError(
                    f"image {source.image[:19]} is not on this node's engine ({self.worker}) and cannot be fetched: "
                    f"{where}, and the submission names no registry digest"
                )
        except PolicyRejected as exc:
            raise SandboxError(f"image {source.image[:19]} could not be fetched on {self.worker}: {exc}") from exc
        if got != source.image:
            raise SandboxError(
                f"fetching image {source.image[:19]} on {self.worker} gave {got[:19]}: the archive or the registry "
                "digest no longer holds the validated image"
            )
        if source.upload_path:  # as on the validating node: the engine knows whose image it is
            self.client.images.get(got).tag(f"{SUBMISSION_REPO}/{source.submission_id}", "latest")
        log.info("image %s fetched on %s for submission %s", got[:19], self.worker, source.submission_id)

    def _remove_refused_upload(self, image: Any) -> None:
        """Remove a refused upload that was not on the engine before it, unless something else (a
        tag, a container, a child image) uses it by now; never a platform image."""
        from docker.errors import DockerException

        image.reload()
        if image.tags or image.id in self.platform_ids:
            return
        try:
            self.client.images.remove(image.id, noprune=False)
        except DockerException as exc:
            log.info("refused upload %s stays on the engine: %s", image.id[:19], exc)

    def _resolve_reference(self, ref: str) -> str:
        """The local image id of ``ref``: an image id present here, or an allowed registry's
        digest (pulled when absent)."""
        from docker.errors import DockerException, ImageNotFound

        if IMAGE_ID.match(ref):
            try:
                return self.client.images.get(ref).id
            except ImageNotFound:
                raise PolicyRejected(f"image {ref} is no longer on the platform's engine", UPLOAD_AGAIN) from None
        digest = parse_repo_digest(ref)
        if digest is None:
            raise PolicyRejected(
                f"the image reference {ref[:200]!r} is neither sha256:<id> nor repo@sha256:<digest>", UPLOAD_AGAIN
            )
        if not registry_allowed(digest, self.settings.allowed_registries):
            raise PolicyRejected(
                f"{digest.registry} is not a registry this platform pulls from (allowed: "
                f"{describe_allowed(self.settings.allowed_registries)})",
                UPLOAD_AGAIN,
            )
        try:
            return self.client.images.get(ref).id
        except ImageNotFound:
            pass
        except DockerException as exc:
            raise PolicyRejected(f"image {ref} could not be found", UPLOAD_AGAIN, admin_detail=str(exc)) from exc
        return self._pull(ref, digest.registry)

    def _pull(self, ref: str, registry: str) -> str:
        """Pull ``ref`` (a digest of an allowed registry). The engine's error stays with the admins:
        the submitter reads the same sentence whatever went wrong (no host or port detail)."""
        from docker.errors import DockerException

        try:
            return self.client.images.pull(ref).id
        except DockerException as exc:
            log.warning("pull of %s failed: %s", ref, exc)
            raise PolicyRejected(
                f"image {ref} could not be pulled from {registry}",
                "check that this digest exists in that registry and can be pulled without "
                f"credentials, or {UPLOAD_AGAIN}",
                admin_detail=f"pull {ref}: {exc}",
            ) from exc

    def _load_archive(self, path: str) -> tuple[str, list[str], bool]:
        """Load the uploaded archive at ``path`` without any of its names; returns the image id,
        the names the archive asked for (ignored) and whether the image is new on the engine."""
        from docker.errors import DockerException, ImageNotFound

        fix = "create the archive with `docker save IMAGE -o policy.tar` (one image) and upload it again"
        clean = f"{path}.clean"
        try:
            try:
                info = sanitize_archive(path, clean)
            except ArchiveRejected as exc:
                raise PolicyRejected(f"the uploaded archive was refused: {exc}", fix) from exc
            try:
                self.client.images.get(info.image_id)
                existed = True
            except ImageNotFound:
                existed = False
            loaded: set[str] = set()
            named: list[str] = []
            try:
                with open(clean, "rb") as fh:
                    for chunk in self.client.api.load_image(fh):
                        if "error" in chunk:
                            raise PolicyRejected(
                                f"the uploaded archive could not be loaded: {chunk['error'][:500]}", fix
                            )
                        text = chunk.get("stream", "")
                        if "Loaded image ID:" in text:
                            loaded.add(text.split("Loaded image ID:")[1].strip())
                        elif "Loaded image:" in text:
                            named.append(text.split("Loaded image:")[1].strip())
            except DockerException as exc:
                raise PolicyRejected(f"the uploaded archive could not be loaded: {str(exc)[:500]}", fix) from exc
            if named:  # never: the archive was rewritten without names
                raise SandboxError(f"the engine named the upload {named} although its archive carried no names")
            if loaded - {info.image_id}:
                raise PolicyRejected(f"the archive loaded {sorted(loaded)}, not the image its manifest names", fix)
            try:
                self.client.images.get(info.image_id)
            except ImageNotFound:
                raise PolicyRejected("the engine loaded no image from the archive", fix) from None
            return info.image_id, info.dropped_tags, not existed
        finally:
            try:
                os.remove(clean)
            except OSError:
                pass

    # ------------------------------------------------------------ validation
    def validate(self, source: PolicySource, on_heartbeat: Callable[[], bool | None]) -> ValidationOutcome:
        """The policy alone in a sandbox, checked by the conformance checker in the evaluator
        image, within ``validation_time_limit_s``."""
        s = self.settings
        spec = CheckSpec(
            protocol=source.protocol,
            health_timeout_s=s.validation_health_timeout_s,
            request_timeout_s=s.validation_request_timeout_s,
            act_limit_s=s.validation_act_limit_s,
        )
        if s.validation_drop_caches:
            self.forget_host_caches()
        with _Sandbox(self, source.submission_id, "validation") as sb:
            policy = sb.start_policy(source.image, restarts=0)
            url = f"http://{POLICY_HOST}:{s.policy_port}"
            checker = sb.create_evaluator(["check", url, spec.model_dump_json()])
            checker.start()
            deadline = time.monotonic() + s.validation_time_limit_s
            next_beat = 0.0
            died: dict[str, Any] | None = None
            timed_out = cancelled = False
            while True:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + min(2.0, s.heartbeat_interval_s)
                    if on_heartbeat() is False:
                        cancelled = True
                        break
                if not _state(checker).get("Running"):
                    break
                pstate = _state(policy)
                if not pstate.get("Running"):
                    died = pstate
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.3)
            policy_log = truncate_log(_logs(policy), s.log_max_bytes)
            if died is not None or timed_out or cancelled:
                checker.stop(timeout=2)
            report = None
            for line in _logs(checker, stderr=False).splitlines():
                ev = parse_event(line)
                if isinstance(ev, ConformanceEvent):
                    report = ev.report
        if cancelled:
            return ValidationOutcome(ok=False, policy_log=policy_log, failure="cancelled", fix="")
        if died is not None:
            return ValidationOutcome(
                ok=False,
                policy_log=policy_log,
                report=report,
                failure=self._death_text(died) + " before passing the conformance check",
                fix=f"make the server start and stay up; {LOCAL_RUN_HINT}. Its output is in the log below",
            )
        if timed_out:
            return ValidationOutcome(
                ok=False,
                policy_log=policy_log,
                report=report,
                failure=f"validation did not finish within {s.validation_time_limit_s:.0f} s",
                fix="answer /health, /metadata, /reset and /act promptly; " + LOCAL_RUN_HINT,
            )
        if report is None:
            raise SandboxError(
                "the conformance checker produced no report: " + _logs(checker, stdout=False, tail=30)[-2000:]
            )
        return _validation_outcome(report, policy_log)

    def forget_host_caches(self) -> str | None:
        """Drop the host kernel's clean page, dentry and inode caches (``sync; echo 3 >
        /proc/sys/vm/drop_caches``) before a validation, whose output the submitter reads: a
        policy in a hidden shard can leave a pattern in the page cache of its own image's files
        (which pages it read), and a later validation of an image sharing those layers can read
        it back without loading a page (``mincore`` on a file it owns; 256 of 256 bits read back
        in a test on overlay2). Flushed, every page reads cold (docs/platform.md, "What remains
        observable"). Done by this process when it may write the file (a worker running as root
        on the host), else by a privileged one-shot container of the evaluator image; returns
        how, or None after logging a warning when neither works (a rootless or restricted engine:
        the channel stays open; run validation on other nodes than shards there)."""
        from docker.errors import DockerException

        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("3\n")
            return "this process"
        except OSError:
            pass
        try:
            self.client.containers.run(
                self.evaluator_id,
                ["sync && echo 3 > /proc/sys/vm/drop_caches"],
                entrypoint=["sh", "-c"],
                privileged=True,
                user="0",
                network_mode="none",
                remove=True,
            )
            return "a privileged container"
        except DockerException as exc:
            log.warning(
                "could not drop the host's page cache before a validation (%s): what a policy left in the page "
                "cache of its image during hidden shards stays readable to a later validation on this node",
                str(exc).strip()[:300],
            )
            return None

    def _death_text(self, state: dict[str, Any]) -> str:
        if state.get("OOMKilled"):
            return (
                f"the policy container was killed for using more than its memory limit ({self.settings.policy_memory})"
            )
        code = state.get("ExitCode")
        return f"the policy container exited with code {code}"

    # ------------------------------------------------------------ shard
    def run_shard(
        self, source: PolicySource, spec: ShardSpec, callbacks: ShardCallbacks, time_limit_s: float
    ) -> ShardOutcome:
        """Run ``spec`` against the submission's policy container on this worker (the node sandbox,
        :meth:`node_policy`: started now or reused from an earlier shard, restarted by the engine
        on a crash up to ``policy_restarts`` times in this shard) with a fresh evaluator container on its
        network, the shard file on its own volume; the evaluator and the volume are removed on
        return, the policy container stays for the next shard (:meth:`release_policy`). The
        policy log of the outcome is what the policy wrote during this shard."""
        self.ensure_image(source)
        started = time.time()
        network, policy = self.node_policy(source)
        with _Sandbox(self, spec.submission_id, f"shard{spec.shard_index}", network=network) as sb:
            volume = sb.volume()
            watch = _PolicyWatch(self.client, policy.id)
            try:
                url = f"http://{POLICY_HOST}:{self.settings.policy_port}"
                evaluator = sb.create_evaluator(
                    ["run", url, f"{SHARD_DIR}/shard.json"],
                    volume=volume,
                    stream=spec.shard_index,
                    streams=spec.streams,
                )
                if not evaluator.put_archive(SHARD_DIR, _tar_one("shard.json", spec.model_dump_json().encode())):
                    raise SandboxError("could not copy the shard file into the evaluator's volume")
                evaluator.start()
                return self._follow(evaluator, policy, watch, callbacks, time_limit_s, started)
            finally:
                watch.close()

    # ------------------------------------------------------------ the node sandbox
    def _node_filters(self, submission_id: str | None = None) -> dict[str, list[str]]:
        filters = self._filters(self.worker)
        filters["label"].append(f"{LABEL_SCOPE}=node")
        if submission_id is not None:
            filters["label"].append(f"{LABEL_SUBMISSION}={submission_id}")
        return filters

    def node_policy(self, source: PolicySource) -> tuple[Any, Any]:
        """(network, policy container) of ``source``'s submission on this worker: the running (or
        restarting) container of an earlier shard, else a fresh one (a container that exited,
        e.g. after its restarts ran out, is replaced; so is one of another image), started on
        the node sandbox's network (made if absent). Raises :class:`SandboxError`."""
        from docker.errors import DockerException

        sid = source.submission_id
        try:
            networks = self.client.networks.list(filters=self._node_filters(sid))
            containers = self.client.containers.list(all=True, filters=self._node_filters(sid))
        except DockerException as exc:
            raise SandboxError(f"cannot list the node sandbox of {sid}: {exc}") from exc
        network = networks[0] if len(networks) == 1 else None
        keep = None
        for c in containers:
            state = _state(c)
            usable = (
                network is not None
                and keep is None
                and c.labels.get(LABEL_ROLE) == "policy"
                and (state.get("Running") or state.get("Restarting"))
                and c.attrs.get("Image") == source.image
                and network.name in (c.attrs.get("NetworkSettings", {}).get("Networks") or {})
            )
            if usable:
                keep = c
                continue
            try:
                c.remove(force=True, v=True)
            except DockerException as exc:
                log.warning("node sandbox of %s: could not remove %s: %s", sid, c.name, exc)
        if keep is not None:
            self._renew_restarts(keep)
            return network, keep
        if network is None:
            for n in networks:  # more than one: leftovers of an interrupted start
                try:
                    n.remove()
                except DockerException as exc:
                    log.warning("node sandbox of %s: could not remove network %s: %s", sid, n.name, exc)
        node = _Sandbox(self, sid, "node", network=network)
        node.labels[LABEL_SCOPE] = "node"
        try:
            if network is None:
                node._own_network = True
                node.__enter__()
            return node.network, node.start_policy(source.image, restarts=self.settings.policy_restarts)
        except BaseException:
            node.__exit__(None, None, None)
            raise

    def _renew_restarts(self, policy: Any) -> None:
        """Give a reused policy container ``policy_restarts`` more restarts for the shard about to
        use it (the engine's ``on-failure`` count runs over the container's life: without this a
        policy that crashed in earlier shards on this worker had no restart left, and every
        episode after its next crash failed, depending on how the shards fell on workers)."""
        from docker.errors import DockerException

        n = self.settings.policy_restarts
        if n <= 0:
            return
        count = int(policy.attrs.get("RestartCount", 0))
        try:
            policy.update(restart_policy={"Name": "on-failure", "MaximumRetryCount": count + n})
        except DockerException as exc:
            log.warning("could not renew the restarts of %s: %s", policy.name, exc)

    def policy_submissions(self) -> set[str]:
        """Submission ids whose node sandbox (policy container or network) this worker holds on the engine."""
        from docker.errors import DockerException

        try:
            resources = [
                *self.client.containers.list(all=True, filters=self._node_filters()),
                *self.client.networks.list(filters=self._node_filters()),
            ]
        except DockerException as exc:
            raise SandboxError(f"cannot list the node sandboxes: {exc}") from exc
        labels = [getattr(r, "labels", None) or r.attrs.get("Labels") or {} for r in resources]
        return {lab[LABEL_SUBMISSION] for lab in labels if lab.get(LABEL_SUBMISSION)}

    def release_policy(self, submission_id: str) -> int:
        """Remove this worker's node sandbox of ``submission_id`` (its policy container, any
        evaluator still on its network, the network); returns how many resources went."""
        from docker.errors import DockerException

        n = 0
        try:
            networks = self.client.networks.list(filters=self._node_filters(submission_id))
            doomed = self.client.containers.list(all=True, filters=self._node_filters(submission_id))
            for net in networks:
                net.reload()
                doomed += [self.client.containers.get(cid) for cid in (net.attrs.get("Containers") or {})]
        except DockerException as exc:
            raise SandboxError(f"cannot list the node sandbox of {submission_id}: {exc}") from exc
        for c in {c.id: c for c in doomed}.values():
            try:
                c.remove(force=True, v=True)
                n += 1
            except DockerException as exc:
                log.warning("release of %s: container %s: %s", submission_id, c.name, exc)
        for net in networks:
            try:
                net.remove()
                n += 1
            except DockerException as exc:
                log.warning("release of %s: network %s: %s", submission_id, net.name, exc)
        return n

    def engine_cpus(self) -> int | None:
        """The engine's CPUs (``docker info`` NCPU, read once); None when it does not say."""
        if self._engine_cpus is None:
            try:
                self._engine_cpus = int(self.client.info().get("NCPU") or 0)
            except Exception as exc:  # noqa: BLE001 - the engine's errors are infrastructure faults
                raise SandboxError(f"cannot read the engine's CPUs: {exc}") from exc
        return self._engine_cpus or None

    def auto_streams(self) -> int:
        """Evaluator streams that fit this engine next to one policy container: the engine's
        CPUs less the policy's (none when the policy has GPUs), and its memory less the policy's
        and one evaluator's, over ``evaluator_stream_memory`` per further stream; at least 1.
        The memory limits and CPU quotas of the running sandbox containers of *other* workers on
        the engine (several workers per engine, e.g. one per GPU) are taken off first: each
        worker counting the whole engine as its own would let their evaluators together ask for
        several times its memory."""
        from docker.utils import parse_bytes

        s = self.settings
        try:
            info = self.client.info()
            others = [
                c
                for c in self.client.containers.list(filters={"label": [f"{LABEL}=1"], "status": "running"})
                if c.labels.get(LABEL_WORKER) != self.worker
            ]
        except Exception as exc:  # noqa: BLE001 - the engine's errors are infrastructure faults
            raise SandboxError(f"cannot read the engine's CPUs and memory: {exc}") from exc
        host = [c.attrs.get("HostConfig") or {} for c in others]
        taken_memory = sum(int(h.get("Memory") or 0) for h in host)
        taken_cpus = sum(int(h.get("NanoCpus") or 0) for h in host) / 1e9
        cpus = int(info.get("NCPU") or 1) - taken_cpus - (0 if s.gpus else math.ceil(s.policy_cpus))
        per = s.evaluator_cpus or 1.0
        left = (
            int(info.get("MemTotal") or 0)
            - taken_memory
            - parse_bytes(s.policy_memory)
            - parse_bytes(s.evaluator_memory)
        )
        by_memory = 1 + max(0, left) // parse_bytes(s.evaluator_stream_memory)
        return max(1, min(int(cpus // per), by_memory, 64))

    def _follow(
        self,
        evaluator: Any,
        policy: Any,
        watch: _PolicyWatch,
        callbacks: ShardCallbacks,
        time_limit_s: float,
        started: float,
    ) -> ShardOutcome:
        s = self.settings
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            buf = b""
            try:
                for chunk in evaluator.logs(stream=True, follow=True, stdout=True, stderr=False):
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        lines.put(line.decode("utf-8", errors="replace"))
            except Exception as exc:  # noqa: BLE001
                lines.put(exc)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + time_limit_s
        next_beat = next_stop_check = 0.0
        restarts = {"seen": int(policy.attrs.get("RestartCount", 0))}  # an earlier shard's count
        last = {"record_at": time.time()}
        finished: DoneEvent | ErrorEvent | None = None
        status = None

        def name_cause(record: EpisodeRecord) -> EpisodeRecord:
            if record.termination_reason not in POLICY_TRANSPORT_FAILURES:
                return record
            record, restarts["seen"] = self._name_policy_death(
                record, policy, watch, last["record_at"], restarts["seen"]
            )
            return record

        while True:
            if time.monotonic() >= next_beat:
                callbacks.heartbeat()
                next_beat = time.monotonic() + s.heartbeat_interval_s
            if time.monotonic() >= next_stop_check:
                next_stop_check = time.monotonic() + 2.0
                if callbacks.should_stop():
                    status = "stopped"
                    break
            if time.monotonic() > deadline:
                status = "timed_out"
                break
            try:
                item = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if item is None or isinstance(item, Exception):
                break
            ev = parse_event(item)
            if ev is None:
                continue
            end = dispatch_event(ev, callbacks, name_cause)
            if isinstance(ev, EpisodeEvent):
                last["record_at"] = time.time()
            if end is not None:
                finished = end
        if status is not None:
            evaluator.stop(timeout=3)
        exit_code = evaluator.wait(timeout=60).get("StatusCode") if status is None else None
        policy_log = truncate_log(_logs(policy, since=started), s.log_max_bytes)
        internal = _logs(evaluator, stdout=False, tail=40)[-4000:]
        if status == "stopped":
            return ShardOutcome("stopped", "the submission was cancelled", internal, policy_log)
        if status == "timed_out":
            return ShardOutcome(
                "timed_out",
                f"the shard did not finish within its time limit ({time_limit_s:.0f} s)",
                internal,
                policy_log,
            )
        if isinstance(finished, DoneEvent):
            return ShardOutcome("completed", "", internal, policy_log)
        if isinstance(finished, ErrorEvent) and finished.kind == "policy":
            pstate = _state(policy)
            cause = self._death_text(pstate) if not pstate.get("Running") else ""
            return policy_error_outcome(
                _failure_reason(finished.reason), str(finished.message), cause, internal, policy_log
            )
        detail = finished.message if finished else f"evaluator exited with code {exit_code}"
        ev_state = _state(evaluator)
        if ev_state.get("OOMKilled"):
            detail = f"the evaluator ran out of memory ({s.evaluator_memory}); " + detail
        return ShardOutcome("infrastructure_error", "internal evaluator error", f"{detail}\n{internal}", policy_log)

    def _name_policy_death(
        self, record: EpisodeRecord, policy: Any, watch: _PolicyWatch, since: float, restarts_seen: int
    ) -> tuple[EpisodeRecord, int]:
        """If the policy container died during this episode, charge the record to it (OOM or
        crash); returns the record and the restarts seen so far."""
        state = _state(policy)
        restarts = int(policy.attrs.get("RestartCount", 0)) if state.get("Status") != "removed" else restarts_seen
        died = (not state.get("Running")) or state.get("Restarting") or restarts > restarts_seen
        if not died:
            return record, restarts_seen
        # The engine's die event may trail the state: look again every 0.1 s for up to 5 s.
        deaths = tenacity.Retrying(
            stop=tenacity.stop_after_delay(5.0),
            wait=tenacity.wait_fixed(0.1),
            retry=tenacity.retry_if_not_result(bool),
            retry_error_callback=lambda st: st.outcome.result(),
        )(watch.deaths_since, since - 1.0)
        death = deaths[-1] if deaths else {"oom": bool(state.get("OOMKilled")), "exit_code": state.get("ExitCode")}
        if death["oom"]:
            record = record.with_cause(
                POLICY_OUT_OF_MEMORY,
                f"the policy container was killed for exceeding its memory limit ({self.settings.policy_memory})",
            )
        else:
            record = record.with_cause(
                POLICY_CRASHED, f"the policy container exited with code {death['exit_code']} during the episode"
            )
        return record, max(restarts, restarts_seen)

    # ------------------------------------------------------------ cleanup
    def _filters(self, worker: str | None = None) -> dict[str, list[str]]:
        """Label filters of this deployment's sandbox resources (of ``worker``, or all)."""
        return {
            "label": [f"{LABEL}=1"]
            + ([f"{LABEL_DEPLOYMENT}={self.deployment}"] if self.deployment else [])
            + ([f"{LABEL_WORKER}={worker}"] if worker else [])
        }

    def sweep(self, worker: str | None = None) -> int:
        """Remove sandbox containers, volumes and networks of this deployment (of ``worker``, or
        all of them; without a deployment id, of every deployment)."""
        filters = self._filters(worker)
        n = 0
        for c in self.client.containers.list(all=True, filters=filters):
            try:
                c.remove(force=True, v=True)
                n += 1
            except Exception as e:  # noqa: BLE001
                log.warning("sweep: container %s: %s", c.name, e)
        for v in self.client.volumes.list(filters=filters):
            try:
                v.remove(force=True)
                n += 1
            except Exception as e:  # noqa: BLE001
                log.warning("sweep: volume %s: %s", v.name, e)
        for net in self.client.networks.list(filters=filters):
            try:
                net.remove()
                n += 1
            except Exception as e:  # noqa: BLE001
                log.warning("sweep: network %s: %s", net.name, e)
        if n:
            log.info("sweep removed %d sandbox resources%s", n, f" of {worker}" if worker else "")
        return n

    def owners(self) -> set[str]:
        """The ``org.liberopro.worker`` label of every sandbox container, volume and network of this
        deployment on this engine (the workers whose sandboxes exist now)."""
        filters = self._filters()
        try:
            labels = [c.labels for c in self.client.containers.list(all=True, filters=filters)]
            labels += [
                r.attrs.get("Labels") or {}
                for r in [*self.client.volumes.list(filters=filters), *self.client.networks.list(filters=filters)]
            ]
        except Exception as e:  # noqa: BLE001 - the engine's errors are infrastructure faults
            raise SandboxError(f"cannot list sandbox resources: {e}") from e
        return {lab[LABEL_WORKER] for lab in labels if lab.get(LABEL_WORKER)}


def _failure_reason(value: object) -> str:
    """The evaluator's failure class as sent (a known ``FailureReason``), else a neutral word: the
    event line comes from the evaluator, but a value is only shown when it is one of ours."""
    from typing import get_args

    from submission_spec.client import FailureReason

    return value if isinstance(value, str) and value in get_args(FailureReason) else "policy_error"


def _validation_outcome(report: dict[str, Any], policy_log: str) -> ValidationOutcome:
    """Turn a conformance report into what the submitter reads."""
    if report.get("ok"):
        return ValidationOutcome(ok=True, report=report, metadata=report.get("metadata"), policy_log=policy_log)
    failed = [c for c in report.get("checks", []) if not c.get("ok")]
    failure = (
        "the policy failed the conformance check: "
        + "; ".join(f"{c['name']}: {c.get('detail') or 'failed'}" for c in failed)
        if failed
        else "the conformance check ran no check"
    )
    hints = [c["hint"] for c in failed if c.get("hint")]
    fix = (hints[0] + "; " if hints else "") + LOCAL_RUN_HINT
    return ValidationOutcome(
        ok=False, report=report, failure=failure, fix=fix, metadata=report.get("metadata"), policy_log=policy_log
    )
