"""Platform settings, read from the environment (prefix ``LIBEROPRO_``) or a ``.env`` file.

Every time limit of the pipeline lives here, so that each level (conformance request, episode,
shard, stage, submission) has one and the docs can list them in one place.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Literal

from liberopro.schema.manifest import EPISODES_PER_INSTANCE
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of the API, the workers and the sandbox.

    Platform images are named by image id (``sha256:...``), fixed at deployment:
    ``docker/build-images.sh`` writes ``LIBEROPRO_EVALUATOR_IMAGE``, ``LIBEROPRO_PLATFORM_IMAGE``,
    ``LIBEROPRO_REDIS_IMAGE`` and ``LIBEROPRO_POSTGRES_IMAGE`` into ``.env``, which compose and
    these settings read (docs/platform.md, "Image identity").
    """

    # env_ignore_empty: an empty variable means the default (compose.yaml passes `${MAX_STEPS:-}`
    # and the like as empty strings when they are not set).
    model_config = SettingsConfigDict(env_prefix="LIBEROPRO_", env_file=".env", extra="ignore", env_ignore_empty=True)

    # --- services
    database_url: str = Field(
        "sqlite:///./liberopro-platform.db",
        description="SQLAlchemy URL; PostgreSQL in compose: postgresql+psycopg://...",
    )
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker (Redis).")
    queue: str = Field(
        "liberopro",
        description="Prefix of the Celery queues: `<queue>.shards` holds the tasks "
        "that start a sandbox (validation, shards), `<queue>.control` the short ones "
        "(aggregation), so that these never wait behind shards.",
    )
    broker_visibility_timeout_s: int = Field(
        3600,
        description="Redis redelivers an unacknowledged task after this long; a redelivered "
        "shard whose lease is still alive is skipped, so this only bounds recovery time.",
    )
    data_dir: Path = Field(Path("./platform-data"), description="Uploaded archives and scratch files.")
    keep_uploads_until_done: bool = Field(
        False,
        description="Several nodes (docs/platform.md): keep an uploaded archive, on the data directory the nodes "
        "share, until its submission ends, so that a node whose engine lacks the image loads it for a shard; the "
        "sweep removes it then. Off: removed once the image is loaded for validation.",
    )

    # --- the hidden evaluation manifest
    manifest_path: Path | None = Field(
        None, description="The evaluation manifest (`liberopro instances generate --split eval`)."
    )
    episodes_per_instance: int = Field(
        EPISODES_PER_INSTANCE, ge=1, description="Episodes per instance; fewer than the protocol's makes a trial run."
    )
    episode_seed: int = Field(0, description="Episode e of an instance uses init state e mod 50, seed + e.")
    max_steps: int | None = Field(None, description="Cap on the suite horizon (tests only).")
    episodes_per_shard: int = Field(20, ge=1)

    # --- sandbox
    backend: Literal["docker", "local"] = "docker"
    evaluator_image: str = Field(
        "liberopro/evaluator:latest",
        description="The evaluator image by id (sha256:...; docker/build-images.sh "
        "writes it to .env). A tag is resolved once when the worker starts and pinned for its lifetime; every "
        "evaluator container's image id is checked against it before it starts.",
    )
    platform_image: str | None = Field(None, description="The api/worker image by id: never run as a policy.")
    redis_image: str | None = Field(None, description="The redis image by id: never run as a policy.")
    postgres_image: str | None = Field(None, description="The postgres image by id: never run as a policy.")
    allowed_registries: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Registries (host[:port], comma-separated) whose repo@sha256 digests a "
        "submission may name; the worker pulls those by digest only. Empty (the default): no pull at all, "
        "teams upload their images.",
    )
    policy_port: int = 8000
    policy_user: str = Field("65534:65534", description="uid:gid the policy runs as (never root).")
    policy_memory: str = "8g"
    policy_cpus: float = 2.0
    policy_pids: int = 512
    policy_tmpfs_size: str = Field("1g", description="Size of the policy's /tmp (a tmpfs, counted in policy_memory).")
    policy_shm_size: str = Field("1g", description="Size of the policy's /dev/shm (a tmpfs, counted in policy_memory).")
    policy_volume_tmpfs_size: str = Field(
        "256m",
        description="Size of the empty tmpfs mounted at each VOLUME the policy image declares (instead of "
        "an unbounded anonymous volume on the host's disk; counted in policy_memory).",
    )
    policy_restarts: int = Field(
        3,
        description="Restarts of a crashed policy container per shard (one policy container serves all of a "
        "submission's shards on a worker: each shard that reuses it gives it this many more; one that finds "
        "it exited starts a fresh one).",
    )
    runtime: str | None = Field(None, description="OCI runtime of the policy container, e.g. runsc (gVisor).")
    gpus: str | None = Field(None, description="GPU request for the policy: 'all', a count, or device ids '0,1'.")
    evaluator_memory: str = Field("8g", description="Memory of an evaluator container running one stream.")
    evaluator_stream_memory: str = Field(
        "3g", description="Memory each further stream adds to an evaluator container (one LIBERO scene: 1.5-2.5 GB)."
    )
    evaluator_cpus: float | None = Field(
        None, description="CPUs per stream of an evaluator container (none: no quota)."
    )
    evaluator_streams: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Simulator streams (processes) an evaluator container runs at once against the submission's "
        "one policy container on this worker; capped by the policy's declared max_concurrent_episodes "
        "(openpi and OpenVLA servers: 1) and the shard's episodes. None (the default): from the engine's CPUs "
        "and memory (DockerBackend.auto_streams).",
    )
    evaluator_gpus: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="GPUs the evaluator containers render on (comma-separated device indexes or GPU-UUIDs, "
        "e.g. '1,2'): each evaluator container gets one, round-robin by shard, and renders through the NVIDIA "
        "driver's EGL (the evaluator image built with EGL_VENDOR=nvidia). Empty (the default): Mesa's "
        "llvmpipe on the CPU. Never the policy's GPUs unless evaluator_gpus_share_policy is set.",
    )
    evaluator_gpus_share_policy: bool = Field(
        False, description="Allow evaluator_gpus to name GPUs the policy also gets (gpus)."
    )
    pull_timeout_s: float = 900
    max_image_bytes: int = Field(20 * 2**30, description="Largest policy image accepted (uncompressed).")
    max_upload_bytes: int = Field(20 * 2**30, description="Largest `docker save` archive accepted.")
    max_request_bytes: int = Field(
        64 * 1024,
        description="Largest request body of every other route (JSON); "
        "a larger one is refused with 413 before it is read.",
    )
    sandbox_firewall: Literal["auto", "external", "off"] = Field(
        "auto",
        description="auto: the worker installs `iptables -I INPUT -i lpsb+ -j DROP` (needs "
        "root); external: the host already has it (compose's sandbox-firewall service); off: tests of "
        "the local backend only.",
    )
    validation_drop_caches: bool = Field(
        True,
        description="Drop the host's clean page, dentry and inode caches before every validation (whose output "
        "the submitter reads), so that nothing a policy left in them during hidden shards can be read back "
        "(docs/platform.md, 'What remains observable'). Needs root on the host or a privileged container.",
    )
    log_max_bytes: int = Field(64 * 1024, description="Submitter-visible policy output kept per stage.")

    # --- time limits (seconds), one per level
    validation_health_timeout_s: float = 120
    validation_request_timeout_s: float = 30
    validation_act_limit_s: float = 10
    validation_time_limit_s: float = 600
    request_timeout_s: float = 30
    episode_budget_s: float = 600
    episode_time_limit_s: float = 900
    shard_startup_s: float = 300
    policy_restart_wait_s: float = 120
    aggregate_time_limit_s: float = 300
    submission_time_limit_s: float = 48 * 3600
    heartbeat_interval_s: float = Field(
        10,
        description="Heartbeat period of a running validation or shard and of each worker's row in worker_heartbeats.",
    )
    heartbeat_stale_s: float = Field(
        180,
        description="A claim or a worker whose heartbeat is older is taken "
        "as gone (its work is requeued, its sandboxes removed).",
    )
    queue_stale_s: float = 1800
    sweep_interval_s: float = Field(
        60, description="How often celery beat runs the stuck sweep (in its own process: no free worker needed)."
    )
    resend_grace_s: float = Field(
        60,
        description="A queued task whose message the broker does not hold is "
        "re-sent once it has waited this long (its message was lost, e.g. by a Redis "
        "restart); also how long a worker may hold a delivered message before acting.",
    )
    max_stage_attempts: int = Field(3, description="Attempts of a stage (validation, a shard) before it fails.")

    # --- accounts and limits
    token_ttl_days: int = 90
    submissions_per_day: int = 5
    max_concurrent: int = 1
    hidden_view_interval_s: float = Field(
        60,
        ge=0,
        description="While the hidden stage runs, what a submitter reads of it (shards done, what the next "
        "shard waits for, the start of aggregation) is refreshed at most once per this many seconds, at whole "
        "multiples of it: the times a policy could steer are readable at that resolution only (0: live, for tests).",
    )
    hidden_runs_per_week: int = Field(
        7,
        ge=0,
        description="Submissions of a team that may run the hidden stage in 7 days (those that passed "
        "validation, plus those still waiting or validating): each run can carry a bounded number of bits "
        "about the hidden instances out through what a submitter reads (docs/platform.md, 'What remains "
        "observable'); this caps them per team and week. A team's own value overrides it.",
    )

    @field_validator("allowed_registries", "evaluator_gpus", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        """A list setting from the environment: comma-separated, or a JSON list."""
        if isinstance(value, str):
            value = value.strip()
            if value.startswith("["):
                import json

                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("evaluator_gpus")
    @classmethod
    def _check_gpus(cls, value: list[str]) -> list[str]:
        for device in value:
            if not (str(device).isdigit() or str(device).startswith("GPU-")):
                raise ValueError(
                    f"evaluator_gpus: {device!r} is not a GPU (a device index such as 0, or a GPU-UUID "
                    "from `nvidia-smi -L`): list them comma-separated, e.g. LIBEROPRO_EVALUATOR_GPUS=1,2"
                )
        return value

    @model_validator(mode="after")
    def _evaluator_gpus_apart_from_policy(self) -> Settings:
        shared = self.policy_gpu_overlap()
        if shared and not self.evaluator_gpus_share_policy:
            raise ValueError(
                f"evaluator_gpus {self.evaluator_gpus} include GPUs the policy gets (gpus={self.gpus!r}: {shared}): "
                "give the evaluator other GPUs, or set LIBEROPRO_EVALUATOR_GPUS_SHARE_POLICY=1 to share them"
            )
        return self

    def policy_gpu_overlap(self) -> list[str]:
        """The evaluator GPUs the policy's request (``gpus``) may also get: all of them for
        ``all``, devices 0..n-1 for a count n (the engine's choice; assumed the first ones), the
        named ones for a list."""
        if not self.gpus or not self.evaluator_gpus:
            return []
        spec = self.gpus.strip()
        if spec == "all":
            return list(self.evaluator_gpus)
        policy = {str(i) for i in range(int(spec))} if spec.isdigit() else {d.strip() for d in spec.split(",")}
        return [d for d in self.evaluator_gpus if d in policy]

    def evaluator_gpu(self, stream: int) -> str | None:
        """The GPU of evaluator stream ``stream`` (a shard index): round-robin over
        ``evaluator_gpus``; None for CPU rendering."""
        return self.evaluator_gpus[stream % len(self.evaluator_gpus)] if self.evaluator_gpus else None

    @property
    def shard_queue(self) -> str:
        """The Celery queue of the tasks that start a sandbox: validation and shards."""
        return f"{self.queue}.shards"

    @property
    def control_queue(self) -> str:
        """The Celery queue of aggregation (and the sweep task, when sent by hand)."""
        return f"{self.queue}.control"

    def shard_time_limit_s(self, episodes: int) -> float:
        """Wall-clock limit of one shard attempt with ``episodes`` episodes to run."""
        return self.shard_startup_s + episodes * self.episode_time_limit_s


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once)."""
    return Settings()
