"""The local (development) backend behind the same interface: the zero example policy as a child
process, the evaluator in-process, through validate -> plan -> shards -> aggregate -> publish
(stages called directly, as the Celery tasks would call them)."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest
from lp_helpers import InlineEnqueue, RecordingCallbacks
from sqlalchemy import select

HOSTILE = Path(__file__).parent / "hostile" / "hostile.py"


def test_local_backend_runs_the_whole_pipeline(migrated_pg, manifest_path, tmp_path):
    from liberopro_platform.config import Settings
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.models import Episode, Result, Submission, Team, User
    from liberopro_platform.pipeline import Pipeline

    settings = Settings(
        database_url=migrated_pg,
        data_dir=tmp_path,
        backend="local",
        manifest_path=manifest_path,
        episodes_per_instance=1,
        episodes_per_shard=1,
        max_steps=3,
        request_timeout_s=10,
        validation_health_timeout_s=60,
        heartbeat_interval_s=1,
    )
    sessions = make_sessionmaker(make_engine(migrated_pg))
    queue = InlineEnqueue()
    pipeline = Pipeline(settings, sessions, queue, "local@test")
    queue.pipeline = pipeline
    with transaction(sessions) as s:
        team = Team(name=f"local-{secrets.token_hex(3)}")
        s.add(team)
        s.flush()
        user = User(name=f"dev-{secrets.token_hex(3)}", team_id=team.id)
        s.add(user)
        s.flush()
        sub = Submission(
            team_id=team.id,
            user_id=user.id,
            source="command",
            policy_command=f"{sys.executable} -m submission_spec.examples zero",
        )
        s.add(sub)
        s.flush()
        sid = sub.id
    queue.validate(sid)
    queue.drain()
    with sessions() as s:
        sub = s.get(Submission, sid)
        assert sub.state == "published", (sub.state, sub.message, sub.failure, [e.message for e in sub.events])
        assert sub.policy_name == "example-zero" and [sh.state for sh in sub.shards] == ["done", "done"]
        episodes = s.scalars(select(Episode).where(Episode.submission_id == sid)).all()
        assert len(episodes) == 2 and {e.record["steps"] for e in episodes} == {3}
        result = s.scalar(select(Result).where(Result.submission_id == sid))
        assert result.summary["settings"]["backend"] == "local"
        assert {c["case"] for c in result.summary["cases"]} == {"nominal", "S12"}


def test_local_backend_reports_a_command_that_never_serves(migrated_pg, tmp_path):
    from liberopro_platform.config import Settings
    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.local_backend import LocalBackend

    backend = LocalBackend(
        Settings(database_url=migrated_pg, data_dir=tmp_path, backend="local", validation_health_timeout_s=3),
        "local@test",
    )
    out = backend.validate(PolicySource(submission_id="x", command="echo loading; sleep 30"), lambda: None)
    assert not out.ok
    assert "/health" in out.failure and "$PORT" in out.fix
    assert "loading" in out.policy_log


@pytest.mark.sim  # two real LIBERO episodes of at most 4 steps
def test_local_backend_names_a_policy_process_that_crashed_mid_episode_and_restarts_it(tmp_path):
    """The shard runner starts the command itself (liberopro.runs.shard, open_policy); the backend
    still sees the process (on_open) to name the cause of a transport failure, and the runner
    restarts the process before the next episode."""
    from liberopro.instances.build import make_instance
    from liberopro.schema.shard import ShardSpec
    from liberopro.sim.tasks import TaskRef
    from liberopro_platform.config import Settings
    from liberopro_platform.sandbox.base import POLICY_CRASHED, PolicySource
    from liberopro_platform.sandbox.local_backend import LocalBackend

    inst = make_instance(TaskRef("libero_goal", 0), [], seed=7)
    assert not isinstance(inst, str), inst
    backend = LocalBackend(Settings(data_dir=tmp_path, backend="local", policy_restarts=1), "local@test")
    command = f"BEHAVIOR=crash {sys.executable} {HOSTILE}"
    spec = ShardSpec(
        submission_id="crash",
        shard_index=0,
        instances=[inst],
        episodes=[(inst.instance_id, 0), (inst.instance_id, 1)],
        max_steps=4,
        request_timeout_s=5,
        startup_timeout_s=60,
        restart_wait_s=30,
    )
    callbacks = RecordingCallbacks()
    outcome = backend.run_shard(PolicySource(submission_id="crash", command=command), spec, callbacks, 600)
    assert outcome.status == "completed", outcome
    assert callbacks.hello["stack"]["mujoco"] and callbacks.metadata["policy_name"] == "example-zero"
    assert [r.termination_reason for r in callbacks.records] == [POLICY_CRASHED, POLICY_CRASHED]
    assert all(
        r.detail and r.detail.startswith("the policy process exited with code 3 during the episode; the evaluator saw ")
        for r in callbacks.records
    )
    assert outcome.policy_log.count("CRASH exiting with code 3") == 2  # restarted once, crashed again
