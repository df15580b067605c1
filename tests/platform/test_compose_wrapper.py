"""scripts/compose.sh without Docker: which Compose it runs (stub ``docker`` and ``docker-compose``
executables on a PATH of their own print their argv), where it runs, and ``set``, which writes the
stack's settings into the ``.env`` beside compose.yaml."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "scripts" / "compose.sh"
# What the wrapper runs besides Compose (and bash's builtins).
TOOLS = ("bash", "cat", "grep", "cut", "sort", "mktemp", "chmod", "awk", "mv", "rm")
DOCKER_V2 = """#!/bin/sh
if [ "$1 $2" = "compose version" ]; then echo "Docker Compose version v2.26.1"; exit 0; fi
echo "cwd=$PWD"; printf 'argv=%s\\n' docker "$@"
"""
DOCKER_ENGINE_ONLY = """#!/bin/sh
if [ "$1" = "compose" ]; then echo "docker: 'compose' is not a docker command." >&2; exit 1; fi
printf 'argv=%s\\n' docker "$@"
"""
DOCKER_COMPOSE_V1 = """#!/bin/sh
echo "cwd=$PWD"; printf 'argv=%s\\n' docker-compose "$@"
"""


def write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def machine(tmp_path):
    """``make(docker=..., compose_v1=...)`` -> a PATH holding the tools and the stubs asked for."""

    def make(docker: str | None, compose_v1: bool) -> str:
        bin_dir = tmp_path / f"bin-{docker}-{compose_v1}"
        bin_dir.mkdir()
        for tool in TOOLS:
            (bin_dir / tool).symlink_to(shutil.which(tool))
        if docker == "v2":
            write_exe(bin_dir / "docker", DOCKER_V2)
        elif docker == "engine":
            write_exe(bin_dir / "docker", DOCKER_ENGINE_ONLY)
        if compose_v1:
            write_exe(bin_dir / "docker-compose", DOCKER_COMPOSE_V1)
        return str(bin_dir)

    return make


@pytest.fixture
def project(tmp_path):
    """A directory holding a copy of compose.yaml (what the wrapper needs to run there)."""
    d = tmp_path / "project"
    d.mkdir()
    shutil.copy(REPO / "compose.yaml", d / "compose.yaml")
    return d


def wrapper(args, cwd, path, **env):
    return subprocess.run(
        [shutil.which("bash"), str(WRAPPER), *args],
        cwd=cwd,
        env={"PATH": path, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def argv(res) -> list[str]:
    assert res.returncode == 0, res.stderr
    return [line.split("=", 1)[1] for line in res.stdout.splitlines() if line.startswith("argv=")]


@pytest.mark.parametrize(
    ("docker", "compose_v1", "force", "expected"),
    [
        ("v2", True, None, ["docker", "compose"]),  # both: v2
        ("v2", False, None, ["docker", "compose"]),
        ("engine", True, None, ["docker-compose"]),  # Debian 12: Docker 20.10 without the plugin, Compose v1
        (None, True, None, ["docker-compose"]),
        ("v2", True, "docker-compose", ["docker-compose"]),  # forced
        ("v2", True, "docker compose", ["docker", "compose"]),
    ],
)
def test_runs_compose_v2_where_installed_else_v1(machine, project, docker, compose_v1, force, expected):
    path = machine(docker, compose_v1)
    env = {"LIBEROPRO_COMPOSE": force} if force else {}
    args = ["exec", "-T", "api", "sh", "-c", "echo 'two words' $HOME"]
    res = wrapper(args, project, path, **env)
    assert argv(res) == [*expected, *args]  # every argument as given, spaces and $ untouched
    assert f"cwd={project}" in res.stdout  # in the current directory, like Compose itself
    assert wrapper(["which"], project, path, **env).stdout.strip() == " ".join(expected)


def test_without_compose_it_names_setup_system(machine, project):
    for path in (machine(None, False), machine("engine", False)):
        res = wrapper(["up", "-d"], project, path)
        assert res.returncode != 0 and "setup-system.sh --with-test-deps" in res.stderr, res.stderr
        assert "argv=" not in res.stdout
    res = wrapper(["up", "-d"], project, machine("v2", True), LIBEROPRO_COMPOSE="podman-compose")
    assert res.returncode != 0 and "LIBEROPRO_COMPOSE=podman-compose" in res.stderr, res.stderr


def test_runs_only_where_compose_yaml_is(machine, tmp_path):
    path = machine("v2", True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = wrapper(["up", "-d"], elsewhere, path)
    assert res.returncode != 0 and "no compose.yaml in" in res.stderr, res.stderr
    assert "argv=" not in res.stdout
    # Unless the file is named, as with Compose's own -f.
    assert argv(wrapper(["-f", "../x/compose.yaml", "ps"], elsewhere, path)) == [
        "docker",
        "compose",
        "-f",
        "../x/compose.yaml",
        "ps",
    ]
    res = wrapper(["set", "MAX_STEPS=10"], elsewhere, path)
    assert res.returncode != 0 and "no compose.yaml in" in res.stderr
    assert not (elsewhere / ".env").exists()


def test_set_replaces_the_key_and_keeps_the_other_lines(machine, project):
    path = machine(None, False)  # `set` needs no Compose
    env_file = project / ".env"
    ids = "LIBEROPRO_PLATFORM_IMAGE=sha256:" + "2" * 64 + "\nLIBEROPRO_EVALUATOR_IMAGE=sha256:" + "1" * 64 + "\n"
    env_file.write_text(ids + "# a comment\nMAX_STEPS=99\nMAX_STEPS_X=3\nWORKER_NAME=w1@host")  # no final newline
    env_file.chmod(0o640)
    res = wrapper(["set", "POSTGRES_PASSWORD=change-me", "EPISODES_PER_INSTANCE=1", "MAX_STEPS=10"], project, path)
    assert res.returncode == 0, res.stderr
    assert "change-me" not in res.stdout + res.stderr  # keys are named, values not
    assert env_file.read_text() == (
        ids + "# a comment\nMAX_STEPS_X=3\nWORKER_NAME=w1@host\n"
        "POSTGRES_PASSWORD=change-me\nEPISODES_PER_INSTANCE=1\nMAX_STEPS=10\n"
    )
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640  # the file's mode is kept
    # Set again: one line per key, the last value; an empty value (the default) is a value.
    res = wrapper(["set", "MAX_STEPS=", "API_PORT=8001", "API_PORT=8002", "WORKER_NAME=w2@node-2"], project, path)
    assert res.returncode == 0, res.stderr
    lines = env_file.read_text().splitlines()
    assert [x for x in lines if re.match(r"(MAX_STEPS|API_PORT|WORKER_NAME)=", x)] == [
        "MAX_STEPS=",
        "API_PORT=8002",
        "WORKER_NAME=w2@node-2",
    ]
    assert lines[:3] == ids.splitlines() + ["# a comment"]
    assert sorted(os.listdir(project)) == [".env", "compose.yaml"]  # no temporary file left


def test_set_creates_a_private_file(machine, project):
    res = wrapper(["set", "POSTGRES_PASSWORD=s3cret"], project, machine(None, False))
    assert res.returncode == 0, res.stderr
    assert (project / ".env").read_text() == "POSTGRES_PASSWORD=s3cret\n"
    assert stat.S_IMODE((project / ".env").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage"),
        (["MAX_STEPS"], "is not KEY=VALUE"),
        (["=10"], "is not a variable name"),
        (["MAX-STEPS=10"], "is not a variable name"),
        (["EPISODES=1"], "compose.yaml does not use EPISODES"),
        (["LIBEROPRO_EVAL_SEED=123"], "stays out of .env"),
        (["MAX_STEPS=1 0"], "read differently"),
        (["POSTGRES_PASSWORD=it's"], "read differently"),
        (["POSTGRES_PASSWORD=$HOME"], "read differently"),
        (["POSTGRES_PASSWORD=a@b"], "database URL"),
        (["MAX_STEPS=10", "SEED=1"], "compose.yaml does not use SEED"),  # nothing written, not even MAX_STEPS
    ],
)
def test_set_refuses_and_writes_nothing(machine, project, args, message):
    env_file = project / ".env"
    env_file.write_text("MAX_STEPS=99\n")
    res = wrapper(["set", *args], project, machine(None, False))
    assert res.returncode != 0 and message in res.stderr, res.stderr
    assert env_file.read_text() == "MAX_STEPS=99\n"
    assert sorted(os.listdir(project)) == [".env", "compose.yaml"]


def test_set_accepts_every_variable_compose_yaml_uses(machine, project):
    used = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", (REPO / "compose.yaml").read_text())))
    assert {"POSTGRES_PASSWORD", "API_PORT", "EPISODES_PER_INSTANCE", "MAX_STEPS", "WORKER_NAME"} <= set(used)
    res = wrapper(["set", *(f"{k}=x" for k in used)], project, machine(None, False))
    assert res.returncode == 0, res.stderr
    assert (project / ".env").read_text().splitlines() == [f"{k}=x" for k in used]
