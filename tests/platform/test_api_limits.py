"""API hygiene on PostgreSQL over a real socket: inputs that used to answer 500 answer a 4xx with
a message (NUL bytes and junk in ids, also on the public leaderboard routes; out-of-range
numbers; over-long strings), and request bodies are limited before they are read (413 with the
limit; an unauthenticated upload is refused without reading its body)."""

from __future__ import annotations

import io
import socket
import tarfile
import time

import httpx
import pytest
from lp_helpers import ApiServer, RecordingEnqueue, free_port, team_with_tokens

IMAGE_ID = "sha256:" + "ab" * 32
MAX_UPLOAD = 1 << 20


@pytest.fixture(scope="module")
def served(migrated_pg, tmp_path_factory):
    """(server, app, user token, admin token, a published submission id)."""
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Result, Submission

    settings = Settings(
        database_url=migrated_pg,
        data_dir=tmp_path_factory.mktemp("limits-data"),
        max_upload_bytes=MAX_UPLOAD,
        submissions_per_day=100,
        max_concurrent=100,
    )
    app = create_app(settings, enqueue=RecordingEnqueue())
    with transaction(app.state.sessions) as s:
        team, user, token, admin_token = team_with_tokens(s, "limits")
        sub = Submission(
            team_id=team.id,
            user_id=user.id,
            source="reference",
            image_ref=IMAGE_ID,
            image_digest=IMAGE_ID,
            state="published",
        )
        s.add(sub)
        s.flush()
        s.add(
            Result(
                submission_id=sub.id,
                team_id=team.id,
                team_name=team.name,
                policy_name="p",
                image_digest=IMAGE_ID,
                spec_version="1.0",
                evaluator_version="0.1.0",
                stack={},
                manifest_sha256="0" * 64,
                summary={"cases": []},
            )
        )
        sid = sub.id
    with ApiServer(app, free_port()) as server:
        yield server, app, token, admin_token, sid


def _message(r: httpx.Response) -> str:
    detail = r.json()["detail"]
    if isinstance(detail, list):  # FastAPI's validation errors: where and what
        return "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail)
    return detail["message"]


def test_bad_input_answers_4xx_with_a_message(served):
    server, _, token, admin, sid = served
    user_h, admin_h = {"Authorization": f"Bearer {token}"}, {"Authorization": f"Bearer {admin}"}
    nul = "a%00b"
    cases = [
        ("GET", "/submissions?limit=-1", user_h, None, 422, "limit"),
        ("GET", "/submissions?limit=0", user_h, None, 422, "limit"),
        ("GET", "/submissions?limit=201", user_h, None, 422, "limit"),
        ("GET", f"/submissions/{nul}", user_h, None, 404, "no submission"),
        ("GET", f"/submissions/{nul}/logs", user_h, None, 404, "no submission"),
        ("POST", f"/submissions/{nul}/cancel", user_h, None, 404, "no submission"),
        ("GET", f"/submissions/{'x' * 300}", user_h, None, 404, "no submission"),
        ("DELETE", f"/tokens/{nul}", user_h, None, 404, "no token"),
        ("POST", "/tokens", user_h, {"label": "x" * 201}, 422, "label"),
        ("POST", "/tokens", user_h, {"label": "a\x00b"}, 422, "control characters"),
        ("POST", "/submissions", user_h, {"image": IMAGE_ID, "note": "a\x00b"}, 422, "control characters"),
        ("POST", "/submissions", user_h, {"image": "r/p@sha256:" + "0" * 64 + "x" * 500}, 422, "image"),
        ("GET", f"/admin/submissions/{nul}", admin_h, None, 404, "no submission"),
        ("POST", f"/admin/submissions/{nul}/requeue", admin_h, None, 404, "no submission"),
        ("POST", f"/admin/submissions/{nul}/hide", admin_h, {"hidden": True}, 404, "no published result"),
        ("POST", f"/admin/users/{nul}/tokens", admin_h, {"days": 1}, 404, "no user"),
        ("POST", "/admin/teams", admin_h, {"name": "t" * 101}, 422, "name"),
        ("POST", "/admin/teams", admin_h, {"name": "t\x00"}, 422, "control characters"),
        ("POST", "/admin/teams", admin_h, {"name": "big", "submissions_per_day": 2**40}, 422, "submissions_per_day"),
        ("POST", "/admin/users", admin_h, {"name": "u" * 201, "team": "t"}, 422, "name"),
        ("GET", "/me", {"Authorization": b"Bearer lp_a\xe9b_secret"}, None, 401, "malformed"),
        # the public leaderboard (no token)
        ("GET", f"/api/leaderboard/submissions/{nul}", {}, None, 404, "No published submission"),
        ("GET", f"/api/leaderboard/compare?a={nul}&b={sid}", {}, None, 404, "No published submission"),
        ("GET", f"/leaderboard/charts/submissions/{nul}/shifts.svg", {}, None, 404, "No published submission"),
        ("GET", f"/leaderboard/charts/compare/{nul}/{sid}.svg", {}, None, 404, "No published submission"),
    ]
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for method, path, headers, body, status, words in cases:
            r = c.request(method, path, headers=headers, json=body)
            assert r.status_code == status, (method, path, r.status_code, r.text[:300])
            assert words in _message(r), (method, path, r.text[:300])
        for path in (f"/leaderboard/submissions/{nul}", f"/leaderboard/compare?a={nul}&b={sid}"):
            r = c.get(path)
            assert r.status_code == 404 and "No published submission" in r.text, (path, r.status_code)
        # and the well-formed requests still work
        assert c.get(f"/api/leaderboard/submissions/{sid}").status_code == 200
        assert c.get("/submissions?limit=200", headers=user_h).status_code == 200


def _raw_request(url: str, head: str, body: bytes, wait: float = 10.0) -> tuple[bytes, float]:
    """Send ``head`` and ``body`` (less than the Content-Length announced) on a raw socket; return
    the first bytes of the answer and how long it took, or fail when none comes within ``wait``."""
    host, port = url.removeprefix("http://").split(":")
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(head.encode() + body)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < 100:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pytest.fail(f"no (whole) answer within {wait} s: the server waits for the whole body: {answer[:200]}")
    return answer, time.monotonic() - t0


def test_bodies_are_limited_before_they_are_read(served):
    server, _, token, _, _ = served
    big = 100 * 2**20
    # An unauthenticated upload within max_upload_bytes: 401 after the headers and 64 KiB, the
    # rest never sent (the route authenticates before it reads the body).
    head = (
        f"POST /submissions/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_UPLOAD}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n\r\n"
    )
    part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="p.tar"\r\n\r\n'
    answer, took = _raw_request(server.url, head, part + b"x" * 65536)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"token_missing" in answer and took < 10
    # An unauthenticated upload announcing 100 MB, over the limit: 413 at once.
    answer, _ = _raw_request(server.url, head.replace(str(MAX_UPLOAD), str(big)), b"--b\r\n")
    assert answer.startswith(b"HTTP/1.1 413") and b"uploaded archive" in answer, answer[:300]
    # A JSON route announcing 100 MB: 413 at once, with the limit, before authentication.
    head = f"POST /submissions HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\nContent-Type: application/json\r\n\r\n"
    answer, _ = _raw_request(server.url, head, b"{")
    assert answer.startswith(b"HTTP/1.1 413") and b"64 KiB allowed" in answer, answer[:300]
    # An authenticated upload announcing more than max_upload_bytes: 413 at once.
    head = (
        f"POST /submissions/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_UPLOAD * 2}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary=b\r\n\r\n"
    )
    answer, _ = _raw_request(server.url, head, b"--b\r\n")
    assert answer.startswith(b"HTTP/1.1 413") and b"uploaded archive" in answer, answer[:300]
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, timeout=60, headers=auth) as c:
        # A chunked (length-less) JSON body is counted as it arrives.
        r = c.post(
            "/submissions",
            content=iter([b'{"note": "', b"x" * 70_000, b'"}']),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413 and "64 KiB" in _message(r), r.text[:300]
        # A chunked upload whose archive grows past max_upload_bytes: 413 while streaming.
        boundary = "bnd"

        def multipart(payload_chunks):
            yield (
                f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nmy note\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="../p.tar"\r\n'
                "Content-Type: application/x-tar\r\n\r\n"
            ).encode()
            yield from payload_chunks
            yield f"\r\n--{boundary}--\r\n".encode()

        ctype = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        archive = _tar(MAX_UPLOAD // 4)
        r = c.post("/submissions/upload", content=multipart([archive] * 5), headers=ctype)
        assert r.status_code == 413 and "uploaded archive" in _message(r), r.text[:300]
        r = c.post("/submissions/upload", content=multipart([b"not a tar" * 100]), headers=ctype)
        assert r.status_code == 422 and "docker save" in _message(r), r.text[:300]
        r = c.post("/submissions/upload", content=multipart([archive]), headers=ctype)
        assert r.status_code == 201, r.text[:300]
        st = c.get(f"/submissions/{r.json()['id']}").json()
        assert st["image_ref"] == "upload:p.tar"
    uploads = [p.name for p in (served[1].state.settings.data_dir / "uploads").iterdir()]
    assert uploads == [f"{st['id']}.tar"], uploads  # refused uploads leave nothing behind


def _tar(size: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("layer.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(b"\0" * size))
    return buf.getvalue()
