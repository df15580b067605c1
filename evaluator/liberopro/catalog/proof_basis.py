"""Which instances the solvability proof runs under their shift (``docs/instances.md``,
"Solvability proof"): a property of the shifts' categories and resources, so the generation
(:mod:`liberopro.instances.generation`, which re-exports it) and the light report
(:mod:`liberopro.instances.generation_report`) read it from the catalog. Light: no simulator."""

from __future__ import annotations

from liberopro.catalog.registry import get_spec

#: Environment shifts change what must be done physically when they take over table space (add a
#: prop), an object's model (swap it) or the line of sight with a prop (an occluder): the
#: ``space``, ``instance`` and ``view`` resource channels (:mod:`liberopro.catalog.spec`).
PHYSICAL_ENVIRONMENT_CHANNELS = ("space", "instance", "view")


def needs_own_proof(shift_ids: list[str]) -> bool:
    """Whether an instance under ``shift_ids`` must be proved by an oracle run of its own: some
    shift changes what must be done physically (Condition, Robot and Execution shifts, and
    Environment shifts owning a resource of :data:`PHYSICAL_ENVIRONMENT_CHANNELS`: S06-S09, D06,
    D09). The nominal case (``[]``) is run too: it is every other instance's proof. Observation,
    Language and appearance, lighting or camera Environment shifts are proved by the nominal
    run. Categories and resources: :mod:`liberopro.catalog` (``docs/shifts.md``)."""
    if not shift_ids:
        return True
    for sid in shift_ids:
        spec = get_spec(sid)
        if spec.category in ("Condition", "Robot", "Execution"):
            return True
        if spec.category == "Environment" and any(
            r.split(":")[0] in PHYSICAL_ENVIRONMENT_CHANNELS for r in spec.resources
        ):
            return True
    return False
