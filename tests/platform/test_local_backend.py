"""The local (development) backend behind the same interface: the zero example policy as a child
process, the evaluator in-process, through validate -> plan -> shards -> aggregate -> publish
(stages called directly, as the Celery tasks would call them)."""

from __future__ import annotations

import secrets
import sys

from lp_helpers import InlineEnqueue
from sqlalchemy import select


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
