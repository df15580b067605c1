"""compose.yaml validates with the installed Compose, binds services so that nothing but the API
(on 127.0.0.1) is published, and names every image by id (from .env, written by
docker/build-images.sh), refusing to start without them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "compose.yaml"


def compose_command() -> list[str]:
    """The stack's one Compose command (scripts/compose.sh: v2 where installed, else v1)."""
    if not (shutil.which("docker-compose") or shutil.which("docker")):
        pytest.fail("no Compose found: bash scripts/setup-system.sh --with-test-deps installs it")
    return ["bash", str(COMPOSE.parent / "scripts" / "compose.sh")]


IDS = {
    f"LIBEROPRO_{name}_IMAGE": "sha256:" + digit * 64
    for name, digit in (("EVALUATOR", "1"), ("PLATFORM", "2"), ("REDIS", "3"), ("POSTGRES", "4"))
}


@pytest.mark.docker  # needs Compose, which scripts/setup-system.sh --with-test-deps installs with the engine
def test_compose_file_validates_and_publishes_only_the_api(tmp_path):
    # A clean environment (no stack variables), but where Docker finds its CLI plugins (compose v2).
    keep = {k: os.environ[k] for k in ("HOME", "DOCKER_CONFIG", "DOCKER_HOST") if k in os.environ}
    env = {**keep, "PATH": "/usr/local/bin:/usr/bin:/bin", "POSTGRES_PASSWORD": "x"}
    # Without the ids (no .env beside the file) Compose refuses and says what to run.
    bare = tmp_path / "compose.yaml"
    bare.write_text(COMPOSE.read_text())
    res = subprocess.run(
        [*compose_command(), "-f", str(bare), "config"], capture_output=True, text=True, check=False, env=env
    )
    assert res.returncode != 0 and "docker/build-images.sh" in res.stderr, res.stderr
    res = subprocess.run(
        [*compose_command(), "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        check=False,
        env={**env, **IDS},
    )
    assert res.returncode == 0, res.stderr
    config = yaml.safe_load(res.stdout)
    services = config["services"]
    # Every image by id; the worker pins the evaluator by id and knows the platform's own images.
    images = {name: s["image"] for name, s in services.items()}
    assert images["redis"] == IDS["LIBEROPRO_REDIS_IMAGE"] and images["postgres"] == IDS["LIBEROPRO_POSTGRES_IMAGE"]
    assert {images[n] for n in ("api", "worker", "control", "beat", "migrate", "sandbox-firewall")} == {
        IDS["LIBEROPRO_PLATFORM_IMAGE"]
    }
    assert {k: services["worker"]["environment"][k] for k in IDS} == IDS
    assert {"redis", "postgres", "api", "worker", "control", "beat", "migrate", "sandbox-firewall"} <= set(services)
    published = {name: s.get("ports") for name, s in services.items() if s.get("ports")}
    assert set(published) == {"api"}
    port = published["api"][0]
    assert (port.get("host_ip") if isinstance(port, dict) else port.split(":")[0]) == "127.0.0.1"
    assert config["networks"]["backend"].get("internal") is True
    for name in ("redis", "postgres", "worker"):
        assert set(services[name]["networks"]) == {"backend"}
    assert services["sandbox-firewall"]["network_mode"] == "host"
    assert services["worker"]["environment"]["LIBEROPRO_SANDBOX_FIREWALL"] == "external"


@pytest.mark.docker
def test_platform_image_serves_the_api_and_installs_the_firewall(docker_client):
    """The api/worker image (docker/platform.Dockerfile): its API answers, it holds what the
    worker imports, and its firewall command works in the host's network namespace (compose's
    sandbox-firewall service)."""
    import time

    import httpx
    from docker.errors import ImageNotFound
    from lp_helpers import free_port

    image = os.environ.get("LIBEROPRO_TEST_PLATFORM_IMAGE", "liberopro/platform:latest")
    try:
        docker_client.images.get(image)
    except ImageNotFound:
        pytest.fail(f"image {image} is missing: run docker/build-images.sh platform")
    out = docker_client.containers.run(
        image,
        [
            "python",
            "-c",
            "import liberopro_platform.celery_app, "
            "liberopro_platform.sandbox.docker_backend; "
            "from liberopro.runs.summary import summarize; print('imports ok')",
        ],
        network_mode="none",
        remove=True,
    )
    assert b"imports ok" in out
    fw = docker_client.containers.run(
        image,
        ["python", "-m", "liberopro_platform", "firewall"],
        network_mode="host",
        cap_add=["NET_ADMIN", "NET_RAW"],
        user="root",
        remove=True,
    )
    assert b"sandbox firewall rule" in fw
    port = free_port()
    api = docker_client.containers.run(
        image,
        [
            "sh",
            "-c",
            f"python -m liberopro_platform db-upgrade && python -m liberopro_platform api "
            f"--host 127.0.0.1 --port {port}",
        ],
        network_mode="host",
        detach=True,
        environment={"LIBEROPRO_DATABASE_URL": "sqlite:////data/platform.db"},
        labels={"org.liberopro.test": "1"},
    )
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"the platform image's API did not answer: {api.logs()[-2000:]!r}")
        assert r.json()["ok"] is True
        assert httpx.get(f"http://127.0.0.1:{port}/me", timeout=5).json()["detail"]["error"] == "token_missing"
        # No simulator in this image: the methodology page is built from the light catalog.
        page = httpx.get(f"http://127.0.0.1:{port}/leaderboard/methodology", timeout=30)
        assert page.status_code == 200, page.text[:500]
        assert "D19" in page.text and "S22" in page.text
    finally:
        api.remove(force=True)


@pytest.mark.docker
def test_a_worker_in_its_own_namespace_checks_the_hosts_firewall_rules(docker_client, platform_settings, caplog):
    """compose's worker runs with LIBEROPRO_SANDBOX_FIREWALL=external in a network namespace of its
    own, where the host's rules are not: it asks the engine to check the host's namespace (the
    platform image's ``firewall --check``) and warns only when that check finds them missing."""
    import logging

    from liberopro_platform.sandbox import firewall
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    firewall.install()  # the host has the rules (compose's sandbox-firewall service would)
    image = docker_client.images.get(os.environ.get("LIBEROPRO_TEST_PLATFORM_IMAGE", "liberopro/platform:latest")).id
    settings = platform_settings.model_copy(update={"sandbox_firewall": "external", "platform_image": image})
    with caplog.at_level(logging.INFO, logger="liberopro_platform.firewall"):
        backend = DockerBackend(settings, "fwcheck@test")
    assert backend.host_has_firewall_rules() is True
    assert "lacks the sandbox rules" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="liberopro_platform.firewall"):
        firewall.ensure("external", lambda: False)
    assert "the host lacks the sandbox rules" in caplog.text
