"""Queues, the timer sweep and recovery on a real broker: a PRIVATE redis-server (own port, own
process, a tmp directory, no persistence) that the tests restart, real Celery worker and beat
processes (``python -m liberopro_platform worker|beat``), a fresh PostgreSQL database of this
module (so the session's own worker rows do not count as live workers here).

What is tested is the path of the task messages, so the local backend is used and the shards'
episodes are stored up front (as after an earlier attempt): a shard task then runs no simulator
and finishes at once, but only when its message reaches a worker. The last test uses the Docker
engine: a worker starting under a new name removes the sandboxes whose owner is gone.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PG_ADMIN_URL
from lp_helpers import EXAMPLE_IMAGE, REPO, WorkerProcess, free_port, sandbox_leftovers

pytestmark = pytest.mark.services  # a private redis-server and PostgreSQL (tier: services)


# ---------------------------------------------------------------- a private Redis, a private database
class RedisServer:
    """``redis-server`` on its own port and directory, without persistence (a restart loses
    every queued message, as a crash of a Redis without AOF does)."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.dir = directory
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(port=self.port, socket_connect_timeout=2, socket_timeout=5)

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.dir / "redis.log"),
            ],
            start_new_session=True,
        )
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                if self.client().ping():
                    return self
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def queue_db() -> str:
    """A fresh PostgreSQL database for this module (migrated), dropped at the end."""
    import psycopg
    from liberopro_platform.db import upgrade

    name = f"lp_queues_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_ADMIN_URL} ({exc}); start it or set LIBEROPRO_TEST_PG")
    admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG_ADMIN_URL.rsplit('/', 1)[0].replace('postgresql://', 'postgresql+psycopg://')}/{name}"
    upgrade(url)
    yield url
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.close()


@pytest.fixture(scope="module")
def env(queue_db, redis_server, tmp_path_factory) -> dict[str, str]:
    """Settings of the processes: local backend, heartbeats every second, a worker gone after
    6 s, the sweep every second, a lost message re-sent after 3 s, the hidden stage's view moving
    at 2 s ticks (the default, 60 s, would make a wait of 30 s depend on where the minute falls)."""
    return {
        "LIBEROPRO_DATABASE_URL": queue_db,
        "LIBEROPRO_BROKER_URL": redis_server.url,
        "LIBEROPRO_QUEUE": f"lpq-{secrets.token_hex(3)}",
        "LIBEROPRO_DATA_DIR": str(tmp_path_factory.mktemp("queues-data")),
        "LIBEROPRO_BACKEND": "local",
        "LIBEROPRO_SANDBOX_FIREWALL": "off",
        "LIBEROPRO_HEARTBEAT_INTERVAL_S": "1",
        "LIBEROPRO_HEARTBEAT_STALE_S": "6",
        "LIBEROPRO_SWEEP_INTERVAL_S": "1",
        "LIBEROPRO_RESEND_GRACE_S": "3",
        "LIBEROPRO_VALIDATION_HEALTH_TIMEOUT_S": "6",
        "LIBEROPRO_MAX_CONCURRENT": "20",
        "LIBEROPRO_HIDDEN_VIEW_INTERVAL_S": "2",
    }


@pytest.fixture(scope="module")
def settings(env):
    from liberopro_platform.config import Settings

    return Settings(**{k.removeprefix("LIBEROPRO_").lower(): v for k, v in env.items()})


@pytest.fixture(scope="module")
def sessions(settings):
    from liberopro_platform.db import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(settings.database_url))


@pytest.fixture(scope="module")
def enqueue(settings):
    """The test process sends tasks as the API and the workers do."""
    from liberopro_platform.celery_app import CeleryEnqueue, make_celery

    return CeleryEnqueue(make_celery(settings), settings.queue)


class BeatProcess:
    """``python -m liberopro_platform beat``: the timer that runs the sweep in its own process."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> BeatProcess:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "liberopro_platform", "beat"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=str(REPO),
            )
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def beat(env, tmp_path_factory):
    b = BeatProcess(env, tmp_path_factory.mktemp("beat") / "beat.log").start()
    yield b
    b.stop()


@pytest.fixture
def workers(env, tmp_path):
    """Start workers by name (and queues); all are stopped at the end of the test."""
    started: list[WorkerProcess] = []

    def start(
        name: str, queues: str = "shards,control", extra_env: dict[str, str] | None = None, wait: bool = True
    ) -> WorkerProcess:
        w = WorkerProcess({**env, **(extra_env or {})}, tmp_path / f"{name}.log", name=name, queues=queues)
        started.append(w)
        return w.launch().wait_ready() if wait else w.launch()

    yield start
    for w in started:
        w.stop()


# ---------------------------------------------------------------- submissions
def make_team_user(sessions):
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Team, User
    from liberopro_platform.security import issue_token

    with transaction(sessions) as s:
        team = Team(name=f"q-{secrets.token_hex(3)}")
        s.add(team)
        s.flush()
        user = User(name=f"q-{secrets.token_hex(3)}", team_id=team.id)
        s.add(user)
        s.flush()
        _, token = issue_token(s, user, 1)
        return team.id, user.id, token


def episode_record(instance_id: str, episode: int) -> dict:
    from liberopro.runs.summary import EpisodeRecord

    return EpisodeRecord(
        instance_id=instance_id,
        case="nominal",
        suite="libero_goal",
        task_index=0,
        task_name="open_the_middle_drawer_of_the_cabinet",
        episode_index=episode,
        init_state_id=episode,
        seed=episode,
        success=episode % 2 == 0,
        steps=3,
        horizon=300,
        termination_reason="horizon",
        instruction="open the middle drawer of the cabinet",
        episode_id=f"e{episode}",
        wall_s=0.1,
    ).model_dump(mode="json")


def running_submission(sessions, shards: int = 2) -> tuple[str, list[int], str]:
    """A submission past validation with ``shards`` shards of one episode each, whose episodes
    are stored already (as after an earlier attempt): ``(id, shard ids, API token)``."""
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Episode, Shard, Submission

    team_id, user_id, token = make_team_user(sessions)
    with transaction(sessions) as s:
        sub = Submission(
            team_id=team_id,
            user_id=user_id,
            source="command",
            policy_command="unused",
            state="running",
            message="running: 0 of 2 episodes done",
            episodes_total=shards,
            policy_name="stored-episodes",
            spec_version="1.0",
            manifest_sha256="0" * 64,
        )
        s.add(sub)
        s.flush()
        rows = [Shard(submission_id=sub.id, index=i, plan=[["nominal-0", i]], episodes_total=1) for i in range(shards)]
        s.add_all(rows)
        s.flush()
        for sh in rows:
            rec = episode_record("nominal-0", sh.index)
            s.add(
                Episode(
                    submission_id=sub.id,
                    shard_id=sh.id,
                    instance_id="nominal-0",
                    episode_index=sh.index,
                    success=rec["success"],
                    termination_reason="horizon",
                    record=rec,
                )
            )
        return sub.id, [sh.id for sh in rows], token


def queued_submission(sessions, command: str) -> str:
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Submission

    team_id, user_id, _ = make_team_user(sessions)
    with transaction(sessions) as s:
        sub = Submission(team_id=team_id, user_id=user_id, source="command", policy_command=command)
        s.add(sub)
        s.flush()
        return sub.id


def wait_for(what: str, predicate, timeout: float, detail=lambda: ""):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}\n{detail()}")


def recovered(worker: WorkerProcess) -> set[str]:
    """The owners that ``worker`` found gone at start (from its "recovery: {...}" log line)."""
    import ast

    line = next(ln for ln in worker.tail(20000).splitlines() if "(recovery: {" in ln)
    return set(ast.literal_eval(line.split("(recovery: ", 1)[1].rstrip(")"))["gone"])


def state_of(sessions, sid: str):
    from liberopro_platform.models import Submission

    with sessions() as s:
        sub = s.get(Submission, sid)
        _ = (sub.events, sub.shards)  # loaded for the caller
        return sub


# ---------------------------------------------------------------- tests
def test_tasks_go_to_their_queue_and_the_broker_view_reads_them(enqueue, settings, redis_server):
    """Sandbox tasks go to <prefix>.shards, aggregation to <prefix>.control; the sweep's view of
    the broker finds waiting messages, delivered-unacknowledged ones (with their hand-over time
    or countdown end) and none once Redis restarted empty; a stopped Redis gives no view quickly."""
    from liberopro_platform.models import utcnow

    r = redis_server.client()
    r.flushdb()
    enqueue.validate("sub-a")
    enqueue.run_shard(7)
    enqueue.run_shard(8, countdown=120)
    enqueue.aggregate("sub-a")
    assert r.llen(settings.shard_queue) == 3 and r.llen(settings.control_queue) == 1
    view = enqueue.pending()
    assert view.waiting == {("validate", "sub-a"), ("run_shard", "7"), ("run_shard", "8"), ("aggregate", "sub-a")}
    assert view.delivered == {}
    # A consumer takes two messages without acknowledging them, as a worker does (acks_late).
    with enqueue.app.connection_for_read() as conn:
        ch = conn.channel()
        taken = [ch.basic_get(settings.shard_queue, no_ack=False) for _ in range(3)]
        assert all(m is not None for m in taken)
        view = enqueue.pending()
        ch.close()  # kombu's Redis channel puts unacknowledged messages back on close
    t = utcnow()
    assert view.waiting == {("aggregate", "sub-a")}
    assert set(view.delivered) == {("validate", "sub-a"), ("run_shard", "7"), ("run_shard", "8")}
    assert abs((view.delivered[("run_shard", "7")] - t).total_seconds()) < 10
    assert 100 < (view.delivered[("run_shard", "8")] - t).total_seconds() <= 121  # the countdown's end counts
    redis_server.restart()
    assert enqueue.pending() == type(view)()
    redis_server.kill()
    t0 = time.monotonic()
    assert enqueue.pending() is None
    assert time.monotonic() - t0 < 15
    redis_server.start()


def test_a_shard_message_lost_in_a_redis_restart_is_resent(
    env, settings, sessions, enqueue, redis_server, beat, workers
):
    """The only worker is busy (a validation that times out) while two shards wait in Redis;
    Redis restarts without persistence and loses them; the beat sweep finds them missing and
    re-sends them, and the submission is published with no admin action."""
    r = redis_server.client()
    r.flushdb()
    worker = workers("q-solo@test")
    busy = queued_submission(sessions, "echo busy; sleep 60")  # never serves: fails validation after 6 s
    enqueue.validate(busy)
    wait_for(
        "the worker validates the busy submission",
        lambda: state_of(sessions, busy).state == "validating",
        30,
        worker.tail,
    )
    sid, shard_ids, _ = running_submission(sessions)
    for i in shard_ids:
        enqueue.run_shard(i)
    assert r.llen(settings.shard_queue) == 2
    redis_server.restart()
    assert redis_server.client().llen(settings.shard_queue) == 0  # the messages are gone
    t0 = time.monotonic()
    sub = wait_for(
        "the submission is published",
        lambda: (s := state_of(sessions, sid)).state == "published" and s,
        90,
        lambda: worker.tail() + beat.log_path.read_text()[-3000:],
    )
    print(f"\nlost shards re-sent and published {time.monotonic() - t0:.1f} s after the Redis restart")
    events = [e.message for e in sub.events]
    assert sum("its task was not in the broker" in m for m in events) >= 1, events
    assert sub.requeues == 0 and [sh.attempts for sh in sub.shards] == [1, 1]
    busy_sub = state_of(sessions, busy)  # the busy validation ended on its own
    assert busy_sub.state == "failed" and "/health" in busy_sub.failure, [e.message for e in busy_sub.events]
    assert worker.proc.poll() is None


def test_with_the_only_worker_dead_status_says_so_and_a_new_worker_takes_over(
    env, settings, sessions, enqueue, redis_server, beat, workers
):
    """The only worker is SIGKILLed; the shards wait. `status` says that no worker is alive and
    names the last one; the beat sweep stored the same reason (with no worker at all: beat
    sweeps in its own process). A worker started under a new name runs the shards, and
    aggregation runs on a control worker (the new worker serves only the shards queue)."""
    from fastapi.testclient import TestClient
    from liberopro_platform.api.app import create_app
    from liberopro_platform.models import WorkerHeartbeat, utcnow
    from liberopro_platform.submitter_cli import format_status

    redis_server.client().flushdb()
    dead = workers("q-first@test")
    dead.kill()
    sid, shard_ids, token = running_submission(sessions)
    for i in shard_ids:
        enqueue.run_shard(i)
    with TestClient(create_app(settings, enqueue)) as api:
        api.headers["Authorization"] = f"Bearer {token}"

        def waiting_reason():
            st = api.get(f"/submissions/{sid}").json()
            return st if "no worker that runs sandbox work" in (st["stuck_reason"] or "") else None

        st = wait_for("status explains the wait", waiting_reason, 30)
        assert "q-first@test" in st["stuck_reason"] and "nothing is lost" in st["stuck_reason"]
        assert st["state"] == "running" and st["progress"]["shards_done"] == 0
        assert any(line.startswith("  NOT MOVING: no worker that runs sandbox work") for line in format_status(st))
        # The timer sweep ran meanwhile with no worker alive, and stored the reason.
        sub = wait_for(
            "the sweep stored the reason",
            lambda: (s := state_of(sessions, sid)).stuck_reason and "q-first@test" in s.stuck_reason and s,
            15,
        )
        assert any(e.message.startswith("stuck: no worker that runs sandbox work") for e in sub.events)
        with sessions() as s:
            beat_row = next(r for r in s.query(WorkerHeartbeat) if r.roles == "beat")
        assert (utcnow() - beat_row.beat_at).total_seconds() < 5 and beat_row.info["last_sweep_at"]

        control = workers("q-control@test", queues="control", wait=False)
        fresh = workers("q-second@test", queues="shards", wait=False)
        control.wait_ready()
        fresh.wait_ready()
        assert "q-first@test" in recovered(fresh), fresh.tail()
        sub = wait_for(
            "published",
            lambda: (s := state_of(sessions, sid)).state == "published" and s,
            60,
            lambda: fresh.tail() + control.tail(),
        )
        ran = "Task liberopro.aggregate["
        assert ran in control.tail(20000) and ran not in fresh.tail(20000)
        st = api.get(f"/submissions/{sid}").json()
        assert st["state"] == "published" and st["stuck_reason"] is None, st
    with sessions() as s:
        assert s.get(WorkerHeartbeat, "q-first@test") is None  # cleaned up by the new worker


def test_two_workers_split_one_submissions_shards_and_run_each_episode_once(
    env, sessions, enqueue, redis_server, workers, manifest_path
):
    """Two workers under different names on one broker and one database (as on two nodes,
    docs/platform.md "Several nodes") split one submission's four shards; each shard runs once
    (one attempt, one worker), every episode is stored once, and both workers ran shards. Real
    episodes: the local backend runs the zero example policy and the evaluator in each worker."""
    import sys

    from liberopro_platform.db import transaction
    from liberopro_platform.models import Episode, Submission

    redis_server.client().flushdb()
    run = {
        "LIBEROPRO_MANIFEST_PATH": str(manifest_path),  # 2 instances
        "LIBEROPRO_EPISODES_PER_INSTANCE": "2",
        "LIBEROPRO_EPISODES_PER_SHARD": "1",  # 4 shards of one episode
        "LIBEROPRO_MAX_STEPS": "3",
        "LIBEROPRO_REQUEST_TIMEOUT_S": "20",
        "LIBEROPRO_VALIDATION_HEALTH_TIMEOUT_S": "60",
        "LIBEROPRO_HEARTBEAT_STALE_S": "120",  # real episodes: a busy worker is not taken for gone
    }
    tag = secrets.token_hex(3)
    nodes = [workers(f"node-{n}-{tag}@test", extra_env=run) for n in ("a", "b")]
    team_id, user_id, _ = make_team_user(sessions)
    with transaction(sessions) as s:
        sub = Submission(
            team_id=team_id,
            user_id=user_id,
            source="command",
            policy_command=f"{sys.executable} -m submission_spec.examples zero",
        )
        s.add(sub)
        s.flush()
        sid = sub.id
    enqueue.validate(sid)
    sub = wait_for(
        "published",
        lambda: (s := state_of(sessions, sid)).state in ("published", "failed") and s,
        300,
        lambda: "".join(w.tail() for w in nodes),
    )
    assert sub.state == "published", (sub.failure, [e.message for e in sub.events])
    assert len(sub.shards) == 4 and all(sh.state == "done" and sh.attempts == 1 for sh in sub.shards)
    by_worker = {w.name: [sh.index for sh in sub.shards if sh.worker == w.name] for w in nodes}
    assert all(by_worker.values()) and sum(map(len, by_worker.values())) == 4, by_worker
    with sessions() as s:
        stored = [
            (e.instance_id, e.episode_index, e.record["steps"]) for e in s.query(Episode).filter_by(submission_id=sid)
        ]
    assert len(stored) == 4 and len({k[:2] for k in stored}) == 4 and {k[2] for k in stored} == {3}


@pytest.mark.docker
def test_a_worker_under_a_new_name_removes_sandboxes_of_gone_owners(
    env, sessions, docker_client, platform_images, redis_server, workers
):
    """Sandbox resources labelled with a worker whose heartbeat row is stale, or that has no
    row, are removed by a worker starting under a new name, and the shard the stale owner held
    is requeued and completed; the resources of a live owner stay, and so do those of another
    platform's deployment on the same engine (another stack's workers have no row here)."""
    from liberopro_platform.db import deployment_id, transaction
    from liberopro_platform.heartbeat import HeartbeatWriter
    from liberopro_platform.models import Shard, WorkerHeartbeat, utcnow

    redis_server.client().flushdb()
    tag = secrets.token_hex(3)
    ghost, norow, alive, foreign = (f"{n}-{tag}@test" for n in ("ghost", "norow", "alive", "foreign"))
    created = []
    ours = deployment_id(sessions)
    for owner in (ghost, norow, alive, foreign):
        # `foreign` is gone too, but belongs to another platform on the same engine: never touched
        labels = {
            "org.liberopro.sandbox": "1",
            "org.liberopro.worker": owner,
            "org.liberopro.submission": tag,
            "org.liberopro.role": "shard",
            "org.liberopro.deployment": "other" if owner == foreign else ours,
        }
        name = f"lp-{tag}-{owner.split('-')[0]}"
        net = docker_client.networks.create(name, driver="bridge", internal=True, labels=labels)
        vol = docker_client.volumes.create(name=f"{name}-shard", labels=labels)
        cont = docker_client.containers.create(
            platform_images[EXAMPLE_IMAGE], name=f"{name}-policy", labels=labels, network=net.name
        )
        created.append((owner, [cont.name, vol.name, net.name]))
    sid, (shard_id, other_id), _ = running_submission(sessions)
    stale = utcnow() - dt.timedelta(minutes=5)
    with transaction(sessions) as s:
        s.add(WorkerHeartbeat(name=ghost, roles="shards,control", beat_at=stale))
        sh = s.get(Shard, shard_id)
        sh.state, sh.worker, sh.heartbeat_at, sh.attempts = "running", ghost, stale, 1
        s.get(Shard, other_id).state = "done"
    live = HeartbeatWriter(sessions, alive, ["shards", "control"], 1.0).start()
    try:
        w = workers(
            f"fresh-{tag}@test", extra_env={"LIBEROPRO_BACKEND": "docker", "LIBEROPRO_SANDBOX_FIREWALL": "auto"}
        )
        left = set(sandbox_leftovers(docker_client))
        for owner, names in created:
            assert (set(names) & left == set()) if owner not in (alive, foreign) else set(names) <= left, (
                owner,
                left,
                w.tail(),
            )
        sub = wait_for("published", lambda: (s := state_of(sessions, sid)).state == "published" and s, 60, w.tail)
        # requeued by the new worker's start, or by the beat sweep of this module if it came first
        assert any(
            ghost in e.message and ("is gone" in e.message or "stopped reporting" in e.message) for e in sub.events
        ), [e.message for e in sub.events]
        gone = recovered(w)
        assert {ghost, norow} <= gone and alive not in gone and foreign not in gone
    finally:
        live.stop()
        from docker.errors import NotFound

        for _, (cont, vol, net) in created:
            for collection, name, kwargs in (
                (docker_client.containers, cont, {"force": True}),
                (docker_client.volumes, vol, {"force": True}),
                (docker_client.networks, net, {}),
            ):
                try:
                    collection.get(name).remove(**kwargs)
                except NotFound:  # removed by the worker (the expected case but for the live owner's)
                    pass
