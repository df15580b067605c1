"""The privileged oracle's nominal success: the scripted controller (:mod:`liberopro.oracle.scripted`,
tooling only, never a submission) run on the nominal task, without cameras, over init states
``0..episodes-1`` with the standard episode protocol (``docs/libero-facts.md``, "Episode
protocol": reseed with ``seed + e``, reset, init state ``e``, 10 settle steps, then the loop until
LIBERO's goal predicate holds or the horizon ends).

``liberopro oracle`` prints it; its full measurement is committed as
``data/oracle_nominal.json`` (:data:`NOMINAL_PATH`), which other tooling reads for each task's
fastest successful episode.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from liberopro.sim.tasks import TaskRef, all_task_refs, parse_task_list, task_info

#: The committed full measurement (``liberopro oracle --tasks all --episodes 10``).
NOMINAL_PATH = Path(__file__).resolve().parents[1] / "data" / "oracle_nominal.json"


@dataclass
class OracleEpisode:
    """One oracle episode.

    Attributes:
        init_state: LIBERO init state index (the episode's env seed is ``seed + init_state``).
        success: LIBERO's goal predicate held before the step limit.
        steps: policy-loop steps taken (after the 10 settle steps).
        stage: the controller's stage when the episode ended (``done`` once all stages ran;
            where a failure stopped otherwise).
        seconds: wall-clock time of the episode (s), scene construction excluded.
    """

    init_state: int
    success: bool
    steps: int
    stage: str
    seconds: float


@dataclass
class OracleTask:
    """The oracle's episodes on one task (``task`` is ``suite:index``)."""

    task: str
    max_steps: int
    episodes: list[OracleEpisode] = field(default_factory=list)

    @property
    def successes(self) -> int:
        return sum(e.success for e in self.episodes)

    @property
    def attempts(self) -> int:
        return len(self.episodes)

    @property
    def fastest_success_steps(self) -> int | None:
        ok = [e.steps for e in self.episodes if e.success]
        return min(ok) if ok else None

    @property
    def mean_success_steps(self) -> float | None:
        ok = [e.steps for e in self.episodes if e.success]
        return sum(ok) / len(ok) if ok else None

    def summary(self) -> dict:
        """The committed per-task record: successes, attempts, fastest and mean successful
        episode length (policy steps; None without a success)."""
        mean = self.mean_success_steps
        return {
            "successes": self.successes,
            "attempts": self.attempts,
            "fastest_success_steps": self.fastest_success_steps,
            "mean_success_steps": None if mean is None else round(mean, 1),
        }


def select_tasks(text: str) -> list[TaskRef]:
    """``all`` (the 40 tasks) or ``evaluate``'s ``--tasks`` syntax (``libero_goal:0,libero_10``);
    raises ``ValueError`` naming a bad item."""
    return all_task_refs() if text.strip().lower() == "all" else parse_task_list(text)


def run_task(
    ref: TaskRef,
    init_states: list[int],
    max_steps: int | None = None,
    seed: int = 0,
    on_episode: Callable[[TaskRef, OracleEpisode], None] | None = None,
) -> OracleTask:
    """Run the scripted controller on the nominal task ``ref`` from each of ``init_states``
    (camera-less scene, env seed ``seed + init state``), up to ``max_steps`` policy steps
    (default: the suite's horizon, :data:`liberopro.sim.tasks.HORIZONS`). Raises ``RuntimeError``
    if the scene cannot be built."""
    from liberopro.oracle.scripted import ScriptedController
    from liberopro.semantics import semantics_of
    from liberopro.sim.scene import LiberoScene

    info = task_info(ref)
    limit = min(info.horizon, max_steps) if max_steps else info.horizon
    sem = semantics_of(ref)
    states = info.init_states()
    scene = LiberoScene(info, cameras=())
    result = OracleTask(task=str(ref), max_steps=limit)
    try:
        for i in init_states:
            t0 = time.perf_counter()
            scene.start_episode(states[i], seed + i)
            scene.settle()
            controller = ScriptedController(scene, sem)
            success, steps = False, 0
            while steps < limit and not success:
                success = scene.step(controller())
                steps += 1
            ep = OracleEpisode(i, success, steps, controller.stage, round(time.perf_counter() - t0, 2))
            result.episodes.append(ep)
            if on_episode is not None:
                on_episode(ref, ep)
    finally:
        scene.close()
    return result


def write_results(path: Path, results: list[OracleTask], settings: dict) -> None:
    """Write the per-task summaries (``task -> OracleTask.summary()``), the episodes and the
    ``settings`` (date, code commit, options) as JSON."""
    doc = {
        "about": (
            "Nominal success of the privileged scripted controller (liberopro.oracle.scripted; tooling only, "
            "never a submission), no cameras, standard episode protocol; steps are policy-loop steps "
            "after the 10 settle steps."
        ),
        "settings": settings,
        "tasks": {r.task: r.summary() for r in results},
        "episodes": {r.task: [asdict(e) for e in r.episodes] for r in results},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def load_nominal(path: Path = NOMINAL_PATH) -> dict[str, dict]:
    """The committed per-task summaries (``"libero_goal:0" -> {successes, attempts,
    fastest_success_steps, mean_success_steps}``); ``FileNotFoundError`` if absent."""
    return json.loads(path.read_text())["tasks"]
