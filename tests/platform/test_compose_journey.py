"""The documented self-host path, end to end, and the stack's own redis and postgres images.

``test_documented_self_host_journey`` reads the bash block of the README's "The platform: bring
the stack up and submit" section (docs/platform.md must hold the same block) and runs it as
written, in a fresh project directory holding a copy of compose.yaml, with only these changes:

- the two preparation lines (setup-system.sh, build-images.sh) are not run: scripts/test.sh runs
  them before pytest, and the journey reuses the images of that run (it checks that the stack's
  containers run exactly those image ids: nothing rebuilt or pulled);
- ``uv run liberopro`` is this test environment's ``liberopro`` (the same console script);
- ``docker compose`` is ``docker-compose`` where only Compose v1 is installed;
- the API port is a free one instead of 8000 (``API_PORT`` for compose, the URLs to match);
- compose.yaml (and a ``.env`` beside it, if any) is copied into a temporary project directory,
  so that ``manifests/`` and the data never touch the checkout;
- the quick-trial settings that docs/platform.md names: ``instances generate`` gets
  ``--tasks libero_spatial:2 --shifts nominal,S12 --episodes 1``, compose gets
  ``EPISODES_PER_INSTANCE=1 MAX_STEPS=10``, plus a unique ``COMPOSE_PROJECT_NAME`` and
  ``WORKER_NAME`` so that nothing collides with another stack on the engine.

``docker compose down -v`` (the block's last line) always runs; afterwards no container,
network or volume of the project, and no sandbox of its worker, may be left.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from lp_helpers import EXAMPLE_IMAGE, REPO, free_port

README = REPO / "README.md"
PLATFORM_DOC = REPO / "docs" / "platform.md"
README_HEADING = "## The platform: bring the stack up and submit"
DOC_HEADING = "## Bring the stack up, submit, follow"
PREPARED = (
    "bash scripts/setup-system.sh --with-test-deps && bash scripts/start-dockerd.sh",
    "bash docker/build-images.sh",
)
TRIAL_GENERATE = "--tasks libero_spatial:2 --shifts nominal,S12 --episodes 1"
TRIAL_ENV = {"EPISODES_PER_INSTANCE": "1", "MAX_STEPS": "10"}
IMAGES = {  # compose variable -> image (the images of this CI run; overridable to test other builds)
    "PLATFORM_IMAGE": os.environ.get("LIBEROPRO_TEST_PLATFORM_IMAGE", "liberopro/platform:latest"),
    "EVALUATOR_IMAGE": os.environ.get("LIBEROPRO_TEST_EVALUATOR_IMAGE", "liberopro/evaluator:latest"),
    "REDIS_IMAGE": os.environ.get("LIBEROPRO_TEST_REDIS_IMAGE", "liberopro/redis:latest"),
    "POSTGRES_IMAGE": os.environ.get("LIBEROPRO_TEST_POSTGRES_IMAGE", "liberopro/postgres:latest"),
}
# Each documented step, recognised by a fragment of its line, with its time limit (seconds).
STEPS = {
    "generate": ("instances generate --split eval", 1200),
    "up": ("up -d", 600),
    "wait_api": ("/health", 300),
    "token": ("create-user", 300),
    "submit": ("liberopro submit", 1800),
    "leaderboard": ("/api/leaderboard", 60),
    "down": ("down -v", 300),
}


def documented_block(path: Path, heading: str) -> list[str]:
    """The non-empty lines of the first ```bash block after ``heading`` in ``path``."""
    m = re.search(re.escape(heading) + r"\n(?:[^\n]*\n)*?```bash\n(.*?)```", path.read_text(), re.S)
    assert m, f"{path.name}: no ```bash block under {heading!r}"
    return [line for line in m.group(1).splitlines() if line.strip()]


def compose_words() -> list[str]:
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0
    ):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("no Compose found: scripts/setup-system.sh --with-test-deps installs it")


def image_ids(docker_client, images) -> dict[str, str]:
    from docker.errors import ImageNotFound

    out = {}
    for image in images:
        try:
            out[image] = docker_client.images.get(image).id
        except ImageNotFound:
            pytest.fail(
                f"image {image} is missing: scripts/test.sh builds every image before pytest "
                "(bash docker/build-images.sh all)"
            )
    return out


class Journey:
    """Runs documented lines one by one in ``project`` (exports carry over through a file)."""

    def __init__(self, project: Path, env: dict[str, str], compose: list[str], port: int) -> None:
        self.project, self.env, self.compose, self.port = project, env, compose, port
        self.envfile = project.parent / "journey.env"
        self.envfile.write_text("")
        self.times: dict[str, float] = {}

    def adapt(self, line: str) -> str:
        line = re.sub(r"\s+#\s.*$", "", line)  # the trailing comment
        line = line.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        line = line.replace("uv run liberopro ", f"{shlex.quote(str(Path(sys.executable).parent / 'liberopro'))} ")
        if self.compose == ["docker-compose"]:
            line = line.replace("docker compose ", "docker-compose ")
        return line

    def run(self, name: str, line: str, timeout: float) -> str:
        script = (
            f"set -eo pipefail\nsource {shlex.quote(str(self.envfile))}\n{line}\n"
            f"export -p > {shlex.quote(str(self.envfile))}\n"
        )
        t0 = time.monotonic()
        try:
            res = subprocess.run(
                ["bash", "-c", script],
                cwd=self.project,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            self.times[name] = time.monotonic() - t0
            pytest.fail(f"step {name} ({line}) ran past {timeout:.0f} s: {(exc.stdout or b'')[-3000:]!r}{self.logs()}")
        self.times[name] = time.monotonic() - t0
        if res.returncode != 0:
            pytest.fail(
                f"step {name} failed (exit {res.returncode}): {line}\n--- stdout\n{res.stdout[-4000:]}"
                f"\n--- stderr\n{res.stderr[-4000:]}{self.logs()}"
            )
        return res.stdout

    def exported(self, var: str) -> str:
        return subprocess.run(
            ["bash", "-c", f'source {shlex.quote(str(self.envfile))}; printf %s "${var}"'],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def logs(self) -> str:
        res = subprocess.run(
            [*self.compose, "logs", "--no-color", "--tail", "60"],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return f"\n--- compose logs (tail)\n{res.stdout[-8000:]}{res.stderr[-1000:]}"


def leftovers(docker_client, project_name: str, worker_name: str) -> list[str]:
    found = []
    for label in (f"com.docker.compose.project={project_name}", f"org.liberopro.worker={worker_name}"):
        f = {"label": [label]}
        found += [f"container {c.name}" for c in docker_client.containers.list(all=True, filters=f)]
        found += [f"network {n.name}" for n in docker_client.networks.list(filters=f)]
        found += [f"volume {v.name}" for v in docker_client.volumes.list(filters=f)]
    return found


def test_readme_and_platform_doc_hold_the_same_walk_through():
    """One walk-through, two pages: docs/platform.md repeats the README's block line for line,
    and both state the quick-trial settings the journey test uses."""
    readme = documented_block(README, README_HEADING)
    assert documented_block(PLATFORM_DOC, DOC_HEADING) == readme
    for page in (PLATFORM_DOC, README):  # both say how to make a first try take minutes, not days
        text = " ".join(page.read_text().split())
        assert TRIAL_GENERATE in text, page.name
        assert " ".join(f"{k}={v}" for k, v in TRIAL_ENV.items()) in text, page.name
    # What the journey does not run is what scripts/test.sh runs before pytest.
    assert readme[0].startswith(PREPARED[0]) and readme[1].startswith(PREPARED[1]), readme[:2]
    test_sh = (REPO / "scripts" / "test.sh").read_text()
    assert "scripts/setup-system.sh --with-test-deps" in test_sh and "docker/build-images.sh all" in test_sh


@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_documented_self_host_journey(docker_client, tmp_path, record_property):
    lines = documented_block(README, README_HEADING)
    steps: dict[str, str] = {}
    for line in lines[2:]:
        names = [n for n, (frag, _) in STEPS.items() if frag in line]
        assert len(names) == 1, f"documented line {line!r} matches steps {names}: teach this test the new step"
        steps[names[0]] = line
    assert list(steps) == list(STEPS), f"the documented steps are {list(steps)}, this test knows {list(STEPS)}"

    compose = compose_words()
    expected = image_ids(docker_client, [*IMAGES.values(), EXAMPLE_IMAGE])
    assert EXAMPLE_IMAGE in steps["submit"], "the README submits the example image this test checks for"
    project = tmp_path / "selfhost"
    project.mkdir()
    shutil.copy(REPO / "compose.yaml", project / "compose.yaml")
    if (REPO / ".env").is_file():  # compose's settings beside the file, as in a checkout
        shutil.copy(REPO / ".env", project / ".env")
    name = f"lpjourney{secrets.token_hex(4)}"
    worker = f"{name}@liberopro"
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LIBEROPRO_", "COMPOSE_")) and k not in IMAGES and k not in TRIAL_ENV
    }
    env.update(
        IMAGES,
        **TRIAL_ENV,
        COMPOSE_PROJECT_NAME=name,
        API_PORT=str(port),
        WORKER_NAME=worker,
        LIBEROPRO_EVAL_SEED=str(secrets.randbelow(2**31)),
        LIBEROPRO_CONFIG=str(tmp_path / "none.toml"),
    )
    j = Journey(project, env, compose, port)
    t0 = time.monotonic()
    try:
        j.run("generate", j.adapt(steps["generate"]) + " " + TRIAL_GENERATE, STEPS["generate"][1])
        manifest = [json.loads(x) for x in (project / "manifests" / "hidden.jsonl").read_text().splitlines() if x]
        instances = [x for x in manifest if "instance_id" in x]
        assert manifest[0].get("split") == "eval", manifest[0]
        assert sorted(tuple(s["id"] for s in x["shifts"]) for x in instances) == [(), ("S12",)], instances
        for step in ("up", "wait_api", "token"):
            j.run(step, j.adapt(steps[step]), STEPS[step][1])
        assert re.fullmatch(r"lp_\w+_\S+", j.exported("LIBEROPRO_TOKEN")), "create-user printed no token"
        assert j.exported("LIBEROPRO_API_URL") == f"http://127.0.0.1:{port}"

        out = j.run("submit", j.adapt(steps["submit"]), STEPS["submit"][1])
        sid = re.search(r"submitted: (\w+)", out)
        assert sid, out
        sid = sid.group(1)
        assert f"submission {sid} (team lab): published" in out, out
        n = len(instances) * int(TRIAL_ENV["EPISODES_PER_INSTANCE"])
        assert f"progress: {n} of {n} episodes" in out, out

        board = json.loads(j.run("leaderboard", j.adapt(steps["leaderboard"]), STEPS["leaderboard"][1]))
        rows = [r for r in board["rows"] if r["submission_id"] == sid]
        assert rows and rows[0]["team"] == "lab", board["rows"]
        # The nominal instance of the eval manifest fills the Nominal column (one episode).
        assert rows[0]["metrics"]["nominal"]["episodes"] == int(TRIAL_ENV["EPISODES_PER_INSTANCE"]), rows[0]

        # The stack ran the images of this CI run, with nothing built or pulled for it.
        f = {"label": [f"com.docker.compose.project={name}"]}
        containers = docker_client.containers.list(all=True, filters=f)
        used = {c.name: c.image.id for c in containers}
        services = set(yaml.safe_load((REPO / "compose.yaml").read_text())["services"])
        assert {c.labels["com.docker.compose.service"] for c in containers} == services, (used, services)
        assert len(used) == len(services) and set(used.values()) <= set(expected.values()), (used, expected)
    finally:
        j.run("down", j.adapt(steps["down"]), STEPS["down"][1])
        j.times["total"] = time.monotonic() - t0
        record_property("journey_seconds", {k: round(v, 1) for k, v in j.times.items()})
        print(f"journey with {' '.join(compose)}, step seconds:", {k: round(v, 1) for k, v in j.times.items()})
    assert leftovers(docker_client, name, worker) == []


# ---------------------------------------------------------------- the stack's redis and postgres
def _wait_exec(container, cmd: list[str], timeout: float = 90) -> str:
    end = time.monotonic() + timeout
    while True:
        code, out = container.exec_run(cmd)
        if code == 0:
            return out.decode()
        if time.monotonic() > end:
            pytest.fail(f"{cmd} did not succeed in {container.name}: {out!r}; logs: {container.logs()[-2000:]!r}")
        time.sleep(0.5)


def _uid_of_pid1(container) -> str:
    """The user name PID 1 runs as (the server process itself)."""
    status = container.exec_run(["cat", "/proc/1/status"]).output.decode()
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
    return container.exec_run(["getent", "passwd", uid]).output.decode().split(":")[0]


@pytest.mark.docker
def test_postgres_image_initialises_with_a_password_and_runs_as_postgres(docker_client):
    import psycopg

    image = IMAGES["POSTGRES_IMAGE"]
    image_ids(docker_client, [image])
    password = "pw with 'quotes\" " + secrets.token_hex(4)
    pg = docker_client.containers.run(
        image,
        detach=True,
        labels={"org.liberopro.test": "1"},
        environment={"POSTGRES_USER": "lpuser", "POSTGRES_DB": "lp db", "POSTGRES_PASSWORD": password},
    )
    try:
        _wait_exec(pg, ["pg_isready", "-U", "lpuser"])
        pg.reload()
        ip = pg.attrs["NetworkSettings"]["IPAddress"]
        assert _uid_of_pid1(pg) == "postgres"
        with psycopg.connect(host=ip, user="lpuser", password=password, dbname="lp db", connect_timeout=10) as c:
            assert c.execute("select current_user, current_database()").fetchone() == ("lpuser", "lp db")
        for bad in ("wrong", ""):
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(host=ip, user="lpuser", password=bad, dbname="lp db", connect_timeout=10)
        # Inside the container too: the socket asks for the password (no trust line anywhere).
        code, out = pg.exec_run(["psql", "-w", "-U", "lpuser", "-d", "lp db", "-c", "select 1"])
        assert code != 0 and b"password" in out, out
        hba = pg.exec_run(["sh", "-c", "grep -Ev '^[[:space:]]*(#|$)' \"$PGDATA/pg_hba.conf\""]).output.decode()
        assert hba and all(line.split()[-1] == "scram-sha-256" for line in hba.splitlines()), hba
    finally:
        pg.remove(force=True, v=True)
    # No password on a first start: refused with the fix, never a passwordless server.
    c = docker_client.containers.run(image, detach=True, labels={"org.liberopro.test": "1"})
    try:
        assert c.wait(timeout=60)["StatusCode"] == 1
        assert b"POSTGRES_PASSWORD" in c.logs()
    finally:
        c.remove(force=True, v=True)


@pytest.mark.docker
def test_redis_image_runs_the_compose_command_as_redis(docker_client):
    import redis

    image = IMAGES["REDIS_IMAGE"]
    image_ids(docker_client, [image])
    r = docker_client.containers.run(
        image, ["redis-server", "--appendonly", "yes"], detach=True, labels={"org.liberopro.test": "1"}
    )
    try:
        assert _wait_exec(r, ["redis-cli", "ping"]).strip() == "PONG"
        assert _wait_exec(r, ["redis-cli", "config", "get", "appendonly"]).split() == ["appendonly", "yes"]
        assert _uid_of_pid1(r) == "redis"
        r.reload()
        # Reached from outside the container, as the platform's containers reach it.
        client = redis.Redis(host=r.attrs["NetworkSettings"]["IPAddress"], socket_connect_timeout=10)
        assert client.ping() is True
        client.close()
    finally:
        r.remove(force=True, v=True)
