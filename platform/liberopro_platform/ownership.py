"""Which images a team may submit: the rule the API applies when a reference is submitted and
the worker applies again before it touches the image (docs/platform.md, "Image identity").

- ``sha256:<id>``: only an id in the team's ``team_images`` rows (an image it uploaded, or one
  the platform pulled for it from an allowed registry). The answer never depends on whether the
  image exists on the engine, so it tells nothing about other teams' or the platform's images.
- ``repo@sha256:<digest>``: only from a registry on ``allowed_registries``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from liberopro_platform.db import transaction
from liberopro_platform.image_refs import IMAGE_ID, describe_allowed, parse_repo_digest, registry_allowed
from liberopro_platform.models import TeamImage

UPLOAD_HOW = (
    "upload it: `liberopro submit IMAGE` uploads a local image your team has not uploaded yet "
    "(`docker save IMAGE -o policy.tar`, then POST /submissions/upload)"
)


@dataclass(frozen=True)
class Refusal:
    """Why a reference is refused: an error code, what is wrong (``failure``), what to do
    (``fix``), and the HTTP status the API answers with."""

    error: str
    failure: str
    fix: str = UPLOAD_HOW
    status: int = 422

    @property
    def message(self) -> str:
        return f"{self.failure}: {self.fix}"


def owns_image(session: Session, team_id: int, image_id: str) -> bool:
    """True when team ``team_id`` uploaded (or had pulled) the image ``image_id``."""
    return (
        session.scalar(select(TeamImage.id).where(TeamImage.team_id == team_id, TeamImage.image_id == image_id))
        is not None
    )


def grant_image(
    sessions: sessionmaker[Session], team_id: int, image_id: str, source: str, submission_id: str | None
) -> None:
    """Record, in its own transaction, that team ``team_id`` may submit ``image_id`` (idempotent).
    The caller makes sure ``image_id`` is no platform image."""
    try:
        with transaction(sessions) as s:
            if not owns_image(s, team_id, image_id):
                s.add(TeamImage(team_id=team_id, image_id=image_id, source=source, submission_id=submission_id))
    except IntegrityError:
        pass  # recorded meanwhile by another submission of the team


def reference_refusal(
    session: Session, team_id: int, team_name: str, ref: str, allowed_registries: list[str]
) -> Refusal | None:
    """None when team ``team_id`` may submit ``ref``, else why not."""
    if IMAGE_ID.match(ref):
        if owns_image(session, team_id, ref):
            return None
        return Refusal(
            "image_not_owned",
            f"image {ref} was not uploaded by team {team_name}; the platform runs "
            "only images a team uploaded itself (or digests from its allowed registries: "
            f"{describe_allowed(allowed_registries)})",
            status=403,
        )
    digest = parse_repo_digest(ref)
    if digest is None:
        return Refusal(
            "image_not_pinned",
            f"the image reference {ref[:200]!r} is neither an image id "
            "sha256:<id> nor repo@sha256:<digest>, so what runs could differ from what you tested",
        )
    if not registry_allowed(digest, allowed_registries):
        return Refusal(
            "registry_not_allowed",
            f"{digest.registry} is not a registry this platform pulls from "
            f"(allowed: {describe_allowed(allowed_registries)})",
        )
    return None
