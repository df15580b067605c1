"""Instances: one task under one case (nominal, a shift, later a composition) with every
parameter fixed, drawn deterministically from (task, case, seed).

An episode of an instance adds an init state and an env seed: episode ``e`` uses LIBERO init
state ``e`` (mod 50) and seed ``seed + e``, the same for every case, so nominal and shifted
episodes start from the same states.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from liberopro.semantics import TaskSemantics, task_semantics
from liberopro.shifts import get_shift
from liberopro.shifts.base import stable_seed
from liberopro.tasks import TaskRef, task_info

INSTANCE_SCHEMA_VERSION = 1
NOMINAL = "nominal"
N_INIT_STATES = 50


class ShiftSpec(BaseModel):
    """A shift with its fixed parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    params: dict[str, Any]


class Instance(BaseModel):
    """A task under a case with fixed parameters; ``shifts`` is empty for nominal."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int = INSTANCE_SCHEMA_VERSION
    instance_id: str
    suite: str
    task_index: int
    shifts: list[ShiftSpec] = Field(default_factory=list)

    @property
    def task(self) -> TaskRef:
        return TaskRef(self.suite, self.task_index)

    @property
    def case(self) -> str:
        """``nominal`` or the shift ids joined by ``+``."""
        return "+".join(s.id for s in self.shifts) or NOMINAL


@dataclass(frozen=True)
class EpisodePlan:
    """One episode to run: an instance, which of its episodes, the init state and the seed."""

    instance: Instance
    episode_index: int
    init_state_index: int
    seed: int


@functools.cache
def semantics_of(ref: TaskRef) -> TaskSemantics:
    """Task roles from the BDDL file alone (no simulator)."""
    from libero.libero.envs import bddl_utils

    parsed = bddl_utils.robosuite_parse_problem(task_info(ref).bddl_path)
    objects = [n for names in parsed["objects"].values() for n in names]
    fixtures = [n for names in parsed["fixtures"].values() for n in names]
    return task_semantics(ref, parsed["goal_state"], objects, fixtures)


def parse_cases(text: str) -> list[list[str]]:
    """``"nominal,S01,D01,S01+D01"`` -> ``[[], ["S01"], ["D01"], ["S01", "D01"]]``; unknown ids raise
    ``KeyError`` naming the known ones."""
    cases = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        if item.lower() == NOMINAL:
            cases.append([])
            continue
        ids = [get_shift(s.strip()).id for s in item.split("+")]
        cases.append(ids)
    if not cases:
        raise ValueError("no cases given (e.g. nominal,S01,D01)")
    return cases


def _instance_id(ref: TaskRef, shifts: list[ShiftSpec]) -> str:
    body = json.dumps([ref.suite, ref.index, [s.model_dump() for s in shifts]], sort_keys=True)
    return "inst-" + hashlib.sha256(body.encode()).hexdigest()[:12]


def make_instance(ref: TaskRef, shift_ids: list[str], seed: int) -> Instance | str:
    """The instance of ``ref`` under ``shift_ids`` for ``seed``, or the reason it does not apply."""
    sem = semantics_of(ref)
    specs = []
    for sid in shift_ids:
        cls = get_shift(sid)
        reason = cls.applicable(ref, sem)
        if reason is not None:
            return f"{sid} not applicable to {ref}: {reason}"
        rng = np.random.default_rng(stable_seed(seed, ref.suite, ref.index, sid))
        specs.append(ShiftSpec(id=cls.id, params=cls.sample_params(rng, ref, sem).model_dump(mode="json")))
    return Instance(instance_id=_instance_id(ref, specs), suite=ref.suite, task_index=ref.index, shifts=specs)


def plan_episodes(instances: list[Instance], episodes: int, seed: int) -> list[EpisodePlan]:
    """``episodes`` episodes of each instance (init state e mod 50, env seed seed + e)."""
    return [
        EpisodePlan(instance=inst, episode_index=e, init_state_index=e % N_INIT_STATES, seed=seed + e)
        for inst in instances
        for e in range(episodes)
    ]
