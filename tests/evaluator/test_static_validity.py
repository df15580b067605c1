"""Every scored episode valid (issue 22, items 1 and 2): a static instance is checked at reset on
every init state its episodes use, not only on init state 0; D04 leaves room for the target beside
its block; a draw the solvability proof drops is redrawn, deterministically from the seed.

Real LIBERO scenes, camera-less (the privileged validation controller, one policy step per reset
check); each test builds its own scenes and closes them (``first_valid_static`` drops variant
scenes from the cache it is given, so it does not get the session's shared one)."""

from __future__ import annotations

import pytest
from liberopro.episode.runner import RunSettings
from liberopro.instances.build import make_instance
from liberopro.instances.generation import (
    _draw_and_prove,
    _oracle_run,
    first_valid_static,
    reset_validity,
    validity_init_states,
)
from liberopro.schema.manifest import Instance, ShiftEntry
from liberopro.sim.tasks import TaskRef

GOAL1 = TaskRef("libero_goal", 1)
SPATIAL0 = TaskRef("libero_spatial", 0)
OBJECT2 = TaskRef("libero_object", 2)


def _close(cache: dict) -> None:
    for scene in {id(s): s for s in cache.values()}.values():
        scene.close()


def test_validity_init_states_default_to_a_ten_episode_evaluations_and_refuse_bad_ones():
    assert validity_init_states() == list(range(10))
    assert validity_init_states([3, 1, 3]) == [1, 3]
    for bad in ([50], [-1], []):
        with pytest.raises(ValueError, match="validity init states must be in 0..49"):
            validity_init_states(bad)


@pytest.mark.sim
def test_a_static_draw_invalid_on_an_init_state_past_0_is_redrawn():
    """libero_goal:1 under S01, seed 0: the first draw that passes on init state 0 (draw 3, which
    the old rule kept) but the bowl does not rest on the table after settling on init state 3 (measured by
    ``benchmarks/static_validity.py``: 1 of 10 episodes invalid); checked on init states 0-9, the
    draw is refused there and a later one, valid on all ten (draw 8), is taken."""
    cache: dict = {}
    try:
        old, old_attempt, _ = first_valid_static(GOAL1, ["S01"], 0, cache, init_states=(0,))
        assert isinstance(old, Instance)
        bad = reset_validity(old, cache, 0, [3])
        assert "target height changed" in bad[3]
        new, attempt, why = first_valid_static(GOAL1, ["S01"], 0, cache, attempts=10, init_states=range(10))
        assert isinstance(new, Instance) and attempt > old_attempt
        assert f"attempt {old_attempt + 1}: invalid at reset on init state(s) [3]: S01: target height changed" in why
        assert reset_validity(new, cache, 0, [3]) == {}
        assert new == make_instance(GOAL1, ["S01"], 0, attempt)  # a pure function of (seed, attempt)
    finally:
        _close(cache)


def _d04(ref: TaskRef, cover: float):
    """A D04 episode under the validation controller, fired at step 2 (the target still at rest)."""
    inst = Instance(
        instance_id="test-d04",
        suite=ref.suite,
        task_index=ref.index,
        shifts=[ShiftEntry(id="D04", params={"cover": cover, "height_m": 0.025, "fallback_step": 2})],
    )
    cache: dict = {}
    try:
        rec, _ = _oracle_run(
            inst, RunSettings(render_size=64, max_steps=10, stop_when_shifts_done=True), cache, (0, 0, 0)
        )
    finally:
        _close(cache)
    return rec


@pytest.mark.sim
def test_d04_leaves_the_target_room_beside_its_block():
    """LIBERO-Spatial's bowl covers 92% of the plate's box (0.0247 of 0.0268 m2): the smallest
    block D04 draws (15%) would leave 0.0228 m2, and the bowl came to rest on the block (the
    oracle failed every proof). The footprint rule refuses it; on libero_object:2 the basket
    holds the can beside the same block. (A target larger than its region is exempt: the bowl on
    libero_goal:1's stove, ``test_shifts_props.py``'s D04 test.)"""
    rec = _d04(SPATIAL0, 0.15)
    assert not rec.valid and rec.termination_reason == "shift_invalid"
    assert "less than the target's footprint" in (rec.detail or ""), rec.detail
    rec = _d04(OBJECT2, 0.15)
    assert rec.valid, rec.detail
    post = rec.shifts[0].applied["post_condition"]
    assert post["free_area_m2"] >= post["target_footprint_m2"] and 0.1 <= post["covered_fraction"] <= 0.5


@pytest.mark.sim
def test_a_draw_the_proof_drops_is_redrawn_and_the_same_seed_gives_the_same_draws():
    """libero_goal:0 under S01, seed 0, proof on init state 0 (measured 2026-12-05): draw 1 is
    invalid, draw 2 is valid but the oracle's pull stalls in the moved cabinet. With one proof
    the pair is dropped on draw 2; with two, draw 2 fails again, word for word (the same draw, the
    same oracle run), and draw 3 is proved before the pair is dropped."""
    ref = TaskRef("libero_goal", 0)
    job = {"attempts": 5, "validity_states": [0], "proof_states": [0], "proof_attempts": 1}
    cache: dict = {}
    nominal: dict = {}
    try:
        inst, stage, one = _draw_and_prove(ref, ["S01"], 0, cache, nominal, job)
        assert inst is None and stage == "proof" and one.startswith("draw 2: the oracle solves the nominal task")
        assert "draw 3" not in one
        inst, stage, two = _draw_and_prove(ref, ["S01"], 0, cache, nominal, {**job, "proof_attempts": 2})
        assert inst is None and stage == "proof"
        first, second = two.split(" | ")[:2]
        assert first == one and second.startswith("draw 3: ")
    finally:
        _close(cache)
