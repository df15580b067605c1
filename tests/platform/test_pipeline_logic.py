"""Pipeline rules on a real PostgreSQL database, without a sandbox: shard planning, idempotent
episode storage, stuck detection with reasons, crash recovery's requeue, migrations."""

from __future__ import annotations

import datetime as dt
import secrets

import pytest
from liberopro_platform.disclosure import HIDDEN_FAILURES
from liberopro_platform.planning import ManifestError, load_manifest, plan_shards
from lp_helpers import RecordingEnqueue
from sqlalchemy import func, select


class SweepCounter:
    """Stands in for a sandbox backend where only ``sweep`` is exercised (one stream per shard)."""

    name = "counter"

    def __init__(self) -> None:
        self.swept: list[str | None] = []
        self.labelled: set[str] = set()

    def sweep(self, worker=None):
        self.swept.append(worker)
        return 3

    def owners(self):
        return set(self.labelled)

    def auto_streams(self):
        return 1


@pytest.fixture
def pipeline(migrated_pg, tmp_path):
    from liberopro_platform.config import Settings
    from liberopro_platform.db import make_engine, make_sessionmaker
    from liberopro_platform.pipeline import Pipeline

    settings = Settings(
        database_url=migrated_pg, data_dir=tmp_path, heartbeat_stale_s=60, queue_stale_s=600, max_stage_attempts=2
    )
    return Pipeline(
        settings, make_sessionmaker(make_engine(migrated_pg)), RecordingEnqueue(), "w1@test", SweepCounter()
    )


def make_submission(pipeline, state="running", shards=((["i1", 0], ["i1", 1]),), **fields):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission, Team, User

    with transaction(pipeline.sessions) as s:
        team = Team(name=f"t-{secrets.token_hex(3)}")
        s.add(team)
        s.flush()
        user = User(name=f"u-{secrets.token_hex(3)}", team_id=team.id)
        s.add(user)
        s.flush()
        sub = Submission(
            team_id=team.id,
            user_id=user.id,
            source="reference",
            image_ref="sha256:" + "1" * 64,
            state=state,
            episodes_total=sum(len(p) for p in shards),
            **fields,
        )
        s.add(sub)
        s.flush()
        for i, plan in enumerate(shards):
            s.add(Shard(submission_id=sub.id, index=i, plan=[list(p) for p in plan], episodes_total=len(plan)))
        return sub.id


def record(instance_id: str, episode: int, reason: str = "horizon", detail: str | None = None):
    """A minimal episode record (:class:`liberopro.schema.results.EpisodeRecord`, as the shard callbacks get it)."""
    from liberopro.schema.reasons import TerminationReason
    from liberopro.schema.results import EpisodeRecord

    return EpisodeRecord(
        instance_id=instance_id,
        case="nominal",
        suite="libero_spatial",
        task_index=0,
        task_name="t",
        episode_index=episode,
        init_state_id=episode,
        seed=0,
        success=False,
        steps=10,
        horizon=10,
        termination_reason=TerminationReason(reason),
        detail=detail,
        instruction="do it",
        episode_id=f"{instance_id}#{episode}",
        wall_s=1.0,
    )


def test_manifest_is_checked_and_cut_into_task_grouped_shards(tmp_path):
    from liberopro.schema.manifest import Instance, make_header, write_manifest

    instances = [
        Instance(instance_id=f"i{k}", suite=suite, task_index=t)
        for k, (suite, t) in enumerate([("libero_10", 3), ("libero_goal", 0), ("libero_10", 3), ("libero_goal", 1)])
    ]
    path = tmp_path / "m.jsonl"
    write_manifest(path, make_header("eval", 1, instances, episodes=3), instances)  # the evaluator's writer
    m = load_manifest(path)
    assert m.instances == instances and len(m.sha256) == 64 and m.header.instances == 4
    shards = plan_shards(m, episodes_per_instance=3, episodes_per_shard=4)
    flat = [tuple(p) for sh in shards for p in sh]
    assert len(flat) == 12 and len(set(flat)) == 12 and [len(s) for s in shards] == [4, 4, 4]
    assert [p[0] for p in flat[:6]] == ["i0"] * 3 + ["i2"] * 3  # libero_10:3 first, its episodes together
    assert plan_shards(m, 3, 4) == shards
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n")
    with pytest.raises(ManifestError, match=r"m\.jsonl:6: instance i0 appears twice \(first on line 2\)"):
        load_manifest(path)
    with pytest.raises(ManifestError, match="LIBEROPRO_MANIFEST_PATH"):
        load_manifest(None)


def test_episodes_are_stored_once_per_submission_instance_and_episode(pipeline):
    from liberopro_platform.models import Episode, Submission

    sid = make_submission(pipeline)
    with pipeline.sessions() as s:
        sub = s.get(Submission, sid)
        shard_id, row_before = sub.shards[0].id, (sub.updated_at, sub.message, sub.episodes_done)
    assert pipeline.store_episode(shard_id, sid, record("i1", 0)) is True
    assert pipeline.store_episode(shard_id, sid, record("i1", 0, "policy_timeout")) is False
    assert pipeline.store_episode(shard_id, sid, record("i1", 1)) is True
    with pipeline.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Episode).where(Episode.submission_id == sid)) == 2
        first = s.scalar(select(Episode).where(Episode.submission_id == sid, Episode.episode_index == 0))
        assert first.termination_reason == "horizon"  # the first record stands
        # The submission's row (which the submitter reads, updated_at included) is not written per
        # episode: its episode count moves with whole shards (disclosure.py).
        sub = s.get(Submission, sid)
        assert (sub.updated_at, sub.message, sub.episodes_done) == row_before


def test_stuck_submissions_are_found_with_a_reason_and_requeued(pipeline):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission, utcnow

    old = utcnow() - dt.timedelta(minutes=10)
    sid = make_submission(pipeline)
    with transaction(pipeline.sessions) as s:
        sh = s.get(Submission, sid).shards[0]
        sh.state, sh.worker, sh.heartbeat_at = "running", "w9@gone", old
        shard_id = sh.id
    with pipeline.sessions() as s:
        stuck = [x for x in pipeline.find_stuck(s) if x.submission_id == sid and x.action != "wait"]
    assert len(stuck) == 1 and stuck[0].action == "requeue_shard"
    assert "w9@gone" in stuck[0].reason and "stopped reporting" in stuck[0].reason
    pipeline.sweep_stuck()
    assert ("run_shard", shard_id) in pipeline.enqueue.sent
    with pipeline.sessions() as s:
        sub = s.get(Submission, sid)
        assert s.get(Shard, shard_id).state == "queued" and "stopped reporting" in sub.stuck_reason
        assert any(e.message.startswith("stuck:") for e in sub.events)

    vid = make_submission(pipeline, state="validating", shards=(), worker="w8@gone", heartbeat_at=old)
    with pipeline.sessions() as s:
        assert [x.action for x in pipeline.find_stuck(s) if x.submission_id == vid and x.action != "wait"] == [
            "requeue_validation"
        ]
    ancient = utcnow() - dt.timedelta(days=5)
    aid = make_submission(pipeline, state="running", created_at=ancient, state_since=ancient)
    pipeline.sweep_stuck()
    with pipeline.sessions() as s:
        sub = s.get(Submission, aid)
        assert sub.state == "failed" and "total time limit" in sub.failure


def test_a_restarted_worker_requeues_what_it_held(pipeline):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission

    sid = make_submission(pipeline)
    vid = make_submission(pipeline, state="validating", shards=(), worker="w1@test")
    with transaction(pipeline.sessions) as s:
        sh = s.get(Submission, sid).shards[0]
        sh.state, sh.worker = "running", "w1@test"
        shard_id = sh.id
    result = pipeline.recover()
    assert result["swept"] == 3 and pipeline.backend.swept == ["w1@test"]
    assert ("run_shard", shard_id) in pipeline.enqueue.sent and ("validate", vid) in pipeline.enqueue.sent
    with pipeline.sessions() as s:
        assert s.get(Submission, vid).state == "queued"
        assert s.get(Submission, sid).shards[0].state == "queued"


def test_shard_attempts_are_bounded(pipeline):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission

    sid = make_submission(pipeline)
    with transaction(pipeline.sessions) as s:
        sh = s.get(Submission, sid).shards[0]
        sh.attempts, sh.last_error = 2, "the shard did not finish within its time limit (10 s)"
        shard_id = sh.id
    pipeline.run_shard(shard_id)
    with pipeline.sessions() as s:
        sub = s.get(Submission, sid)
        assert sub.state == "failed" and sub.failure_stage == "evaluation"
        # The last attempt never reported (its worker died): the platform's failure, in the hidden
        # stage's fixed words for the submitter; the shard's story is for the admins.
        assert (sub.failure, sub.fix) == HIDDEN_FAILURES["platform"]
        admin = [e.message for e in sub.events if e.message.startswith("[admin] platform error")]
        assert admin and "attempted 2 times" in admin[0] and "time limit" in admin[0], admin


def test_migrations_match_the_models(migrated_pg):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from liberopro_platform.models import Base
    from sqlalchemy import create_engine

    engine = create_engine(migrated_pg)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == [], f"models changed without a migration: {diff}"


def test_requeue_restarts_from_where_it_stopped(pipeline):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission

    sid = make_submission(pipeline, state="failed", shards=((["i1", 0],), (["i2", 0],)))
    with transaction(pipeline.sessions) as s:
        done, failed = s.get(Submission, sid).shards
        done.state, failed.state, failed.attempts = "done", "failed", 3
        failed_id = failed.id
    assert pipeline.requeue(sid, by="admin") == "1 shards"
    assert ("run_shard", failed_id) in pipeline.enqueue.sent
    with pipeline.sessions() as s:
        sub = s.get(Submission, sid)
        assert sub.state == "running" and sub.failure is None and sub.requeues == 1
        assert [(sh.state, sh.attempts) for sh in sub.shards] == [("done", 0), ("queued", 0)]
    vid = make_submission(pipeline, state="failed", shards=(), failure="validation failed", attempts=3)
    assert pipeline.requeue(vid, by="admin") == "validation"
    assert ("validate", vid) in pipeline.enqueue.sent
    with pipeline.sessions() as s:
        assert s.get(Submission, vid).state == "queued" and s.get(Submission, vid).attempts == 0


class OnlyThese:
    """A broker view for the ids of one test: ``view`` decides for them, everything else (other
    tests' rows in the shared database) counts as held, so the sweep leaves it alone."""

    def __init__(self, ids, view) -> None:
        self.ids = {str(i) for i in ids}
        self.view = view

    def holds(self, kind, arg, delivered_after=None):
        return self.view.holds(kind, arg, delivered_after) if str(arg) in self.ids else True

    @property
    def waiting(self):
        return self.view.waiting


def test_lost_task_messages_are_resent_for_free(pipeline):
    """A queued validation or shard whose message the broker does not hold (or holds only as
    delivered long ago: its worker died) is re-sent, without counting as a requeue; one the
    broker holds waiting, or delivered recently, or an aggregation being run, is left alone."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, utcnow
    from liberopro_platform.pipeline import BrokerView

    now = utcnow()
    old = now - dt.timedelta(minutes=10)
    rid = make_submission(pipeline, state_since=old, shards=((["i1", 0],), (["i1", 1],), (["i1", 2],)))
    lost_v, dead_v, fresh_v = (make_submission(pipeline, state="queued", shards=(), state_since=old) for _ in range(3))
    # Aggregating for 2 min: past the re-send grace (60 s), within the aggregation limit (300 s),
    # so neither a re-send nor a requeue is due, whether or not a live control worker is on record.
    agg = make_submission(pipeline, state="aggregating", shards=(), state_since=now - dt.timedelta(minutes=2))
    with pipeline.sessions() as s:
        held, lost, eta = [sh.id for sh in s.get(Submission, rid).shards]
    view = BrokerView(
        waiting={("run_shard", str(held))},
        delivered={
            ("validate", dead_v): now - dt.timedelta(minutes=5),
            ("validate", fresh_v): now - dt.timedelta(seconds=10),
            ("run_shard", str(eta)): now + dt.timedelta(seconds=90),  # countdown not over
            ("aggregate", agg): now - dt.timedelta(minutes=2),
        },
    )
    pipeline.enqueue.broker = OnlyThese([rid, lost_v, dead_v, fresh_v, agg, held, lost, eta], view)
    found = pipeline.sweep_stuck()
    mine = {(x.action, x.shard_id or x.submission_id) for x in found if x.action.startswith("resend")}
    assert mine == {("resend_shard", lost), ("resend_validation", lost_v), ("resend_validation", dead_v)}
    assert sorted(pipeline.enqueue.sent, key=str) == sorted(
        [("run_shard", lost), ("validate", lost_v), ("validate", dead_v)], key=str
    )
    with pipeline.sessions() as s:
        sub = s.get(Submission, rid)
        assert sub.requeues == 0 and sub.state == "running" and [sh.state for sh in sub.shards] == ["queued"] * 3
        assert "the task of one of its shards was not in the broker" in sub.stuck_reason
        assert "shard 1" not in sub.stuck_reason  # which shard is where belongs to the hidden stage
        assert any("shard 1: its task was not in the broker" in e.message for e in sub.events if "[admin]" in e.message)
        assert any("not in the broker" in e.message for e in sub.events)
        assert s.get(Submission, lost_v).requeues == 0 and s.get(Submission, lost_v).state == "queued"
        assert "broker" not in (
            s.get(Submission, fresh_v).stuck_reason or ""
        )  # (a "no live worker" reason may be there)
    # Once the broker holds them again, nothing more is sent and the reasons are cleared.
    view.waiting |= {("run_shard", str(lost)), ("validate", lost_v), ("validate", dead_v)}
    pipeline.enqueue.sent.clear()
    pipeline.sweep_stuck()
    assert pipeline.enqueue.sent == []
    with pipeline.sessions() as s:
        assert "broker" not in (s.get(Submission, rid).stuck_reason or "")
    with transaction(pipeline.sessions) as s:
        for i in (rid, lost_v, dead_v, fresh_v, agg):
            s.get(Submission, i).state = "cancelled"


def test_no_live_worker_is_the_stuck_reason(pipeline):
    """Waiting work says when no live worker serves its queue, naming the last worker seen;
    a live worker's row clears it; aggregation needs a worker of the control queue."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, WorkerHeartbeat, utcnow

    later = utcnow() + dt.timedelta(hours=30)  # every real row of the shared database is stale then
    pipeline.now = lambda: later
    since = later - dt.timedelta(minutes=1)
    qid = make_submission(pipeline, state="queued", shards=(), created_at=since, state_since=since)
    aid = make_submission(pipeline, state="aggregating", shards=(), created_at=since, state_since=since)
    names = [f"{n}-{secrets.token_hex(3)}@unit" for n in ("stopped", "live")]

    def reasons(sid):
        with pipeline.sessions() as s:
            return [x.reason for x in pipeline.find_stuck(s) if x.submission_id == sid and x.action == "wait"]

    try:
        assert reasons(qid) and "no worker that runs sandbox work" in reasons(qid)[0]
        with transaction(pipeline.sessions) as s:
            s.add(
                WorkerHeartbeat(
                    name=names[0],
                    roles="shards,control",
                    beat_at=later - dt.timedelta(seconds=5),
                    stopped_at=later - dt.timedelta(seconds=5),
                )
            )
        [why] = reasons(qid)
        assert f"the last one, {names[0]}, stopped at" in why and "nothing is lost" in why
        assert "aggregation" in reasons(aid)[0]
        with transaction(pipeline.sessions) as s:
            s.add(WorkerHeartbeat(name=names[1], roles="shards", beat_at=later - dt.timedelta(seconds=5)))
        assert reasons(qid) == []
        assert "no worker that runs aggregation is alive" in reasons(aid)[0]  # a shards-only worker does not count
    finally:
        with transaction(pipeline.sessions) as s:
            for n in names:
                row = s.get(WorkerHeartbeat, n)
                if row is not None:
                    s.delete(row)
            for i in (qid, aid):
                s.get(Submission, i).state = "cancelled"


def test_a_new_worker_cleans_up_after_owners_whose_heartbeat_is_gone(pipeline):
    """recover() under a new name: sandboxes of owners with a stale or no heartbeat row are
    removed and their claims requeued; a live owner and one whose claim still beats are spared."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, WorkerHeartbeat, utcnow

    tag = secrets.token_hex(3)
    gone, norow, live, busy = (f"{n}-{tag}@unit" for n in ("gone", "norow", "live", "busy"))
    now = utcnow()
    stale = now - dt.timedelta(minutes=10)
    pipeline.backend.labelled = {gone, norow, live, busy}
    sid = make_submission(pipeline, shards=((["i1", 0],), (["i1", 1],)))
    vid = make_submission(pipeline, state="validating", shards=(), worker=norow, heartbeat_at=stale)
    with transaction(pipeline.sessions) as s:
        s.add_all(
            [
                WorkerHeartbeat(name=gone, roles="shards,control", beat_at=stale),
                WorkerHeartbeat(name=live, roles="shards,control", beat_at=now),
                WorkerHeartbeat(name=busy, roles="shards,control", beat_at=stale),
            ]
        )
        a, b = s.get(Submission, sid).shards
        a.state, a.worker, a.heartbeat_at = "running", gone, stale
        b.state, b.worker, b.heartbeat_at = "running", busy, now
        a_id, b_id = a.id, b.id
    try:
        result = pipeline.recover()
        assert set(result["gone"]) >= {gone, norow} and not {live, busy} & set(result["gone"])
        assert {gone, norow, "w1@test"} <= set(pipeline.backend.swept) and not {live, busy} & set(
            pipeline.backend.swept
        )
        assert ("run_shard", a_id) in pipeline.enqueue.sent and ("validate", vid) in pipeline.enqueue.sent
        assert ("run_shard", b_id) not in pipeline.enqueue.sent
        with pipeline.sessions() as s:
            sub = s.get(Submission, sid)
            assert [sh.state for sh in sub.shards] == ["queued", "running"]
            assert any(f"its worker {gone} is gone" in e.message for e in sub.events)
            assert s.get(Submission, vid).state == "queued"
            assert s.get(WorkerHeartbeat, gone) is None and s.get(WorkerHeartbeat, live) is not None
    finally:
        with transaction(pipeline.sessions) as s:
            for n in (gone, live, busy):
                row = s.get(WorkerHeartbeat, n)
                if row is not None:
                    s.delete(row)
            for i in (sid, vid):
                s.get(Submission, i).state = "cancelled"


class PolicyHolder(SweepCounter):
    """Stands in for a backend that keeps a policy container per submission between shards."""

    def __init__(self, held: set[str]) -> None:
        super().__init__()
        self.held = set(held)
        self.released: list[str] = []

    def policy_submissions(self):
        return set(self.held)

    def release_policy(self, submission_id):
        self.held.discard(submission_id)
        self.released.append(submission_id)
        return 2


def test_shard_streams_follow_what_the_policy_declared_at_validation():
    """The stored ``/metadata`` gives the declared concurrency; the rule itself is the schema's
    (``liberopro.schema.shard.shard_streams``, tests/evaluator/test_shard_streams.py)."""
    from liberopro.schema.shard import shard_streams
    from liberopro_platform.pipeline import max_concurrent_episodes

    assert max_concurrent_episodes({"max_concurrent_episodes": 16}) == 16
    assert max_concurrent_episodes({"max_concurrent_episodes": None}) is None  # spec 1.0
    assert max_concurrent_episodes(None) is None  # no metadata recorded
    assert shard_streams(8, "liberopro", max_concurrent_episodes({"max_concurrent_episodes": 2}), 20) == 2
    assert shard_streams(8, "openpi", max_concurrent_episodes({"max_concurrent_episodes": 16}), 20) == 1


def test_a_kept_policy_container_is_released_once_nothing_of_its_submission_will_run_here(pipeline):
    """Kept: a running submission with a shard queued, or running on this worker. Released: one
    whose last shard runs on another worker, one that ended. At a shard's start every other
    submission's container goes (one shard at a time per worker)."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard
    from liberopro_platform.pipeline.policies import release_policies

    two = ((["i1", 0],), (["i1", 1],))
    queued = make_submission(pipeline, shards=two)
    here = make_submission(pipeline, shards=two)
    elsewhere = make_submission(pipeline, shards=two)
    ended = make_submission(pipeline, state="published", shards=two)
    with transaction(pipeline.sessions) as s:
        for sid, states in (
            (queued, ("done", "queued")),
            (here, ("done", "running")),
            (elsewhere, ("done", "running")),
        ):
            for sh, state in zip(
                s.query(Shard).filter_by(submission_id=sid).order_by(Shard.index), states, strict=True
            ):
                sh.state = state
                sh.worker = (pipeline.worker if sid == here else "w2@test") if state == "running" else None
        for sh in s.query(Shard).filter_by(submission_id=ended):
            sh.state = "done"
    pipeline._backend = holder = PolicyHolder({queued, here, elsewhere, ended})

    assert sorted(pipeline.release_idle_policies()) == sorted([elsewhere, ended])
    assert holder.held == {queued, here}
    assert pipeline.release_idle_policies() == []  # nothing changed: nothing more to release

    with pipeline.policy_lock:
        assert release_policies(pipeline, keep=here) == [queued]
    assert holder.held == {here}


class PolicyValidator(PolicyHolder):
    """A backend that keeps policy containers between shards and fails every validation."""

    def prepare(self, source, upload_path=None):
        return None

    def validate(self, source, on_heartbeat):
        from liberopro_platform.sandbox.base import ValidationOutcome

        return ValidationOutcome(ok=False, failure="refused by the test", fix="none")


def test_a_validation_and_a_shutdown_release_every_kept_policy_container(pipeline):
    """A validation's policy container runs alone on the node: another submission's container
    kept for its next shard (still needed) is released first, or the two would share the node's
    memory and GPU and the validation's failure there would be blamed on its policy. A worker's
    shutdown releases the rest (release_all_policies)."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission

    two = ((["i1", 0],), (["i1", 1],))
    kept = make_submission(pipeline, shards=two)  # shard 0 done, shard 1 queued: still needed
    with transaction(pipeline.sessions) as s:
        s.query(Shard).filter_by(submission_id=kept, index=0).one().state = "done"
    new = make_submission(pipeline, state="queued")
    with transaction(pipeline.sessions) as s:
        sub = s.get(Submission, new)
        sub.source, sub.image_digest = "upload", "sha256:" + "2" * 64
    pipeline._backend = holder = PolicyValidator({kept})
    assert pipeline.release_idle_policies() == [] and holder.held == {kept}  # needed: kept while idle

    pipeline.validate(new)
    assert holder.released == [kept] and holder.held == set()
    with pipeline.sessions() as s:
        assert s.get(Submission, new).failure == "refused by the test"

    holder.held = {kept, new}
    assert sorted(pipeline.release_all_policies()) == sorted([kept, new]) and holder.held == set()
    with transaction(pipeline.sessions) as s:
        s.get(Submission, kept).state = "cancelled"


def test_an_evaluator_stream_that_died_leaves_its_episode_missing_for_the_next_attempt(pipeline):
    """Records the evaluator could not run (worker_crashed: one of its simulator stream processes
    died twice) are the platform's fault: not stored (an episode is stored once and for good),
    an [admin] event says why, and the shard's attempt ends with the episode missing, so it is
    retried."""
    from liberopro_platform.models import Episode, Shard, Submission
    from liberopro_platform.pipeline import StoringCallbacks
    from liberopro_platform.pipeline.shard_end import after_shard
    from liberopro_platform.sandbox.base import ShardOutcome

    sid = make_submission(pipeline)
    with pipeline.sessions() as s:
        shard_id = s.get(Submission, sid).shards[0].id
    with pipeline.sessions() as s:
        s.get(Shard, shard_id).attempts = 1
        s.commit()
    cb = StoringCallbacks(pipeline, shard_id, sid)
    cb.on_record(record("i1", 0))
    crashed = record("i1", 1, "worker_crashed", "the worker process running this episode died twice")
    cb.on_record(crashed)
    with pipeline.sessions() as s:
        stored = s.scalars(select(Episode.episode_index).where(Episode.submission_id == sid)).all()
        events = [e.message for e in s.get(Submission, sid).events]
    assert stored == [0]
    assert any(m.startswith("[admin] episode i1#1 not stored: worker_crashed") for m in events), events
    after_shard(pipeline, shard_id, ShardOutcome("completed", "", "", ""))
    with pipeline.sessions() as s:
        shard = s.get(Shard, shard_id)
        assert shard.state == "queued" and "1 of 2 episodes stored" in shard.last_error
    assert pipeline.enqueue.sent[-1] == ("run_shard", shard_id)


def test_a_slow_idle_hook_does_not_stop_the_heartbeat(pipeline):
    """The idle hook (the release of kept policy containers) runs beside the beats: a Docker
    engine that takes minutes to remove a container must not make the worker look gone
    (heartbeat_stale_s) to the others, which would sweep its sandboxes and take its claims. One
    call at a time."""
    import threading
    import time

    from liberopro_platform.heartbeat import HeartbeatWriter
    from liberopro_platform.models import WorkerHeartbeat

    entered, release = threading.Event(), threading.Event()
    calls = []

    def slow_hook():
        calls.append(time.monotonic())
        entered.set()
        release.wait(10)

    name = f"slowhook-{secrets.token_hex(3)}@test"
    hb = HeartbeatWriter(pipeline.sessions, name, ["shards"], 0.2, idle_hook=slow_hook, idle_every_s=0.0).start()
    try:
        assert entered.wait(5)
        with pipeline.sessions() as s:
            first = s.get(WorkerHeartbeat, name).beat_at
        time.sleep(1.5)
        with pipeline.sessions() as s:
            later = s.get(WorkerHeartbeat, name).beat_at
        assert (later - first).total_seconds() >= 1.0, (first, later)
        assert len(calls) == 1  # the hook still runs: no second call beside it
    finally:
        release.set()
        hb.stop()


class ShardRunner(PolicyHolder):
    """A backend whose shards end with ``status`` and keep the submission's policy container."""

    def __init__(self, status: str) -> None:
        super().__init__(set())
        self.status = status

    def run_shard(self, source, spec, callbacks, time_limit_s):
        from liberopro_platform.sandbox.base import ShardOutcome

        self.held.add(source.submission_id)
        return ShardOutcome(self.status, "the policy did not answer", "internal", "")


@pytest.mark.parametrize(("status", "kept"), [("policy_error", False), ("timed_out", False), ("completed", True)])
def test_a_failed_shard_attempt_is_retried_on_a_fresh_policy_container(pipeline, manifest_path, status, kept):
    """A policy server that hung (Running to the engine, no answer) must not serve the retry too:
    after an attempt that failed as a whole the node sandbox goes, though a shard of the
    submission is queued again. An attempt that completed with an episode missing keeps it."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission

    manifest = load_manifest(manifest_path)
    iid = manifest.instances[0].instance_id
    pipeline.settings = pipeline.settings.model_copy(update={"manifest_path": manifest_path})
    sid = make_submission(pipeline, shards=(([iid, 0],), ([iid, 1],)), manifest_sha256=manifest.sha256)
    with transaction(pipeline.sessions) as s:
        sub = s.get(Submission, sid)
        sub.image_digest, sub.protocol = "sha256:" + "3" * 64, "liberopro"
        shard_id = s.query(Shard).filter_by(submission_id=sid, index=0).one().id
    pipeline._backend = holder = ShardRunner(status)
    pipeline.run_shard(shard_id)
    with pipeline.sessions() as s:
        assert s.get(Shard, shard_id).state == "queued"  # retried (attempt 1 of 2)
    assert (holder.held == {sid}) is kept and (holder.released == [sid]) is not kept
    with transaction(pipeline.sessions) as s:
        s.get(Submission, sid).state = "cancelled"


def test_an_idle_worker_removes_what_gone_owners_left_on_its_engine(pipeline):
    """The idle hook applies recover()'s rule between starts: a worker killed and replaced under
    a new name (within heartbeat_stale_s, so the replacement's start spared it) left a policy
    container holding memory and GPUs; the next idle minute of any worker on that engine
    removes it. Never its own sandboxes nor a live owner's; the work is the stuck sweep's."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import WorkerHeartbeat, utcnow

    tag = secrets.token_hex(3)
    gone, live = f"gone-{tag}@unit", f"live-{tag}@unit"
    pipeline._backend = holder = PolicyHolder(set())
    holder.labelled = {gone, live, pipeline.worker}
    with transaction(pipeline.sessions) as s:
        s.add_all(
            [
                WorkerHeartbeat(name=gone, roles="shards", beat_at=utcnow() - dt.timedelta(minutes=10)),
                WorkerHeartbeat(name=live, roles="shards", beat_at=utcnow()),
            ]
        )
    try:
        assert pipeline.idle() == {"released": [], "swept": 3}
        assert holder.swept == [gone] and pipeline.enqueue.sent == []
    finally:
        with transaction(pipeline.sessions) as s:
            for n in (gone, live):
                s.delete(s.get(WorkerHeartbeat, n))


class LockProbe(ShardRunner):
    """auto_streams tries to lock the shard's row at once (NOWAIT): it fails while run_shard
    holds the lock."""

    def __init__(self, pipeline, shard_id) -> None:
        super().__init__("completed")
        self.pipeline, self.shard_id, self.locked = pipeline, shard_id, None

    def auto_streams(self):
        from liberopro_platform.models import Shard
        from sqlalchemy.exc import OperationalError

        with self.pipeline.sessions() as s:
            try:
                s.execute(select(Shard.id).where(Shard.id == self.shard_id).with_for_update(nowait=True)).all()
                self.locked = False
            except OperationalError:
                self.locked = True
        return 4


def test_the_engine_is_asked_for_streams_before_the_shard_is_locked(pipeline, manifest_path):
    """A Docker engine slow to answer (auto_streams) must not hold the shard's row lock, which a
    cancel's update of the shard waits on."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission

    manifest = load_manifest(manifest_path)
    iid = manifest.instances[0].instance_id
    pipeline.settings = pipeline.settings.model_copy(update={"manifest_path": manifest_path})
    sid = make_submission(pipeline, shards=(([iid, 0], [iid, 1]),), manifest_sha256=manifest.sha256)
    with transaction(pipeline.sessions) as s:
        sub = s.get(Submission, sid)
        sub.image_digest, sub.protocol = "sha256:" + "4" * 64, "liberopro"
        sub.policy_metadata = {"max_concurrent_episodes": 8}
        shard_id = sub.shards[0].id
    pipeline._backend = probe = LockProbe(pipeline, shard_id)
    pipeline.run_shard(shard_id)
    assert probe.locked is False
    with pipeline.sessions() as s:
        assert any("in 2 simulator streams at once" in e.message for e in s.get(Submission, sid).events)
        assert s.get(Shard, shard_id).state == "queued"
    with transaction(pipeline.sessions) as s:
        s.get(Submission, sid).state = "cancelled"


def test_the_heartbeat_thread_runs_the_idle_hook_only_while_no_task_runs(pipeline):
    """A shards worker releases unused policy containers from its heartbeat thread, never while a
    task runs (the task's own shard start and end do it then)."""
    import threading
    import time

    from liberopro_platform.heartbeat import HeartbeatWriter

    calls: list[str | None] = []
    fired = threading.Event()
    writer = HeartbeatWriter(pipeline.sessions, "hook@test", ["shards"], 0.05, idle_hook=None, idle_every_s=0.0)

    def hook():
        calls.append(writer.task)
        fired.set()

    writer.idle_hook = hook
    writer.set_task("liberopro.run_shard 7")
    writer.start()
    try:
        time.sleep(0.5)
        assert calls == []  # a task runs: never called
        writer.set_task(None)
        assert fired.wait(5.0)
    finally:
        writer.stop()
    assert set(calls) == {None}


def test_a_shard_waiting_for_a_worker_says_what_it_waits_for(pipeline):
    """A running submission none of whose shards runs reads "waiting for a free worker" with the
    sandbox tasks ahead of it (running ones, and those queued before it), not just "running"
    (counted over the whole database: other tests' rows are the baseline, the deltas are checked)."""
    from types import SimpleNamespace

    from liberopro_platform.api.routes.submissions import status_of
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, utcnow
    from liberopro_platform.pipeline import sandbox_wait

    now = utcnow()
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(settings=pipeline.settings, pipeline=pipeline)))
    mine = make_submission(pipeline)
    with transaction(pipeline.sessions) as s:
        s.get(Submission, mine).shards[0].queued_at = now - dt.timedelta(minutes=5)
    with pipeline.sessions() as s:
        before = sandbox_wait(s, s.get(Submission, mine), pipeline.settings.heartbeat_stale_s)
    assert before is not None
    # Another team's validation runs on the worker; another team's shard was queued before mine.
    other_validation = make_submission(pipeline, state="validating", shards=(), worker="w1@test", heartbeat_at=now)
    earlier = make_submission(pipeline)
    with transaction(pipeline.sessions) as s:
        s.get(Submission, earlier).shards[0].queued_at = now - dt.timedelta(minutes=10)
    with pipeline.sessions() as s:
        sub = s.get(Submission, mine)
        wait = sandbox_wait(s, sub, pipeline.settings.heartbeat_stale_s)
        st = status_of(request, s, sub)
    assert (wait.running, wait.queued_before) == (before.running + 1, before.queued_before + 1)
    ahead = wait.running + wait.queued_before
    assert f"waiting for a free worker: {ahead} sandbox tasks ahead of it" in st.message, st.message
    assert f"({wait.running} running, {wait.queued_before} queued before it;" in st.message
    assert st.message.startswith("running on the hidden instances: 0 of 1 shards done")
    # Once its shard runs, it waits for nothing.
    with transaction(pipeline.sessions) as s:
        sh = s.get(Submission, mine).shards[0]
        sh.state, sh.worker, sh.heartbeat_at = "running", "w1@test", utcnow()
    with pipeline.sessions() as s:
        sub = s.get(Submission, mine)
        assert sandbox_wait(s, sub, pipeline.settings.heartbeat_stale_s) is None
        assert "waiting" not in status_of(request, s, sub).message
    # A retry's wait is not told (when an attempt fails is the policy's to choose).
    with transaction(pipeline.sessions) as s:
        sh = s.get(Submission, mine).shards[0]
        sh.state, sh.attempts = "queued", 1
    with pipeline.sessions() as s:
        assert sandbox_wait(s, s.get(Submission, mine), pipeline.settings.heartbeat_stale_s) is None
    with transaction(pipeline.sessions) as s:  # leave nothing active for the other tests
        for sid in (mine, other_validation, earlier):
            sub = s.get(Submission, sid)
            sub.state = "cancelled"
            for sh in sub.shards:
                sh.state = "cancelled"


def test_the_hidden_stage_reads_the_same_within_a_tick(pipeline):
    """While the hidden stage runs, the submitter's view (shards done, the wait, the state) is the
    one of the last tick of ``hidden_view_interval_s``: a shard ending within the tick shows at the
    next tick, and ``updated_at`` is the tick the view last changed at, never the second a shard
    ended; the admins' view is live."""
    import time
    from types import SimpleNamespace

    from liberopro_platform.api.routes.submissions import status_of
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission

    settings = pipeline.settings.model_copy(update={"hidden_view_interval_s": 2.0})
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(settings=settings, pipeline=pipeline)))
    sid = make_submission(pipeline, shards=((["i1", 0],), (["i1", 1],)))

    def read(admin: bool = False):
        with transaction(pipeline.sessions) as s:
            st = status_of(request, s, s.get(Submission, sid), admin=admin)
            return st.progress.shards_done, st.message, st.updated_at

    time.sleep(2.0 - time.time() % 2.0 + 0.05)  # just after a tick
    before = read()
    with transaction(pipeline.sessions) as s:
        s.get(Submission, sid).shards[0].state = "done"
    assert read() == before and before[0] == 0  # the same tick: the same view, to the microsecond
    assert read(admin=True)[0] == 1  # admins read it live
    time.sleep(2.0 - time.time() % 2.0 + 0.05)
    after = read()
    assert after[0] == 1 and "1 of 2 shards done" in after[1]
    assert after[2].timestamp() % 2.0 == 0 and after[2] > before[2]  # a tick, not the shard's end
    with transaction(pipeline.sessions) as s:
        sub = s.get(Submission, sid)
        sub.state = "cancelled"
        for sh in sub.shards:
            sh.state = "cancelled"


def _status(pipeline, sid: str) -> dict:
    """The submitter's GET /submissions/{id} (``status_of`` as the route calls it), read live
    (``hidden_view_interval_s`` 0): what changes is seen at once."""
    import json
    from types import SimpleNamespace

    from liberopro_platform.api.routes.submissions import status_of
    from liberopro_platform.models import Submission

    settings = pipeline.settings.model_copy(update={"hidden_view_interval_s": 0})
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(settings=settings, pipeline=pipeline)))
    with pipeline.sessions() as s:
        return json.loads(status_of(request, s, s.get(Submission, sid)).model_dump_json())


def test_a_hidden_stage_over_the_total_time_limit_ends_in_the_fixed_words(pipeline):
    """(A security review's finding.) A slow policy can push its submission past
    ``submission_time_limit_s``: the sweep ends it with the hidden stage's fixed words, not a text
    of its own (with the stage's name and, for a requeue limit, a worker and a heartbeat time)."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission, utcnow

    sid = make_submission(pipeline)
    with transaction(pipeline.sessions) as s:
        s.get(Submission, sid).created_at = utcnow() - dt.timedelta(hours=49)
    pipeline.sweep_stuck()
    st = _status(pipeline, sid)
    assert st["state"] == "failed" and st["failure_stage"] == "evaluation", st
    assert (st["failure"], st["fix"]) == HIDDEN_FAILURES["total"]


def test_a_failed_shard_attempt_is_not_visible_until_the_shard_ends(pipeline, manifest_path):
    """(A security review's finding.) A policy that fails a shard attempt when it chooses (no
    answer at its start) does not change what its submitter reads: its retry's wait is not told
    (the shard's first turn is), progress and updated_at stay."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Shard, Submission, WorkerHeartbeat, utcnow
    from liberopro_platform.planning import load_manifest
    from liberopro_platform.sandbox.base import ShardOutcome

    class FailingBackend(SweepCounter):
        def policy_submissions(self):
            return set()

        def release_policy(self, submission_id):
            return 0

        def run_shard(self, source, spec, callbacks, time_limit_s):
            return ShardOutcome("policy_error", "the policy did not answer", "internal", "")

    manifest = load_manifest(manifest_path)
    iid = manifest.instances[0].instance_id
    pipeline.settings = pipeline.settings.model_copy(update={"manifest_path": manifest_path, "max_stage_attempts": 3})
    pipeline._backend = FailingBackend()
    sid = make_submission(pipeline, shards=(([iid, 0], [iid, 1]),), manifest_sha256=manifest.sha256)
    worker = f"live-{secrets.token_hex(3)}@test"
    with transaction(pipeline.sessions) as s:  # a live worker serves the sandbox queue, as in production
        s.add(WorkerHeartbeat(name=worker, roles="shards,control", beat_at=utcnow()))
        sh = s.get(Submission, sid).shards[0]
        shard_id, sh.state, sh.worker, sh.heartbeat_at = sh.id, "running", "w1@test", utcnow()
    during = _status(pipeline, sid)
    with transaction(pipeline.sessions) as s:
        s.get(Shard, shard_id).state = "queued"
    pipeline.run_shard(shard_id)  # its attempt fails when the policy decides
    with pipeline.sessions() as s:
        assert (s.get(Shard, shard_id).attempts, s.get(Shard, shard_id).state) == (1, "queued")
    after = _status(pipeline, sid)
    assert {k: after[k] for k in ("message", "progress", "updated_at", "events", "stuck_reason")} == {
        k: during[k] for k in ("message", "progress", "updated_at", "events", "stuck_reason")
    }
    with transaction(pipeline.sessions) as s:
        s.delete(s.get(WorkerHeartbeat, worker))
    with transaction(pipeline.sessions) as s:
        sub = s.get(Submission, sid)
        sub.state = "cancelled"
        for sh in sub.shards:
            sh.state = "cancelled"
