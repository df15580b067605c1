"""Injected dependencies: the database session, the current user (from the bearer token) and
the admin check. A refused token answers 401 with the reason (missing, malformed, unknown,
expired, revoked) in the body and in ``WWW-Authenticate``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from liberopro_platform.models import User
from liberopro_platform.security import TokenRefused, authenticate

#: What a public id (submission, token) can look like: ids are short ASCII (``models.new_id``).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def plausible_id(value: str) -> bool:
    """True when ``value`` could be an id; anything else (a NUL byte, other control characters,
    non-ASCII, over 64 characters) is unknown without asking the database, which would refuse
    some of it (PostgreSQL cannot compare text holding NUL)."""
    return _ID.fullmatch(value) is not None


def get_session(request: Request) -> Iterator[Session]:
    """One session per request, committed when the handler returns normally."""
    factory = request.app.state.sessions
    with factory() as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() not in ("bearer", "token"):
        raise HTTPException(
            401,
            detail={"error": "token_malformed", "message": "use 'Authorization: Bearer <token>'"},
            headers={"WWW-Authenticate": 'Bearer error="invalid_request"'},
        )
    return value.strip()


SessionDep = Annotated[Session, Depends(get_session)]


def current_user(request: Request, session: SessionDep) -> User:
    """The authenticated user; 401 with the reason otherwise."""
    try:
        auth = authenticate(session, _bearer(request))
    except TokenRefused as exc:
        session.rollback()
        desc = exc.message.replace('"', "'")
        raise HTTPException(
            401,
            detail={"error": f"token_{exc.reason}", "message": exc.message},
            headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{desc}"'},
        ) from None
    session.commit()  # last_used_at
    return auth.user


CurrentUser = Annotated[User, Depends(current_user)]


def admin_user(user: CurrentUser) -> User:
    """The current user if an admin; 403 otherwise."""
    if not user.is_admin:
        raise HTTPException(403, detail={"error": "not_admin", "message": f"user {user.name} is not an admin"})
    return user


AdminUser = Annotated[User, Depends(admin_user)]
