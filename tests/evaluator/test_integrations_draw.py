"""An instance drawn for an integration (no manifest) is the first parameter draw realised at reset
on init state 0, where a run's first episode starts, or refused with the reason
(:func:`liberopro.integrations.stepper.first_valid_draw`; ``docs/integrations.md``, vla-eval)."""

from __future__ import annotations

import pytest
from liberopro.instances.build import make_instance
from liberopro.integrations.stepper import first_valid_draw
from liberopro.sim.tasks import TaskRef

pytestmark = pytest.mark.sim  # resets real LIBERO scenes (tier: sim)


def test_first_valid_draw_redraws_then_refuses():
    first = make_instance(TaskRef("libero_goal", 1), ["S01", "D19"], 0)  # S01: no free placement from init state 0
    inst = first_valid_draw("libero_goal", 1, "S01+D19", seed=0, env_seed=0)
    assert inst.instance_id != first.instance_id and [s.id for s in inst.shifts] == ["S01", "D19"]  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"S01\+D19 on libero_goal:1: none of the first 1 .*no valid placement"):
        first_valid_draw("libero_goal", 1, "S01+D19", seed=0, env_seed=0, attempts=1)
    assert first_valid_draw("libero_goal", 1, "nominal").shifts == []
