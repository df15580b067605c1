"""The methodology page's data, generated from the evaluator's own catalog: the shift table
(``liberopro.shifts.SHIFTS``), the split (``liberopro.split.held_out``), the horizons, the metric
constants and the versions. Nothing here is typed in by hand, so a shift module added to the
evaluator appears on the page without touching the site.

Importing the shift catalog loads the simulator (robosuite, MuJoCo; ~15 s cold). Where the
site runs without the simulator (the platform image), point ``LIBEROPRO_LEADERBOARD_CATALOG`` at a
snapshot written by ``python -m liberopro_leaderboard catalog --out catalog.json`` where the
evaluator is installed (for example in the evaluator image at build time); otherwise the catalog
is imported in-process on first use and kept for the life of the process.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class ShiftEntry(BaseModel):
    """One shift type of the catalog, with its default magnitudes (ranges, never an instance's values)."""

    id: str
    name: str
    category: str
    kind: str
    trigger: str | None = Field(None, description="Runtime shifts: the task phase(s) that fire it.")
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
    bootstrap_replicates: int
    bootstrap_seed: int


class Catalog(BaseModel):
    """Everything the methodology page shows that comes from the evaluator's code."""

    shifts: list[ShiftEntry]
    categories: list[str]
    split: SplitInfo
    versions: Versions
    generated_at: dt.datetime
    source: str = Field(..., description="Where this copy came from: the evaluator imported in-process, or a snapshot file.")


def build_catalog() -> Catalog:
    """Read the catalog from the evaluator's modules (slow: loads the simulator)."""
    from liberopro import EVALUATOR_VERSION
    from liberopro.metrics import BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED
    from liberopro.results import RESULTS_SCHEMA_VERSION
    from liberopro.shifts import CATEGORIES, SHIFTS
    from liberopro.split import SPLIT_SEED, held_out
    from liberopro.stack import PINNED
    from liberopro.tasks import HORIZONS, SUITES, TASKS_PER_SUITE, TaskRef, task_info
    from submission_spec.models import SPEC_VERSION

    shifts = [ShiftEntry(id=c.id, name=c.name, category=c.category, kind=c.kind,
                         trigger=" or ".join(c.triggers) or None, summary=c.summary,
                         parameters=json.loads(json.dumps(c.default_params(), default=str)),
                         post_condition=c.post_condition)
              for c in SHIFTS.values()]
    ho = held_out()
    tasks = []
    for suite in SUITES:
        for i in range(TASKS_PER_SUITE):
            try:
                info = task_info(TaskRef(suite, i))
                name, instruction = info.name, info.instruction
            except Exception:  # noqa: BLE001 - LIBERO's task files missing: ids still name the task
                name = instruction = None
            tasks.append(SplitTask(suite=suite, index=i, split="eval" if i in ho[suite] else "train",
                                   name=name, instruction=instruction))
    return Catalog(
        shifts=shifts, categories=list(CATEGORIES),
        split=SplitInfo(seed=SPLIT_SEED, held_out=ho, tasks=tasks, horizons={s: HORIZONS[s] for s in SUITES}),
        versions=Versions(evaluator=EVALUATOR_VERSION, spec=SPEC_VERSION, results_schema=RESULTS_SCHEMA_VERSION,
                          pinned_stack=dict(PINNED), bootstrap_replicates=BOOTSTRAP_REPLICATES,
                          bootstrap_seed=BOOTSTRAP_SEED),
        generated_at=dt.datetime.now(dt.UTC), source="the evaluator's modules, imported in-process",
    )


class CatalogUnavailable(RuntimeError):
    """Neither a snapshot nor the evaluator's modules could provide the catalog."""


class CatalogProvider:
    """The catalog for the methodology page: from ``snapshot`` when given (re-read when the file
    changes), else built in-process once. Thread-safe; a failure is remembered with its reason
    and retried on the next call."""

    def __init__(self, snapshot: Path | None = None) -> None:
        self.snapshot = Path(snapshot) if snapshot else None
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._mtime: float | None = None

    def get(self) -> Catalog:
        with self._lock:
            if self.snapshot is not None:
                return self._from_snapshot()
            if self._catalog is None:
                try:
                    self._catalog = build_catalog()
                except ImportError as exc:
                    raise CatalogUnavailable(
                        f"the shift catalog needs the evaluator and its simulator ({exc}); install them, or set "
                        "LIBEROPRO_LEADERBOARD_CATALOG to a snapshot made with "
                        "`python -m liberopro_leaderboard catalog --out catalog.json`") from exc
            return self._catalog

    def _from_snapshot(self) -> Catalog:
        assert self.snapshot is not None
        try:
            mtime = self.snapshot.stat().st_mtime
            if self._catalog is None or mtime != self._mtime:
                catalog = Catalog.model_validate_json(self.snapshot.read_text())
                self._catalog, self._mtime = catalog.model_copy(update={"source": f"snapshot {self.snapshot.name}"}), mtime
        except (OSError, ValueError) as exc:
            raise CatalogUnavailable(f"cannot read the catalog snapshot {self.snapshot}: {exc}") from exc
        return self._catalog

    def warm(self) -> threading.Thread:
        """Load the catalog in a background thread (errors are raised again on the next :meth:`get`)."""
        def run() -> None:
            try:
                self.get()
            except CatalogUnavailable:
                pass

        t = threading.Thread(target=run, name="leaderboard-catalog", daemon=True)
        t.start()
        return t
