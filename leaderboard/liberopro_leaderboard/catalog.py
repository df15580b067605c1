"""The methodology page's data, generated from the evaluator's own light modules: the shift table
(:mod:`liberopro.catalog`), the split (:mod:`liberopro.split`), the task registry and horizons
(:mod:`liberopro.sim.tasks`), the metric constants and the versions. Nothing here is typed in by
hand, so a shift added to the catalog appears on the page without touching the site.

None of these modules loads the simulator (robosuite, MuJoCo, LIBERO, OpenCV), so the page is
built in-process wherever the site runs, the platform image included.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, Field


class ShiftEntry(BaseModel):
    """One shift type of the catalog, with its default magnitudes (ranges, never an instance's values)."""

    id: str
    name: str
    category: str
    kind: str
    trigger: str | None = Field(None, description="Runtime shifts: the task phase(s) that fire it.")
    fallback_step: str | dict[str, str] | None = Field(
        None,
        description="Runtime shifts: when it fires if its phase is never reached, as the rule giving the "
        "policy step from the task, e.g. '0.25*S(task)' with S(task) the privileged oracle's fastest "
        "success on the task in policy steps (per trigger phase where a shift has several).",
    )
    summary: str
    parameters: dict[str, Any] = Field({}, description="Default parameter ranges instances are drawn from.")
    post_condition: str = ""


class SplitTask(BaseModel):
    suite: str
    index: int
    split: str = Field(..., description="eval (held out) or train.")
    name: str | None = None
    instruction: str | None = None


class SplitInfo(BaseModel):
    seed: int
    held_out: dict[str, list[int]]
    tasks: list[SplitTask]
    horizons: dict[str, int] = Field(..., description="Max policy steps per suite.")


class Versions(BaseModel):
    evaluator: str
    spec: str
    results_schema: int
    pinned_stack: dict[str, str]
    bootstrap_replicates: int = Field(
        ..., description="Of a local run's summary.json and liberopro report; the public intervals use none."
    )
    bootstrap_seed: int = Field(..., description="Of a local run's summary.json and liberopro report.")


class Catalog(BaseModel):
    """Everything the methodology page shows that comes from the evaluator's code."""

    shifts: list[ShiftEntry]
    categories: list[str]
    split: SplitInfo
    versions: Versions


@functools.cache
def build_catalog() -> Catalog:
    """Read the catalog from the evaluator's light modules (milliseconds once imported; cached)."""
    from liberopro import EVALUATOR_VERSION
    from liberopro.catalog import CATEGORIES, SPECS
    from liberopro.metrics import BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED
    from liberopro.runs.summary import RESULTS_SCHEMA_VERSION
    from liberopro.sim.tasks import HORIZONS, SUITES, all_task_refs, task_info
    from liberopro.split import SPLIT_SEED, held_out
    from liberopro.stack import PINNED
    from submission_spec.models import SPEC_VERSION

    shifts = [
        ShiftEntry(
            id=s.id,
            name=s.name,
            category=s.category,
            kind=s.kind,
            trigger=" or ".join(s.triggers) or None,
            fallback_step=s.fallback.describe() if s.fallback else None,
            summary=s.summary,
            parameters=s.default_params(),
            post_condition=s.post_condition,
        )
        for s in SPECS.values()
    ]
    ho = held_out()
    tasks = [
        SplitTask(
            suite=ref.suite,
            index=ref.index,
            split="eval" if ref.index in ho[ref.suite] else "train",
            name=task_info(ref).name,
            instruction=task_info(ref).instruction,
        )
        for ref in all_task_refs()
    ]
    return Catalog(
        shifts=shifts,
        categories=list(CATEGORIES),
        split=SplitInfo(seed=SPLIT_SEED, held_out=ho, tasks=tasks, horizons={s: HORIZONS[s] for s in SUITES}),
        versions=Versions(
            evaluator=EVALUATOR_VERSION,
            spec=SPEC_VERSION,
            results_schema=RESULTS_SCHEMA_VERSION,
            pinned_stack=dict(PINNED),
            bootstrap_replicates=BOOTSTRAP_REPLICATES,
            bootstrap_seed=BOOTSTRAP_SEED,
        ),
    )
