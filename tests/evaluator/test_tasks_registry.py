"""The committed task registry (``evaluator/liberopro/data/tasks.json``) is what LIBERO says."""

from __future__ import annotations

import pytest
from liberopro.sim.tasks import HORIZONS, all_task_refs, task_info


def test_registry_holds_the_40_tasks_in_benchmark_order_with_their_horizons():
    infos = [task_info(ref) for ref in all_task_refs()]
    assert len(infos) == 40 and [i.ref for i in infos] == all_task_refs()
    assert all(i.horizon == HORIZONS[i.ref.suite] for i in infos)
    assert all(i.bddl_file == f"{i.ref.suite}/{i.name}.bddl" for i in infos)


def test_registry_equals_what_libero_says():
    pytest.importorskip("libero.libero.benchmark", reason="LIBERO is not installed: nothing to compare with")
    from scripts.make_task_registry import OUT, registry_from_libero, render

    assert OUT.read_text() == render(registry_from_libero()), (
        "evaluator/liberopro/data/tasks.json differs from LIBERO: run scripts/make_task_registry.py"
    )
    for ref in all_task_refs()[::13]:  # the BDDL files are where the registry says
        assert open(task_info(ref).bddl_path).read().startswith("(define")
