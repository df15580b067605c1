"""Image identity and the sandbox's disk on the real Docker engine (issue 9): an uploaded archive
tagged as a platform image moves no tag and runs as an ordinary submission; a team cannot submit
another team's image or a platform image by id; image references to registries not on the
allowed list are refused with one message, whatever the host and port, without the engine
connecting anywhere; an image's VOLUMEs become size-limited tmpfs mounts.

Each test restores any platform tag it finds moved (see ``platform_tags``), so a failing run
does not break other users of this engine.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import tarfile
import time
from pathlib import Path

import pytest
from lp_helpers import EXAMPLE_IMAGE, Canary, free_port, sandbox_leftovers, wait_final

pytestmark = pytest.mark.docker

HOSTILE_DIR = Path(__file__).resolve().parent / "hostile"
EVALUATOR_IMAGE = os.environ.get("LIBEROPRO_TEST_EVALUATOR_IMAGE", "liberopro/evaluator:latest")

PLATFORM_TAGS = sorted({EVALUATOR_IMAGE, "liberopro/evaluator:latest", "liberopro/platform:latest", EXAMPLE_IMAGE})
DIGEST = "sha256:" + "0" * 64


@pytest.fixture
def platform_tags(docker_client):
    """The image id behind each platform tag before the test; after it, a moved tag is put back
    (and one that did not exist is removed)."""
    from docker.errors import ImageNotFound

    def ids() -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for tag in PLATFORM_TAGS:
            try:
                out[tag] = docker_client.images.get(tag).id
            except ImageNotFound:
                out[tag] = None
        return out

    before = ids()
    yield before
    for tag, now in ids().items():
        if now == before[tag]:
            continue
        repo, name = tag.rsplit(":", 1)
        if before[tag] is None:
            docker_client.images.remove(tag)
        else:
            docker_client.images.get(before[tag]).tag(repo, name)


@pytest.fixture(scope="module")
def fake_image(docker_client) -> str:
    """A small image standing in for a forged evaluator (exits 3 when run as a policy)."""
    image, _ = docker_client.images.build(
        path=str(HOSTILE_DIR),
        dockerfile="takeover.Dockerfile",
        network_mode="none",
        tag="liberopro-test/takeover:latest",
        rm=True,
    )
    return image.id


def archive_tagged(docker_client, image_id: str, tag: str, dest: Path) -> Path:
    """`docker save` of ``image_id`` whose manifest and repositories name ``tag``: what
    `docker tag FAKE liberopro/evaluator:latest && docker save liberopro/evaluator:latest` makes,
    without moving the real tag here."""
    raw = dest.with_suffix(".raw")
    with raw.open("wb") as fh:
        for chunk in docker_client.images.get(image_id).save(named=False):
            fh.write(chunk)
    repo, name = tag.rsplit(":", 1)
    with tarfile.open(raw) as src, tarfile.open(dest, "w") as out:
        for m in src:
            if m.name == "manifest.json":
                manifest = json.loads(src.extractfile(m).read())
                manifest[0]["RepoTags"] = [tag]
                data = json.dumps(manifest).encode()
                top = manifest[0]["Layers"][-1].split("/")[0]
                m.size = len(data)
                out.addfile(m, io.BytesIO(data))
                repos = json.dumps({repo: {name: top}}).encode()
                info = tarfile.TarInfo("repositories")
                info.size = len(repos)
                out.addfile(info, io.BytesIO(repos))
            elif m.name != "repositories":
                out.addfile(m, src.extractfile(m) if m.isreg() else None)
    raw.unlink()
    return dest


def test_takeover_archives_move_no_tag_and_run_as_plain_submissions(
    http, worker, fake_image, docker_client, platform_tags, platform_settings, tmp_path
):
    """Archives tagged liberopro/evaluator:latest and liberopro/platform:latest, uploaded through
    the API and loaded by the worker: every platform tag still names the same image, the fake is
    tagged liberopro/submission/<id> only, fails validation as a policy, and a worker that
    starts now still pins the real evaluator."""
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    t0 = time.monotonic()
    for tag in ("liberopro/evaluator:latest", "liberopro/platform:latest"):
        path = archive_tagged(docker_client, fake_image, tag, tmp_path / "takeover.tar")
        with path.open("rb") as fh:
            r = http.post("/submissions/upload", files={"file": ("policy.tar", fh)})
        assert r.status_code == 201, r.text
        st = wait_final(http, r.json()["id"], 300, worker)
        now = {t: docker_client.images.get(t).id if platform_tags[t] else None for t in PLATFORM_TAGS}
        assert now == platform_tags, f"a platform tag moved: {now} != {platform_tags}"
        assert st["state"] == "failed" and st["failure_stage"] == "validation", st
        assert "exited with code 3" in st["failure"] and st["image_digest"] == fake_image
        events = [e["message"] for e in st["events"]]
        assert any(f"the archive's own names ({tag}) were ignored" in m for m in events), events
        tags = docker_client.images.get(fake_image).tags
        assert f"liberopro/submission/{st['id']}:latest" in tags and tag not in tags, tags
    backend = DockerBackend(platform_settings.model_copy(update={"evaluator_image": EVALUATOR_IMAGE}), "takeover@test")
    assert backend.evaluator_id == platform_tags[EVALUATOR_IMAGE] != fake_image
    print(f"\ntwo takeover uploads, submit to failed: {time.monotonic() - t0:.1f} s")


def _team_token(settings) -> tuple[str, int]:
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    with transaction(make_sessionmaker(make_engine(settings.database_url))) as s:
        team = Team(name=f"other-{secrets.token_hex(3)}")
        s.add(team)
        s.flush()
        user = User(name=f"bob-{secrets.token_hex(3)}", team_id=team.id)
        s.add(user)
        s.flush()
        _, token = issue_token(s, user, 1)
        return token, team.id


class _NoQueue:
    def validate(self, submission_id, countdown=0):
        pass

    def run_shard(self, shard_id, countdown=0):
        pass

    def aggregate(self, submission_id, countdown=0):
        pass


def test_foreign_and_platform_image_ids_are_refused(api, grant, platform_images, platform_settings, docker_client):
    """Another team's upload and the platform's own images cannot be submitted by id; even with
    a forged ownership row the worker refuses a platform image before starting anything."""
    import httpx
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.models import Submission, TeamImage
    from liberopro_platform.pipeline import Pipeline
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    theirs = grant(platform_images[EXAMPLE_IMAGE])  # the session team uploaded the example
    evaluator = platform_images[EVALUATOR_IMAGE]
    token, team_id = _team_token(platform_settings)
    messages = []
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as other:
        for ref in (theirs, evaluator):
            r = other.post("/submissions", json={"image": ref})
            assert r.status_code == 403 and r.json()["detail"]["error"] == "image_not_owned", r.text
            messages.append(r.json()["detail"]["message"].replace(ref, "ID"))
    assert messages[0] == messages[1]
    # Past the API (a forged row): the worker still refuses the platform's images.
    sessions = make_sessionmaker(make_engine(platform_settings.database_url))
    settings = platform_settings.model_copy(update={"evaluator_image": evaluator})
    pipeline = Pipeline(
        settings, sessions, _NoQueue(), "identity@test", backend=DockerBackend(settings, "identity@test")
    )
    refs = [evaluator]
    try:
        refs.append(docker_client.images.get("liberopro/platform:latest").id)
    except Exception:  # noqa: BLE001 - the platform image is optional here
        pass
    for ref in refs:
        with transaction(sessions) as s:
            s.add(TeamImage(team_id=team_id, image_id=ref, source="upload"))
            sub = Submission(
                team_id=team_id,
                user_id=s.scalar(_first_user(team_id)),
                source="reference",
                image_ref=ref,
                image_digest=ref,
            )
            s.add(sub)
            s.flush()
            sid = sub.id
        pipeline.validate(sid)
        with sessions() as s:
            sub = s.get(Submission, sid)
            assert sub.state == "failed" and "the platform's own images" in sub.failure, (sub.state, sub.failure)
        assert not [n for n in sandbox_leftovers(docker_client) if sid in n]


def _first_user(team_id: int):
    from liberopro_platform.models import User
    from sqlalchemy import select

    return select(User.id).where(User.team_id == team_id).limit(1)


def test_registry_references_give_one_refusal_and_no_connection(platform_settings, docker_client):
    """127.0.0.1:<open port> and 127.0.0.1:<closed port>: with the default (empty) allowed list
    both are refused without the engine connecting; with both allowed the engine tries, and the
    submitter still reads the same sentence (the engine's error goes to the admins)."""
    from liberopro_platform.sandbox.base import PolicyRejected, PolicySource
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    canary, closed = Canary(free_port()), free_port()
    try:
        refs = {port: f"127.0.0.1:{port}/team/policy@{DIGEST}" for port in (canary.port, closed)}
        for allowed in ([], [f"127.0.0.1:{p}" for p in refs]):
            backend = DockerBackend(platform_settings.model_copy(update={"allowed_registries": allowed}), "pull@test")
            seen = {}
            for port, ref in refs.items():
                with pytest.raises(PolicyRejected) as exc:
                    backend.prepare(PolicySource(submission_id="pulltest", image=ref))
                seen[port] = (exc.value.failure.replace(str(port), "PORT"), exc.value.fix)
            assert seen[canary.port] == seen[closed], seen
            if not allowed:
                assert "not a registry this platform pulls from (allowed: none" in seen[closed][0]
                time.sleep(0.5)
                assert canary.connections == [], "the engine connected to a registry that is not allowed"
            else:
                assert (
                    seen[closed][0] == "image 127.0.0.1:PORT/team/policy@" + DIGEST + " could not be pulled from "
                    "127.0.0.1:PORT"
                )
                assert canary.connections, "positive control: the engine did try the allowed registry"
    finally:
        canary.close()


def test_image_volumes_become_size_limited_tmpfs(platform_settings, platform_images, docker_client):
    """A policy image declaring VOLUMEs fills each: every write stops at the tmpfs size (as does
    /dev/shm at its size, and the read-only root at once); no volume is created on the engine."""
    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.docker.containers import Sandbox
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    image, _ = docker_client.images.build(
        path=str(HOSTILE_DIR),
        dockerfile="volume.Dockerfile",
        network_mode="none",
        tag="liberopro-test/hostile-volume:latest",
        rm=True,
        buildargs={"BASE_IMAGE": EXAMPLE_IMAGE},
    )
    settings = platform_settings.model_copy(update={"policy_volume_tmpfs_size": "16m", "policy_shm_size": "24m"})
    backend = DockerBackend(settings, "volume@test")
    prepared = backend.prepare(PolicySource(submission_id="volumetest", image=image.id))
    assert any("VOLUME /data /var/cache/policy" in n and "tmpfs of 16m" in n for n in prepared.notes), prepared.notes
    volumes_before = {v.name for v in docker_client.volumes.list()}
    with Sandbox(backend, "volumetest", "validation") as sb:
        c = sb.start_policy(image.id, restarts=0)
        end = time.monotonic() + 60
        logs = ""
        while "VOLUME done" not in logs and time.monotonic() < end:
            time.sleep(0.3)
            logs = c.logs().decode(errors="replace")
        host = docker_client.api.inspect_container(c.id)
        volumes_during = {v.name for v in docker_client.volumes.list()}
    assert "VOLUME done" in logs, logs
    wrote = {
        ln.split()[1]: (int(ln.split()[3]), ln.split(": ", 1)[1])
        for ln in logs.splitlines()
        if ln.startswith("VOLUME /")
    }
    for path, size in (("/data", 16), ("/var/cache/policy", 16), ("/dev/shm", 24)):
        n, outcome = wrote[path]
        assert size - 2 <= n <= size and "No space left on device" in outcome, (path, wrote[path])
    assert wrote["/app"] == (0, "OSError: Read-only file system"), wrote["/app"]
    assert [m for m in host["Mounts"] if m["Type"] == "volume"] == []
    assert host["HostConfig"]["Tmpfs"]["/data"].endswith("size=16m") and host["HostConfig"]["ShmSize"] == 24 * 2**20
    assert host["HostConfig"]["ReadonlyRootfs"] is True
    assert volumes_during == volumes_before


def test_a_shard_on_a_node_without_the_image_loads_it_from_the_kept_upload(docker_client, platform_settings, tmp_path):
    """Several nodes (docs/platform.md): a shard's node whose engine lacks the validated image
    loads it again from the upload kept on the shared data directory, and refuses an archive that
    no longer holds that image or a submission it cannot fetch at all."""
    from docker.errors import ImageNotFound
    from liberopro_platform.image_refs import SUBMISSION_REPO
    from liberopro_platform.sandbox.base import PolicySource, SandboxError
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    marker = secrets.token_hex(4)
    dockerfile = f"FROM {EXAMPLE_IMAGE}\nLABEL org.liberopro.test.node={marker}\n".encode()
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile), network_mode="none", rm=True)
    upload = archive_tagged(docker_client, image.id, f"node-test/{marker}:latest", tmp_path / "upload.tar")
    docker_client.images.remove(image.id, force=True)
    backend = DockerBackend(platform_settings, f"node-b-{marker}@test")
    sid = f"node{marker}"
    try:
        with pytest.raises(
            SandboxError, match="cannot be fetched: no uploaded archive was kept .*LIBEROPRO_KEEP_UPLOADS_UNTIL_DONE=1"
        ):
            backend.ensure_image(PolicySource(sid, image=image.id))
        backend.ensure_image(PolicySource(sid, image=image.id, upload_path=str(upload)))
        loaded = docker_client.images.get(image.id)
        assert f"{SUBMISSION_REPO}/{sid}:latest" in loaded.tags
        backend.ensure_image(PolicySource(sid, image=image.id))  # present now: nothing to fetch
        with pytest.raises(SandboxError, match="no longer holds the validated image"):
            backend.ensure_image(PolicySource(sid, image=DIGEST, upload_path=str(upload)))
    finally:
        try:
            docker_client.images.remove(image.id, force=True)
        except ImageNotFound:
            pass
