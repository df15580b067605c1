"""Request and response bodies of the platform API."""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Annotated

from liberopro.schema.public import PublicResult
from pydantic import AfterValidator, BaseModel, Field


def text_problem(value: str, newlines: bool = False) -> str | None:
    """What makes ``value`` unfit to store, or None: a control character (NUL included, which
    PostgreSQL cannot store; tab and line breaks allowed when ``newlines``) or a lone UTF-16
    surrogate (not encodable as UTF-8)."""
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in ("Cc", "Cs") and not (newlines and ch in "\t\n\r"):
            return f"holds the character {ch!r} at position {i}: control characters are not accepted"
    return None


def _line(value: str) -> str:
    if (problem := text_problem(value)) is not None:
        raise ValueError(problem)
    return value


def _text(value: str) -> str:
    if (problem := text_problem(value, newlines=True)) is not None:
        raise ValueError(problem)
    return value


#: One line of text (a name, a label): no control characters.
Line = Annotated[str, AfterValidator(_line)]
#: Free text (a note, a command): no control characters except tab and line breaks.
Text = Annotated[str, AfterValidator(_text)]


class SubmitRequest(BaseModel):
    """Exactly one of ``image`` (the image id ``sha256:<id>`` of an image the team uploaded, or
    ``repo@sha256:<digest>`` from one of the platform's allowed registries) or ``command``
    (development platforms on the local backend only: a shell command serving the policy on $PORT)."""

    image: str | None = Field(
        None, max_length=500, examples=["registry.example.org/team/policy@sha256:0123...", "sha256:4f2a..."]
    )
    command: Text | None = Field(None, max_length=10_000)
    note: Text = Field("", max_length=2000)


class OwnedImage(BaseModel):
    image_id: str
    source: str = Field(..., description="upload, or registry (pulled by digest from an allowed registry)")
    since: dt.datetime


class TeamImages(BaseModel):
    """What a team may submit by reference."""

    allowed_registries: list[str] = Field(
        ..., description="Registries whose repo@sha256 digests are accepted (empty: none, images are uploaded)."
    )
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
    """How far a submission is, in whole shards while the hidden stage runs (``episodes_done``
    counts the episodes of the shards done): nothing a policy could modulate per episode is shown
    (docs/platform.md, "What the submitter sees")."""

    episodes_done: int = Field(..., description="Episodes of the shards done (whole shards).")
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
    termination_reasons: dict[str, int] = Field(
        {},
        description="Episodes per termination reason: empty until the result is published, then what the "
        "leaderboard shows (the hidden stage's per-episode endings are not shown while it runs).",
    )
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None = None
    result: PublicResult | None = Field(
        None,
        description="Once published: what the public leaderboard shows for this result (aggregate rates "
        "with intervals and counts, provenance); per-task and per-instance rates, the seed and the reasons "
        "episodes were invalid stay with the platform's admins.",
    )
    events: list[Event] = []


class SubmissionCreated(BaseModel):
    id: str
    state: str
    message: str
    queue_position: int | None
    status_url: str


class TokenCreate(BaseModel):
    label: Line = Field("", max_length=200)
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
    name: Line = Field(..., min_length=1, max_length=100)
    submissions_per_day: int | None = Field(None, ge=0, le=1_000_000)
    max_concurrent: int | None = Field(None, ge=0, le=1_000_000)


class UserCreate(BaseModel):
    name: Line = Field(..., min_length=1, max_length=200)
    team: Line = Field(..., min_length=1, max_length=100)
    is_admin: bool = False


class HideRequest(BaseModel):
    hidden: bool = True


class StuckItem(BaseModel):
    submission_id: str
    state: str
    reason: str
    action: str
    shard_id: int | None = None
