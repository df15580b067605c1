"""What ``liberopro demo`` (README quick start, ``scripts/demo.sh``) runs: the example ``zero``
policy, served over the submission spec, and the privileged oracle
(:mod:`liberopro.oracle.policy`), in process, on the same tasks and cases through the same
episode runner and shift layers, so that the oracle's row shows what the benchmark measures (a
controller that succeeds nominally and loses success under some shifts) where the zero policy's
rows are all 0%.

The cases are chosen by measurement (``data/demo_oracle_cases.json``, :data:`MEASURED_PATH`):
the oracle through the real runner on the demo's tasks, several init states per case; a case is
in the demo when the oracle's measured success there is below its nominal success.

A light module: it loads no simulator (the plan is checked without one).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from liberopro.oracle.policy import ORACLE_NAME
from liberopro.sim.tasks import HORIZONS

#: The demo's tasks: two fast pick-and-place tasks on which the oracle succeeds on all of init
#: states 0-9 (``data/oracle_nominal.json``: libero_spatial:0 in ~79 steps, libero_spatial:5 in ~103).
DEMO_TASKS = "libero_spatial:0,libero_spatial:5"
#: Its cases: nominal and the shifts under which the oracle's measured mean success over the two
#: tasks drops (:data:`MEASURED_PATH`): S19 action latency, S20 action noise (both tasks), D18
#: grasp loss (libero_spatial:5; on :0 the oracle re-grasps every time, ~45 steps later). The same
#: for both policies, so their rows line up.
DEMO_SHIFTS = "nominal,S19,S20,D18"
#: The oracle's measurement that chose :data:`DEMO_SHIFTS` (``scripts/measure_demo_oracle.py``).
MEASURED_PATH = Path(__file__).resolve().parents[1] / "data" / "demo_oracle_cases.json"
#: Policy steps of the example policy's episodes (0.19 s a step with its two cameras on a 2-core
#: CPU; it never succeeds, so a longer horizon would only cost time): past D18's fallback step on
#: both tasks (0.5 x S(task): 37 and 50, ``data/fastest_success.json``), so that it fires.
EXAMPLE_STEPS = 60
#: The oracle's episodes per case (init states 0..N-1; ~10-30 ms a step without cameras). The
#: measurement ran 5; its failures under the demo's shifts fall on init states 0-2 of some task
#: for every case (:data:`MEASURED_PATH`), so 3 keep every drop (the demo: 324 s CPU on a 2-core machine; 447 s with 5).
ORACLE_EPISODES = 3
#: Margin over the oracle's slowest measured success on a demo case, so that a success it can
#: reach is inside the horizon (a shift costs it steps: re-grasping after D18, a slower arm).
ORACLE_MARGIN = 1.5


@dataclass(frozen=True)
class DemoRun:
    """One evaluation of the demo.

    Attributes:
        label: how its tables are titled (the oracle's says it is privileged).
        subdir: its run directory under the demo's ``--out``.
        oracle: the privileged oracle in process (True) or the example policy over the spec.
        policy_cmd: the command serving the example policy on ``$PORT`` (None for the oracle).
        episodes: episodes per instance (init states 0..N-1).
        max_steps: policy steps per episode (cap on the suite horizon).
        note: one line printed before it runs (what it is, why its horizon).
    """

    label: str
    subdir: str
    oracle: bool
    policy_cmd: str | None
    episodes: int
    max_steps: int
    note: str


def load_measured(path: Path = MEASURED_PATH) -> dict:
    """The committed measurement (``{"settings", "tasks": {task: {case: {"successes",
    "attempts", "steps"}}}}``; steps: policy steps of each episode); ``FileNotFoundError`` if
    absent."""
    return json.loads(path.read_text())


def oracle_steps(measured: dict | None = None) -> int:
    """The oracle's horizon: :data:`ORACLE_MARGIN` x its slowest successful episode on the demo's
    tasks and cases in the measurement (policy steps), rounded up to a multiple of 10, at most the
    shortest suite horizon of the demo's tasks (:data:`liberopro.sim.tasks.HORIZONS`: a longer cap
    would change nothing). ``KeyError`` if a demo task or case was not measured."""
    measured = measured if measured is not None else load_measured()
    cases = DEMO_SHIFTS.split(",")
    longest = max(
        steps
        for task in DEMO_TASKS.split(",")
        for case in cases
        for steps, ok in zip(
            measured["tasks"][task][case]["steps"], measured["tasks"][task][case]["success"], strict=True
        )
        if ok
    )
    horizon = min(HORIZONS[task.split(":")[0]] for task in DEMO_TASKS.split(","))
    return min(horizon, int(math.ceil(ORACLE_MARGIN * longest / 10) * 10))


def demo_plan(python: str = sys.executable, example_steps: int = EXAMPLE_STEPS) -> list[DemoRun]:
    """The demo's two evaluations, in order: the example ``zero`` policy (started as
    ``python -m submission_spec.examples zero``) for ``example_steps`` steps, then the oracle for
    :func:`oracle_steps`."""
    steps = oracle_steps()
    return [
        DemoRun(
            label="example policy 'zero' (served over the submission spec)",
            subdir="example-zero",
            oracle=False,
            policy_cmd=f"{python} -m submission_spec.examples zero",
            episodes=1,
            max_steps=example_steps,
            note=f"{example_steps} steps an episode: it holds still and never succeeds, so a longer "
            "horizon would only cost time (two cameras, ~0.2 s a step)",
        ),
        DemoRun(
            label=ORACLE_NAME,
            subdir="oracle",
            oracle=True,
            policy_cmd=None,
            episodes=ORACLE_EPISODES,
            max_steps=steps,
            note=f"{steps} steps an episode ({ORACLE_MARGIN}x its slowest measured success on these cases, "
            "at most the suite's horizon), "
            f"init states 0-{ORACLE_EPISODES - 1}, no cameras: the scripted controller reads the simulator's "
            "state, so it shows what the shifts do to a controller that succeeds nominally",
        ),
    ]
