"""Writes the golden run's fixed manifest (``manifest.jsonl``); run once, the file is committed.

``python -m tests.golden.make_manifest``. Parameters are drawn by the catalog for seed 0, then
the runtime shifts' fallback steps (and D10's window, D18's open steps) are set inside the
golden run's 24-step horizon.
"""

from __future__ import annotations

import datetime as dt

from liberopro.instances.build import make_instance
from liberopro.schema.manifest import Instance, make_header, write_manifest
from liberopro.sim.tasks import TaskRef

from tests.golden.run import EPISODES, MANIFEST

TASKS = (TaskRef("libero_spatial", 0), TaskRef("libero_object", 2), TaskRef("libero_goal", 1))
CASES = ([], ["S01"], ["S14"], ["S19"], ["D01"], ["D10"], ["D18"])
OVERRIDES = {
    "D01": {"fallback_step": 6},
    "D10": {"fallback_step": 6, "duration_steps": 10},
    "D18": {"fallback_step": 10, "open_steps": 10},
}


def golden_instances() -> list[Instance]:
    out = []
    for ref in TASKS:
        for case in CASES:
            inst = make_instance(ref, case, seed=0)
            assert not isinstance(inst, str), inst
            data = inst.model_dump(mode="json")
            for s in data["shifts"]:
                s["params"].update(OVERRIDES.get(s["id"], {}))
            data["instance_id"] = f"golden-{ref.suite}-{ref.index}-{inst.case}"
            out.append(Instance.model_validate(data))
    return out


def main() -> None:
    instances = golden_instances()
    header = make_header(
        "train", 0, instances, episodes=EPISODES, created=dt.datetime(2026, 12, 1, tzinfo=dt.UTC).isoformat()
    )
    write_manifest(MANIFEST, header, instances)
    print(f"wrote {MANIFEST}: {len(instances)} instances, content hash {header.content_hash[:12]}")


if __name__ == "__main__":
    main()
