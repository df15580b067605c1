"""The whole pipeline on real Redis, PostgreSQL, Celery and Docker: an example policy image to a
published result; a worker killed mid-shard; hostile images contained while the worker goes on.

Shared scene: one Celery worker (solo pool) with a 2-instance manifest (libero_goal task 0,
nominal and S12), 1 episode per instance, 2 episodes per shard (so one shard per submission;
planning over several shards is covered by test_local_backend and test_pipeline_logic), 5 policy
steps per episode. Every sandbox start costs ~15 s (evaluator import and LIBERO scene).
"""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from lp_helpers import EXAMPLE_IMAGE, RecordingCallbacks, sandbox_leftovers, wait_final
from sqlalchemy import func, select

pytestmark = pytest.mark.docker

TIMINGS: dict[str, float] = {}


def _sessions(settings):
    from liberopro_platform.db import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(settings.database_url))


def submit(http, image: str, grant=None) -> str:
    """Submit ``image`` by id; ``grant`` first records that the team uploaded it."""
    if grant is not None:
        grant(image)
    r = http.post("/submissions", json={"image": image, "note": "platform test"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def episodes_of(settings, submission_id: str) -> dict[tuple[str, int], dict]:
    from liberopro_platform.models import Episode

    with _sessions(settings)() as s:
        rows = s.scalars(select(Episode).where(Episode.submission_id == submission_id)).all()
        keys = [(r.instance_id, r.episode_index) for r in rows]
        assert len(keys) == len(set(keys)), f"duplicate episodes: {keys}"
        return {(r.instance_id, r.episode_index): r.record for r in rows}


def outcome(record: dict) -> tuple:
    from liberopro.runs.summary import EpisodeRecord

    return EpisodeRecord.model_validate(record).outcome_key()


def wait_no_leftovers(docker_client, timeout: float = 30.0) -> list[str]:
    end = time.monotonic() + timeout
    left = sandbox_leftovers(docker_client)
    while left and time.monotonic() < end:
        time.sleep(0.5)
        left = sandbox_leftovers(docker_client)
    return left


def watch_views(http, sid: str, timeout: float, worker) -> tuple[dict, list[dict]]:
    """Poll everything a submitter reads of ``sid`` every 0.25 s until it is final: (the final
    status, the views seen). A view is the status, the list's entry for it, the policy log and
    the lines `liberopro status ID --logs` prints for that status."""
    from liberopro_platform.submitter_cli import format_status

    end, views = time.monotonic() + timeout, []
    while time.monotonic() < end:
        st = http.get(f"/submissions/{sid}").json()
        listed = next(x for x in http.get("/submissions?limit=200").json() if x["id"] == sid)
        logs = http.get(f"/submissions/{sid}/logs").text
        if http.get(f"/submissions/{sid}").json() != st:
            continue  # it moved between the reads: not one view of one moment; read again
        views.append({"status": st, "listed": listed, "logs": logs, "cli": format_status(st)})
        if st["state"] in ("published", "failed", "cancelled"):
            return st, views
        time.sleep(0.25)
    raise AssertionError(f"submission {sid} not final within {timeout} s: {views[-1:]}\n{worker.tail()}")


#: Fields a submitter reads that the public validation stage fixes (the image, its name, the checks
#: against the public conformance inputs): they differ between images, never during the hidden stage.
VALIDATION_FIELDS = (
    "id",
    "image_ref",
    "image_digest",
    "policy_name",
    "spec_version",
    "validation_checks",
    "created_at",
)
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_DIGEST = re.compile(r"sha256:[0-9a-f]+")


def hidden_stage_views(views: list[dict]) -> dict[tuple, str]:
    """The views of the hidden stage (running, aggregating: after planning, before publication),
    keyed by (state, shards shown done, message), as normalised JSON: the validation stage's
    fields dropped, timestamps and image digests replaced by placeholders (their values differ
    between submissions whatever happens). Also checks, within the run, that the validation
    stage's fields and the log stay as they were and that no view changes while its key stays
    the same (nothing per episode: a timestamp moving within a shard would time the hidden
    episodes)."""
    hidden = [v for v in views if v["status"]["state"] in ("running", "aggregating")]
    assert hidden, "no view of the hidden stage was seen"
    out: dict[tuple, str] = {}
    raw_of: dict[tuple, str] = {}
    for v in hidden:
        st = v["status"]
        key = (st["state"], st["progress"]["shards_done"], st["message"])
        raw = json.dumps(v, sort_keys=True)
        assert raw_of.setdefault(key, raw) == raw, f"the view changed within {key}:\n{raw_of[key]}\n{raw}"
        assert {k: st[k] for k in VALIDATION_FIELDS} == {k: hidden[0]["status"][k] for k in VALIDATION_FIELDS}
        assert v["logs"] == hidden[0]["logs"] and "=== validation ===" in v["logs"], "the hidden stage reached the log"
        view = {
            "status": {k: x for k, x in st.items() if k not in VALIDATION_FIELDS},
            "listed": {k: x for k, x in v["listed"].items() if k not in VALIDATION_FIELDS},
            "cli": [line for line in v["cli"] if not line.startswith(("submission ", "  image:", "  policy:"))],
        }
        out[key] = _DIGEST.sub("sha256:<id>", _TIME.sub("<time>", json.dumps(view, sort_keys=True)))
    return out


def assert_hidden_stage_reads_the_same(views: list[dict], reference: list[dict]) -> None:
    """What a submitter could read during the hidden stage of ``views`` is what it could read of
    the ``reference`` run: every view seen in both runs under the same key is identical, and a key
    seen in one run only is a short transition that polling may miss (a shard waiting for the
    worker to take it, all shards done before aggregation starts)."""
    mine, ref = hidden_stage_views(views), hidden_stage_views(reference)

    def transient(key: tuple) -> bool:
        return "waiting for a free worker" in key[2] or key[0] == "aggregating" or key[1] > 0

    for key in mine.keys() | ref.keys():
        if key in mine and key in ref:
            assert mine[key] == ref[key], f"the hidden stage reads differently under {key}:\n{mine[key]}\n{ref[key]}"
        else:
            assert transient(key), f"{key} seen in one run only: {mine.get(key) or ref.get(key)}"
    assert any(k[0] == "running" and not transient(k) for k in mine.keys() & ref.keys()), (mine.keys(), ref.keys())


@pytest.fixture(scope="module")
def reference_run(http, worker, platform_images, platform_settings, grant):
    """The example policy submitted once and run uninterrupted: (status, episodes, the views a
    submitter had of it, :func:`watch_views`)."""
    t0 = time.monotonic()
    sid = submit(http, platform_images[EXAMPLE_IMAGE], grant)
    st, views = watch_views(http, sid, 600, worker)
    TIMINGS["example submission, submit to published (s)"] = round(time.monotonic() - t0, 1)
    return st, episodes_of(platform_settings, sid), views


def test_example_policy_image_goes_through_the_whole_pipeline(
    reference_run, http, platform_images, platform_settings, manifest_path, docker_client
):
    from liberopro_platform.models import Result, Shard

    st, episodes, _ = reference_run
    assert st["state"] == "published", st
    assert st["progress"] == {"episodes_done": 2, "episodes_total": 2, "shards_done": 1, "shards_total": 1}
    assert st["queue_position"] is None and st["failure"] is None
    assert [c["ok"] for c in st["validation_checks"]] and all(c["ok"] for c in st["validation_checks"])
    assert set(st["termination_reasons"]) <= {"horizon", "success"}, st["termination_reasons"]
    assert len(episodes) == 2
    # The published row keeps everything the leaderboard needs, and it is traceable.
    with _sessions(platform_settings)() as s:
        result = s.scalar(select(Result).where(Result.submission_id == st["id"]))
        shards = s.scalars(select(Shard).where(Shard.submission_id == st["id"])).all()
        assert result is not None and not result.hidden
        assert result.image_digest == platform_images[EXAMPLE_IMAGE]
        assert result.policy_name == "example-zero"
        assert result.spec_version.startswith("1")
        assert result.evaluator_version and result.stack["mujoco"] == "2.3.7"
        assert result.team_name == st["team"]
        summary = result.summary
        assert summary["submission_id"] == st["id"] and summary["stack"]["mujoco"] == "2.3.7"
        assert {c["case"] for c in summary["cases"]} == {"nominal", "S12"}
        assert summary["episodes"]["total"] == 2
        assert all(sh.state == "done" and sh.attempts == 1 for sh in shards)
    from liberopro.schema.public import public_result

    assert st["result"] == json.loads(public_result(result).model_dump_json())  # the leaderboard's view
    # Submitter-visible logs: the policy's own output during validation only, no evaluator events,
    # instance data or output of the shard (kept for admins with the shard).
    logs = http.get(f"/submissions/{st['id']}/logs").text
    assert "=== validation ===" in logs and "=== attempt" not in logs
    assert all(sh.policy_log.startswith("=== attempt 1 ===") for sh in shards)
    assert "LIBEROPRO-EVENT" not in logs
    from liberopro.schema.manifest import read_manifest

    for inst in read_manifest(manifest_path).instances:
        assert inst.instance_id not in logs
    assert wait_no_leftovers(docker_client) == []


def test_worker_killed_mid_shard_completes_without_duplicates(
    reference_run, http, worker, platform_images, platform_settings, docker_client, grant
):
    """SIGKILL the worker while a shard runs; a restarted worker sweeps the orphaned sandbox,
    reruns only the missing episodes, and the result equals the uninterrupted run."""
    from liberopro_platform.models import Episode

    ref_status, ref_episodes, _ = reference_run
    sid = submit(http, platform_images[EXAMPLE_IMAGE], grant)
    sessions = _sessions(platform_settings)
    end = time.monotonic() + 300
    stored = 0
    while time.monotonic() < end:
        with sessions() as s:
            stored = s.scalar(select(func.count()).select_from(Episode).where(Episode.submission_id == sid))
        if stored >= 1:
            break
        time.sleep(0.2)
    assert stored == 1, f"expected to kill the worker after the shard's first episode: {stored}\n{worker.tail()}"
    worker.kill()
    orphans = sandbox_leftovers(docker_client)
    assert any(sid in name for name in orphans), f"expected the killed worker's sandbox to remain: {orphans}"
    t0 = time.monotonic()
    worker.start()
    assert not any(sid in name for name in sandbox_leftovers(docker_client) if name in orphans), (
        "the restarted worker did not sweep its predecessor's sandbox"
    )
    st = wait_final(http, sid, 600, worker)
    TIMINGS["recovery after SIGKILL, restart to published (s)"] = round(time.monotonic() - t0, 1)
    assert st["state"] == "published", st
    episodes = episodes_of(platform_settings, sid)  # asserts no duplicates
    assert set(episodes) == set(ref_episodes)
    assert {k: outcome(v) for k, v in episodes.items()} == {k: outcome(v) for k, v in ref_episodes.items()}

    def numbers(result: dict) -> dict:
        return {
            "episodes": result["meta"]["episodes"],
            "termination_reasons": result["termination_reasons"],
            "cases": [(c["case"], c["rate"]["value"], c["rate"]["episodes"]) for c in result["cases"]],
        }

    assert numbers(st["result"]) == numbers(ref_status["result"])
    from liberopro_platform.models import SubmissionEvent

    with sessions() as s:  # the requeue is told to the admins (which shard is where: hidden stage)
        events = s.scalars(select(SubmissionEvent.message).where(SubmissionEvent.submission_id == sid)).all()
    assert any(m.startswith("[admin]") and "restarted; requeued" in m for m in events), events
    assert wait_no_leftovers(docker_client) == []


# ---------------------------------------------------------------- hostile images
def run_hostile(http, worker, hostile_images, behavior: str, grant) -> tuple[dict, str, str]:
    """Submit the hostile image until final: (status, the policy's output the submitter reads (the
    validation stage's), its output on the shards (admins only))."""
    st, logs, shard_logs, _ = run_hostile_watched(http, worker, hostile_images, behavior, grant)
    return st, logs, shard_logs


def run_hostile_watched(http, worker, hostile_images, behavior: str, grant) -> tuple[dict, str, str, list[dict]]:
    """:func:`run_hostile`, plus every view the submitter had of it (:func:`watch_views`)."""
    from liberopro_platform.db import make_engine, make_sessionmaker
    from liberopro_platform.models import Shard

    t0 = time.monotonic()
    sid = submit(http, hostile_images[behavior], grant)
    st, views = watch_views(http, sid, 600, worker)
    TIMINGS[f"hostile {behavior}, submit to final (s)"] = round(time.monotonic() - t0, 1)
    assert worker.proc.poll() is None, "the worker died"
    with make_sessionmaker(make_engine(worker.env["LIBEROPRO_DATABASE_URL"]))() as s:
        shard_logs = "".join(sh.policy_log for sh in s.scalars(select(Shard).where(Shard.submission_id == sid)))
    return st, http.get(f"/submissions/{sid}/logs").text, shard_logs, views


def test_hostile_egress_is_refused_everywhere(http, worker, hostile_images, canary, egress_ports, docker_client, grant):
    """The image probes the internet, the API and a canary on 0.0.0.0, Redis and PostgreSQL
    (through the sandbox gateway and by compose service name) before serving; every attempt is
    refused, and it still passes validation (then it is cancelled: the shard sandbox is the
    same, see test_policy_container_restrictions)."""
    t0 = time.monotonic()
    sid = submit(http, hostile_images["egress"], grant)
    end = time.monotonic() + 300
    st = {}
    while time.monotonic() < end:
        st = http.get(f"/submissions/{sid}").json()
        if st["state"] not in ("queued", "validating"):
            break
        time.sleep(0.5)
    assert st["state"] == "running", st  # contained, and the pipeline went on
    http.post(f"/submissions/{sid}/cancel")
    TIMINGS["hostile egress, submit to validated (s)"] = round(time.monotonic() - t0, 1)
    logs = http.get(f"/submissions/{sid}/logs").text
    attempts = [ln for ln in logs.splitlines() if ln.startswith("EGRESS ") and ":" in ln and "gateway" not in ln]
    names = {ln.split()[1] for ln in attempts}
    assert {"internet", "api", "canary", "redis", "postgres", "docker0"} <= names, logs
    assert attempts and all("blocked" in ln for ln in attempts), "\n".join(attempts)
    assert "CONNECTED" not in logs and "EGRESS done" in logs
    assert canary.connections == [], canary.connections
    # Positive control: the canary and the API do accept connections from the host itself.
    with socket.create_connection(("127.0.0.1", egress_ports["canary"]), timeout=2):
        pass
    end = time.monotonic() + 10
    while not canary.connections and time.monotonic() < end:
        time.sleep(0.1)
    assert canary.connections == ["127.0.0.1"]
    assert http.get("/health").status_code == 200
    assert wait_no_leftovers(docker_client) == []


def test_hostile_fork_bomb_hits_the_pids_limit(http, worker, hostile_images, platform_settings, docker_client, grant):
    st, logs, _ = run_hostile(http, worker, hostile_images, "forkbomb", grant)
    assert st["state"] == "failed" and st["failure_stage"] == "validation", st
    assert "/health" in st["failure"] and st["fix"]
    m = re.search(r"FORKBOMB fork failed after (\d+) forks: (.*)", logs)
    assert m, logs
    assert int(m.group(1)) < platform_settings.policy_pids
    assert "Resource temporarily unavailable" in m.group(2)
    assert wait_no_leftovers(docker_client) == []


def test_hostile_memory_bomb_ends_its_episodes_with_oom(http, worker, hostile_images, docker_client, grant):
    st, _, logs = run_hostile(http, worker, hostile_images, "memory", grant)
    assert st["state"] == "published", st
    assert st["termination_reasons"] == {"policy_out_of_memory": 2}, st["termination_reasons"]
    assert "MEMORY allocating until killed" in logs
    assert wait_no_leftovers(docker_client) == []


def test_hostile_never_healthy_fails_validation_with_a_message(http, worker, hostile_images, docker_client, grant):
    st, logs, _ = run_hostile(http, worker, hostile_images, "never_healthy", grant)
    assert st["state"] == "failed" and st["failure_stage"] == "validation", st
    assert "/health" in st["failure"], st["failure"]
    assert "GET /health" in st["fix"] and "docker run" in st["fix"]
    assert "--policy-cmd" not in json.dumps(st), "a container submitter was told to use the evaluator's --policy-cmd"
    assert [c["name"] for c in st["validation_checks"] if not c["ok"]] == ["health"]
    assert "NEVER_HEALTHY" in logs
    assert wait_no_leftovers(docker_client) == []


def test_cancel_during_validation_stops_the_sandbox(http, worker, hostile_images, docker_client, grant):
    sid = submit(http, hostile_images["never_healthy"], grant)
    end = time.monotonic() + 120
    while time.monotonic() < end and not any(sid in n for n in sandbox_leftovers(docker_client)):
        time.sleep(0.2)
    assert http.get(f"/submissions/{sid}").json()["state"] == "validating"
    t0 = time.monotonic()
    assert http.post(f"/submissions/{sid}/cancel").json()["state"] == "cancelled"
    assert wait_no_leftovers(docker_client, 30) == []
    TIMINGS["cancel during validation, sandbox gone after (s)"] = round(time.monotonic() - t0, 1)
    assert http.get(f"/submissions/{sid}").json()["state"] == "cancelled"


def test_hostile_slow_policy_times_out(reference_run, http, worker, hostile_images, docker_client, grant):
    """Slow on the hidden episodes only (from step 2, which the public check never reaches): each
    ends with ``policy_timeout``, and until publication the submitter reads exactly what it read of
    the example policy's run (a policy varying its latency by hidden content signals nothing per
    episode; the times of shard steps remain, docs/platform.md "What remains observable")."""
    st, _, _, views = run_hostile_watched(http, worker, hostile_images, "slow", grant)
    assert st["state"] == "published", st
    assert set(st["termination_reasons"]) == {"policy_timeout"}, st["termination_reasons"]
    assert_hidden_stage_reads_the_same(views, reference_run[2])
    assert wait_no_leftovers(docker_client) == []


def test_hostile_crash_mid_episode_ends_only_that_episode(
    reference_run, http, worker, hostile_images, platform_settings, docker_client, grant
):
    """Crashes on every hidden episode (at step 2, which the public check never reaches): each
    is recorded with the cause and the next runs on the restarted container; until publication
    the submitter reads exactly what it read of the example policy's run (no termination-reason
    totals, progress in whole shards, no per-episode change), so crashing or not per hidden episode
    signals nothing; once published, the leaderboard's view, termination reasons included."""
    st, seen, logs, views = run_hostile_watched(http, worker, hostile_images, "crash", grant)
    assert st["state"] == "published", st
    assert_hidden_stage_reads_the_same(views, reference_run[2])
    # Every episode reaches step 2 and crashes there: each is recorded with the cause, and the
    # next episode runs against the restarted container.
    assert st["termination_reasons"] == {"policy_crashed": 2}, st["termination_reasons"]
    records = episodes_of(platform_settings, st["id"]).values()
    assert all("exited with code 3" in r["detail"] and r["steps"] == 2 for r in records), list(records)
    assert logs.count("CRASH exiting with code 3") >= 2
    # What it printed on the hidden stage stays with the admins (test_leaks.py reads every route).
    status_and_list = json.dumps(st) + http.get("/submissions").text
    assert "=== validation ===" in seen and "CRASH" not in seen + status_and_list, seen
    assert wait_no_leftovers(docker_client) == []


def test_policy_container_restrictions(docker_client, platform_images, platform_settings):
    """What the policy container is created with, read back from the engine; gVisor and GPUs
    are configuration (runc stands in for runsc here: no GPU or gVisor on this machine). An
    evaluator stream on a GPU (issue 12) gets its one device round-robin and the driver's EGL."""
    from liberopro_platform.sandbox.docker.containers import Sandbox
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    settings = platform_settings.model_copy(
        update={"runtime": "runc", "gpus": "all", "evaluator_gpus": ["1", "2"], "evaluator_gpus_share_policy": True}
    )
    backend = DockerBackend(settings, "restrictions@test")
    with Sandbox(backend, "restrictions", "validation") as sb:
        c = sb.create_policy(platform_images[EXAMPLE_IMAGE], restarts=2)
        host = docker_client.api.inspect_container(c.id)["HostConfig"]
        ev = docker_client.api.inspect_container(sb.create_evaluator(["check"], stream=3, streams=3).id)
        net = docker_client.api.inspect_network(sb.network.id)
        name = sb.name
    assert ev["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["2"]  # stream 3 of 2 GPUs
    assert ev["HostConfig"]["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert ev["HostConfig"]["Memory"] == 4 * 2**30 + 2 * 3 * 2**30  # evaluator_memory + 2 more streams
    assert {"MUJOCO_EGL_DEVICE_ID=0", "NVIDIA_DRIVER_CAPABILITIES=graphics,utility"} <= set(ev["Config"]["Env"])
    assert host["ReadonlyRootfs"] is True and "/tmp" in host["Tmpfs"] and host["ShmSize"] == 2**30
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Memory"] == 384 * 2**20 and host["MemorySwap"] == host["Memory"]
    assert host["PidsLimit"] == settings.policy_pids and host["NanoCpus"] == int(settings.policy_cpus * 1e9)
    assert host["Init"] is True and host["Privileged"] is False
    assert host["Runtime"] == "runc"
    assert host["DeviceRequests"][0]["Count"] == -1 and host["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 2}
    assert c.attrs["Config"]["User"] == settings.policy_user
    assert net["Internal"] is True and net["Options"]["com.docker.network.bridge.name"].startswith("lpsb")
    from liberopro_platform.sandbox import firewall

    assert firewall.rule_present("iptables"), "the host rules for lpsb+ bridges are missing"
    assert not [n for n in sandbox_leftovers(docker_client) if name in n]


def test_evaluator_cpu_quota_never_exceeds_the_engine(docker_client, platform_settings):
    """LIBEROPRO_EVALUATOR_STREAMS beyond what the engine's CPUs give at evaluator_cpus per stream:
    the engine refuses a quota above its CPUs, so the quota is capped there (was: every shard of a
    batching policy failed at create with "Range of CPUs is from 0.01 to N")."""
    from liberopro_platform.sandbox.docker.containers import Sandbox
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    ncpu = int(docker_client.info()["NCPU"])
    settings = platform_settings.model_copy(update={"evaluator_cpus": 1.0, "evaluator_streams": ncpu + 2})
    backend = DockerBackend(settings, "cpuquota@test")
    quota = {}
    for streams in (ncpu + 2, 1):
        with Sandbox(backend, "cpuquota", f"shard{streams}") as sb:
            ev = sb.create_evaluator(["run"], streams=streams)
            quota[streams] = docker_client.api.inspect_container(ev.id)["HostConfig"]["NanoCpus"]
    assert quota == {ncpu + 2: ncpu * 10**9, 1: 10**9}
    assert not [n for n in sandbox_leftovers(docker_client) if "cpuquota" in n]


_KILL_SERVER = (
    "import os\n"
    "for p in os.listdir('/proc'):\n"
    "    if p.isdigit() and int(p) > 1 and int(p) != os.getpid():\n"
    "        os.kill(int(p), 9)\n"
)


def test_a_reused_policy_container_gets_its_restarts_again(docker_client, platform_images, platform_settings):
    """The engine's on-failure count runs over a container's life; the node sandbox's container
    serves many shards, so each shard that reuses it gives it policy_restarts more. Was: with
    policy_restarts=1, a crash in the first shard left none for the second, whose first crash
    ended the container and failed every later episode of that shard."""
    import secrets

    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    settings = platform_settings.model_copy(update={"policy_restarts": 1})
    backend = DockerBackend(settings, f"restarts-{secrets.token_hex(3)}@test")
    sid = f"restarts{secrets.token_hex(4)}"
    source = PolicySource(submission_id=sid, image=platform_images[EXAMPLE_IMAGE])

    def crash_and_wait(policy, count: int) -> dict:
        policy.exec_run(["python", "-c", _KILL_SERVER])  # the server dies: exit 137 under the init
        end = time.monotonic() + 60
        while time.monotonic() < end:
            policy.reload()
            state = policy.attrs["State"]
            # Running stays true while the engine restarts it (Status "restarting"): wait for "running"
            if (policy.attrs["RestartCount"] >= count and state["Status"] == "running") or state["Status"] == "exited":
                break
            time.sleep(0.3)
        return {"restarts": policy.attrs["RestartCount"], "status": policy.attrs["State"]["Status"]}

    try:
        _, policy = backend.node_policy(source)  # shard 1
        assert crash_and_wait(policy, 1) == {"restarts": 1, "status": "running"}
        _, again = backend.node_policy(source)  # shard 2 reuses it
        assert again.id == policy.id
        again.reload()
        assert again.attrs["HostConfig"]["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 2}
        assert crash_and_wait(again, 2) == {"restarts": 2, "status": "running"}
    finally:
        backend.release_policy(sid)
    assert not [n for n in sandbox_leftovers(docker_client) if sid[:12] in n]


def test_one_policy_container_serves_two_evaluator_streams_and_the_next_shard(
    docker_client, platform_images, platform_settings, hostile_images
):
    """Issue 12: a submission's shards on a worker share one policy container; an evaluator
    container runs two simulator streams against it at once and the policy batches their /act
    calls (it waits up to 60 s for the second of a batch, so batches of 2 do not depend on
    timing). The second shard reuses the container (same id, never restarted); the release
    removes everything of the submission."""
    import secrets

    from liberopro.schema.shard import ShardSpec
    from liberopro_platform.planning import load_manifest
    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.docker.labels import LABEL_SUBMISSION
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    settings = platform_settings.model_copy(update={"evaluator_streams": 2})
    backend = DockerBackend(settings, f"streams-{secrets.token_hex(3)}@test")
    sid = f"streams{secrets.token_hex(4)}"
    instances = load_manifest(settings.manifest_path).instances  # libero_goal:0 nominal and S12
    source = PolicySource(submission_id=sid, image=hostile_images["batching"])

    def shard(index: int) -> tuple:
        spec = ShardSpec(
            submission_id=sid,
            shard_index=index,
            instances=instances,
            episodes=[(i.instance_id, index) for i in instances],
            seed=settings.episode_seed,
            max_steps=5,
            request_timeout_s=90,  # above the policy's 60 s batch wait
            episode_budget_s=300,
            startup_timeout_s=60,
            restart_wait_s=20,
            streams=2,
        )
        got = RecordingCallbacks()
        outcome = backend.run_shard(source, spec, got, time_limit_s=600)
        policies = docker_client.containers.list(
            all=True, filters={"label": [f"{LABEL_SUBMISSION}={sid}", "org.liberopro.role=policy"]}
        )
        return outcome, got.records, policies

    try:
        first, records, policies = shard(0)
        assert first.status == "completed", first
        assert sorted((r.instance_id, r.episode_index) for r in records) == sorted(
            (i.instance_id, 0) for i in instances
        )
        assert all(r.valid and r.termination_reason == "horizon" for r in records), records
        sizes = [int(m) for m in re.findall(r"BATCH size=(\d+) episodes=2", first.policy_log)]
        assert sizes and max(sizes) == 2, first.policy_log[-2000:]
        assert len(policies) == 1 and policies[0].status == "running"
        policy_id, started = policies[0].id, policies[0].attrs["State"]["StartedAt"]

        second, records2, policies2 = shard(1)
        assert second.status == "completed", second
        assert len(records2) == 2 and "BATCH size=2" in second.policy_log
        assert [p.id for p in policies2] == [policy_id]
        policies2[0].reload()
        assert policies2[0].attrs["State"]["StartedAt"] == started and policies2[0].attrs["RestartCount"] == 0
        assert backend.policy_submissions() == {sid}
    finally:
        backend.release_policy(sid)
    assert not [n for n in sandbox_leftovers(docker_client) if sid[:12] in n]
    assert backend.policy_submissions() == set()


def test_worker_goes_on_uploaded_archive_runs_and_cancel_removes_the_sandbox(
    api, http, team_token, worker, platform_images, docker_client, tmp_path
):
    """After the hostile images the worker goes on: `liberopro submit IMAGE` sends `docker save
    IMAGE` (a tagged archive, as `docker save` always writes); the worker loads it without its tag,
    tags it liberopro/submission/<id>, validates it and starts its shard. A cancel while the shard
    runs stops the sandbox and removes it. Submitting the same image again goes by id, without
    an upload, since the team now owns it."""
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    env = {"LIBEROPRO_API_URL": api.url, "LIBEROPRO_TOKEN": team_token, "LIBEROPRO_CONFIG": str(tmp_path / "x.toml")}
    image_id = docker_client.images.get("liberopro/example-random:latest").id
    r = CliRunner().invoke(app, ["submit", "liberopro/example-random:latest"], env=env)
    assert r.exit_code == 0, r.output
    assert "uploading liberopro/example-random:latest" in r.output, r.output
    sid = r.output.split("submitted: ")[1].split()[0]
    end = time.monotonic() + 300
    st = {}
    while time.monotonic() < end:
        st = http.get(f"/submissions/{sid}").json()
        if st["state"] == "running" and any(sid in n and "shard" in n for n in sandbox_leftovers(docker_client)):
            break
        assert st["state"] in ("queued", "validating", "running"), st
        time.sleep(0.5)
    assert st["state"] == "running", st
    assert st["image_ref"] == "upload:policy.tar"
    assert st["image_digest"] == image_id == docker_client.images.get("liberopro/example-random:latest").id
    assert f"liberopro/submission/{sid}:latest" in docker_client.images.get(image_id).tags
    assert st["policy_name"] == "example-random"
    r = CliRunner().invoke(app, ["submit", "liberopro/example-random:latest"], env=env)
    assert r.exit_code == 0 and "your team uploaded it before, so it is submitted by id (no upload" in r.output, (
        r.output
    )
    again = r.output.split("submitted: ")[1].split()[0]
    assert http.get(f"/submissions/{again}").json()["image_ref"] == image_id
    assert CliRunner().invoke(app, ["cancel", again], env=env).exit_code == 0
    r = CliRunner().invoke(app, ["cancel", sid], env=env)
    assert r.exit_code == 0 and "cancelled" in r.output, r.output
    assert wait_no_leftovers(docker_client, 30) == []
    assert http.get(f"/submissions/{sid}").json()["state"] == "cancelled"
    assert worker.proc.poll() is None
    print("\nplatform timings:", TIMINGS)
