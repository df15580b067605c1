"""Image preparation: what a policy image reference means on this engine (docs/platform.md,
"Image identity"). The platform's own images are pinned by id when the backend starts; an
uploaded archive is loaded without any of its names (:mod:`..archive`) and tagged
``liberopro/submission/<id>``; a registry digest is pulled only from an allowed registry, and a
failed pull is reported without the engine's (network) detail; a policy image is checked (never
a platform image, its size, its protocol label, its VOLUMEs) before it runs."""

from __future__ import annotations

import logging
import os
import posixpath
from typing import TYPE_CHECKING, Any

from liberopro_platform.config import Settings
from liberopro_platform.image_refs import (
    IMAGE_ID,
    SUBMISSION_REPO,
    describe_allowed,
    is_platform_tag,
    parse_repo_digest,
    registry_allowed,
)
from liberopro_platform.sandbox.archive import ArchiveRejected, sanitize_archive
from liberopro_platform.sandbox.base import PolicyRejected, PolicySource, PreparedImage, SandboxError

if TYPE_CHECKING:
    from liberopro_platform.sandbox.docker_backend import DockerBackend

log = logging.getLogger("liberopro_platform.sandbox.docker")

#: At most this many VOLUMEs per policy image (each becomes a tmpfs mount).
MAX_IMAGE_VOLUMES = 16
_FORBIDDEN_VOLUME_ROOTS = ("/proc", "/sys", "/dev")
UPLOAD_AGAIN = "upload it: `liberopro submit IMAGE --upload` (sends `docker save IMAGE`)"
_ARCHIVE_FIX = "create the archive with `docker save IMAGE -o policy.tar` (one image) and upload it again"


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def pin_platform_image(client: Any, settings: Settings, field: str, required: bool = False) -> str | None:
    """The image id of the platform image setting ``field`` (an id, or a tag resolved now and
    logged as a warning); None when unset, or absent and not ``required`` (a missing required
    one raises :class:`SandboxError`)."""
    from docker.errors import DockerException, ImageNotFound

    value = getattr(settings, field)
    env = f"LIBEROPRO_{field.upper()}"
    if not value:
        return None
    try:
        image_id = str(client.images.get(value).id)
    except ImageNotFound:
        if IMAGE_ID.match(value) and not required:
            return str(value)  # not on this engine, yet never to run as a policy here either
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


def prepare(b: DockerBackend, source: PolicySource, upload_path: str | None = None) -> PreparedImage:
    """Load the uploaded archive (without its names) or find/pull the referenced image, pin it
    to its id and check it (:func:`check_image`). An uploaded image that passes is tagged
    ``liberopro/submission/<submission id>``; one that fails is removed again when it was new."""
    notes: list[str] = []
    added = False
    if upload_path is not None:
        image_id, dropped, added = load_archive(b, upload_path)
        if dropped:
            notes.append(f"the archive's own names ({', '.join(dropped[:5])}) were ignored")
    else:
        image_id = resolve_reference(b, source.image or "")
    image = b.client.images.get(image_id)
    try:
        size, labels, volumes = check_image(b, image)
    except PolicyRejected:
        if added:
            remove_refused_upload(b, image)
        raise
    if volumes:
        notes.append(
            f"the image declares VOLUME {' '.join(volumes)}: the sandbox mounts an empty tmpfs of "
            f"{b.settings.policy_volume_tmpfs_size} at each instead of a volume on the host's disk (files the "
            "image holds under those paths are not visible)"
        )
    if upload_path is not None:
        image.tag(f"{SUBMISSION_REPO}/{source.submission_id}", "latest")
    return PreparedImage(digest=image.id, size=size, labels=labels, notes=notes)


def check_image(b: DockerBackend, image: Any) -> tuple[int, dict[str, str], list[str]]:
    """(size, labels, VOLUMEs) of a policy image that may run: no platform image, at most
    ``max_image_bytes``, a protocol label this platform speaks, VOLUMEs a tmpfs can replace.
    Raises :class:`PolicyRejected` with the fix."""
    from submission_spec.transports import PROTOCOL_LABEL, protocol_from_labels

    if image.id in b.platform_ids or any(is_platform_tag(t) for t in image.tags):
        raise PolicyRejected(
            "the image is one of the platform's own images (evaluator, platform, redis, "
            "postgres or a base image), which never run as a policy",
            "submit your policy's own image",
        )
    size = int(image.attrs.get("Size", 0))
    if size > b.settings.max_image_bytes:
        raise PolicyRejected(
            f"the image is {_gib(size)} uncompressed; the limit is {_gib(b.settings.max_image_bytes)}",
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
    return size, labels, volumes


def pinned_image(source: PolicySource) -> str:
    """The image id ``source`` runs; :class:`SandboxError` when the submission has none."""
    if not source.image:
        raise SandboxError(f"submission {source.submission_id} has no pinned image to run")
    return source.image


def ensure_image(b: DockerBackend, source: PolicySource) -> None:
    """Make the submission's pinned image (``source.image``, an id) present on this engine: a
    shard may run on another node than its validation (docs/platform.md, "Several nodes").
    Absent, it is loaded again from the uploaded archive (``source.upload_path``, on the data
    directory the nodes share) or pulled again by its registry digest (``source.reference``);
    either must give the same image id. Raises :class:`SandboxError` (a retry may land on a
    node that has it) naming what is missing."""
    from docker.errors import ImageNotFound

    image = pinned_image(source)
    try:
        b.client.images.get(image)
        return
    except ImageNotFound:
        pass
    got = _fetch_again(b, source, image)
    if got != image:
        raise SandboxError(
            f"fetching image {image[:19]} on {b.worker} gave {got[:19]}: the archive or the registry "
            "digest no longer holds the validated image"
        )
    if source.upload_path:  # as on the validating node: the engine knows whose image it is
        b.client.images.get(got).tag(f"{SUBMISSION_REPO}/{source.submission_id}", "latest")
    log.info("image %s fetched on %s for submission %s", got[:19], b.worker, source.submission_id)


def _fetch_again(b: DockerBackend, source: PolicySource, image: str) -> str:
    """The id of the image loaded again from ``source``'s kept archive or pulled again by its
    registry digest; :class:`SandboxError` when neither is possible or the fetch was refused."""
    try:
        if source.upload_path and os.path.exists(source.upload_path):
            return load_archive(b, source.upload_path)[0]
        if source.reference and parse_repo_digest(source.reference) is not None:
            return resolve_reference(b, source.reference)
    except PolicyRejected as exc:
        raise SandboxError(f"image {image[:19]} could not be fetched on {b.worker}: {exc}") from exc
    where = (
        f"its uploaded archive is not at {source.upload_path} (share the data directory between the nodes)"
        if source.upload_path
        else "no uploaded archive was kept (set LIBEROPRO_KEEP_UPLOADS_UNTIL_DONE=1 and share the data "
        "directory between the nodes)"
    )
    raise SandboxError(
        f"image {image[:19]} is not on this node's engine ({b.worker}) and cannot be fetched: "
        f"{where}, and the submission names no registry digest"
    )


def remove_refused_upload(b: DockerBackend, image: Any) -> None:
    """Remove a refused upload that was not on the engine before it, unless something else (a
    tag, a container, a child image) uses it by now; never a platform image."""
    from docker.errors import DockerException

    image.reload()
    if image.tags or image.id in b.platform_ids:
        return
    try:
        b.client.images.remove(image.id, noprune=False)
    except DockerException as exc:
        log.info("refused upload %s stays on the engine: %s", image.id[:19], exc)


def resolve_reference(b: DockerBackend, ref: str) -> str:
    """The local image id of ``ref``: an image id present here, or an allowed registry's
    digest (pulled when absent)."""
    from docker.errors import DockerException, ImageNotFound

    if IMAGE_ID.match(ref):
        try:
            return str(b.client.images.get(ref).id)
        except ImageNotFound:
            raise PolicyRejected(f"image {ref} is no longer on the platform's engine", UPLOAD_AGAIN) from None
    digest = parse_repo_digest(ref)
    if digest is None:
        raise PolicyRejected(
            f"the image reference {ref[:200]!r} is neither sha256:<id> nor repo@sha256:<digest>", UPLOAD_AGAIN
        )
    if not registry_allowed(digest, b.settings.allowed_registries):
        raise PolicyRejected(
            f"{digest.registry} is not a registry this platform pulls from (allowed: "
            f"{describe_allowed(b.settings.allowed_registries)})",
            UPLOAD_AGAIN,
        )
    try:
        return str(b.client.images.get(ref).id)
    except ImageNotFound:
        pass
    except DockerException as exc:
        raise PolicyRejected(f"image {ref} could not be found", UPLOAD_AGAIN, admin_detail=str(exc)) from exc
    return pull(b, ref, digest.registry)


def pull(b: DockerBackend, ref: str, registry: str) -> str:
    """Pull ``ref`` (a digest of an allowed registry). The engine's error stays with the admins:
    the submitter reads the same sentence whatever went wrong (no host or port detail)."""
    from docker.errors import DockerException

    try:
        return str(b.client.images.pull(ref).id)
    except DockerException as exc:
        log.warning("pull of %s failed: %s", ref, exc)
        raise PolicyRejected(
            f"image {ref} could not be pulled from {registry}",
            f"check that this digest exists in that registry and can be pulled without credentials, or {UPLOAD_AGAIN}",
            admin_detail=f"pull {ref}: {exc}",
        ) from exc


def load_archive(b: DockerBackend, path: str) -> tuple[str, list[str], bool]:
    """Load the uploaded archive at ``path`` without any of its names; returns the image id,
    the names the archive asked for (ignored) and whether the image is new on the engine."""
    from docker.errors import ImageNotFound

    clean = f"{path}.clean"
    try:
        try:
            info = sanitize_archive(path, clean)
        except ArchiveRejected as exc:
            raise PolicyRejected(f"the uploaded archive was refused: {exc}", _ARCHIVE_FIX) from exc
        existed = _present(b, info.image_id)
        loaded, named = _load_clean(b, clean)
        if named:  # never: the archive was rewritten without names
            raise SandboxError(f"the engine named the upload {named} although its archive carried no names")
        if loaded - {info.image_id}:
            raise PolicyRejected(f"the archive loaded {sorted(loaded)}, not the image its manifest names", _ARCHIVE_FIX)
        try:
            b.client.images.get(info.image_id)
        except ImageNotFound:
            raise PolicyRejected("the engine loaded no image from the archive", _ARCHIVE_FIX) from None
        return info.image_id, info.dropped_tags, not existed
    finally:
        try:
            os.remove(clean)
        except OSError:
            pass


def _present(b: DockerBackend, image_id: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        b.client.images.get(image_id)
        return True
    except ImageNotFound:
        return False


def _load_clean(b: DockerBackend, clean: str) -> tuple[set[str], list[str]]:
    """``docker load`` the sanitized archive at ``clean``: (the image ids the engine reports it
    loaded, the names it reports it applied). Raises :class:`PolicyRejected` when it refuses it."""
    from docker.errors import DockerException

    loaded: set[str] = set()
    named: list[str] = []
    try:
        with open(clean, "rb") as fh:
            for chunk in b.client.api.load_image(fh):
                if "error" in chunk:
                    raise PolicyRejected(
                        f"the uploaded archive could not be loaded: {chunk['error'][:500]}", _ARCHIVE_FIX
                    )
                text = chunk.get("stream", "")
                if "Loaded image ID:" in text:
                    loaded.add(text.split("Loaded image ID:")[1].strip())
                elif "Loaded image:" in text:
                    named.append(text.split("Loaded image:")[1].strip())
    except DockerException as exc:
        raise PolicyRejected(f"the uploaded archive could not be loaded: {str(exc)[:500]}", _ARCHIVE_FIX) from exc
    return loaded, named
