"""Sandboxes that validate policies and run shards: Docker (production) and local (development)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liberopro_platform.config import Settings
    from liberopro_platform.sandbox.base import SandboxBackend


def make_backend(settings: Settings, worker: str, deployment: str | None = None) -> SandboxBackend:
    """The backend ``settings.backend`` names, owned by ``worker`` within ``deployment`` (both
    label its resources; see :class:`~liberopro_platform.sandbox.docker_backend.DockerBackend`)."""
    if settings.backend == "docker":
        from liberopro_platform.sandbox.docker_backend import DockerBackend

        return DockerBackend(settings, worker, deployment)
    from liberopro_platform.sandbox.local_backend import LocalBackend

    return LocalBackend(settings, worker, deployment)
