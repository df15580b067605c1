"""Submissions: create (image reference or uploaded archive), status, logs, cancel.

An image reference is accepted only when the team may submit it (:mod:`liberopro_platform.ownership`:
an id the team uploaded, or a digest from an allowed registry); the API never asks the Docker
engine, so a refusal tells nothing about which images exist there."""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path
from typing import Annotated, TypedDict

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse
from liberopro.schema.public import public_result
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from liberopro_platform.api.deps import CurrentUser, SessionDep, plausible_id
from liberopro_platform.api.schemas import (
    Check,
    Event,
    Progress,
    SubmissionCreated,
    SubmissionStatus,
    SubmitRequest,
)
from liberopro_platform.api.upload import UPLOAD_BODY_DOC, receive_archive
from liberopro_platform.disclosure import hidden_message
from liberopro_platform.image_refs import IMAGE_ID
from liberopro_platform.models import (
    ACTIVE_STATES,
    Episode,
    Result,
    ShardState,
    Submission,
    Team,
    User,
    utcnow,
)
from liberopro_platform.models import SubmissionState as S
from liberopro_platform.ownership import reference_refusal
from liberopro_platform.pipeline import add_event, queue_position, sandbox_wait

router = APIRouter(prefix="/submissions", tags=["submissions"])


def _error(status: int, error: str, message: str) -> HTTPException:
    return HTTPException(status, detail={"error": error, "message": message})


def _get_own(session: Session, user: User, submission_id: str) -> Submission:
    sub = session.get(Submission, submission_id) if plausible_id(submission_id) else None
    if sub is None or (sub.team_id != user.team_id and not user.is_admin):
        raise _error(404, "not_found", f"no submission {submission_id[:80]!r} for team {user.team.name}")
    return sub


def check_limits(session: Session, request: Request, team: Team) -> None:
    """429 when ``team`` is at its per-day or concurrent limit, saying when it can submit again."""
    settings = request.app.state.settings
    per_day = team.submissions_per_day if team.submissions_per_day is not None else settings.submissions_per_day
    concurrent = team.max_concurrent if team.max_concurrent is not None else settings.max_concurrent
    active = session.scalars(
        select(Submission.id).where(Submission.team_id == team.id, Submission.state.in_(ACTIVE_STATES))
    ).all()
    if len(active) >= concurrent:
        raise _error(
            429,
            "too_many_active",
            f"team {team.name} already has {len(active)} submission(s) in progress "
            f"({', '.join(active)}); the limit is {concurrent} at a time: wait for it to finish or cancel it "
            "(`liberopro cancel ID`)",
        )
    week = team.hidden_runs_per_week if team.hidden_runs_per_week is not None else settings.hidden_runs_per_week
    runs = session.execute(
        select(Submission.created_at, Submission.manifest_sha256).where(
            Submission.team_id == team.id,
            (Submission.state.in_([S.queued.value, S.validating.value]))
            | (Submission.manifest_sha256.isnot(None) & (Submission.created_at > utcnow() - dt.timedelta(days=7))),
        )
    ).all()
    if len(runs) >= week:
        ran = sorted(at for at, planned in runs if planned is not None)
        when = f"at {ran[0] + dt.timedelta(days=7):%Y-%m-%d %H:%M} UTC" if ran else "once a waiting submission ends"
        raise _error(
            429,
            "hidden_run_limit",
            f"team {team.name} has {len(runs)} submission(s) that ran or may run the hidden evaluation within 7 "
            f"days; the limit is {week} per week (each run lets a policy signal a bounded number of bits about "
            f"the hidden instances through what you read, docs/platform.md 'What remains observable'): the next "
            f"one is possible {when}",
        )
    since = utcnow() - dt.timedelta(days=1)
    recent = session.scalars(
        select(Submission.created_at)
        .where(Submission.team_id == team.id, Submission.created_at > since)
        .order_by(Submission.created_at)
    ).all()
    if len(recent) >= per_day:
        again = recent[0] + dt.timedelta(days=1)
        raise _error(
            429,
            "daily_limit",
            f"team {team.name} has used its {per_day} submissions of the last 24 h; "
            f"the next one is possible at {again:%Y-%m-%d %H:%M} UTC",
        )


def _created(request: Request, session: Session, sub: Submission) -> SubmissionCreated:
    session.flush()
    add_event(session, sub, "submitted")
    session.commit()
    request.app.state.enqueue.validate(sub.id)
    return SubmissionCreated(
        id=sub.id,
        state=sub.state,
        message=sub.message,
        queue_position=queue_position(session, sub),
        status_url=str(request.url_for("submission_status", submission_id=sub.id)),
    )


@router.post(
    "",
    response_model=SubmissionCreated,
    status_code=201,
    summary="Submit an image your team uploaded (sha256:<id>) or a digest of an allowed registry "
    "(or a command on a development platform)",
)
def submit(body: SubmitRequest, request: Request, session: SessionDep, user: CurrentUser) -> SubmissionCreated:
    settings = request.app.state.settings
    if (body.image is None) == (body.command is None):
        raise _error(422, "bad_request", "give exactly one of image (pinned by digest) or command")
    if body.command is not None:
        if settings.backend != "local":
            raise _error(
                422,
                "command_not_allowed",
                "this platform runs submissions in a Docker sandbox and "
                "accepts images only: submit an image (`liberopro submit IMAGE`)",
            )
        sub = Submission(
            team_id=user.team_id, user_id=user.id, source="command", policy_command=body.command, note=body.note
        )
    else:
        ref = (body.image or "").strip()  # not None: exactly one of image and command is given
        refusal = reference_refusal(session, user.team_id, user.team.name, ref, settings.allowed_registries)
        if refusal is not None:
            raise _error(refusal.status, refusal.error, refusal.message)
        sub = Submission(
            team_id=user.team_id,
            user_id=user.id,
            source="reference",
            image_ref=ref,
            image_digest=ref if IMAGE_ID.match(ref) else None,
            note=body.note,
        )
    check_limits(session, request, user.team)
    session.add(sub)
    return _created(request, session, sub)


@router.post(
    "/upload",
    response_model=SubmissionCreated,
    status_code=201,
    openapi_extra=UPLOAD_BODY_DOC,
    summary="Submit a `docker save` archive (air-gapped platforms)",
)
async def submit_upload(request: Request, session: SessionDep, user: CurrentUser) -> SubmissionCreated:
    """Multipart fields ``file`` (the archive) and ``note``. The token and the team's limits are
    checked before a byte of the body is read; the archive then streams to disk, refused at
    ``max_upload_bytes`` (413)."""
    settings = request.app.state.settings
    if settings.backend != "docker":
        raise _error(422, "upload_not_allowed", "this development platform runs commands, not images")
    await run_in_threadpool(check_limits, session, request, user.team)
    uploads = Path(settings.data_dir) / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    incoming = uploads / f"incoming-{secrets.token_hex(8)}.tar"
    archive = await receive_archive(request, incoming, settings.max_upload_bytes)

    def store() -> SubmissionCreated:
        sub = Submission(
            team_id=user.team_id,
            user_id=user.id,
            source="upload",
            note=archive.note,
            image_ref=f"upload:{archive.filename}",
        )
        session.add(sub)
        session.flush()
        dest = uploads / f"{sub.id}.tar"
        incoming.rename(dest)
        sub.upload_path = str(dest.resolve())
        return _created(request, session, sub)

    try:
        return await run_in_threadpool(store)
    finally:
        incoming.unlink(missing_ok=True)


@router.get("", response_model=list[SubmissionStatus], summary="Your team's submissions, newest first")
def list_submissions(
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200, description="How many, newest first.")] = 50,
) -> list[SubmissionStatus]:
    subs = session.scalars(
        select(Submission).where(Submission.team_id == user.team_id).order_by(Submission.created_at.desc()).limit(limit)
    ).all()
    return [status_of(request, session, s, with_events=False) for s in subs]


@router.get(
    "/{submission_id}",
    response_model=SubmissionStatus,
    name="submission_status",
    summary="Stage, queue position, progress, and what failed with how to fix it",
)
def get_submission(submission_id: str, request: Request, session: SessionDep, user: CurrentUser) -> SubmissionStatus:
    return status_of(request, session, _get_own(session, user, submission_id))


@router.get(
    "/{submission_id}/logs",
    response_class=PlainTextResponse,
    summary="The policy container's own output during validation (truncated); its output on the hidden "
    "instances is not shown",
)
def get_logs(submission_id: str, session: SessionDep, user: CurrentUser) -> str:
    sub = _get_own(session, user, submission_id)
    return sub.policy_log or "(no output from the policy yet)\n"


@router.post("/{submission_id}/cancel", response_model=SubmissionStatus, summary="Cancel a submission")
def cancel(submission_id: str, request: Request, session: SessionDep, user: CurrentUser) -> SubmissionStatus:
    sub = _get_own(session, user, submission_id)
    if sub.state not in ACTIVE_STATES:
        raise _error(409, "already_final", f"submission {sub.id} is already {sub.state}; nothing to cancel")
    request.app.state.pipeline.cancel(session, sub, by=user.name)
    session.commit()
    return status_of(request, session, sub)


#: The message of a submission waiting for its validation (``Submission.message``'s default).
DEFAULT_MESSAGE = "waiting for a worker"


class StatusView(TypedDict):
    """The parts of a status that move while a submission runs (kept as JSON in
    ``Submission.hidden_view`` for the hidden stage)."""

    state: str
    message: str
    shards_done: int
    episodes_done: int
    stuck_reason: str | None


def _live_view(request: Request, session: Session, sub: Submission, with_events: bool, admin: bool) -> StatusView:
    """What ``sub``'s status says now: state, message (what it waits for), shards and episodes
    done, stuck reason (live with ``with_events``, else the stored one; the admins' full text with
    ``admin``)."""
    settings = request.app.state.settings
    shards = sub.shards
    done = sum(s.state == ShardState.done.value for s in shards)
    message = sub.message
    if sub.state in (S.running.value, S.aggregating.value):
        message = hidden_message(sub.state, done, len(shards))
    wait = sandbox_wait(session, sub, settings.heartbeat_stale_s) if sub.state in ACTIVE_STATES else None
    if wait is not None:
        message = (
            f"queued: {wait.text()}"
            if sub.state == S.queued.value and message == DEFAULT_MESSAGE
            else f"{message}; {wait.text()}"
        )
    stuck = sub.stuck_reason
    if with_events and sub.state in ACTIVE_STATES:
        live = [s for s in request.app.state.pipeline.find_stuck(session) if s.submission_id == sub.id]
        stuck = "; ".join(dict.fromkeys(s.reason if admin else s.public for s in live)) or None
    return StatusView(
        state=sub.state, message=message, shards_done=done, episodes_done=sub.episodes_done, stuck_reason=stuck
    )


def _hidden_view(request: Request, session: Session, sub: Submission) -> tuple[StatusView, dt.datetime]:
    """The submitter's view of a submission in the hidden stage (running, aggregating): the live
    view (:func:`_live_view`) as it was at the last whole multiple of ``hidden_view_interval_s``
    seconds a reader asked at, and when it last changed (also such a tick). Stored on the
    submission (``hidden_view``), so every reader sees the same until the next tick: how the
    hidden stage moves (shard ends, waits, the start of aggregation) is readable at that
    resolution only, never at the second a policy chooses (disclosure.py)."""
    interval = request.app.state.settings.hidden_view_interval_s
    tick = dt.datetime.fromtimestamp(utcnow().timestamp() // interval * interval, tz=dt.UTC)
    stored = sub.hidden_view or {}
    checked = dt.datetime.fromisoformat(stored["checked"]) if stored.get("checked") else None
    if checked is not None and checked >= tick:  # read within this tick: what the tick showed (even if
        return stored["view"], dt.datetime.fromisoformat(stored["since"])  # the state moved since)
    view = _live_view(request, session, sub, with_events=True, admin=False)
    since: str = stored["since"] if stored.get("view") == view else tick.isoformat()
    sub.hidden_view = {"view": view, "since": since, "checked": tick.isoformat()}
    return view, dt.datetime.fromisoformat(since)


def status_of(
    request: Request, session: Session, sub: Submission, with_events: bool = True, admin: bool = False
) -> SubmissionStatus:
    """The submitter's view of ``sub``: where it is and what it waits for, progress, what failed
    and how to fix it (texts the platform wrote), the validation checks, and once published what
    the leaderboard shows for the result (:func:`liberopro.schema.public.public_result`).

    From planning until publication the hidden stage runs, and the view holds nothing the
    policy can steer per episode (:mod:`liberopro_platform.disclosure`): progress in whole shards,
    no termination-reason totals (once published, the leaderboard's), no event of a shard's
    attempts, and it moves only at ticks of ``hidden_view_interval_s`` (:func:`_hidden_view`;
    ``updated_at`` is then the tick it last changed at). ``admin`` (the admin route) shows the
    live view, counts of stored episodes and reasons. ``with_events`` False (the list) also leaves
    out the live stuck check outside the hidden stage (the stored ``stuck_reason`` is shown)."""
    shards = sub.shards
    result = session.scalar(select(Result).where(Result.submission_id == sub.id))
    public = public_result(result) if result is not None else None
    updated_at = sub.updated_at
    if (
        sub.state in (S.running.value, S.aggregating.value)
        and not admin
        and request.app.state.settings.hidden_view_interval_s > 0
    ):
        view, updated_at = _hidden_view(request, session, sub)
    else:
        view = _live_view(request, session, sub, with_events, admin)
    if admin:
        reasons = dict(
            session.execute(
                select(Episode.termination_reason, func.count())
                .where(Episode.submission_id == sub.id)
                .group_by(Episode.termination_reason)
            ).all()
        )
        view["episodes_done"] = sum(reasons.values())
    else:
        reasons = dict(public.termination_reasons) if public is not None else {}
    report = sub.validation_report or {}
    return SubmissionStatus(
        id=sub.id,
        team=sub.team.name,
        state=view["state"],
        message=view["message"],
        queue_position=queue_position(session, sub),
        progress=Progress(
            episodes_done=view["episodes_done"],
            episodes_total=sub.episodes_total,
            shards_done=view["shards_done"],
            shards_total=len(shards),
        ),
        failure_stage=sub.failure_stage,
        failure=sub.failure,
        fix=sub.fix,
        stuck_reason=view["stuck_reason"],
        image_ref=sub.image_ref,
        image_digest=sub.image_digest,
        policy_name=sub.policy_name,
        spec_version=sub.spec_version,
        validation_checks=[
            Check(**{k: c.get(k, "") for k in ("name", "ok", "detail", "hint")}) for c in report.get("checks", [])
        ],
        termination_reasons=reasons,
        created_at=sub.created_at,
        updated_at=updated_at,
        finished_at=sub.finished_at,
        result=public,
        events=[
            Event(at=e.at, state=e.state, message=e.message)
            for e in sub.events
            if admin or not e.message.startswith("[admin]")
        ]
        if with_events
        else [],
    )
