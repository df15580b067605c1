"""Measures of the host and its engine: how many simulator streams fit next to a policy
(:func:`auto_streams`), the engine's CPUs, the host's page cache flushed before a validation
(:func:`forget_host_caches`) and whether the host holds the sandbox firewall rules."""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from liberopro_platform.config import Settings
from liberopro_platform.sandbox.base import SandboxError
from liberopro_platform.sandbox.docker.labels import LABEL, LABEL_ROLE, LABEL_WORKER

log = logging.getLogger("liberopro_platform.sandbox.docker")


def engine_cpus(client: Any) -> int:
    """The engine's CPUs (``docker info`` NCPU; 0 when it does not say)."""
    try:
        return int(client.info().get("NCPU") or 0)
    except Exception as exc:  # noqa: BLE001 - the engine's errors are infrastructure faults
        raise SandboxError(f"cannot read the engine's CPUs: {exc}") from exc


def auto_streams(client: Any, settings: Settings, worker: str) -> int:
    """Evaluator streams that fit this engine next to one policy container: the engine's CPUs
    less the policy's (none when the policy has GPUs), and its memory less the policy's and one
    evaluator's, over ``evaluator_stream_memory`` per further stream; at least 1, at most 64.
    The memory limits and CPU quotas of the running sandbox containers of *other* workers than
    ``worker`` on the engine (several workers per engine, e.g. one per GPU) are taken off first:
    each worker counting the whole engine as its own would let their evaluators together ask for
    several times its memory."""
    from docker.utils import parse_bytes

    s = settings
    try:
        info = client.info()
        others = [
            c
            for c in client.containers.list(filters={"label": [f"{LABEL}=1"], "status": "running"})
            if c.labels.get(LABEL_WORKER) != worker
        ]
    except Exception as exc:  # noqa: BLE001 - the engine's errors are infrastructure faults
        raise SandboxError(f"cannot read the engine's CPUs and memory: {exc}") from exc
    host = [c.attrs.get("HostConfig") or {} for c in others]
    taken_memory = sum(int(h.get("Memory") or 0) for h in host)
    taken_cpus = sum(int(h.get("NanoCpus") or 0) for h in host) / 1e9
    cpus = int(info.get("NCPU") or 1) - taken_cpus - (0 if s.gpus else math.ceil(s.policy_cpus))
    per = s.evaluator_cpus or 1.0
    left = (
        int(info.get("MemTotal") or 0) - taken_memory - parse_bytes(s.policy_memory) - parse_bytes(s.evaluator_memory)
    )
    by_memory = 1 + max(0, left) // parse_bytes(s.evaluator_stream_memory)
    return int(max(1, min(int(cpus // per), by_memory, 64)))


def forget_host_caches(client: Any, evaluator_id: str) -> str | None:
    """Drop the host kernel's clean page, dentry and inode caches (``sync; echo 3 >
    /proc/sys/vm/drop_caches``) before a validation, whose output the submitter reads: a
    policy in a hidden shard can leave a pattern in the page cache of its own image's files
    (which pages it read), and a later validation of an image sharing those layers can read
    it back without loading a page (``mincore`` on a file it owns; 256 of 256 bits read back
    in a test on overlay2). Flushed, every page reads cold (docs/platform.md, "What remains
    observable"). Done by this process when it may write the file (a worker running as root
    on the host), else by a privileged one-shot container of the evaluator image
    (``evaluator_id``); returns how, or None after logging a warning when neither works (a
    rootless or restricted engine: the channel stays open; run validation on other nodes than
    shards there)."""
    from docker.errors import DockerException

    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return "this process"
    except OSError:
        pass
    try:
        drop_caches_in_container(client, evaluator_id)
        return "a privileged container"
    except DockerException as exc:
        log.warning(
            "could not drop the host's page cache before a validation (%s): what a policy left in the page "
            "cache of its image during hidden shards stays readable to a later validation on this node",
            str(exc).strip()[:300],
        )
        return None


#: The role label of :func:`drop_caches_in_container`'s one-shot container.
DROP_CACHES_ROLE = "drop-caches"


def drop_caches_in_container(client: Any, image: str) -> None:
    """Run ``sync; echo 3 > /proc/sys/vm/drop_caches`` in a privileged one-shot container of
    ``image`` (any image with ``sh``; no network), and remove the container whatever happened:
    an engine that refuses privileged containers (rootless, or itself in a container: runc's
    "unable to apply caps") fails at start, which ``containers.run(remove=True)`` would leave
    behind as a created container at every validation. Raises ``docker.errors.DockerException``
    when the container cannot be created or started, or exits non-zero."""
    from docker.errors import DockerException

    container = client.containers.create(
        image,
        ["sync && echo 3 > /proc/sys/vm/drop_caches"],
        entrypoint=["sh", "-c"],
        privileged=True,
        user="0",
        network_mode="none",
        labels={LABEL_ROLE: DROP_CACHES_ROLE},
    )
    try:
        container.start()
        code = container.wait(timeout=120).get("StatusCode")
        if code != 0:
            raise DockerException(f"the drop_caches container exited with code {code}")
    finally:
        try:
            container.remove(force=True)
        except DockerException:
            log.warning("could not remove the drop_caches container %s", container.id[:12])


def host_has_firewall_rules(client: Any, platform_image: str | None) -> bool | None:
    """Whether the host's network namespace holds the sandbox firewall rules
    (:mod:`liberopro_platform.sandbox.firewall`), asked of the engine: the platform image runs
    ``firewall --check`` there (host network, NET_ADMIN, ~1 s). None when it cannot tell (no
    ``platform_image``, or the check itself failed to run)."""
    from docker.errors import ContainerError, DockerException

    if not platform_image:
        return None
    try:
        client.containers.run(
            platform_image,
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
