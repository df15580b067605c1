"""The documented self-host path, end to end, and the stack's own redis and postgres images.

``test_documented_self_host_journey`` reads the two bash blocks of the README's "The platform:
bring the stack up and submit" section, the walk-through and the first-try lines
(docs/platform.md must hold the same two blocks), and runs their lines as written, each in a
fresh ``bash`` (exports carried over, as in one terminal), in a fresh project directory: the
first-try lines in place of the walk-through's ``instances generate`` line, as both pages say.
It runs once per Compose installed: ``scripts/compose.sh``'s own choice (v2 where installed,
else v1), and v1 again, forced with ``LIBEROPRO_COMPOSE=docker-compose``, where both are.
What is not literally the documented walk, and why:

- the two preparation lines (setup-system.sh, build-images.sh) are not run: scripts/test.sh runs
  them before pytest, and the journey reuses the images of that run; the project's ``.env`` gets
  the ids of those images (``LIBEROPRO_*_IMAGE``, what build-images.sh's ``pin`` step writes
  there; ``LIBEROPRO_TEST_*_IMAGE`` names other builds), and the test checks that the stack's
  containers run exactly those ids: nothing rebuilt or pulled;
- the project directory is a temporary one holding copies of ``compose.yaml`` and
  ``scripts/compose.sh`` (the two files of the checkout the lines use), so that ``manifests/``,
  ``.env`` and the data never touch the checkout;
- ``LIBEROPRO_EVAL_SEED`` (a random one) is in the environment, as the section's first sentence
  asks a user to export it;
- isolation from other stacks on the engine: ``COMPOSE_PROJECT_NAME`` is unique (in the
  environment: it is Compose's own variable, not one of compose.yaml's), and one more settings
  line, ``bash scripts/compose.sh set API_PORT=<free port> WORKER_NAME=<unique>``, runs before
  ``up`` (port 8000 may be taken; a starting worker removes the sandboxes of its name), with the
  URLs' ``127.0.0.1:8000`` written with that port;
- isolation from the machine: the environment holds no ``LIBEROPRO_*``, ``COMPOSE_*`` or
  compose.yaml variable of the caller, ``LIBEROPRO_CONFIG`` names a missing file (no user config
  is read), ``VIRTUAL_ENV`` names this test's environment (``uv run pytest`` sets it already; a
  bare ``pytest`` does not) so that ``uv run liberopro`` in the project directory, which has no
  ``pyproject.toml``, runs this environment's ``liberopro`` (uv runs in the active virtual
  environment outside a project), and uv's directory is on ``PATH`` when it was not.

Between the leaderboard and ``down -v``, the documented ``up`` line runs once more in a fresh
shell (nothing exported but what the block exports): no container is recreated, and the worker
still has the settings of the ``set`` lines (they live in ``.env``, not in a shell).
``bash scripts/compose.sh down -v`` (the block's last line) always runs; afterwards no
container, network or volume of the project, and no sandbox of its worker, may be left.
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
WRAPPER = "bash scripts/compose.sh"
# What the first-try lines must say (the journey runs them as read from the pages).
TRIAL_GENERATE = "--tasks libero_spatial:2 --shifts nominal,S12 --episodes 1"
TRIAL_SETTINGS = f"{WRAPPER} set EPISODES_PER_INSTANCE=1 MAX_STEPS=10"
IMAGES = {  # compose variable -> image (the images of this CI run; overridable to test other builds)
    "LIBEROPRO_PLATFORM_IMAGE": os.environ.get("LIBEROPRO_TEST_PLATFORM_IMAGE", "liberopro/platform:latest"),
    "LIBEROPRO_EVALUATOR_IMAGE": os.environ.get("LIBEROPRO_TEST_EVALUATOR_IMAGE", "liberopro/evaluator:latest"),
    "LIBEROPRO_REDIS_IMAGE": os.environ.get("LIBEROPRO_TEST_REDIS_IMAGE", "liberopro/redis:latest"),
    "LIBEROPRO_POSTGRES_IMAGE": os.environ.get("LIBEROPRO_TEST_POSTGRES_IMAGE", "liberopro/postgres:latest"),
}
# Each documented step of the walk-through, recognised by a fragment of its line, with its time
# limit (seconds).
STEPS = {
    "generate": ("instances generate --split eval", 1200),
    "settings": (f"{WRAPPER} set ", 60),
    "up": (f"{WRAPPER} up -d", 600),
    "wait_api": ("/health", 300),
    "token": ("create-user", 300),
    "submit": ("liberopro submit", 1800),
    "leaderboard": ("/api/leaderboard", 60),
    "down": (f"{WRAPPER} down -v", 300),
}


def section_blocks(path: Path, heading: str) -> list[list[str]]:
    """The non-empty lines of each ```bash block of the section under ``heading`` in ``path``."""
    text = path.read_text()
    assert heading + "\n" in text, f"{path.name}: no section {heading!r}"
    section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
    return [[line for line in b.splitlines() if line.strip()] for b in blocks]


def documented(path: Path, heading: str) -> tuple[list[str], list[str]]:
    """The walk-through (the section's first bash block) and the first-try lines (its second)."""
    blocks = section_blocks(path, heading)
    assert len(blocks) >= 2, f"{path.name}: {heading!r} needs the walk-through and the first-try lines"
    return blocks[0], blocks[1]


def uncommented(line: str) -> str:
    """``line`` without its trailing comment."""
    return re.sub(r"\s+#\s.*$", "", line)


def settings_of(line: str) -> dict[str, str]:
    """KEY=VALUE pairs of a documented ``compose.sh set`` line."""
    words = shlex.split(line, comments=True)
    assert words[:3] == ["bash", "scripts/compose.sh", "set"], line
    return dict(w.split("=", 1) for w in words[3:])


def compose_variables() -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", (REPO / "compose.yaml").read_text()))


def installed_composes() -> list[str]:
    found = []
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0
    ):
        found.append("docker compose")
    if shutil.which("docker-compose"):
        found.append("docker-compose")
    return found


def journey_composes() -> list:
    """One journey per Compose installed: v2 as the wrapper picks it, v1 forced when v2 is there
    too (LIBEROPRO_COMPOSE), else v1 as the wrapper's own choice. None when there is no Compose
    (the test then fails with the fix)."""
    found = installed_composes()
    params = []
    if "docker compose" in found:
        params.append(pytest.param(("docker compose", None), id="compose-v2"))
    if "docker-compose" in found:
        force = "docker-compose" if "docker compose" in found else None
        params.append(pytest.param(("docker-compose", force), id="compose-v1"))
    return params or [pytest.param((None, None), id="no-compose")]


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
    """Runs documented lines one by one in ``project``, each in a fresh ``bash`` (exports carry
    over through a file, as in one terminal)."""

    def __init__(self, project: Path, env: dict[str, str], port: int) -> None:
        self.project, self.env, self.port = project, env, port
        self.envfile = project.parent / "journey.env"
        self.envfile.write_text("")
        self.times: dict[str, float] = {}

    def adapt(self, line: str) -> str:
        return line.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")

    def run(self, name: str, line: str, timeout: float, carry: bool = True) -> str:
        """``line`` in bash with ``set -eo pipefail``; ``carry=False``: a fresh terminal (the
        exports of earlier lines not sourced)."""
        source = f"source {shlex.quote(str(self.envfile))}\n" if carry else ""
        script = f"set -eo pipefail\n{source}{line}\n"
        if carry:
            script += f"export -p > {shlex.quote(str(self.envfile))}\n"
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
            ["bash", "scripts/compose.sh", "logs", "--no-color", "--tail", "60"],
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
    """One walk-through, two pages: docs/platform.md repeats the README's walk-through and
    first-try lines line for line; the first try is the walk-through's generate line with the
    trial selection, and one settings line."""
    walk, trial = documented(README, README_HEADING)
    assert documented(PLATFORM_DOC, DOC_HEADING) == (walk, trial)
    generate = next(line for line in walk if STEPS["generate"][0] in line)
    assert trial == [uncommented(generate) + " " + TRIAL_GENERATE, TRIAL_SETTINGS], trial
    # Every Compose command goes through the wrapper; nothing is set on the command line.
    assert not [line for line in walk + trial if re.search(r"docker[ -]compose|^[A-Z_]+=", line)], walk
    # What the journey does not run is what scripts/test.sh runs before pytest.
    assert walk[0].startswith(PREPARED[0]) and walk[1].startswith(PREPARED[1]), walk[:2]
    test_sh = (REPO / "scripts" / "test.sh").read_text()
    assert "scripts/setup-system.sh --with-test-deps" in test_sh and "docker/build-images.sh all" in test_sh


@pytest.mark.docker
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("compose", journey_composes())
def test_documented_self_host_journey(compose, docker_client, tmp_path, record_property):
    expect_compose, force = compose
    if expect_compose is None:
        pytest.fail("no Compose found: bash scripts/setup-system.sh --with-test-deps installs it")
    walk, trial = documented(README, README_HEADING)
    steps: dict[str, str] = {}
    for line in walk[2:]:
        names = [n for n, (frag, _) in STEPS.items() if frag in line]
        assert len(names) == 1, f"documented line {line!r} matches steps {names}: teach this test the new step"
        steps[names[0]] = line
    assert list(steps) == list(STEPS), f"the documented steps are {list(steps)}, this test knows {list(STEPS)}"
    trial_generate, trial_settings = trial
    assert trial_generate.startswith(uncommented(steps["generate"])), (trial_generate, steps["generate"])
    settings = {**settings_of(steps["settings"]), **settings_of(trial_settings)}

    ids = image_ids(docker_client, [*IMAGES.values(), EXAMPLE_IMAGE])
    assert EXAMPLE_IMAGE in steps["submit"], "the README submits the example image this test checks for"
    project = tmp_path / "selfhost"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "compose.yaml", project / "compose.yaml")
    shutil.copy(REPO / "scripts" / "compose.sh", project / "scripts" / "compose.sh")
    (project / ".env").write_text("".join(f"{k}={ids[image]}\n" for k, image in IMAGES.items()))
    name = f"lpjourney{secrets.token_hex(4)}"
    worker = f"{name}@liberopro"
    port = free_port()
    variables = compose_variables()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LIBEROPRO_", "COMPOSE_")) and k not in variables and k != "VIRTUAL_ENV"
    }
    uv = shutil.which("uv", path=env.get("PATH")) or os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is not installed: scripts/setup-system.sh installs it"
    if not shutil.which("uv", path=env.get("PATH")):
        env["PATH"] = f"{Path(uv).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        COMPOSE_PROJECT_NAME=name,
        LIBEROPRO_EVAL_SEED=str(secrets.randbelow(2**31)),
        LIBEROPRO_CONFIG=str(tmp_path / "none.toml"),
        VIRTUAL_ENV=sys.prefix,
    )
    if force:
        env["LIBEROPRO_COMPOSE"] = force
    chosen = subprocess.run(
        ["bash", "scripts/compose.sh", "which"], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    assert chosen.stdout.strip() == expect_compose, (chosen.stdout, chosen.stderr)

    j = Journey(project, env, port)
    t0 = time.monotonic()
    try:
        j.run("generate", j.adapt(trial_generate), STEPS["generate"][1])
        manifest = [json.loads(x) for x in (project / "manifests" / "hidden.jsonl").read_text().splitlines() if x]
        instances = [x for x in manifest if "instance_id" in x]
        assert manifest[0].get("split") == "eval", manifest[0]
        assert sorted(tuple(s["id"] for s in x["shifts"]) for x in instances) == [(), ("S12",)], instances
        j.run("trial_settings", j.adapt(trial_settings), STEPS["settings"][1])
        j.run("settings", j.adapt(steps["settings"]), STEPS["settings"][1])
        j.run("isolation", f"{WRAPPER} set API_PORT={port} WORKER_NAME={worker}", STEPS["settings"][1])
        assert "LIBEROPRO_EVAL_SEED" not in (project / ".env").read_text()
        for step in ("up", "wait_api", "token"):
            j.run(step, j.adapt(steps[step]), STEPS[step][1])
        assert re.fullmatch(r"lp_\w+_\S+", j.exported("LIBEROPRO_TOKEN")), "create-user printed no token"
        assert j.exported("LIBEROPRO_API_URL") == f"http://127.0.0.1:{port}"

        out = j.run("submit", j.adapt(steps["submit"]), STEPS["submit"][1])
        sid = re.search(r"submitted: (\w+)", out)
        assert sid, out
        sid = sid.group(1)
        assert f"submission {sid} (team lab): published" in out, out

        board = json.loads(j.run("leaderboard", j.adapt(steps["leaderboard"]), STEPS["leaderboard"][1]))
        rows = [r for r in board["rows"] if r["submission_id"] == sid]
        assert rows and rows[0]["team"] == "lab", board["rows"]
        # The nominal instance of the eval manifest fills the Nominal column (its episodes).
        assert rows[0]["metrics"]["nominal"]["episodes"] == int(settings["EPISODES_PER_INSTANCE"]), rows[0]
        # The documented first try is a trial run: listed unranked, with its reasons (docs/leaderboard.md).
        assert rows[0]["trial"] is True and rows[0]["rank"] is None, rows[0]
        assert f"horizon capped at {settings['MAX_STEPS']} steps" in rows[0]["trial_reasons"], rows[0]

        # The stack ran the images of this CI run, with nothing built or pulled for it.
        f = {"label": [f"com.docker.compose.project={name}"]}
        containers = docker_client.containers.list(all=True, filters=f)
        used = {c.name: c.image.id for c in containers}
        services = set(yaml.safe_load((REPO / "compose.yaml").read_text())["services"])
        assert {c.labels["com.docker.compose.service"] for c in containers} == services, (used, services)
        assert len(used) == len(services) and set(used.values()) <= set(ids.values()), (used, ids)

        # A later `up`, from a fresh terminal, keeps the settings: nothing is recreated.
        j.run("up_again", j.adapt(steps["up"]), STEPS["up"][1], carry=False)
        again = {c.name: c.id for c in docker_client.containers.list(all=True, filters=f)}
        assert again == {c.name: c.id for c in containers}, "a later `up -d` recreated containers"
        worker_env = dict(
            e.split("=", 1)
            for e in docker_client.containers.get(
                next(c.id for c in containers if c.labels["com.docker.compose.service"] == "worker")
            ).attrs["Config"]["Env"]
        )
        assert worker_env["LIBEROPRO_EPISODES_PER_INSTANCE"] == settings["EPISODES_PER_INSTANCE"], worker_env
        assert worker_env["LIBEROPRO_MAX_STEPS"] == settings["MAX_STEPS"], worker_env
        assert f":{settings['POSTGRES_PASSWORD']}@" in worker_env["LIBEROPRO_DATABASE_URL"]
    finally:
        j.run("down", j.adapt(steps["down"]), STEPS["down"][1])
        j.times["total"] = time.monotonic() - t0
        record_property("journey_seconds", {k: round(v, 1) for k, v in j.times.items()})
        print(f"journey with {expect_compose}, step seconds:", {k: round(v, 1) for k, v in j.times.items()})
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

    image = IMAGES["LIBEROPRO_POSTGRES_IMAGE"]
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

    image = IMAGES["LIBEROPRO_REDIS_IMAGE"]
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
