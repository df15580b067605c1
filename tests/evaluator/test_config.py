"""``EvalConfig`` (liberopro.config): the evaluation's arguments, checked before anything runs,
with the messages the command line prints; no simulator is loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest
from liberopro.config import EvalConfig, config_error
from pydantic import ValidationError

URL = "http://127.0.0.1:9"


def refusal(**fields: object) -> str:
    with pytest.raises(ValidationError) as info:
        EvalConfig(**fields)  # type: ignore[arg-type]
    return config_error(info.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, 'give exactly one of --policy URL or --policy-cmd "CMD" (or --oracle'),
        ({"policy": URL, "policy_cmd": "x"}, 'give exactly one of --policy URL or --policy-cmd "CMD" (or --oracle'),
        ({"oracle": True, "policy": URL}, "the oracle runs in process: give neither --policy nor --policy-cmd"),
        ({"oracle": True, "policy_cmd": "x"}, "the oracle runs in process: give neither --policy nor --policy-cmd"),
        ({"policy": "127.0.0.1:9"}, "--policy '127.0.0.1:9' is not a URL: give it with its scheme"),
        ({"policy": URL, "encoding": "xml"}, "--encoding must be msgpack or json, not 'xml'"),
        ({"policy": URL, "protocol": "grpc"}, "--protocol must be one of liberopro, openpi, openvla, not 'grpc'"),
        ({"policy": URL, "protocol_options": ["chunk_length"]}, "protocol option 'chunk_length' is not KEY=VALUE"),
        ({"policy": URL, "protocol_options": ["a=1", "a=2"]}, "protocol option 'a' given twice"),
        ({"policy": URL, "episodes": 0}, "--episodes must be at least 1"),
        (
            {"policy": URL, "workers": 0},
            "--workers must be at least 1 (leave it out to choose by CPUs, policy and memory)",
        ),
        ({"policy": URL, "replan_steps": 0}, "--replan-steps must be at least 1"),
        ({"policy": URL, "max_steps": 0}, "--max-steps must be at least 1 (leave it out to run the suite's horizon)"),
        (
            {"policy": URL, "manifest": "m.jsonl", "shifts": "S01"},
            "--manifest fixes the instances: do not combine it with --tasks, --split or --shifts",
        ),
        (
            {"policy": URL, "observations": "live,blurred"},
            "--observations takes live and/or frozen, not 'live,blurred'",
        ),
        ({"policy": URL, "recovery": " , "}, "--recovery takes none, hold, retry and/or restore, not ' , '"),
        ({"policy": URL, "request_timeout": -1}, "--request-timeout: Input should be greater than 0"),
        ({"policy": URL, "render_size": 7}, "--render-size: Input should be greater than or equal to 32"),
    ],
)
def test_each_refused_argument_gets_the_command_lines_message(fields, message):
    assert refusal(**fields).startswith(message)


def test_the_checks_run_in_the_command_lines_order():
    # both the policy and --max-steps are wrong: the policy is named first, as before
    assert refusal(max_steps=0).startswith("give exactly one of")
    assert refusal(policy=URL, episodes=0, max_steps=0) == "--episodes must be at least 1"


def test_a_config_has_the_command_lines_defaults_and_parsed_lists():
    c = EvalConfig(policy_cmd="serve", protocol_options=["chunk_length=10"], observations="live, frozen")
    assert (c.shifts, c.seed, c.encoding, c.protocol, c.request_timeout, c.episode_budget, c.startup_timeout) == (
        "nominal",
        0,
        "msgpack",
        "liberopro",
        30.0,
        600.0,
        120.0,
    )
    assert c.check_static and c.recovery_protocols == ["none"] and c.observation_modes == ["live", "frozen"]
    assert c.protocol_option_values() == {"chunk_length": "10"}


def test_replace_checks_the_changed_fields_again():
    c = EvalConfig(policy=URL)
    assert c.replace(replan_steps=5).replan_steps == 5 and c.replan_steps is None
    with pytest.raises(ValidationError):
        c.replace(replan_steps=0)


def test_the_config_module_loads_no_simulator():
    code = (
        "import sys\nfrom liberopro.config import EvalConfig\nEvalConfig(policy='http://a', protocol_options=['a=1'])\n"
        "print(sorted(m for m in ('mujoco', 'robosuite', 'libero', 'cv2') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
