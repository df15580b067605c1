"""The images a team may submit by id, and the registries the platform pulls from: what
``liberopro submit`` asks before it decides to upload (docs/platform.md, "Image identity")."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy import select

from liberopro_platform.api.deps import CurrentUser, SessionDep
from liberopro_platform.api.schemas import ImageOwnership, OwnedImage, TeamImages
from liberopro_platform.image_refs import IMAGE_ID, normalize_registry
from liberopro_platform.models import TeamImage
from liberopro_platform.ownership import owns_image

router = APIRouter(prefix="/images", tags=["images"])


@router.get(
    "",
    response_model=TeamImages,
    summary="The registries this platform pulls from, and the image ids your team may submit",
)
def list_images(request: Request, session: SessionDep, user: CurrentUser) -> TeamImages:
    rows = session.scalars(
        select(TeamImage).where(TeamImage.team_id == user.team_id).order_by(TeamImage.created_at.desc()).limit(200)
    ).all()
    allowed = sorted({normalize_registry(r) for r in request.app.state.settings.allowed_registries})
    return TeamImages(
        allowed_registries=allowed,
        owned=[OwnedImage(image_id=r.image_id, source=r.source, since=r.created_at) for r in rows],
    )


@router.get(
    "/{image_id}",
    response_model=ImageOwnership,
    summary="Whether your team may submit this image id (it uploaded it) without uploading it again",
)
def get_image(image_id: str, session: SessionDep, user: CurrentUser) -> ImageOwnership:
    if not IMAGE_ID.match(image_id):
        raise HTTPException(
            422,
            detail={
                "error": "not_an_image_id",
                "message": f"{image_id[:100]!r} is not an image id sha256:<64 hex digits> "
                "(`docker inspect --format '{{.Id}}' IMAGE`)",
            },
        )
    return ImageOwnership(image_id=image_id, owned=owns_image(session, user.team_id, image_id))
