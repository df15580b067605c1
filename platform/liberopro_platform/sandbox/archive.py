"""An uploaded ``docker save`` archive, made safe to ``docker load``: no name survives, nothing
escapes, nothing expands.

``docker load`` applies every repo tag an archive's ``manifest.json`` (or legacy
``repositories`` file, or OCI ``index.json`` annotation) names. An archive tagged
``liberopro/evaluator:latest`` would therefore replace the platform's evaluator. So
:func:`sanitize_archive` copies the archive member by member (streaming, constant memory) into a
new tar that the engine then loads:

- ``manifest.json`` is rewritten to exactly one image with ``RepoTags: null`` (and without
  ``Parent`` or ``LayerSources``); ``repositories`` is dropped; name annotations are removed from
  ``index.json``;
- member names must be relative and stay inside the archive (no ``..``, no absolute paths, no
  duplicates); only regular files, directories and symlinks to another regular member of the
  archive (``docker save`` links a layer saved twice) pass; hard links, devices and fifos do not;
- the JSON members the platform reads are capped (:data:`MAX_JSON_BYTES`), as are the member
  and layer counts; a member starting with a compression magic (gzip, bzip2, xz, zstd) is
  refused, so the loaded image is no larger than the archive; every layer is read as a tar and
  one holding a sparse file (which the engine would expand with zeros on disk) is refused.

The image id is the SHA-256 of the config member (how the engine computes it); the caller checks
that the engine loaded that id and tags it ``liberopro/submission/<id>`` itself. Formats:
Docker's ``docker save`` (``manifest.json`` + ``<id>.json`` + ``<layer>/layer.tar``) and the OCI
layout newer engines write (``blobs/sha256/...`` with ``manifest.json`` beside ``index.json``).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

MAX_JSON_BYTES = 16 * 2**20
MAX_MEMBERS = 20_000
MAX_LAYERS = 256
MAX_NAME = 1024
_COMPRESSION_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
_NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")
_CHUNK = 1 << 20


class ArchiveRejected(ValueError):
    """The archive cannot be loaded safely; the message says what is wrong with it."""


@dataclass
class SanitizedArchive:
    """What :func:`sanitize_archive` wrote: the image id the engine must load, the repo tags the
    archive asked for (ignored: for the record only), and the sizes."""

    image_id: str
    dropped_tags: list[str] = field(default_factory=list)
    layers: int = 0
    bytes_in: int = 0


def _clean_name(raw: str) -> str:
    if not raw or len(raw) > MAX_NAME or "\x00" in raw or "\\" in raw:
        raise ArchiveRejected(f"member name {raw[:80]!r} is not allowed")
    name = raw[2:] if raw.startswith("./") else raw
    name = name.rstrip("/")
    if name.startswith("/") or not name:
        raise ArchiveRejected(f"member {raw[:80]!r} has an absolute or empty path")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArchiveRejected(f"member {raw[:80]!r} leaves the archive or has an empty path component")
    return name


def _read_json(tar: tarfile.TarFile, member: tarfile.TarInfo, what: str):
    if member.size > MAX_JSON_BYTES:
        raise ArchiveRejected(f"{what} is {member.size} bytes; at most {MAX_JSON_BYTES} are accepted")
    data = tar.extractfile(member).read()  # type: ignore[union-attr]
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ArchiveRejected(f"{what} is not valid JSON ({exc})") from None


def _clean_manifest(manifest: object) -> tuple[dict, list[str]]:
    if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
        count = len(manifest) if isinstance(manifest, list) else "no"
        raise ArchiveRejected(
            f"manifest.json describes {count} images; exactly one is needed (`docker save IMAGE` with a single image)"
        )
    entry = manifest[0]
    config, layers = entry.get("Config"), entry.get("Layers")
    if not isinstance(config, str) or not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
        raise ArchiveRejected("manifest.json lacks Config or Layers")
    if len(layers) > MAX_LAYERS:
        raise ArchiveRejected(f"the image has {len(layers)} layers; at most {MAX_LAYERS} are accepted")
    tags = entry.get("RepoTags") or []
    dropped = [str(t)[:200] for t in tags] if isinstance(tags, list) else [str(tags)[:200]]
    clean = {"Config": _clean_name(config), "RepoTags": None, "Layers": [_clean_name(x) for x in layers]}
    return clean, dropped


def _clean_index(index: object) -> dict:
    if not isinstance(index, dict):
        raise ArchiveRejected("index.json is not an object")
    for desc in index.get("manifests") or []:
        if isinstance(desc, dict) and isinstance(desc.get("annotations"), dict):
            for key in _NAME_ANNOTATIONS:
                desc["annotations"].pop(key, None)
    index.pop("annotations", None)
    return index


def _add_bytes(out: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    out.addfile(info, io.BytesIO(data))


class _HashingReader(io.RawIOBase):
    """Reads ``size`` bytes of ``src``, hashing them and checking the first bytes' magic."""

    def __init__(self, src: IO[bytes], hash_it: bool) -> None:
        self.src = src
        self.sha = hashlib.sha256() if hash_it else None
        self.head = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        data = self.src.read(len(buf))
        if len(self.head) < 8:
            self.head += data[: 8 - len(self.head)]
        if self.sha is not None:
            self.sha.update(data)
        buf[: len(data)] = data
        return len(data)


def sanitize_archive(src: str | Path, dst: str | Path) -> SanitizedArchive:
    """Copy the ``docker save`` archive ``src`` to ``dst`` without any image name (see the
    module docstring for every check). Raises :class:`ArchiveRejected` with the reason; ``dst``
    is then incomplete and the caller removes it."""
    copy = _Copy()
    size_in = Path(src).stat().st_size
    try:
        with (
            tarfile.open(src, mode="r|", bufsize=_CHUNK) as tar,
            tarfile.open(dst, mode="w", format=tarfile.PAX_FORMAT) as out,
        ):
            for m in tar:
                copy.member(tar, out, m)
    except tarfile.TarError as exc:
        raise ArchiveRejected(f"the archive is not a valid tar ({exc})") from None
    except EOFError:
        raise ArchiveRejected("the archive is truncated") from None
    except OSError as exc:
        if exc.errno is not None:
            raise  # the platform's own disk, not the archive
        raise ArchiveRejected(f"the archive is truncated ({exc})") from None
    return copy.result(Path(dst), size_in)


class _Copy:
    """The state of one archive's copy: the members seen so far and what they are, where its
    symlinks point, the hashes of its small files, its manifest and the names it carried."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}  # name -> "file" | "dir" | "link"
        self.links: dict[str, str] = {}  # link name -> resolved target
        self.hashes: dict[str, str] = {}
        self.manifest: dict | None = None
        self.dropped: list[str] = []
        self.members = 0

    def member(self, tar: tarfile.TarFile, out: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        """Check member ``m`` of ``tar`` and copy it to ``out`` (without names, owners or times)."""
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise ArchiveRejected(f"the archive has more than {MAX_MEMBERS} members")
        name = _clean_name(m.name)
        if name in self.seen:
            raise ArchiveRejected(f"member {name!r} appears twice")
        if m.isdir():
            self.seen[name] = "dir"
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            out.addfile(info)
            return
        if m.issym():
            self._symlink(out, name, m.linkname)
            return
        if not m.isreg():
            kind = "hard link" if m.islnk() else "device, fifo or special file"
            raise ArchiveRejected(f"member {name!r} is a {kind}; `docker save` writes none")
        if m.issparse():
            raise ArchiveRejected(f"member {name!r} is a sparse file; `docker save` writes none")
        self.seen[name] = "file"
        self._file(tar, out, m, name)

    def _symlink(self, out: tarfile.TarFile, name: str, target: str) -> None:
        if not target or target.startswith("/") or "\x00" in target:
            raise ArchiveRejected(f"symlink {name!r} points outside the archive ({target[:80]!r})")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        if resolved.startswith("..") or resolved.startswith("/"):
            raise ArchiveRejected(f"symlink {name!r} points outside the archive ({target[:80]!r})")
        self.seen[name], self.links[name] = "link", resolved
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
        out.addfile(info)

    def _file(self, tar: tarfile.TarFile, out: tarfile.TarFile, m: tarfile.TarInfo, name: str) -> None:
        if name == "manifest.json":
            self.manifest, self.dropped = _clean_manifest(_read_json(tar, m, "manifest.json"))
            _add_bytes(out, name, json.dumps([self.manifest]).encode())
            return
        if name == "repositories":
            return  # legacy tags: dropped
        if name == "index.json":
            _add_bytes(out, name, json.dumps(_clean_index(_read_json(tar, m, "index.json"))).encode())
            return
        data = tar.extractfile(m)
        if data is None:  # never for a regular file
            raise ArchiveRejected(f"member {name!r} cannot be read")
        reader = _HashingReader(data, hash_it=m.size <= MAX_JSON_BYTES)
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = m.size, 0o644, 0
        out.addfile(info, io.BufferedReader(reader, _CHUNK))
        for magic, kind in _COMPRESSION_MAGIC.items():
            if reader.head.startswith(magic):
                raise ArchiveRejected(
                    f"member {name!r} is {kind}-compressed; upload the archive exactly as "
                    "`docker save` writes it (uncompressed layers)"
                )
        if reader.sha is not None:
            self.hashes[name] = reader.sha.hexdigest()

    def _regular(self, name: str, what: str) -> str:
        """The regular file ``name`` is, following symlinks (at most 8 hops)."""
        hops = 0
        while self.seen.get(name) == "link" and hops < 8:
            name, hops = self.links[name], hops + 1
        if self.seen.get(name) != "file":
            raise ArchiveRejected(f"{what} {name!r} is not a file of the archive")
        return name

    def result(self, dst: Path, size_in: int) -> SanitizedArchive:
        """Check what the whole archive holds (a manifest, links to its files, a small config,
        layers that are tars without sparse files) and describe the copy at ``dst``."""
        if self.manifest is None:
            raise ArchiveRejected("the archive has no manifest.json (not written by `docker save`?)")
        for link, target in self.links.items():
            self._regular(target, f"the target of symlink {link!r}")
        config = self._regular(self.manifest["Config"], "the image config")
        if config not in self.hashes:
            raise ArchiveRejected(f"the image config is larger than {MAX_JSON_BYTES} bytes")
        layers = [self._regular(x, "layer") for x in self.manifest["Layers"]]
        _check_layers(dst, set(layers))
        return SanitizedArchive(
            image_id=f"sha256:{self.hashes[config]}", dropped_tags=self.dropped, layers=len(layers), bytes_in=size_in
        )


class _Slice(io.RawIOBase):
    """A read-only, seekable window ``[start, start + size)`` of ``fh``."""

    def __init__(self, fh: BinaryIO, start: int, size: int) -> None:
        self.fh, self.start, self.size, self.pos = fh, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buf) -> int:
        n = max(0, min(len(buf), self.size - self.pos))
        self.fh.seek(self.start + self.pos)
        data = self.fh.read(n)
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _check_layers(path: Path, layers: set[str]) -> None:
    """Each layer must be a tar without sparse files (headers only: the data is seeked over)."""
    with path.open("rb") as fh, tarfile.open(fileobj=fh, mode="r:") as outer:
        for m in outer:
            if m.name not in layers:
                continue
            try:
                with tarfile.open(fileobj=io.BufferedReader(_Slice(fh, m.offset_data, m.size), _CHUNK), mode="r:") as t:
                    for inner in t:
                        if inner.issparse():
                            raise ArchiveRejected(
                                f"layer {m.name!r} holds a sparse file ({inner.name[:120]!r}), "
                                "which would expand on the platform's disk"
                            )
            except tarfile.TarError as exc:
                if m.size <= 64 * 1024 and not _Slice(fh, m.offset_data, m.size).read(m.size).strip(b"\x00"):
                    continue  # the empty layer: end-of-archive blocks only
                raise ArchiveRejected(f"layer {m.name!r} is not a valid tar ({exc})") from None
