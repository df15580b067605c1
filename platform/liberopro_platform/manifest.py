"""The hidden evaluation manifest and how a submission's episodes are cut into shards.

The manifest is a JSON-lines file of :class:`liberopro.instances.Instance` (``liberopro
instances generate`` writes one). It is read here as plain JSON (the worker needs no simulator);
the evaluator validates each instance when it runs it. Episode ``e`` of an instance follows the
evaluator's own plan (:func:`liberopro.instances.plan_episodes`: init state ``e mod 50``, seed
``seed + e``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ManifestError(RuntimeError):
    """The manifest is missing or malformed (a platform configuration fault)."""


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest: instances in file order, by id, and the file's SHA-256."""

    instances: list[dict[str, Any]]
    sha256: str

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {i["instance_id"]: i for i in self.instances}


def load_manifest(path: Path | None) -> Manifest:
    """Read and check the manifest at ``path``; :class:`ManifestError` says what is wrong."""
    if path is None:
        raise ManifestError("no evaluation manifest configured: set LIBEROPRO_MANIFEST_PATH to a JSON-lines "
                            "file of instances (`liberopro instances generate` writes one)")
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read the evaluation manifest {path}: {exc}") from exc
    instances, seen = [], set()
    for n, line in enumerate(data.decode().splitlines(), 1):
        if not line.strip():
            continue
        try:
            inst = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}:{n}: not JSON ({exc})") from exc
        missing = [k for k in ("instance_id", "suite", "task_index") if k not in inst]
        if missing:
            raise ManifestError(f"{path}:{n}: an instance needs {', '.join(missing)}")
        if inst["instance_id"] in seen:
            raise ManifestError(f"{path}:{n}: instance {inst['instance_id']} appears twice")
        seen.add(inst["instance_id"])
        instances.append(inst)
    if not instances:
        raise ManifestError(f"the evaluation manifest {path} holds no instance")
    return Manifest(instances=instances, sha256=hashlib.sha256(data).hexdigest())


def plan_shards(manifest: Manifest, episodes_per_instance: int, episodes_per_shard: int) -> list[list[list[Any]]]:
    """Cut all ``[instance_id, episode_index]`` pairs into shards of at most
    ``episodes_per_shard``, keeping episodes of one task together (a LIBERO scene costs seconds
    to build, so a shard should touch as few tasks as possible). Deterministic."""
    by_task: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for inst in manifest.instances:
        by_task.setdefault((inst["suite"], int(inst["task_index"])), []).append(inst)
    pairs = [[inst["instance_id"], e] for task in sorted(by_task) for inst in by_task[task]
             for e in range(episodes_per_instance)]
    return [pairs[i:i + episodes_per_shard] for i in range(0, len(pairs), episodes_per_shard)]
