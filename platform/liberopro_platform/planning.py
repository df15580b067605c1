"""The hidden evaluation manifest and how a submission's episodes are cut into shards.

The manifest is the file ``liberopro instances generate --split eval`` writes: a header line,
then one instance per line. The worker reads it through the evaluator's own light models
(:mod:`liberopro.schema.manifest`, no simulator): every line parsed, the header's kind, schema
version, counts and content hash verified, then every instance's shift ids, parameters and
compositions against the light shift catalog (:func:`liberopro.catalog.shift_problems`; the
evaluator container checks its shard again before the first episode). Episode ``e`` of an instance
follows the evaluator's own plan (:func:`liberopro.instances.build.plan_episodes`: init state
``e mod 50``, seed ``seed + e``).
"""

from __future__ import annotations

from pathlib import Path

from liberopro.catalog import shift_problems
from liberopro.schema.manifest import Manifest, ManifestError, listing, read_manifest

__all__ = ["Manifest", "ManifestError", "load_manifest", "plan_shards"]


def load_manifest(path: Path | None) -> Manifest:
    """Read and verify the manifest at ``path``. Raises :class:`ManifestError` (a platform
    configuration fault) naming the file, the line and what is wrong, or that none is set."""
    if path is None:
        raise ManifestError(
            "no evaluation manifest configured: set LIBEROPRO_MANIFEST_PATH to the file "
            "`liberopro instances generate --split eval` writes"
        )
    manifest = read_manifest(Path(path))
    if not manifest.instances:
        raise ManifestError(f"the evaluation manifest {path} holds no instance")
    problems = [
        f"{manifest.where(k)}: {p}"
        for k, inst in enumerate(manifest.instances)
        for p in shift_problems([(s.id, s.params) for s in inst.shifts])
    ]
    if problems:
        raise ManifestError(listing(path, problems))
    return manifest


def plan_shards(manifest: Manifest, episodes_per_instance: int, episodes_per_shard: int) -> list[list[list[str | int]]]:
    """Cut all ``[instance_id, episode_index]`` pairs into shards of at most
    ``episodes_per_shard``, keeping episodes of one task together (a LIBERO scene costs seconds
    to build, so a shard should touch as few tasks as possible). Deterministic."""
    by_task: dict[tuple[str, int], list[str]] = {}
    for inst in manifest.instances:
        by_task.setdefault((inst.suite, inst.task_index), []).append(inst.instance_id)
    pairs: list[list[str | int]] = [
        [iid, e] for task in sorted(by_task) for iid in by_task[task] for e in range(episodes_per_instance)
    ]
    return [pairs[i : i + episodes_per_shard] for i in range(0, len(pairs), episodes_per_shard)]
