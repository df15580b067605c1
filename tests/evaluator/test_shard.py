"""The shard runner the platform runs in the evaluator container (``python -m liberopro.cli.shard``)
and the one way a run opens its policy (:func:`liberopro.episode.policy_connection.open_policy`, shared by
``liberopro evaluate`` and the shard runner).

The fast tests need no simulator: usage, exit codes and the event lines of a shard whose policy
never answers or whose instances are refused, the validation check's event, and open_policy with
a URL and with the example policy as a command. One ``sim`` test runs a real one-episode shard
in-process with a policy command, as the platform's local backend does.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from liberopro.cli.shard import main
from liberopro.episode.policy_connection import open_policy
from liberopro.episode.policy_process import free_port
from liberopro.schema.results import DoneEvent, EpisodeEvent, ErrorEvent, HelloEvent, MetadataEvent
from liberopro.schema.shard import MARK, CheckSpec, ShardSpec, event_line, parse_event

from submission_spec import PolicyError

EXAMPLE = f"{sys.executable} -m submission_spec.examples zero"


def nominal_instance():
    """libero_goal task 0 with no shift (built without the simulator)."""
    from liberopro.instances.build import make_instance
    from liberopro.sim.tasks import TaskRef

    inst = make_instance(TaskRef("libero_goal", 0), [], seed=7)
    assert not isinstance(inst, str), inst
    return inst


def shard_runner(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "liberopro.cli.shard", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def events(stdout: str) -> list:
    """The events of the marked lines; every stdout line must be one."""
    lines = stdout.splitlines()
    assert all(line.startswith(MARK) for line in lines), stdout
    parsed = [parse_event(line) for line in lines]
    assert None not in parsed, stdout
    return parsed


def test_an_event_line_parses_back_and_other_lines_are_not_events():
    event = DoneEvent(episodes=3)
    assert parse_event(event_line(event)) == event
    assert parse_event("done 3") is None and parse_event(MARK + '{"type": "nope"}') is None


def test_the_module_runs_and_bad_arguments_print_the_usage_and_exit_2():
    proc = shard_runner("run", "http://127.0.0.1:9")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Usage: python -m liberopro.cli.shard run [OPTIONS] {URL} {SHARD_JSON}" in proc.stderr
    assert "Missing argument 'SHARD_JSON'" in proc.stderr


def run_main(capsys, *args: str) -> tuple[int, list]:
    """``python -m liberopro.cli.shard ARGS`` in this process (the simulator's imports are paid once
    per test process): its exit code and its stdout events."""
    code = main(list(args))
    return code, events(capsys.readouterr().out)


def test_a_shard_whose_policy_never_answers_says_hello_then_a_policy_error_and_exits_3(tmp_path, capsys):
    spec = ShardSpec(
        submission_id="s",
        shard_index=0,
        instances=[nominal_instance()],
        episodes=[(nominal_instance().instance_id, 0)],
        startup_timeout_s=1.0,
    )
    path = tmp_path / "shard.json"
    path.write_text(spec.model_dump_json())
    code, (hello, error) = run_main(capsys, "run", f"http://127.0.0.1:{free_port()}", str(path))
    assert code == 3
    assert isinstance(hello, HelloEvent) and hello.stack["mujoco"]
    assert isinstance(error, ErrorEvent) and error.kind == "policy" and error.reason == "policy_connect_error"
    assert "/health did not answer 200 within 1 s" in error.message


def test_a_shard_with_an_episode_of_no_instance_is_refused_before_the_policy_is_contacted(tmp_path, capsys):
    inst = nominal_instance()
    spec = ShardSpec(submission_id="s", shard_index=4, instances=[inst], episodes=[("nowhere", 0)])
    path = tmp_path / "shard.json"
    path.write_text(spec.model_dump_json())
    # Nothing listens at this URL: a contacted policy would end with exit 3, after 120 s.
    code, (hello, error) = run_main(capsys, "run", f"http://127.0.0.1:{free_port()}", str(path))
    assert code == 4
    assert isinstance(hello, HelloEvent)
    assert isinstance(error, ErrorEvent) and error.kind == "internal"
    assert error.message == "shard 4: episode 0 of unknown instance nowhere"


def test_the_check_of_a_policy_that_never_answers_is_one_failed_conformance_event(capsys):
    limits = CheckSpec(health_timeout_s=1.0, request_timeout_s=1.0)
    code, (event,) = run_main(capsys, "check", f"http://127.0.0.1:{free_port()}", limits.model_dump_json())
    assert code == 0
    assert event.type == "conformance" and event.report["ok"] is False
    assert event.report["checks"][0]["name"] == "health" and not event.report["checks"][0]["ok"]


# ---------------------------------------------------------------- open_policy
def test_open_policy_starts_a_command_reads_its_metadata_and_stops_it_and_reaches_a_url(tmp_path):
    log = tmp_path / "policy.log"
    with open_policy(cmd=EXAMPLE, log_path=log, startup_timeout=60) as served:
        assert served.metadata.policy_name == "example-zero"
        assert served.client.health(timeout=2.0) and served.url.startswith("http://127.0.0.1:")
        assert served.running() and served.exit_code() is None and served.restarts == 0
        (pid,) = served.pids
        assert psutil.pid_exists(pid)
        with open_policy(served.url, protocol="liberopro", client_options={"encoding": "json"}) as policy:
            assert policy.metadata == served.metadata and policy.process is None
            assert policy.running() and policy.exit_code() is None and policy.pids == []
        assert served.running(), "closing the URL connection touches no process"
    assert not served.running()
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(pid).status()  # stopped and reaped


def test_open_policy_names_a_command_that_exits_with_its_output(tmp_path):
    with pytest.raises(PolicyError) as err, open_policy(cmd="echo booting; exit 3", log_path=tmp_path / "p.log"):
        pass
    assert err.value.reason == "policy_connect_error"
    assert "policy command exited with code 3 before answering /health" in err.value.detail
    assert "booting" in err.value.detail


def test_a_second_start_appends_to_the_policy_log_after_a_separator(tmp_path):
    """A resumed run starts its command onto the earlier run's policy.log: both outputs are kept,
    a separator line between them, and the error names only the new start's output."""
    from liberopro.episode.policy_process import SEPARATOR

    log = tmp_path / "policy.log"
    for word in ("first-run", "resumed-run"):
        with pytest.raises(PolicyError) as err, open_policy(cmd=f"echo {word}; exit 3", log_path=log):
            pass
    assert "resumed-run" in err.value.detail and "first-run" not in err.value.detail
    lines = log.read_text().splitlines()
    assert lines[0] == "first-run" and lines[-1] == "resumed-run"
    (sep,) = [line for line in lines if line.startswith(SEPARATOR.split("{")[0])]
    assert lines.index(sep) == len(lines) - 2 and re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", sep)


def test_open_policy_waits_for_a_url_no_longer_than_the_startup_timeout():
    with pytest.raises(PolicyError) as err, open_policy(f"http://127.0.0.1:{free_port()}", startup_timeout=1.0):
        pass
    assert err.value.reason == "policy_connect_error" and "/health did not answer 200 within 1 s" in err.value.detail


def test_open_policy_refuses_bad_arguments_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    with pytest.raises(ValueError, match="exactly one"), open_policy():
        pass
    with pytest.raises(ValueError, match="exactly one"), open_policy("http://127.0.0.1:9", "true"):
        pass
    with pytest.raises(ValueError, match="log path"), open_policy(cmd=f"touch {marker}"):
        pass
    with (
        pytest.raises(ValueError),
        open_policy(cmd=f"touch {marker}", log_path=tmp_path / "p.log", client_options={"no_such_option": 1}),
    ):
        pass
    assert not marker.exists()


# ---------------------------------------------------------------- streams
def test_streams_are_capped_by_the_policy_and_the_episodes():
    from liberopro.runs.shard import shard_streams

    from submission_spec import PolicyMetadata

    spec10 = PolicyMetadata(policy_name="p")
    spec11 = PolicyMetadata(policy_name="p", spec_version="1.1", max_concurrent_episodes=16)
    assert shard_streams(4, spec11, "liberopro", 20)[0] == 4
    assert shard_streams(4, spec11, "liberopro", 3)[0] == 3
    assert shard_streams(4, spec10, "liberopro", 20)[0] == 1  # spec 1.0: one episode at a time
    assert shard_streams(4, spec11, "openpi", 20)[0] == 1  # no episode on its wire: serialised
    n, why = shard_streams(8, spec11, "liberopro", 2)
    assert n == 2 and "16 at once" in why


def test_episodes_are_dealt_to_streams_in_contiguous_balanced_blocks():
    from liberopro.instances.build import plan_episodes
    from liberopro.runs.workers import assign_blocks, canonical_order

    inst = nominal_instance()
    plans = plan_episodes([inst], 7, 0)
    blocks = assign_blocks(plans, 3)
    assert blocks == [[0, 1, 2], [3, 4], [5, 6]] and blocks == assign_blocks(plans, 3)
    assert sum(blocks, []) == canonical_order(plans)
    assert assign_blocks(plans[:2], 4) == [[0], [1], [], []]
    with pytest.raises(ValueError):
        assign_blocks(plans, 0)


# ---------------------------------------------------------------- a real shard
@pytest.mark.sim  # two real LIBERO episodes of 3 steps, in one process and in two streams
def test_a_shard_runs_against_a_policy_command_in_one_stream_or_two_with_the_same_records(tmp_path):
    """What the local backend does: the runner starts the command itself (after the instances
    were checked), hands the open connection to ``on_open`` and emits hello, metadata, one episode
    per pair and done. With ``streams=2`` (the example declares 16 episodes at once) two simulator
    processes run one episode each against the same policy process: the same records."""
    from liberopro.runs.shard import run_shard

    inst = nominal_instance()
    got = {}
    for streams in (1, 2):
        spec = ShardSpec(
            submission_id="s",
            shard_index=0,
            instances=[inst],
            episodes=[(inst.instance_id, 0), (inst.instance_id, 1)],
            max_steps=3,
            render_size=64,
            streams=streams,
        )
        emitted, opened = [], []
        run_shard(
            spec,
            emitted.append,
            policy_cmd=f"echo serving; exec {EXAMPLE}",
            policy_log=tmp_path / f"policy{streams}.log",
            on_open=opened.append,
        )
        assert [type(e) for e in emitted] == [HelloEvent, MetadataEvent, EpisodeEvent, EpisodeEvent, DoneEvent]
        assert emitted[1].metadata["policy_name"] == "example-zero" and emitted[4].episodes == 2
        records = sorted((e.record for e in emitted[2:4]), key=lambda r: r.episode_index)
        assert [(r.episode_index, r.steps, r.termination_reason) for r in records] == [
            (0, 3, "horizon"),
            (1, 3, "horizon"),
        ]
        got[streams] = [r.outcome_key() for r in records]
        (policy,) = opened
        assert not policy.running(), "the policy process is stopped when the shard ends"
        assert "serving" in Path(tmp_path / f"policy{streams}.log").read_text()
    assert got[1] == got[2]
