"""The Docker sandbox: internal networks holding only a submission's policy container and its
evaluator containers. :class:`DockerBackend` is the one class the rest of the platform uses; its
jobs live in :mod:`liberopro_platform.sandbox.docker`, one module each:

* :mod:`~.docker.images`: image preparation (an upload loaded without its names, a registry
  digest pulled only from an allowed registry, the checks, the image fetched again on another node);
* :mod:`~.docker.containers`: a sandbox's network and containers (:class:`~.docker.containers.Sandbox`,
  removed on every return path) and the restrictions they are created with;
* :mod:`~.docker.node`: the node sandbox (a submission's policy container kept between its shards
  on a worker), its release, and the cleanup of what a worker left (:meth:`DockerBackend.sweep`,
  :meth:`DockerBackend.owners`);
* :mod:`~.docker.validation` and :mod:`~.docker.follow`: a validation, and a shard whose
  evaluator's events are followed as they come;
* :mod:`~.docker.deaths`: the policy container's deaths named in the records it broke;
* :mod:`~.docker.host`: measures of the host (:meth:`DockerBackend.auto_streams`, the engine's
  CPUs, the page cache dropped before a validation, the host's firewall rules);
* :mod:`~.docker.labels`: the labels and names every resource carries.

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
id only, never one of the platform's own images. The shard's slice of the hidden manifest goes
into a volume mounted into the evaluator container only. The evaluator reports through marked
stdout lines (:mod:`liberopro.cli.shard`, the image's entry point); its stderr is kept for admins only.

Every container, volume and network carries ``org.liberopro.sandbox=1`` and the owning
worker's name: :class:`~.docker.containers.Sandbox` removes them on every return path, and
:meth:`DockerBackend.sweep` removes what a killed worker left behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from liberopro.schema.shard import ShardSpec

from liberopro_platform.config import Settings
from liberopro_platform.sandbox import firewall
from liberopro_platform.sandbox.base import (
    PolicySource,
    PreparedImage,
    SandboxError,
    ShardCallbacks,
    ShardOutcome,
    ValidationOutcome,
)
from liberopro_platform.sandbox.docker import follow, host, images, node, validation


class DockerBackend:
    """Runs policies and evaluators as sibling containers on one Docker engine.

    ``worker`` names the owner in every resource's labels; ``deployment`` (the database's
    deployment id, :func:`liberopro_platform.db.deployment_id`) scopes them to this platform, so
    that :meth:`sweep` and :meth:`owners` never see another platform's sandboxes on the same
    engine (None: unscoped, for tools and tests that own the whole engine). The methods only call
    the modules of :mod:`liberopro_platform.sandbox.docker` (module docstring)."""

    name = "docker"

    def __init__(self, settings: Settings, worker: str, deployment: str | None = None) -> None:
        from docker.client import DockerClient
        from docker.errors import DockerException

        self.settings = settings
        self.worker = worker
        self.deployment = deployment
        self._engine_cpus: int | None = None
        try:
            self.client: Any = DockerClient.from_env(timeout=300)
            self.client.ping()
        except DockerException as exc:
            raise SandboxError(
                f"the Docker engine does not answer ({exc}): start dockerd "
                "(scripts/start-dockerd.sh) or mount /var/run/docker.sock into the worker"
            ) from exc
        firewall.ensure(settings.sandbox_firewall, self.host_has_firewall_rules)
        evaluator_id = images.pin_platform_image(self.client, settings, "evaluator_image", required=True)
        if evaluator_id is None:
            raise SandboxError("LIBEROPRO_EVALUATOR_IMAGE is not set: name the evaluator image by id")
        #: The evaluator image's id, pinned for this backend's lifetime.
        self.evaluator_id: str = evaluator_id
        #: Ids of the platform's own images, never run as a policy.
        self.platform_ids: set[str] = {self.evaluator_id} | {
            i
            for i in (
                images.pin_platform_image(self.client, settings, f)
                for f in ("platform_image", "redis_image", "postgres_image")
            )
            if i
        }

    # ------------------------------------------------------------ images (.docker.images)
    def prepare(self, source: PolicySource, upload_path: str | None = None) -> PreparedImage:
        """Load, pin and check the submission's image (:func:`.docker.images.prepare`)."""
        return images.prepare(self, source, upload_path)

    def ensure_image(self, source: PolicySource) -> None:
        """Make the pinned image present on this engine (:func:`.docker.images.ensure_image`)."""
        images.ensure_image(self, source)

    # ------------------------------------------------------------ validation and shards
    def validate(self, source: PolicySource, on_heartbeat: Callable[[], bool | None]) -> ValidationOutcome:
        """The policy alone in a sandbox, checked by the conformance checker in the evaluator
        image, within ``validation_time_limit_s`` (:func:`.docker.validation.validate`)."""
        return validation.validate(self, source, on_heartbeat)

    def run_shard(
        self, source: PolicySource, spec: ShardSpec, callbacks: ShardCallbacks, time_limit_s: float
    ) -> ShardOutcome:
        """Run ``spec`` against the submission's node sandbox (:func:`.docker.follow.run_shard`)."""
        return follow.run_shard(self, source, spec, callbacks, time_limit_s)

    # ------------------------------------------------------------ the node sandbox, cleanup (.docker.node)
    def node_policy(self, source: PolicySource) -> tuple[Any, Any]:
        """(network, policy container) of the submission on this worker (:func:`.docker.node.node_policy`)."""
        return node.node_policy(self, source)

    def policy_submissions(self) -> set[str]:
        """Submission ids whose node sandbox this worker holds (:func:`.docker.node.policy_submissions`)."""
        return node.policy_submissions(self)

    def release_policy(self, submission_id: str) -> int:
        """Remove this worker's node sandbox of ``submission_id`` (:func:`.docker.node.release_policy`)."""
        return node.release_policy(self, submission_id)

    def sweep(self, worker: str | None = None) -> int:
        """Remove this deployment's sandbox resources (of ``worker``, or all; :func:`.docker.node.sweep`)."""
        return node.sweep(self, worker)

    def owners(self) -> set[str]:
        """The workers whose sandbox resources exist on this engine (:func:`.docker.node.owners`)."""
        return node.owners(self)

    # ------------------------------------------------------------ host measures (.docker.host)
    def engine_cpus(self) -> int | None:
        """The engine's CPUs (``docker info`` NCPU, read once); None when it does not say."""
        if self._engine_cpus is None:
            self._engine_cpus = host.engine_cpus(self.client)
        return self._engine_cpus or None

    def auto_streams(self) -> int:
        """Evaluator streams that fit this engine next to one policy container (:func:`.docker.host.auto_streams`)."""
        return host.auto_streams(self.client, self.settings, self.worker)

    def forget_host_caches(self) -> str | None:
        """Drop the host's page cache before a validation (:func:`.docker.host.forget_host_caches`)."""
        return host.forget_host_caches(self.client, self.evaluator_id)

    def host_has_firewall_rules(self) -> bool | None:
        """Whether the host holds the sandbox firewall rules (:func:`.docker.host.host_has_firewall_rules`)."""
        return host.host_has_firewall_rules(self.client, self.settings.platform_image)
