"""Image references a submitter may give, and which of them this platform accepts.

Two forms are accepted (docs/platform.md, "Image identity"):

- ``sha256:<64 hex>``: an image id. Accepted only when the submitting team uploaded that image
  (the ``team_images`` table); the platform never runs its own images (evaluator, platform,
  redis, postgres) or another team's by id.
- ``[registry/]repo@sha256:<64 hex>``: a registry digest. Accepted only when the registry is on
  the ``allowed_registries`` setting (empty by default: the platform pulls nothing). The
  registry is the first path component when it holds a ``.`` or a ``:`` or is ``localhost``
  (Docker's rule), else ``docker.io``.

A tag alone is never accepted: what runs could differ from what was tested. This module imports
nothing heavy: the API, the worker and the ``liberopro submit`` CLI share it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_DOMAIN = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"(?::[0-9]{1,5})?$"
)
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
DOCKER_HUB = "docker.io"
_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}

#: The repository uploaded images are tagged in: ``liberopro/submission/<submission id>:latest``.
SUBMISSION_REPO = "liberopro/submission"


@dataclass(frozen=True)
class RepoDigest:
    """A parsed ``[registry/]repo@sha256:<digest>`` reference."""

    registry: str  # host[:port], lower case; docker.io when the reference names none
    repository: str
    digest: str

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}@{self.digest}"


def parse_repo_digest(ref: str) -> RepoDigest | None:
    """``ref`` as a registry digest, or None when it is not one (a tag, an id, malformed).
    A tag before the digest (``repo:tag@sha256:...``) is refused: the digest alone names the image."""
    name, sep, digest = ref.partition("@")
    if not sep or not _DIGEST.match(digest) or len(ref) > 500:
        return None
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN.match(first):
            return None
        registry, path = normalize_registry(first), rest
    else:
        registry, path = DOCKER_HUB, name
    parts = path.split("/")
    if not path or not all(_COMPONENT.match(p) for p in parts):
        return None
    return RepoDigest(registry=registry, repository=path, digest=digest)


def normalize_registry(host: str) -> str:
    """A registry host as compared with the allowed list: lower case, Docker Hub's aliases as docker.io."""
    host = host.strip().lower().rstrip("/")
    return DOCKER_HUB if host in _HUB_ALIASES else host


def registry_allowed(ref: RepoDigest, allowed: Iterable[str]) -> bool:
    """Whether ``ref``'s registry is one of ``allowed`` (host[:port] entries)."""
    return ref.registry in {normalize_registry(a) for a in allowed}


def describe_allowed(allowed: Iterable[str]) -> str:
    """The allowed list in words, for error messages."""
    allowed = sorted({normalize_registry(a) for a in allowed})
    return ", ".join(allowed) if allowed else "none: this platform pulls no image, it runs uploads"


def submission_tag(submission_id: str) -> str:
    """The only tag an uploaded image receives: ``liberopro/submission/<id>:latest``."""
    return f"{SUBMISSION_REPO}/{submission_id}:latest"


def is_platform_tag(tag: str) -> bool:
    """True for a tag in the platform's own namespace (``liberopro/evaluator``, ``liberopro/platform``,
    base images...), except submissions' and the example policies' (which teams may submit)."""
    repo = tag.split("@", 1)[0].rsplit(":", 1)[0] if "/" in tag else tag
    if repo.startswith("docker.io/"):
        repo = repo[len("docker.io/") :]
    return repo.startswith("liberopro/") and not repo.startswith((f"{SUBMISSION_REPO}/", "liberopro/example-"))
