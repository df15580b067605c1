"""Pinned parameter draws: a digest per shift of ``make_instance`` on all 40 tasks, seed 0, attempts 0
and 1 (instance ids, parameters, or the reason a pair does not apply).

Manifests' instance ids and content hashes depend on every generator call of the sampling
(:mod:`liberopro.catalog.sampling`), so ``tests/evaluator/test_catalog.py`` compares these digests
with ``tests/data/catalog_draws.json``, recorded before the catalog reorganisation of issue 10. A
change that alters the draws on purpose re-records them and says why in its commit::

    uv run --frozen python -m tests.evaluator.catalog_draws --record
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import typer

PINNED = Path(__file__).resolve().parents[1] / "data" / "catalog_draws.json"
SEED, ATTEMPTS = 0, (0, 1)


def digests() -> dict[str, str]:
    """Shift id -> SHA-256 of its draws over the 40 tasks and :data:`ATTEMPTS` (reads the BDDL
    files through LIBERO's parser; builds no scene)."""
    from liberopro.catalog import SPECS
    from liberopro.instances.build import make_instance
    from liberopro.sim.tasks import all_task_refs

    out = {}
    for sid in SPECS:  # every shift of the catalog (the JSON is written with sorted keys)
        h = hashlib.sha256()
        for attempt in ATTEMPTS:
            for ref in all_task_refs():
                inst = make_instance(ref, [sid], SEED, attempt)
                body = inst if isinstance(inst, str) else inst.model_dump(mode="json")
                h.update(json.dumps([str(ref), attempt, body], sort_keys=True).encode() + b"\n")
        out[sid] = h.hexdigest()
    return out


def main(record: bool = typer.Option(False, "--record", help=f"Write the digests to {PINNED.name}.")) -> None:
    """Record the pinned draws (``--record``; without it, print this help and exit 1)."""
    if not record:
        typer.echo(__doc__)
        raise typer.Exit(1)
    PINNED.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")


if __name__ == "__main__":
    typer.run(main)
