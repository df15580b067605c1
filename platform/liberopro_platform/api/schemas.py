"""Request and response bodies of the platform API."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field


class SubmitRequest(BaseModel):
    """Exactly one of ``image`` (the image id ``sha256:<id>`` of an image the team uploaded, or
    ``repo@sha256:<digest>`` from one of the platform's allowed registries) or ``command``
    (development platforms on the local backend only: a shell command serving the policy on $PORT)."""

    image: str | None = Field(None, examples=["registry.example.org/team/policy@sha256:0123...", "sha256:4f2a..."])
    command: str | None = None
    note: str = Field("", max_length=2000)


class OwnedImage(BaseModel):
    image_id: str
    source: str = Field(..., description="upload, or registry (pulled by digest from an allowed registry)")
    since: dt.datetime


class TeamImages(BaseModel):
    """What a team may submit by reference."""

    allowed_registries: list[str] = Field(..., description="Registries whose repo@sha256 digests are accepted "
                                          "(empty: none, images are uploaded).")
    owned: list[OwnedImage] = Field(..., description="Image ids the team may submit as sha256:<id> (newest 200).")


class ImageOwnership(BaseModel):
    image_id: str
    owned: bool = Field(..., description="True when the team uploaded this image (submit it by id, no upload).")


class Check(BaseModel):
    name: str
    ok: bool
    detail: str = ""
    hint: str = ""


class Progress(BaseModel):
    episodes_done: int
    episodes_total: int
    shards_done: int
    shards_total: int


class Event(BaseModel):
    at: dt.datetime
    state: str
    message: str


class SubmissionStatus(BaseModel):
    """Everything a submitter may know about a submission (never evaluator internals or instance data)."""

    id: str
    team: str
    state: str
    message: str = Field(..., description="What is happening now, in words.")
    queue_position: int | None = Field(None, description="Active submissions ahead of this one (None once final).")
    progress: Progress
    failure_stage: str | None = None
    failure: str | None = Field(None, description="What failed.")
    fix: str | None = Field(None, description="What to do about it.")
    stuck_reason: str | None = Field(None, description="Why it is not moving, when it is not.")
    image_ref: str | None = None
    image_digest: str | None = None
    policy_name: str | None = None
    spec_version: str | None = None
    validation_checks: list[Check] = []
    termination_reasons: dict[str, int] = {}
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None = None
    result: dict[str, Any] | None = Field(None, description="The published summary, once published.")
    events: list[Event] = []


class SubmissionCreated(BaseModel):
    id: str
    state: str
    message: str
    queue_position: int | None
    status_url: str


class TokenCreate(BaseModel):
    label: str = ""
    days: int | None = Field(None, ge=1, le=3650)


class TokenIssued(BaseModel):
    token: str = Field(..., description="Shown once; store it (the platform keeps only a hash).")
    id: str
    expires_at: dt.datetime


class TokenInfo(BaseModel):
    id: str
    label: str
    created_at: dt.datetime
    expires_at: dt.datetime
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None


class TeamCreate(BaseModel):
    name: str
    submissions_per_day: int | None = None
    max_concurrent: int | None = None


class UserCreate(BaseModel):
    name: str
    team: str
    is_admin: bool = False


class HideRequest(BaseModel):
    hidden: bool = True


class StuckItem(BaseModel):
    submission_id: str
    state: str
    reason: str
    action: str
    shard_id: int | None = None
