"""Instances: one task under one case (nominal, a shift, later a composition) with every
parameter fixed, drawn deterministically from (task, case, seed).

An episode of an instance adds an init state and an env seed: episode ``e`` uses LIBERO init
state ``e`` (mod 50) and seed ``seed + e``, the same for every case, so nominal and shifted
episodes start from the same states.

The models (:class:`Instance`, :class:`ShiftEntry`) live in the light
:mod:`liberopro.schema.manifest`, which the platform reads without the simulator; this module
draws their parameters and checks them against the shift catalog.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

import numpy as np

from liberopro.catalog import get_spec, shift_class, shift_problems
from liberopro.schema.manifest import (
    INSTANCE_SCHEMA_VERSION,
    NOMINAL,
    Instance,
    ShiftEntry,
)
from liberopro.semantics import semantics_of
from liberopro.shifts.base import stable_seed
from liberopro.sim.tasks import TaskRef

__all__ = [
    "INSTANCE_SCHEMA_VERSION",
    "N_INIT_STATES",
    "NOMINAL",
    "Diagnostic",
    "EpisodePlan",
    "Instance",
    "ShiftEntry",
    "instance_problems",
    "make_instance",
    "parse_cases",
    "plan_episodes",
    "semantics_of",
]

N_INIT_STATES = 50


Observations = Literal["live", "frozen"]
Recovery = Literal["none", "hold", "retry", "restore"]


@dataclass(frozen=True)
class Diagnostic:
    """Diagnostic conditions of an episode (``docs/definition.md``, "Diagnostic studies").

    ``observations``: ``live`` (standard) or ``frozen`` (the policy keeps receiving its first
    observation; the step index and instruction stay current). ``recovery`` after the first
    runtime shift fires: ``none`` (standard), ``hold`` (the robot holds still for a set time,
    then the policy resumes), ``retry`` (the policy's action chunk is dropped, so it starts its
    chunking afresh, and the episode gets extra steps), ``restore`` (the robot is returned to its
    pose at the start of the policy loop, then the policy resumes).
    """

    observations: Observations = "live"
    recovery: Recovery = "none"

    @property
    def label(self) -> str:
        """``""`` for standard conditions, else e.g. ``frozen`` or ``frozen,hold``."""
        parts = [
            p
            for p in (
                self.observations if self.observations != "live" else "",
                self.recovery if self.recovery != "none" else "",
            )
            if p
        ]
        return ",".join(parts)


@dataclass(frozen=True)
class EpisodePlan:
    """One episode to run: an instance, which of its episodes, the init state, the seed and the
    diagnostic conditions."""

    instance: Instance
    episode_index: int
    init_state_index: int
    seed: int
    diagnostic: Diagnostic = Diagnostic()


def parse_cases(text: str) -> list[list[str]]:
    """``"nominal,S01,D01,S01+D01"`` -> ``[[], ["S01"], ["D01"], ["S01", "D01"]]``; unknown ids raise
    ``KeyError`` naming the known ones. ``@NAME`` / ``@FILE`` items expand to a preset's cases
    (:mod:`liberopro.instances.study`; duplicates dropped); a bad preset raises ``ValueError``."""
    from liberopro.instances.study import expand

    cases: list[list[str]] = []
    for item in expand([p.strip() for p in text.split(",") if p.strip()]):
        if not item:
            continue
        if item.lower() == NOMINAL:
            cases.append([])
            continue
        ids = [get_spec(s).id for s in item.split("+")]
        cases.append(ids)
    if not cases:
        raise ValueError("no cases given (e.g. nominal,S01,D01)")
    return cases


def _instance_id(ref: TaskRef, shifts: list[ShiftEntry]) -> str:
    body = json.dumps([ref.suite, ref.index, [s.model_dump() for s in shifts]], sort_keys=True)
    return "inst-" + hashlib.sha256(body.encode()).hexdigest()[:12]


def make_instance(ref: TaskRef, shift_ids: list[str], seed: int, attempt: int = 0) -> Instance | str:
    """The instance of ``ref`` under ``shift_ids`` for ``seed``, or the reason it does not apply.

    ``attempt`` > 0 draws other parameters (manifest generation redraws when an instance fails
    validation); the draw is still a pure function of (task, shifts, seed, attempt).
    """
    from liberopro.catalog.compositions import conflict

    sem = semantics_of(ref)
    reason = conflict(shift_ids)
    if reason is not None:
        return f"{'+'.join(shift_ids)} is not a valid composition: {reason}"
    specs = []
    for sid in shift_ids:
        spec = get_spec(sid)
        reason = shift_class(spec.id).applicable(ref, sem)
        if reason is not None:
            return f"{sid} not applicable to {ref}: {reason}"
        parts = (seed, ref.suite, ref.index, sid) + ((attempt,) if attempt else ())
        rng = np.random.default_rng(stable_seed(*parts))
        specs.append(ShiftEntry(id=spec.id, params=spec.sample_params(rng, ref, sem).model_dump(mode="json")))
    reason = conflict([s.id for s in specs], [s.params for s in specs])
    if reason is not None:  # runtime triggers drawn into the same phase
        return f"{'+'.join(shift_ids)} is not a valid composition here: {reason}"
    return Instance(instance_id=_instance_id(ref, specs), suite=ref.suite, task_index=ref.index, shifts=specs)


def instance_problems(inst: Instance) -> list[str]:
    """What is wrong with ``inst`` beyond its format (empty when nothing is): a shift id the
    catalog does not know (or not written as the catalog writes it, e.g. ``s01``), parameters
    that do not validate against the shift's ``Params`` model (ranges, trigger phases, unknown
    or missing fields), or shifts that may not be composed (:func:`liberopro.catalog.compositions.conflict`).
    Each problem is one line naming the shift (:func:`liberopro.catalog.shift_problems`)."""
    return shift_problems([(s.id, s.params) for s in inst.shifts])


def plan_episodes(
    instances: list[Instance], episodes: int, seed: int, diagnostics: list[Diagnostic] | None = None
) -> list[EpisodePlan]:
    """``episodes`` episodes of each instance (init state e mod 50, env seed seed + e), under
    each of ``diagnostics`` (default: standard conditions only)."""
    return [
        EpisodePlan(instance=inst, episode_index=e, init_state_index=e % N_INIT_STATES, seed=seed + e, diagnostic=d)
        for d in (diagnostics or [Diagnostic()])
        for inst in instances
        for e in range(episodes)
    ]
