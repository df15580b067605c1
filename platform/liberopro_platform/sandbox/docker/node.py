"""Container lifetime beyond one call: the node sandbox (a submission's policy container and its
network, shared by its shards on this worker: started by the first, reused by the next, released
by the pipeline), and the cleanup of what a worker left behind (:func:`sweep`, :func:`owners`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from liberopro_platform.sandbox.base import PolicySource, SandboxError
from liberopro_platform.sandbox.docker.containers import Sandbox, state
from liberopro_platform.sandbox.docker.images import pinned_image
from liberopro_platform.sandbox.docker.labels import LABEL_ROLE, LABEL_SCOPE, LABEL_SUBMISSION, LABEL_WORKER
from liberopro_platform.sandbox.docker.labels import filters as label_filters
from liberopro_platform.sandbox.docker.labels import node_filters as label_node_filters

if TYPE_CHECKING:
    from liberopro_platform.sandbox.docker_backend import DockerBackend

log = logging.getLogger("liberopro_platform.sandbox.docker")


def node_filters(b: DockerBackend, submission_id: str | None = None) -> dict[str, list[str]]:
    """Label filters of this worker's node sandboxes (of ``submission_id``, or all)."""
    return label_node_filters(b.deployment, b.worker, submission_id)


def node_policy(b: DockerBackend, source: PolicySource) -> tuple[Any, Any]:
    """(network, policy container) of ``source``'s submission on this worker: the running (or
    restarting) container of an earlier shard, else a fresh one (a container that exited,
    e.g. after its restarts ran out, is replaced; so is one of another image), started on
    the node sandbox's network (made if absent). Raises :class:`SandboxError`."""
    from docker.errors import DockerException

    sid = source.submission_id
    image = pinned_image(source)
    try:
        networks = b.client.networks.list(filters=node_filters(b, sid))
        containers = b.client.containers.list(all=True, filters=node_filters(b, sid))
    except DockerException as exc:
        raise SandboxError(f"cannot list the node sandbox of {sid}: {exc}") from exc
    network = networks[0] if len(networks) == 1 else None
    keep = _keep_one(network, containers, image, sid)
    if keep is not None:
        renew_restarts(b, keep)
        return network, keep
    if network is None:
        for n in networks:  # more than one: leftovers of an interrupted start
            try:
                n.remove()
            except DockerException as exc:
                log.warning("node sandbox of %s: could not remove network %s: %s", sid, n.name, exc)
    return _start(b, sid, image, network)


def _keep_one(network: Any | None, containers: list[Any], image: str, sid: str) -> Any | None:
    """The one container of ``containers`` to reuse (the running or restarting policy container
    of ``image`` on ``network``), removing every other; None when there is none."""
    from docker.errors import DockerException

    keep = None
    for c in containers:
        now = state(c)  # reloads c.attrs too
        usable = (
            network is not None
            and keep is None
            and c.labels.get(LABEL_ROLE) == "policy"
            and (now.get("Running") or now.get("Restarting"))
            and c.attrs.get("Image") == image
            and network.name in (c.attrs.get("NetworkSettings", {}).get("Networks") or {})
        )
        if usable:
            keep = c
            continue
        try:
            c.remove(force=True, v=True)
        except DockerException as exc:
            log.warning("node sandbox of %s: could not remove %s: %s", sid, c.name, exc)
    return keep


def _start(b: DockerBackend, sid: str, image: str, network: Any | None) -> tuple[Any, Any]:
    """Start a fresh policy container for ``sid`` on ``network`` (a new node network when None);
    everything it made is removed again if the start fails."""
    node = Sandbox(b, sid, "node", network=network)
    node.labels[LABEL_SCOPE] = "node"
    try:
        if network is None:
            node.own_network = True
            node.__enter__()
        return node.net, node.start_policy(image, restarts=b.settings.policy_restarts)
    except BaseException:
        node.__exit__(None, None, None)
        raise


def renew_restarts(b: DockerBackend, policy: Any) -> None:
    """Give a reused policy container ``policy_restarts`` more restarts for the shard about to
    use it (the engine's ``on-failure`` count runs over the container's life: without this a
    policy that crashed in earlier shards on this worker had no restart left, and every
    episode after its next crash failed, depending on how the shards fell on workers)."""
    from docker.errors import DockerException

    n = b.settings.policy_restarts
    if n <= 0:
        return
    count = int(policy.attrs.get("RestartCount", 0))
    try:
        policy.update(restart_policy={"Name": "on-failure", "MaximumRetryCount": count + n})
    except DockerException as exc:
        log.warning("could not renew the restarts of %s: %s", policy.name, exc)


def policy_submissions(b: DockerBackend) -> set[str]:
    """Submission ids whose node sandbox (policy container or network) this worker holds on the engine."""
    from docker.errors import DockerException

    try:
        resources = [
            *b.client.containers.list(all=True, filters=node_filters(b)),
            *b.client.networks.list(filters=node_filters(b)),
        ]
    except DockerException as exc:
        raise SandboxError(f"cannot list the node sandboxes: {exc}") from exc
    labels = [getattr(r, "labels", None) or r.attrs.get("Labels") or {} for r in resources]
    return {lab[LABEL_SUBMISSION] for lab in labels if lab.get(LABEL_SUBMISSION)}


def release_policy(b: DockerBackend, submission_id: str) -> int:
    """Remove this worker's node sandbox of ``submission_id`` (its policy container, any
    evaluator still on its network, the network); returns how many resources went."""
    from docker.errors import DockerException

    try:
        networks = b.client.networks.list(filters=node_filters(b, submission_id))
        doomed = b.client.containers.list(all=True, filters=node_filters(b, submission_id))
        for net in networks:
            net.reload()
            doomed += [b.client.containers.get(cid) for cid in (net.attrs.get("Containers") or {})]
    except DockerException as exc:
        raise SandboxError(f"cannot list the node sandbox of {submission_id}: {exc}") from exc
    n = 0
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


def sweep(b: DockerBackend, worker: str | None = None) -> int:
    """Remove sandbox containers, volumes and networks of this deployment (of ``worker``, or
    all of them; without a deployment id, of every deployment)."""
    found = label_filters(b.deployment, worker)
    n = 0
    for c in b.client.containers.list(all=True, filters=found):
        try:
            c.remove(force=True, v=True)
            n += 1
        except Exception as e:  # noqa: BLE001
            log.warning("sweep: container %s: %s", c.name, e)
    for v in b.client.volumes.list(filters=found):
        try:
            v.remove(force=True)
            n += 1
        except Exception as e:  # noqa: BLE001
            log.warning("sweep: volume %s: %s", v.name, e)
    for net in b.client.networks.list(filters=found):
        try:
            net.remove()
            n += 1
        except Exception as e:  # noqa: BLE001
            log.warning("sweep: network %s: %s", net.name, e)
    if n:
        log.info("sweep removed %d sandbox resources%s", n, f" of {worker}" if worker else "")
    return n


def owners(b: DockerBackend) -> set[str]:
    """The ``org.liberopro.worker`` label of every sandbox container, volume and network of this
    deployment on this engine (the workers whose sandboxes exist now)."""
    found = label_filters(b.deployment)
    try:
        labels = [c.labels for c in b.client.containers.list(all=True, filters=found)]
        labels += [
            r.attrs.get("Labels") or {}
            for r in [*b.client.volumes.list(filters=found), *b.client.networks.list(filters=found)]
        ]
    except Exception as e:  # noqa: BLE001 - the engine's errors are infrastructure faults
        raise SandboxError(f"cannot list sandbox resources: {e}") from e
    return {lab[LABEL_WORKER] for lab in labels if lab.get(LABEL_WORKER)}
