"""Stages 4 and 5: once every shard is done, summarise the stored episodes
(``liberopro.runs.summary.summarize`` with the platform's run header) and publish the result, once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from liberopro.schema.results import EpisodeRecord, RunHeader, Summary, run_header
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.disclosure import INTERNAL_FIX
from liberopro_platform.models import Episode, Result, Shard, ShardState, Submission
from liberopro_platform.pipeline.state import S, add_event, fail, get_submission, set_state

if TYPE_CHECKING:
    from sqlalchemy import CursorResult

    from liberopro_platform.pipeline.core import Pipeline


def maybe_aggregate(p: Pipeline, submission_id: str) -> None:
    """Move a running submission whose shards are all done to ``aggregating`` (once, whoever
    finished the last shard) and send its aggregation to the control queue."""
    with transaction(p.sessions) as s:
        open_shards = s.scalar(
            select(func.count())
            .select_from(Shard)
            .where(Shard.submission_id == submission_id, Shard.state != ShardState.done.value)
        )
        if open_shards:
            return
        res = cast(
            "CursorResult[Any]",
            s.execute(
                update(Submission)
                .where(Submission.id == submission_id, Submission.state == S.running.value)
                .values(state=S.aggregating.value, state_since=p.now(), message="aggregating: computing the summary"),
            ),
        )
        if res.rowcount != 1:
            return
        add_event(s, get_submission(s, submission_id), "[admin] all shards done; aggregating")
    p.enqueue.aggregate(submission_id)


def aggregate(p: Pipeline, submission_id: str) -> None:
    """Summarise and publish ``submission_id`` (module docstring); a submission whose shards ran
    on different evaluator versions or stacks fails instead (its result would not be comparable)."""
    from liberopro.runs.summary import summarize

    with transaction(p.sessions) as s:
        sub = s.get(Submission, submission_id, with_for_update=True)
        if sub is None or sub.state != S.aggregating.value:
            return
        if s.scalar(select(Result.id).where(Result.submission_id == sub.id)) is not None:
            set_state(s, sub, S.published, "published")
            return
        evaluator = _one_evaluator(s, sub)
        if evaluator is None:
            return
        records = _records(s, sub.id)
        summary = summarize(records, _header(p, sub, evaluator, records))
        s.add(
            Result(
                submission_id=sub.id,
                team_id=sub.team_id,
                team_name=sub.team.name,
                policy_name=sub.policy_name or "unnamed",
                image_digest=sub.image_digest or "",
                spec_version=sub.spec_version or "",
                evaluator_version=str(evaluator["evaluator_version"]),
                stack=evaluator["stack"] or {},
                manifest_sha256=sub.manifest_sha256 or "",
                summary=summary.to_json(),
            )
        )
        set_state(s, sub, S.published, f"published: {len(records)} episodes{_headline(summary)}")


def _records(s: Session, submission_id: str) -> list[EpisodeRecord]:
    """The submission's stored episodes, typed, in (instance, episode) order."""
    rows = s.scalars(
        select(Episode)
        .where(Episode.submission_id == submission_id)
        .order_by(Episode.instance_id, Episode.episode_index)
    ).all()
    return [EpisodeRecord.model_validate(r.record) for r in rows]


def _one_evaluator(s: Session, sub: Submission) -> dict[str, Any] | None:
    """The evaluator version and stack every shard reported, or None after failing ``sub`` when
    they differ (``{"evaluator_version": None, "stack": {}}`` when no shard reported any)."""
    evaluators = [sh.evaluator for sh in sub.shards if sh.evaluator]
    versions = {e.get("evaluator_version") for e in evaluators}
    stacks = {repr(sorted((e.get("stack") or {}).items())) for e in evaluators}
    if len(versions) > 1 or len(stacks) > 1:
        fail(
            s,
            sub,
            "aggregation",
            "shards ran on different evaluator or simulator versions, so the result would not be comparable",
            INTERNAL_FIX,
        )
        add_event(s, sub, f"[admin] evaluator versions {sorted(map(str, versions))}, stacks {sorted(stacks)}")
        return None
    return evaluators[0] if evaluators else {"evaluator_version": None, "stack": {}}


def _header(p: Pipeline, sub: Submission, evaluator: dict[str, Any], records: list[EpisodeRecord]) -> RunHeader:
    """The summary's header: the evaluator, the submission, its policy and the run's settings."""
    st = p.settings
    return run_header(
        evaluator_version=evaluator["evaluator_version"],
        stack=evaluator["stack"],
        started=sub.created_at.isoformat(timespec="seconds"),
        finished=p.now().isoformat(timespec="seconds"),
        submission_id=sub.id,
        team=sub.team.name,
        policy={
            "image_ref": sub.image_ref,
            "image_digest": sub.image_digest,
            "source": sub.source,
            "protocol": sub.protocol,
            "metadata": sub.policy_metadata,
        },
        settings={
            "episodes_per_instance": st.episodes_per_instance,
            "seed": st.episode_seed,
            "max_steps": st.max_steps,
            "request_timeout_s": st.request_timeout_s,
            "episode_budget_s": st.episode_budget_s,
            "backend": st.backend,
        },
        manifest_sha256=sub.manifest_sha256,
        instances=len({r.instance_id for r in records}),
    )


def _headline(summary: Summary) -> str:
    nominal = summary.case("nominal")
    if nominal is None or nominal.success_rate is None:
        return ""
    return f"; nominal success rate {100 * nominal.success_rate:.1f}%"
