"""API tokens: ``lp_<token id>_<secret>``. The id finds the row; only SHA-256(secret) is stored
(the secret is 256 random bits, so a fast hash is enough). Verification says WHY a token is
refused, so the client can tell the user what to do instead of "Error: None"."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from sqlalchemy.orm import Session

from liberopro_platform.models import ApiToken, User, utcnow

TOKEN_PREFIX = "lp"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(session: Session, user: User, ttl_days: int, label: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user`` valid ``ttl_days`` days; returns the row and the plain token
    (shown once, never stored)."""
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    row = ApiToken(
        id=token_id,
        user_id=user.id,
        secret_sha256=hash_secret(secret),
        label=label,
        expires_at=utcnow() + dt.timedelta(days=ttl_days),
    )
    session.add(row)
    session.flush()
    return row, f"{TOKEN_PREFIX}_{token_id}_{secret}"


class TokenRefused(Exception):
    """Why a token is not accepted: ``reason`` is missing, malformed, unknown, expired or revoked;
    ``message`` says what to do."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Authenticated:
    user: User
    token: ApiToken


def authenticate(session: Session, raw: str | None, now: dt.datetime | None = None) -> Authenticated:
    """The user behind ``raw`` (the token text), or :class:`TokenRefused` with the reason."""
    now = now or utcnow()
    if not raw:
        raise TokenRefused(
            "missing",
            "no API token given: send 'Authorization: Bearer <token>' "
            "(the CLI reads LIBEROPRO_TOKEN or ~/.config/liberopro/platform.toml)",
        )
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not re.fullmatch(r"[0-9a-f]{1,16}", parts[1]) or not parts[2]:
        raise TokenRefused(
            "malformed",
            "the API token is malformed: tokens look like lp_<id>_<secret>; copy it again from where it was issued",
        )
    row = session.get(ApiToken, parts[1])
    if row is None or not hmac.compare_digest(row.secret_sha256, hash_secret(parts[2])):
        raise TokenRefused(
            "unknown",
            f"API token lp_{parts[1]}_... is not known to this platform: check "
            "the platform URL, or ask an admin for a new token",
        )
    if row.revoked_at is not None:
        raise TokenRefused(
            "revoked",
            f"API token lp_{row.id}_... was revoked on "
            f"{row.revoked_at:%Y-%m-%d %H:%M} UTC: create a new one (POST /tokens) or ask an admin",
        )
    if row.expires_at <= now:
        raise TokenRefused(
            "expired",
            f"API token lp_{row.id}_... expired on {row.expires_at:%Y-%m-%d %H:%M} UTC: "
            "create a new one (POST /tokens with a valid token) or ask an admin",
        )
    row.last_used_at = now
    return Authenticated(user=row.user, token=row)
