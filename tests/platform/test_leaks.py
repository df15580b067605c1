"""Nothing of the hidden evaluation stage reaches the submitter: canaries planted in a hidden
instance (an S22 paraphrase the policy is given, the instance ids, the episode seed) and in the
policy's own output on that stage (stdout, stderr, an /act error body quoting the instruction, a
/metadata error body) appear in no route or field a submitter can read: the status (state,
message, failure, fix, stuck reason, events, validation checks, result), the list, the logs,
`liberopro status --logs` / `--json` and the public leaderboard. Positive controls: the canaries
did reach the platform, and an admin sees them.

The real pipeline on PostgreSQL with the local backend (the same pipeline code and API as with
Docker: the policy's output reaches ``Pipeline._after_shard`` the same way; the Docker path is
in test_docker_pipeline), stages run in order as the Celery tasks would run them; the API on a
real socket. One shard of 2 episodes that end at their first /act.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import httpx
import pytest
from liberopro_platform.disclosure import HIDDEN_FAILURES
from lp_helpers import InlineEnqueue, local_platform

HOSTILE = Path(__file__).resolve().parent / "hostile" / "hostile.py"
MARK = secrets.token_hex(4)
PARAPHRASE = f"CANARY-PARAPHRASE-{MARK} open the middle drawer of the cabinet"
SEED = 424242
POLICY_MARKERS = ("CANARY-STDOUT", "CANARY-STDERR", "CANARY-ERRBODY", "CANARY-SHARD-START", "CANARY-METADATA")
#: Keys of the summary that are admin-only (liberopro.schema.public's whitelist leaves them out).
PRIVATE_KEYS = {
    "per_task",
    "invalid_reasons",
    "seed",
    "params",
    "applied",
    "instance_id",
    "settings",
    "policy_log",
    "runtime_not_fired",
    "image_ref_public",
    "pairs",  # paired intervals: which episodes succeeded (the public view's intervals come from counts)
    "paired_episodes",
    "paired_rates",
}


@pytest.fixture(scope="module")
def hidden_manifest(tmp_path_factory) -> tuple[Path, list[str]]:
    """libero_goal task 0, nominal and under S22 with a planted paraphrase: (path, instance ids)."""
    from liberopro.instances.build import make_instance
    from liberopro.schema.manifest import Instance, make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    instances = []
    for shifts in ([], ["S22"]):
        inst = make_instance(TaskRef("libero_goal", 0), shifts, seed=7)
        assert not isinstance(inst, str), inst
        data = inst.model_dump(mode="json")
        if shifts:
            data["shifts"][0]["params"]["text"] = PARAPHRASE
        instances.append(Instance.model_validate(data))
    path = tmp_path_factory.mktemp("hidden") / "hidden.jsonl"
    # As `liberopro instances generate --split eval` writes it: a header line, then the instances.
    write_manifest(path, make_header("eval", 7, instances, episodes=1), instances)
    return path, [i.instance_id for i in instances]


@pytest.fixture(scope="module")
def platform(migrated_pg, hidden_manifest, tmp_path_factory):
    """(API server, inline queue, user token, admin token) on the local backend."""
    with local_platform(
        migrated_pg,
        tmp_path_factory.mktemp("leaks-data"),
        hidden_manifest[0],
        "leaks@test",
        episodes_per_instance=1,
        episodes_per_shard=2,
        max_steps=3,
        episode_seed=SEED,
        request_timeout_s=10,
        validation_health_timeout_s=60,
        max_stage_attempts=1,
    ) as platform:
        yield platform


def _submit(http: httpx.Client, queue: InlineEnqueue, command: str) -> dict:
    r = http.post("/submissions", json={"command": command})
    assert r.status_code == 201, r.text
    queue.drain()
    return http.get(f"/submissions/{r.json()['id']}").json()


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def _submitter_views(server, token: str, sid: str, tmp_path: Path) -> dict[str, str]:
    """Every text a submitter (or anyone, for the leaderboard) can read about ``sid``."""
    from liberopro.cli.main import app as cli
    from typer.testing import CliRunner

    views: dict[str, str] = {}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for path in (f"/submissions/{sid}", f"/submissions/{sid}/logs", "/submissions", "/submissions?limit=200"):
            views[path] = c.get(path).text
        views["cancel (refused)"] = c.post(f"/submissions/{sid}/cancel").text
    env = {"LIBEROPRO_API_URL": server.url, "LIBEROPRO_TOKEN": token, "LIBEROPRO_CONFIG": str(tmp_path / "x.toml")}
    for args in (["status", sid, "--logs"], ["status", sid, "--json"], ["status"]):
        r = CliRunner().invoke(cli, args, env=env)
        views["liberopro " + " ".join(args)] = r.output + ("" if r.exit_code == 0 else f"\nEXIT {r.exit_code}")
    with httpx.Client(base_url=server.url, timeout=60) as c:  # the public site, no token
        for path in (
            "/api/leaderboard",
            "/api/leaderboard.csv",
            f"/api/leaderboard/submissions/{sid}",
            "/leaderboard",
            f"/leaderboard/submissions/{sid}",
            f"/leaderboard/compare?a={sid}&b={sid}",
            f"/api/leaderboard/compare?a={sid}&b={sid}",
            f"/leaderboard/charts/submissions/{sid}/shifts.svg",
            "/leaderboard/charts/heatmap.svg",
        ):
            views[path] = c.get(path).text
    return views


def _leaks(views: dict[str, str], instance_ids: list[str]) -> list[str]:
    """Where a canary or an admin-only key shows in ``views``."""
    canaries = (*POLICY_MARKERS, MARK, str(SEED), str(SEED + 1), *instance_ids)
    found = []
    for where, text in views.items():
        found += [f"{canary!r} in {where}" for canary in canaries if canary in text]
        if text.startswith(("{", "[")):
            found += [f"key {key!r} in {where}" for key in sorted(_keys(json.loads(text)) & PRIVATE_KEYS)]
    return found


def test_hidden_stage_reaches_no_submitter_visible_route(platform, hidden_manifest, tmp_path):
    server, queue, token, admin_token = platform
    instance_ids = hidden_manifest[1]
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        # 1. A policy that echoes what it is shown on the hidden stage and fails with it: published.
        st = _submit(http, queue, f"BEHAVIOR=canary {sys.executable} {HOSTILE}")
        assert st["state"] == "published", st
        assert st["termination_reasons"] == {"policy_http_error": 2}, st
        assert st["progress"]["episodes_done"] == 2 and st["validation_checks"]
        published, result = st["id"], st["result"]
        # 2. A policy that fails the start of its shard with an error body: failed, with a reason.
        state = tmp_path / "starts"
        st = _submit(http, queue, f"BEHAVIOR=canary_metadata CANARY_STATE={state} {sys.executable} {HOSTILE}")
        assert st["state"] == "failed" and st["failure_stage"] == "evaluation", st
        # In the hidden stage's fixed words: not the failure class of the policy's reply.
        assert (st["failure"], st["fix"]) == HIDDEN_FAILURES["policy"], st
        failed = st["id"]
    leaks, exits = [], []
    for sid in (published, failed):
        views = _submitter_views(server, token, sid, tmp_path)
        assert "=== validation ===" in views[f"/submissions/{sid}/logs"]  # the validation stage's output is shown
        leaks += _leaks(views, instance_ids)
        exits += [f"{where}: {text}" for where, text in views.items() if "\nEXIT " in text]
    assert not leaks, "the hidden stage reached the submitter:\n" + "\n".join(leaks)
    assert not exits, exits
    # What the submitter does see of the result: the leaderboard's view of it.
    assert result["meta"]["submission_id"] == published and result["metrics"]["nominal"]["episodes"] == 1
    assert {c["case"] for c in result["cases"]} == {"nominal", "S22"}
    # ... whose intervals are functions of its published counts (liberopro.metrics), not the summary's
    from liberopro.metrics import mean_of_rates_ci, newcombe_difference

    counts = {c["case"]: (c["rate"]["value"], c["rate"]["episodes"]) for c in result["cases"]}
    assert result["metrics"]["overall"]["ci95"] == mean_of_rates_ci([counts["S22"]])["ci95"]
    s22 = next(c for c in result["cases"] if c["case"] == "S22")
    drop = newcombe_difference(counts["nominal"], counts["S22"])
    assert s22["drop_from_nominal"] == {"value": drop["value"], "ci95": drop["ci95"], "method": "newcombe"}
    # Positive controls: the canaries reached the platform, and an admin reads them.
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=60) as adm:
        inside = adm.get(f"/admin/submissions/{published}").json()
        shard_log = inside["shards"][0]["policy_log"]
        assert f"CANARY-STDOUT saw {PARAPHRASE!r}" in shard_log and "CANARY-STDERR" in shard_log, shard_log
        assert inside["summary"]["settings"]["seed"] == SEED
        assert {"per_task", "invalid_reasons"} <= _keys(inside["summary"]["cases"])
        inside = adm.get(f"/admin/submissions/{failed}").json()
        assert any("CANARY-METADATA-ERRBODY" in e["message"] for e in inside["events"]), inside["events"]
        assert "CANARY-SHARD-START" in inside["shards"][0]["policy_log"]
    with queue.pipeline.sessions() as s:
        from liberopro_platform.models import Episode
        from sqlalchemy import select

        details = [
            e.record.get("detail") or "" for e in s.scalars(select(Episode).where(Episode.submission_id == published))
        ]
    assert any("CANARY-ERRBODY" in d and MARK in d for d in details), details  # the error body was recorded
