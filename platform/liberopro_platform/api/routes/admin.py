"""Admin endpoints: teams, users and their tokens; stuck submissions; requeue; hide a result."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from liberopro_platform.api.deps import AdminUser, SessionDep, plausible_id
from liberopro_platform.api.routes.submissions import status_of
from liberopro_platform.api.schemas import (
    HideRequest,
    StuckItem,
    TeamCreate,
    TokenCreate,
    TokenIssued,
    UserCreate,
    text_problem,
)
from liberopro_platform.models import Result, Submission, Team, User
from liberopro_platform.pipeline import add_event
from liberopro_platform.security import issue_token

router = APIRouter(prefix="/admin", tags=["admin"])


def _not_found(what: str) -> HTTPException:
    return HTTPException(404, detail={"error": "not_found", "message": f"no {what}"})


def _storable(value: str, max_length: int) -> bool:
    """True when ``value`` (a name from a path) could be stored at all: not too long, no control
    characters (PostgreSQL cannot compare text holding NUL)."""
    return len(value) <= max_length and text_problem(value) is None


def _submission(session, submission_id: str) -> Submission:
    sub = session.get(Submission, submission_id) if plausible_id(submission_id) else None
    if sub is None:
        raise _not_found(f"submission {submission_id[:80]!r}")
    return sub


@router.post("/teams", status_code=201, summary="Create a team")
def create_team(body: TeamCreate, session: SessionDep, _: AdminUser) -> dict:
    team = Team(name=body.name, submissions_per_day=body.submissions_per_day, max_concurrent=body.max_concurrent)
    session.add(team)
    try:
        session.flush()
    except IntegrityError:
        raise HTTPException(409, detail={"error": "exists", "message": f"team {body.name} exists"}) from None
    return {"id": team.id, "name": team.name}


@router.post("/users", status_code=201, summary="Create a user in a team")
def create_user(body: UserCreate, session: SessionDep, _: AdminUser) -> dict:
    team = session.scalar(select(Team).where(Team.name == body.team))
    if team is None:
        raise _not_found(f"team {body.team}")
    user = User(name=body.name, team_id=team.id, is_admin=body.is_admin)
    session.add(user)
    try:
        session.flush()
    except IntegrityError:
        raise HTTPException(409, detail={"error": "exists", "message": f"user {body.name} exists"}) from None
    return {"id": user.id, "name": user.name, "team": team.name, "is_admin": user.is_admin}


@router.post("/users/{name}/tokens", response_model=TokenIssued, status_code=201, summary="Issue a token for a user")
def issue_user_token(name: str, body: TokenCreate, request: Request, session: SessionDep, _: AdminUser) -> TokenIssued:
    user = session.scalar(select(User).where(User.name == name)) if _storable(name, 200) else None
    if user is None:
        raise _not_found(f"user {name[:80]!r}")
    row, token = issue_token(session, user, body.days or request.app.state.settings.token_ttl_days, body.label)
    return TokenIssued(token=token, id=row.id, expires_at=row.expires_at)


@router.get("/stuck", response_model=list[StuckItem], summary="Submissions that are not moving, with the reason")
def list_stuck(request: Request, session: SessionDep, _: AdminUser) -> list[StuckItem]:
    return [StuckItem(**vars(s)) for s in request.app.state.pipeline.find_stuck(session)]


@router.post("/sweep", response_model=list[StuckItem], summary="Act on stuck submissions now (also runs every minute)")
def sweep(request: Request, _: AdminUser) -> list[StuckItem]:
    return [StuckItem(**vars(s)) for s in request.app.state.pipeline.sweep_stuck()]


@router.post("/submissions/{submission_id}/requeue", summary="Run a failed, cancelled or stuck submission again")
def requeue(submission_id: str, request: Request, session: SessionDep, admin: AdminUser) -> dict:
    _submission(session, submission_id)
    session.close()
    try:
        action = request.app.state.pipeline.requeue(submission_id, by=admin.name)
    except ValueError as exc:
        raise HTTPException(409, detail={"error": "not_requeueable", "message": str(exc)}) from None
    return {"id": submission_id, "requeued": action}


@router.post("/submissions/{submission_id}/hide", summary="Hide (or show) a published result on the leaderboard")
def hide(submission_id: str, body: HideRequest, session: SessionDep, admin: AdminUser) -> dict:
    result = (
        session.scalar(select(Result).where(Result.submission_id == submission_id))
        if plausible_id(submission_id)
        else None
    )
    if result is None:
        raise _not_found(f"published result for submission {submission_id[:80]!r}")
    result.hidden = body.hidden
    add_event(session, result.submission, f"result {'hidden' if body.hidden else 'shown'} by {admin.name}")
    return {"id": submission_id, "hidden": result.hidden}


@router.get(
    "/submissions/{submission_id}",
    summary="Everything about a submission, internals included: the "
    "whole summary (per-task rates, seed, invalid reasons), every event, each shard's last error and the "
    "policy's output on the hidden instances",
)
def inspect(submission_id: str, request: Request, session: SessionDep, _: AdminUser) -> dict:
    sub = _submission(session, submission_id)
    status = status_of(request, session, sub, admin=True).model_dump(mode="json")
    status["events"] = [{"at": e.at.isoformat(), "state": e.state, "message": e.message} for e in sub.events]
    status["shards"] = [
        {
            "index": s.index,
            "state": s.state,
            "attempts": s.attempts,
            "worker": s.worker,
            "heartbeat_at": s.heartbeat_at.isoformat() if s.heartbeat_at else None,
            "episodes_total": s.episodes_total,
            "last_error": s.last_error,
            "evaluator": s.evaluator,
            "policy_log": s.policy_log,
        }
        for s in sub.shards
    ]
    status["worker"] = sub.worker
    result = session.scalar(select(Result).where(Result.submission_id == sub.id))
    status["summary"] = result.summary if result is not None else None
    status["hidden"] = result.hidden if result is not None else None
    return status
