"""Stage 2, planning: cut the hidden manifest's ``[instance, episode]`` pairs into shards
(:func:`liberopro_platform.planning.plan_shards`: one task's episodes together) and queue them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from liberopro_platform.db import transaction
from liberopro_platform.disclosure import INTERNAL_FIX
from liberopro_platform.models import Shard
from liberopro_platform.pipeline.state import S, add_event, fail, get_submission, set_state
from liberopro_platform.planning import ManifestError, load_manifest, plan_shards

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline


def plan(p: Pipeline, submission_id: str) -> None:
    """Plan ``submission_id``'s shards (once: a submission that has shards, or is no longer
    validating, is left alone) and send each to the shards queue; a manifest the platform cannot
    use fails the submission (the reason for the admins)."""
    settings = p.settings
    try:
        manifest = load_manifest(settings.manifest_path)
    except ManifestError as exc:
        with transaction(p.sessions) as s:
            sub = get_submission(s, submission_id)
            fail(s, sub, "planning", "the platform has no usable evaluation manifest", INTERNAL_FIX)
            add_event(s, sub, f"[admin] {exc}")
        return
    shards = plan_shards(manifest, settings.episodes_per_instance, settings.episodes_per_shard)
    with transaction(p.sessions) as s:
        sub = get_submission(s, submission_id, lock=True)
        if sub.state != S.validating.value or sub.shards:
            return
        now = p.now()
        rows = [
            Shard(submission_id=sub.id, index=i, plan=pairs, episodes_total=len(pairs), queued_at=now)
            for i, pairs in enumerate(shards)
        ]
        s.add_all(rows)
        total = sum(len(pairs) for pairs in shards)
        set_state(
            s,
            sub,
            S.running,
            f"running on the hidden instances: {total} episodes in {len(shards)} shards",
            manifest_sha256=manifest.sha256,
            episodes_total=total,
            episodes_done=0,
            attempts=0,
        )
        s.flush()
        shard_ids = [sh.id for sh in rows]
    for shard_id in shard_ids:
        p.enqueue.run_shard(shard_id)
