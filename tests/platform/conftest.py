"""Fixtures of the platform tests: a real PostgreSQL database (created and dropped here), a real
Redis database number, the real Docker engine with the platform's images, a real Celery worker
process, and the API on a real socket.

Tests marked ``docker`` FAIL (never skip) when the engine or the images are missing: CI must
install and start them (scripts/start-dockerd.sh, docker/build-images.sh).
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

import pytest
from lp_helpers import EXAMPLE_IMAGE, ApiServer, Canary, WorkerProcess, free_port

REPO = Path(__file__).resolve().parents[2]
HOSTILE_DIR = Path(__file__).resolve().parent / "hostile"
PG_ADMIN_URL = os.environ.get("LIBEROPRO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("LIBEROPRO_TEST_REDIS", "redis://127.0.0.1:6379/11")
EVALUATOR_IMAGE = os.environ.get("LIBEROPRO_TEST_EVALUATOR_IMAGE", "liberopro/evaluator:latest")


# ---------------------------------------------------------------- PostgreSQL and Redis
@pytest.fixture(scope="session")
def pg_url() -> str:
    """A fresh PostgreSQL database for the session, dropped at the end."""
    import psycopg

    name = f"lp_test_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_ADMIN_URL} ({exc}); start it or set LIBEROPRO_TEST_PG")
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    yield f"{base}/{name}"
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.close()


@pytest.fixture(scope="session")
def migrated_pg(pg_url: str) -> str:
    from liberopro_platform.db import upgrade

    upgrade(pg_url)
    return pg_url


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Our own Redis database number, flushed before and after."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is required at {REDIS_URL} ({exc}); start it or set LIBEROPRO_TEST_REDIS")
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


# ---------------------------------------------------------------- Docker
@pytest.fixture(scope="session")
def docker_client():
    """The Docker engine; the test FAILS when it does not answer."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"the Docker engine is required ({exc}): apt-get install docker.io, then scripts/start-dockerd.sh")
    return client


@pytest.fixture(scope="session")
def platform_images(docker_client) -> dict[str, str]:
    """The evaluator and example policy images (built by docker/build-images.sh)."""
    from docker.errors import ImageNotFound

    out = {}
    for image in (EVALUATOR_IMAGE, EXAMPLE_IMAGE):
        try:
            out[image] = docker_client.images.get(image).id
        except ImageNotFound:
            pytest.fail(f"image {image} is missing: run docker/build-images.sh")
    return out


@pytest.fixture(scope="session")
def hostile_images(docker_client, platform_images, egress_ports) -> dict[str, str]:
    """One image per hostile behaviour, built from tests/platform/hostile (about a second each)."""
    targets = ",".join(
        [
            f"api:GATEWAY:{egress_ports['api']}",
            f"canary:GATEWAY:{egress_ports['canary']}",
            "redis:GATEWAY:6379",
            "postgres:GATEWAY:5432",
            "docker0:172.17.0.1:6379",
        ]
    )
    try:
        pypi = socket.gethostbyname("pypi.org")
        targets += f",internet:{pypi}:443"
    except OSError:
        pass
    images = {}
    for behavior in ("egress", "forkbomb", "memory", "slow", "crash", "never_healthy", "batching"):
        tag = f"liberopro-test/hostile-{behavior}:latest"
        image, _ = docker_client.images.build(
            path=str(HOSTILE_DIR),
            tag=tag,
            network_mode="none",
            rm=True,
            buildargs={"BEHAVIOR": behavior, "EGRESS_TARGETS": targets, "BASE_IMAGE": EXAMPLE_IMAGE},
        )
        images[behavior] = image.id
    return images


# ---------------------------------------------------------------- the manifest
@pytest.fixture(scope="session")
def manifest_path(tmp_path_factory) -> Path:
    """A tiny hidden manifest: libero_goal task 0, nominal and under S12 (lighting), written with
    its header through the evaluator's own writer (the format the platform reads in production)."""
    from liberopro.instances.build import make_instance
    from liberopro.schema.manifest import make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    path = tmp_path_factory.mktemp("manifest") / "hidden.jsonl"
    instances = []
    for shifts in ([], ["S12"]):
        inst = make_instance(TaskRef("libero_goal", 0), shifts, seed=7)
        assert not isinstance(inst, str), inst
        instances.append(inst)
    write_manifest(path, make_header("eval", 7, instances, episodes=1), instances)
    return path


# ---------------------------------------------------------------- platform settings, worker, API
@pytest.fixture(scope="session")
def platform_env(migrated_pg, redis_url, manifest_path, tmp_path_factory) -> dict[str, str]:
    """The LIBEROPRO_* settings of the worker and the API under test (small limits, short waits)."""
    data = tmp_path_factory.mktemp("platform-data")
    return {
        "LIBEROPRO_DATABASE_URL": migrated_pg,
        "LIBEROPRO_BROKER_URL": redis_url,
        "LIBEROPRO_QUEUE": f"lptest-{secrets.token_hex(3)}",
        "LIBEROPRO_DATA_DIR": str(data),
        "LIBEROPRO_MANIFEST_PATH": str(manifest_path),
        "LIBEROPRO_EPISODES_PER_INSTANCE": "1",
        "LIBEROPRO_EPISODES_PER_SHARD": "2",
        "LIBEROPRO_MAX_STEPS": "5",
        "LIBEROPRO_EVALUATOR_IMAGE": EVALUATOR_IMAGE,
        "LIBEROPRO_POLICY_MEMORY": "384m",
        "LIBEROPRO_POLICY_CPUS": "1",
        "LIBEROPRO_POLICY_PIDS": "64",
        "LIBEROPRO_EVALUATOR_MEMORY": "4g",
        "LIBEROPRO_VALIDATION_HEALTH_TIMEOUT_S": "20",
        "LIBEROPRO_VALIDATION_REQUEST_TIMEOUT_S": "5",
        "LIBEROPRO_VALIDATION_ACT_LIMIT_S": "3",
        "LIBEROPRO_VALIDATION_TIME_LIMIT_S": "90",
        "LIBEROPRO_REQUEST_TIMEOUT_S": "2",
        "LIBEROPRO_EPISODE_BUDGET_S": "30",
        "LIBEROPRO_EPISODE_TIME_LIMIT_S": "90",
        "LIBEROPRO_SHARD_STARTUP_S": "150",
        "LIBEROPRO_POLICY_RESTART_WAIT_S": "20",
        "LIBEROPRO_HEARTBEAT_INTERVAL_S": "2",
        "LIBEROPRO_HEARTBEAT_STALE_S": "30",
        "LIBEROPRO_MAX_STAGE_ATTEMPTS": "3",
        "LIBEROPRO_SUBMISSIONS_PER_DAY": "100",
        "LIBEROPRO_HIDDEN_RUNS_PER_WEEK": "100",
        "LIBEROPRO_HIDDEN_VIEW_INTERVAL_S": "1",
        "LIBEROPRO_MAX_CONCURRENT": "20",
    }


@pytest.fixture(scope="session")
def platform_settings(platform_env):
    from liberopro_platform.config import Settings

    saved = {k: os.environ.get(k) for k in platform_env}
    os.environ.update(platform_env)
    try:
        return Settings()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def worker(platform_env, docker_client, platform_images, tmp_path_factory):
    """The Celery worker of the session (tests may kill and restart it); as in production it
    names the evaluator image by id."""
    env = {**platform_env, "LIBEROPRO_EVALUATOR_IMAGE": platform_images[EVALUATOR_IMAGE]}
    w = WorkerProcess(env, tmp_path_factory.mktemp("worker") / "worker.log").start()
    yield w
    w.stop()


@pytest.fixture(scope="session")
def egress_ports() -> dict[str, int]:
    return {"api": free_port(), "canary": free_port()}


@pytest.fixture(scope="session")
def canary(egress_ports):
    c = Canary(egress_ports["canary"])
    yield c
    c.close()


@pytest.fixture(scope="session")
def api(platform_settings, egress_ports):
    """The API (Celery enqueue on the test queue), served on 0.0.0.0."""
    from liberopro_platform.api.app import create_app

    with ApiServer(create_app(platform_settings), egress_ports["api"]) as server:
        yield server


@pytest.fixture(scope="session")
def team_token(platform_settings) -> str:
    """An API token of a user of team 'lab' (and an admin 'root' in team 'ops')."""
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    sessions = make_sessionmaker(make_engine(platform_settings.database_url))
    with transaction(sessions) as s:
        team = Team(name=f"lab-{secrets.token_hex(2)}")
        s.add(team)
        s.flush()
        user = User(name=f"alice-{secrets.token_hex(2)}", team_id=team.id)
        s.add(user)
        s.flush()
        _, token = issue_token(s, user, 1)
    return token


@pytest.fixture(scope="session")
def grant(platform_settings, team_token):
    """``grant(image_id)`` records that the team of ``team_token`` uploaded ``image_id`` (as the
    worker does after loading an upload), so tests can submit locally built images by id; the
    upload path itself is tested in test_image_identity.py and test_docker_pipeline.py."""
    from liberopro_platform.db import make_engine, make_sessionmaker
    from liberopro_platform.models import ApiToken
    from liberopro_platform.ownership import grant_image

    sessions = make_sessionmaker(make_engine(platform_settings.database_url))
    with sessions() as s:
        team_id = s.get(ApiToken, team_token.split("_")[1]).user.team_id

    def grant_(image_id: str) -> str:
        grant_image(sessions, team_id, image_id, "upload", None)
        return image_id

    return grant_


@pytest.fixture(scope="session")
def http(api, team_token):
    import httpx

    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {team_token}"}, timeout=60) as c:
        yield c
