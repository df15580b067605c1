"""compose.yaml validates with the installed Compose, and binds services so that nothing but the
API (on 127.0.0.1) is published."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "compose.yaml"


def compose_command() -> list[str]:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True,
                                                 check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("no Compose found: apt-get install docker-compose (or the docker compose plugin)")


def test_compose_file_validates_and_publishes_only_the_api():
    res = subprocess.run([*compose_command(), "-f", str(COMPOSE), "config"], capture_output=True, text=True,
                         check=False, env={"PATH": "/usr/local/bin:/usr/bin:/bin", "POSTGRES_PASSWORD": "x"})
    assert res.returncode == 0, res.stderr
    config = yaml.safe_load(res.stdout)
    services = config["services"]
    assert {"redis", "postgres", "api", "worker", "beat", "migrate", "sandbox-firewall"} <= set(services)
    published = {name: s.get("ports") for name, s in services.items() if s.get("ports")}
    assert set(published) == {"api"}
    port = published["api"][0]
    assert (port.get("host_ip") if isinstance(port, dict) else port.split(":")[0]) == "127.0.0.1"
    assert config["networks"]["backend"].get("internal") is True
    for name in ("redis", "postgres", "worker"):
        assert set(services[name]["networks"]) == {"backend"}
    assert services["sandbox-firewall"]["network_mode"] == "host"
    assert services["worker"]["environment"]["LIBEROPRO_SANDBOX_FIREWALL"] == "external"
