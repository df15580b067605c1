"""Platform settings, read from the environment (prefix ``LIBEROPRO_``) or a ``.env`` file.

Every time limit of the pipeline lives here, so that each level (conformance request, episode,
shard, stage, submission) has one and the docs can list them in one place.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of the API, the workers and the sandbox."""

    model_config = SettingsConfigDict(env_prefix="LIBEROPRO_", env_file=".env", extra="ignore")

    # --- services
    database_url: str = Field("sqlite:///./liberopro-platform.db",
                              description="SQLAlchemy URL; PostgreSQL in compose: postgresql+psycopg://...")
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker (Redis).")
    queue: str = Field("liberopro", description="Celery queue the pipeline tasks go to.")
    broker_visibility_timeout_s: int = Field(
        3600, description="Redis redelivers an unacknowledged task after this long; a redelivered "
        "shard whose lease is still alive is skipped, so this only bounds recovery time.")
    data_dir: Path = Field(Path("./platform-data"), description="Uploaded archives and scratch files.")

    # --- the hidden evaluation manifest
    manifest_path: Path | None = Field(None, description="JSON-lines file of liberopro.instances.Instance.")
    episodes_per_instance: int = Field(10, ge=1)
    episode_seed: int = Field(0, description="Episode e of an instance uses init state e mod 50, seed + e.")
    max_steps: int | None = Field(None, description="Cap on the suite horizon (tests only).")
    episodes_per_shard: int = Field(20, ge=1)

    # --- sandbox
    backend: Literal["docker", "local"] = "docker"
    evaluator_image: str = "liberopro/evaluator:latest"
    policy_port: int = 8000
    policy_user: str = Field("65534:65534", description="uid:gid the policy runs as (never root).")
    policy_memory: str = "8g"
    policy_cpus: float = 2.0
    policy_pids: int = 512
    policy_tmpfs_size: str = "1g"
    policy_restarts: int = Field(3, description="Restarts of a crashed policy container per shard.")
    runtime: str | None = Field(None, description="OCI runtime of the policy container, e.g. runsc (gVisor).")
    gpus: str | None = Field(None, description="GPU request for the policy: 'all', a count, or device ids '0,1'.")
    evaluator_memory: str = "8g"
    evaluator_cpus: float | None = None
    allow_pull: bool = Field(True, description="Pull a repo@sha256 reference that is not present locally.")
    pull_timeout_s: float = 900
    max_image_bytes: int = Field(20 * 2**30, description="Largest policy image accepted (uncompressed).")
    max_upload_bytes: int = Field(20 * 2**30, description="Largest `docker save` archive accepted.")
    max_request_bytes: int = Field(64 * 1024, description="Largest request body of every other route (JSON); "
                                   "a larger one is refused with 413 before it is read.")
    sandbox_firewall: Literal["auto", "external", "off"] = Field(
        "auto", description="auto: the worker installs `iptables -I INPUT -i lpsb+ -j DROP` (needs "
        "root); external: the host already has it (compose's sandbox-firewall service); off: tests of "
        "the local backend only.")
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
    heartbeat_interval_s: float = 10
    heartbeat_stale_s: float = 180
    queue_stale_s: float = 1800
    max_stage_attempts: int = Field(3, description="Attempts of a stage (validation, a shard) before it fails.")

    # --- accounts and limits
    token_ttl_days: int = 90
    submissions_per_day: int = 5
    max_concurrent: int = 1

    def shard_time_limit_s(self, episodes: int) -> float:
        """Wall-clock limit of one shard attempt with ``episodes`` episodes to run."""
        return self.shard_startup_s + episodes * self.episode_time_limit_s


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once)."""
    return Settings()
