"""The behaviour-cloning baseline's policy image (``liberopro/example-bc``, built by
``docker/build-images.sh bc`` from ``submission_spec/examples/bc/Dockerfile`` with the checkpoint
folder ``BC_CHECKPOINT``; docs/baselines.md, "Image") on the real Docker engine: a container of it
passes ``liberopro check-policy`` (submission spec v1), and the image holds no JAX (it serves the
checkpoint with numpy; the training extra stays out of its requirements)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from lp_helpers import BC_IMAGE, free_port

pytestmark = pytest.mark.docker

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def bc_image(docker_client) -> str:
    """The id of the bc image of this build; the test FAILS when it was not built."""
    from docker.errors import ImageNotFound

    try:
        return docker_client.images.get(BC_IMAGE).id
    except ImageNotFound:
        pytest.fail(
            f"image {BC_IMAGE} is missing: run BC_CHECKPOINT=DIR docker/build-images.sh bc "
            "(DIR: a `liberopro-bc train` folder; default baselines/checkpoints/bc-nominal)"
        )


def test_a_bc_container_conforms_to_the_spec(docker_client, bc_image):
    port = free_port()
    container = docker_client.containers.run(
        bc_image,
        detach=True,
        name=f"lp-test-bc-{uuid.uuid4().hex[:8]}",
        ports={"8000/tcp": ("127.0.0.1", port)},
        labels={"org.liberopro.test": "1"},
    )
    try:
        result = subprocess.run(
            [str(BIN / "liberopro"), "check-policy", f"http://127.0.0.1:{port}", "--health-timeout", "60"],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
            stdin=subprocess.DEVNULL,
        )
        logs = container.logs().decode(errors="replace")
        assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\ncontainer:\n{logs}"
        assert result.stdout.strip().splitlines()[-1] == "CONFORMS", result.stdout
        assert "metadata: liberopro-bc:" in result.stdout  # the baseline's server, not another policy
    finally:
        container.remove(force=True)


def test_the_bc_image_has_no_jax(docker_client, bc_image):
    container = docker_client.containers.run(
        bc_image,
        ["python", "-c", "import jax"],
        detach=True,
        network_mode="none",
        labels={"org.liberopro.test": "1"},
    )
    try:
        status = container.wait(timeout=60)["StatusCode"]
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status == 1 and "ModuleNotFoundError: No module named 'jax'" in logs, logs
    # The same interpreter does import the serving stack (the failure above is JAX's absence alone).
    out = docker_client.containers.run(
        bc_image,
        ["python", "-c", "import liberopro_baselines.serving, numpy; print('serving ok')"],
        network_mode="none",
        remove=True,
    )
    assert b"serving ok" in out
