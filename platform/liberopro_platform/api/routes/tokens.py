"""Your identity and your API tokens (create, list, revoke)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy import select

from liberopro_platform.api.deps import CurrentUser, SessionDep, plausible_id
from liberopro_platform.api.schemas import TokenCreate, TokenInfo, TokenIssued
from liberopro_platform.models import ApiToken, utcnow
from liberopro_platform.security import issue_token

router = APIRouter(tags=["tokens"])


@router.get("/me", summary="Who the token belongs to")
def me(user: CurrentUser) -> dict:
    return {"user": user.name, "team": user.team.name, "is_admin": user.is_admin}


@router.post("/tokens", response_model=TokenIssued, status_code=201, summary="Create a new token for yourself")
def create_token(body: TokenCreate, request: Request, session: SessionDep, user: CurrentUser) -> TokenIssued:
    days = body.days or request.app.state.settings.token_ttl_days
    row, token = issue_token(session, user, days, body.label)
    return TokenIssued(token=token, id=row.id, expires_at=row.expires_at)


@router.get("/tokens", response_model=list[TokenInfo], summary="Your tokens (never their secrets)")
def list_tokens(session: SessionDep, user: CurrentUser) -> list[TokenInfo]:
    rows = session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.created_at)).all()
    return [TokenInfo.model_validate(r, from_attributes=True) for r in rows]


@router.delete("/tokens/{token_id}", response_model=TokenInfo, summary="Revoke one of your tokens")
def revoke_token(token_id: str, session: SessionDep, user: CurrentUser) -> TokenInfo:
    row = session.get(ApiToken, token_id) if plausible_id(token_id) else None
    if row is None or (row.user_id != user.id and not user.is_admin):
        raise HTTPException(404, detail={"error": "not_found", "message": f"you have no token {token_id[:80]!r}"})
    if row.revoked_at is None:
        row.revoked_at = utcnow()
    return TokenInfo.model_validate(row, from_attributes=True)
