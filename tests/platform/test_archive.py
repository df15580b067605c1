"""The uploaded-archive sanitizer (liberopro_platform.sandbox.archive) on crafted archives: names
are dropped, and every hostile form (traversal, links out, hard links, devices, several images,
compressed or sparse layers, duplicates, huge JSON) is refused before the engine sees it. The
engine-side half (a takeover archive loaded, the platform's tags unmoved) is in
test_image_identity.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest
from liberopro_platform.sandbox.archive import MAX_JSON_BYTES, ArchiveRejected, sanitize_archive

CONFIG = json.dumps(
    {"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}}
).encode()
CONFIG_NAME = hashlib.sha256(CONFIG).hexdigest() + ".json"


def layer_tar(files: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in (files or {"app/policy.py": b"print('hi')\n"}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sparse_layer_tar() -> bytes:
    """A layer holding one PAX 1.0 sparse file that claims 10 GiB and stores 1 byte (what a disk
    filler would upload: the engine writes the zeros out)."""
    sparse_map = b"1\n10737418239\n1\n"
    data = sparse_map + b"\0" * (512 - len(sparse_map)) + b"x"
    info = tarfile.TarInfo("app/GNUSparseFile.0/filler")
    info.size = len(data)
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "app/filler",
        "GNU.sparse.realsize": "10737418240",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def archive(tmp_path, members: list[tuple], manifest: object = "default", name: str = "in.tar") -> str:
    """A docker-save-like archive. ``members``: (name, bytes) files, (name, "dir"), (name, "sym", target),
    (name, "hard", target), (name, "fifo")."""
    path = tmp_path / name
    with tarfile.open(path, mode="w") as t:

        def add(info: tarfile.TarInfo, data: bytes | None = None) -> None:
            if data is not None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)

        for m in members:
            info = tarfile.TarInfo(m[0])
            if isinstance(m[1], bytes):
                add(info, m[1])
            elif m[1] == "dir":
                info.type = tarfile.DIRTYPE
                add(info)
            elif m[1] in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if m[1] == "sym" else tarfile.LNKTYPE
                info.linkname = m[2]
                add(info)
            elif m[1] == "fifo":
                info.type = tarfile.FIFOTYPE
                add(info)
        if manifest == "default":
            manifest = [
                {"Config": CONFIG_NAME, "RepoTags": ["liberopro/evaluator:latest"], "Layers": ["aaaa/layer.tar"]}
            ]
        if manifest is not None:
            add(tarfile.TarInfo("manifest.json"), json.dumps(manifest).encode())
        add(tarfile.TarInfo("repositories"), b'{"liberopro/evaluator": {"latest": "aaaa"}}')
    return str(path)


def base_members(layer: bytes | None = None) -> list[tuple]:
    return [
        (CONFIG_NAME, CONFIG),
        ("aaaa", "dir"),
        ("aaaa/VERSION", b"1.0"),
        ("aaaa/layer.tar", layer if layer is not None else layer_tar()),
    ]


def read_back(path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as t:
        return {m.name: m for m in t.getmembers()}


def test_a_docker_save_archive_loses_every_name_and_keeps_its_content(tmp_path):
    src = archive(tmp_path, base_members())
    out = tmp_path / "out.tar"
    info = sanitize_archive(src, out)
    assert info.image_id == "sha256:" + hashlib.sha256(CONFIG).hexdigest()
    assert info.dropped_tags == ["liberopro/evaluator:latest"] and info.layers == 1
    members = read_back(out)
    assert "repositories" not in members
    with tarfile.open(out) as t:
        manifest = json.loads(t.extractfile("manifest.json").read())
        assert manifest == [{"Config": CONFIG_NAME, "RepoTags": None, "Layers": ["aaaa/layer.tar"]}]
        assert t.extractfile("aaaa/layer.tar").read() == layer_tar()
        assert t.extractfile(CONFIG_NAME).read() == CONFIG


def test_a_layer_saved_twice_as_a_symlink_is_kept(tmp_path):
    """`docker save` links a layer that occurs twice to its first copy (../<id>/layer.tar)."""
    members = [*base_members(), ("bbbb", "dir"), ("bbbb/layer.tar", "sym", "../aaaa/layer.tar")]
    manifest = [{"Config": CONFIG_NAME, "RepoTags": None, "Layers": ["aaaa/layer.tar", "bbbb/layer.tar"]}]
    info = sanitize_archive(archive(tmp_path, members, manifest), tmp_path / "out.tar")
    assert info.layers == 2
    assert read_back(tmp_path / "out.tar")["bbbb/layer.tar"].linkname == "../aaaa/layer.tar"


def test_an_oci_index_loses_its_name_annotations(tmp_path):
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "digest": "sha256:" + "1" * 64,
                "annotations": {
                    "io.containerd.image.name": "docker.io/liberopro/evaluator:latest",
                    "org.opencontainers.image.ref.name": "latest",
                    "other": "kept",
                },
            }
        ],
    }
    src = archive(tmp_path, [*base_members(), ("index.json", json.dumps(index).encode()), ("oci-layout", b"{}")])
    sanitize_archive(src, tmp_path / "out.tar")
    with tarfile.open(tmp_path / "out.tar") as t:
        cleaned = json.loads(t.extractfile("index.json").read())
    assert cleaned["manifests"][0]["annotations"] == {"other": "kept"}


def test_the_empty_layer_is_accepted(tmp_path):
    sanitize_archive(archive(tmp_path, base_members(layer=b"\0" * 1024)), tmp_path / "out.tar")


@pytest.mark.parametrize(
    ("members", "manifest", "reason"),
    [
        ([("../evil", b"x")], "default", "leaves the archive"),
        ([("aaaa/../../evil", b"x")], "default", "leaves the archive"),
        ([("/etc/cron.d/x", b"x")], "default", "absolute"),
        ([("link", "sym", "../../etc/passwd")], "default", "points outside"),
        ([("link", "sym", "/etc/passwd")], "default", "points outside"),
        ([("hard", "hard", "aaaa/layer.tar")], "default", "hard link"),
        ([("pipe", "fifo")], "default", "device, fifo"),
        ([("aaaa/VERSION", b"again")], "default", "appears twice"),
        ([], None, "no manifest.json"),
        ([], [{"Config": CONFIG_NAME, "Layers": []}] * 2, "exactly one"),
        ([], [{"Config": CONFIG_NAME, "RepoTags": None, "Layers": ["../x/layer.tar"]}], "leaves the archive"),
        ([], [{"Config": CONFIG_NAME, "RepoTags": None, "Layers": ["missing/layer.tar"]}], "not a file of the archive"),
        ([("dangling", "sym", "nothing-here")], "default", "not a file of the archive"),
    ],
)
def test_hostile_archives_are_refused(tmp_path, members, manifest, reason):
    src = archive(tmp_path, [*base_members(), *members], manifest)
    with pytest.raises(ArchiveRejected, match=reason):
        sanitize_archive(src, tmp_path / "out.tar")


def test_compressed_and_sparse_layers_are_refused(tmp_path):
    """A compressed layer could expand far beyond the upload limit; a sparse file would be
    written out as zeros by the engine (10 GiB from a 2 KiB layer here)."""
    src = archive(tmp_path, base_members(layer=gzip.compress(layer_tar())), name="gz.tar")
    with pytest.raises(ArchiveRejected, match="gzip-compressed"):
        sanitize_archive(src, tmp_path / "out.tar")
    src = archive(tmp_path, base_members(layer=sparse_layer_tar()), name="sparse.tar")
    with pytest.raises(ArchiveRejected, match="sparse file"):
        sanitize_archive(src, tmp_path / "out.tar")
    src = archive(tmp_path, base_members(layer=b"not a tar at all" * 64), name="junk.tar")
    with pytest.raises(ArchiveRejected, match="not a valid tar"):
        sanitize_archive(src, tmp_path / "out.tar")


def test_huge_json_and_truncated_archives_are_refused(tmp_path):
    big = json.dumps([{"Config": CONFIG_NAME, "RepoTags": ["x" * MAX_JSON_BYTES], "Layers": []}]).encode()
    src = tmp_path / "big.tar"
    with tarfile.open(src, mode="w") as t:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(big)
        t.addfile(info, io.BytesIO(big))
    with pytest.raises(ArchiveRejected, match="at most"):
        sanitize_archive(src, tmp_path / "out.tar")
    whole = open(archive(tmp_path, base_members()), "rb").read()  # noqa: SIM115
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ArchiveRejected, match="truncated|not a valid tar|no manifest"):
        sanitize_archive(cut, tmp_path / "out.tar")
