"""Who is charged with an episode, through the whole pipeline (docs/platform.md, "Who is charged
with an episode"): an evaluator fault no action causes is never scored. Injected into one episode
it is not stored, the shard runs it again, and the published result equals a run without the
fault; when it persists, the submission ends as a platform error (the fixed words of
``disclosure.HIDDEN_FAILURES``, an ``[admin]`` event), never with a lower score.

The real pipeline on PostgreSQL with the local backend (the evaluator runs in this process, so a
fault is injected by patching the scene's reset: ``LiberoScene.start_episode``, before the policy
acts, which no action can cause), stages run in order as the Celery tasks would run them; the
API on a real socket. One shard of 2 episodes of 3 steps (libero_goal task 0, nominal and S12).
"""

from __future__ import annotations

import sys

import httpx
import pytest
from liberopro_platform.disclosure import HIDDEN_FAILURES
from lp_helpers import local_platform

pytestmark = pytest.mark.sim
ZERO = f"{sys.executable} -m submission_spec.examples zero"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    from liberopro.instances.build import make_instance
    from liberopro.schema.manifest import make_header, write_manifest
    from liberopro.sim.tasks import TaskRef

    instances = [make_instance(TaskRef("libero_goal", 0), shifts, seed=7) for shifts in ([], ["S12"])]
    path = tmp_path_factory.mktemp("blame") / "hidden.jsonl"
    write_manifest(path, make_header("eval", 7, instances, episodes=1), instances)
    return path


@pytest.fixture(scope="module")
def platform(migrated_pg, manifest, tmp_path_factory):
    with local_platform(
        migrated_pg,
        tmp_path_factory.mktemp("blame-data"),
        manifest,
        "blame@test",
        episodes_per_instance=1,
        episodes_per_shard=2,
        max_steps=3,
        request_timeout_s=10,
        validation_health_timeout_s=60,
        max_stage_attempts=2,
    ) as platform:
        yield platform


def _run(platform) -> tuple[dict, list[str]]:
    """Submit the zero policy, run every stage: (status, every event message, admins' included)."""
    server, queue, token, admin_token = platform
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        r = http.post("/submissions", json={"command": ZERO})
        assert r.status_code == 201, r.text
        queue.drain()
        st = http.get(f"/submissions/{r.json()['id']}").json()
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=60) as adm:
        events = [e["message"] for e in adm.get(f"/admin/submissions/{st['id']}").json()["events"]]
    return st, events


def _records(platform, sid: str) -> dict:
    from liberopro.runs.summary import EpisodeRecord
    from liberopro_platform.models import Episode
    from sqlalchemy import select

    with platform[1].pipeline.sessions() as s:
        rows = s.scalars(select(Episode).where(Episode.submission_id == sid)).all()
        return {(e.instance_id, e.episode_index): EpisodeRecord.model_validate(e.record).outcome_key() for e in rows}


def _faulty_reset(monkeypatch, times: int | None) -> list[int]:
    """Make the scene's reset raise the first ``times`` times (every time: None); returns the count
    of faults raised."""
    from liberopro.sim.scene import LiberoScene

    original, raised = LiberoScene.start_episode, []

    def start_episode(self, *args, **kwargs):
        if times is None or len(raised) < times:
            raised.append(1)
            raise RuntimeError("injected: the renderer lost its context")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LiberoScene, "start_episode", start_episode)
    return raised


def test_an_evaluator_fault_is_rerun_and_the_result_is_the_same_as_without_it(platform, monkeypatch):
    clean, _ = _run(platform)
    assert clean["state"] == "published", clean
    raised = _faulty_reset(monkeypatch, times=1)
    faulty, events = _run(platform)
    assert raised == [1] and faulty["state"] == "published", faulty
    # Not stored, run again by the shard's second attempt: the same records and the same result.
    assert any("not stored: evaluator_error" in m and "injected" in m for m in events), events
    assert any(m.startswith("[admin] shard 0, attempt 1") and "1 not run for a platform fault" in m for m in events)
    assert _records(platform, faulty["id"]) == _records(platform, clean["id"])
    assert faulty["termination_reasons"] == clean["termination_reasons"] == {"horizon": 2}
    pick = lambda st: [(c["case"], c["rate"]) for c in st["result"]["cases"]]  # noqa: E731
    assert pick(faulty) == pick(clean) and faulty["result"]["metrics"] == clean["result"]["metrics"]
    # Nothing of it in the submitter's events.
    assert not [e for e in faulty["events"] if "evaluator_error" in e["message"] or "attempt" in e["message"]]


def test_a_persistent_evaluator_fault_ends_the_submission_as_a_platform_error(platform, monkeypatch):
    raised = _faulty_reset(monkeypatch, times=None)
    st, events = _run(platform)
    assert len(raised) == 4, raised  # 2 episodes x max_stage_attempts (2)
    assert st["state"] == "failed" and st["failure_stage"] == "evaluation", st
    assert (st["failure"], st["fix"]) == HIDDEN_FAILURES["platform"]
    assert any(m.startswith("[admin] platform error: shard 0 after 2 attempts") for m in events), events
    assert st["result"] is None and st["termination_reasons"] == {}
    assert _records(platform, st["id"]) == {}  # nothing scored
