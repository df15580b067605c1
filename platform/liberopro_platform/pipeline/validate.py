"""Stage 1, validation: check that the team may submit the image (again: the API did, the settings
may have changed since), pin and check it, record that the team owns an uploaded or pulled
image, start it alone in a sandbox, run the conformance check; then plan (:mod:`.plan`).

Everything here is public in effect (the conformance check's inputs are synthetic and published),
so what failed reaches the submitter with its fix and the policy's own output."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from liberopro_platform.db import transaction
from liberopro_platform.disclosure import INTERNAL_FIX
from liberopro_platform.image_refs import IMAGE_ID
from liberopro_platform.models import Submission
from liberopro_platform.ownership import grant_image, reference_refusal
from liberopro_platform.pipeline.plan import plan
from liberopro_platform.pipeline.policies import release_all_policies
from liberopro_platform.pipeline.state import S, add_event, fail, get_submission, remove_quietly, set_state
from liberopro_platform.sandbox.base import PolicyRejected, PolicySource, PreparedImage, ValidationOutcome

if TYPE_CHECKING:
    from liberopro_platform.pipeline.core import Pipeline

log = logging.getLogger("liberopro_platform.pipeline")

#: States in which a validation task has nothing to do (it ran, or the submission ended).
_PAST_VALIDATION = (S.published.value, S.failed.value, S.cancelled.value, S.running.value, S.aggregating.value)


@dataclass(frozen=True)
class _Job:
    """A claimed validation: what to run, and what the image's preparation needs to know."""

    source: PolicySource
    upload: str | None  # the uploaded archive, until the image is loaded
    team_id: int
    kind: str  # the submission's source: reference, upload or command
    ref_is_id: bool  # the reference is an image id (the team's own upload), not a registry digest


def validate(p: Pipeline, submission_id: str) -> None:
    """Stage 1 (module docstring); bounded retries of an infrastructure fault."""
    with transaction(p.sessions) as s:
        job = _claim(p, s, submission_id)
    if job is None:
        return
    try:
        outcome = _check(p, submission_id, job)
    except PolicyRejected as exc:
        with transaction(p.sessions) as s:
            sub = get_submission(s, submission_id)
            fail(s, sub, "validation", exc.failure, exc.fix)
            if exc.admin_detail:
                add_event(s, sub, f"[admin] {exc.admin_detail[:2000]}")
        if job.upload:
            remove_quietly(job.upload)
        return
    except Exception as exc:  # noqa: BLE001 - an infrastructure fault: bounded retries
        log.exception("validation of %s failed", submission_id)
        _infrastructure_error(p, submission_id, f"{exc.__class__.__name__}: {exc}")
        return
    if _record(p, submission_id, outcome):
        plan(p, submission_id)


def _claim(p: Pipeline, s: Session, submission_id: str) -> _Job | None:
    """Claim ``submission_id``'s validation for this worker, or None when there is nothing to do:
    done or ended, another worker's live claim, attempts used up or an image the team may not
    submit (both fail it)."""
    sub = s.get(Submission, submission_id, with_for_update=True)
    if sub is None or sub.state in _PAST_VALIDATION:
        return None
    if sub.state == S.validating.value and not p.stale(sub.heartbeat_at):
        return None  # another worker is on it
    if sub.attempts >= p.settings.max_stage_attempts:
        fail(s, sub, "validation", f"validation was attempted {sub.attempts} times without finishing", INTERNAL_FIX)
        return None
    if sub.source == "reference" and sub.image_ref:
        refusal = reference_refusal(s, sub.team_id, sub.team.name, sub.image_ref, p.settings.allowed_registries)
        if refusal is not None:
            fail(s, sub, "validation", refusal.failure, refusal.fix)
            return None
    set_state(
        s,
        sub,
        S.validating,
        "validating: checking the image",
        worker=p.worker,
        heartbeat_at=p.now(),
        attempts=sub.attempts + 1,
        stuck_reason=None,
    )
    return _Job(
        source=PolicySource(
            submission_id=sub.id,
            image=sub.image_digest or sub.image_ref,
            command=sub.policy_command,
            protocol=sub.protocol,
        ),
        upload=sub.upload_path if not sub.image_digest else None,
        team_id=sub.team_id,
        kind=sub.source,
        ref_is_id=bool(sub.image_ref and IMAGE_ID.match(sub.image_ref)),
    )


def _check(p: Pipeline, submission_id: str, job: _Job) -> ValidationOutcome:
    """Prepare the image (:func:`_prepared`) and run the conformance check on it, alone on the
    node. Raises :class:`PolicyRejected` (the submitter's fault) or anything else (the platform's)."""
    backend = p.backend
    release_all_policies(p)  # this validation's policy container runs alone on the node
    prepared = backend.prepare(job.source, job.upload)
    source = job.source if prepared is None else _prepared(p, submission_id, job, prepared)
    return backend.validate(source, lambda: _beat(p, submission_id))


def _prepared(p: Pipeline, submission_id: str, job: _Job, prepared: PreparedImage) -> PolicySource:
    """Record the pinned image: the team owns an upload or a pulled digest, the submission names
    the image id, size and protocol, its notes become events; the archive goes unless kept for
    other nodes. Returns the source to validate."""
    from submission_spec.transports import protocol_from_labels

    source = PolicySource(
        submission_id=submission_id, image=prepared.digest, protocol=protocol_from_labels(prepared.labels)
    )
    if job.kind == "upload" or (job.kind == "reference" and not job.ref_is_id):
        grant_image(
            p.sessions, job.team_id, prepared.digest, "upload" if job.kind == "upload" else "registry", submission_id
        )
    with transaction(p.sessions) as s:
        sub = get_submission(s, submission_id)
        sub.image_digest, sub.image_size = prepared.digest, prepared.size
        sub.protocol = source.protocol
        for note in prepared.notes:
            add_event(s, sub, note)
        set_state(
            s,
            sub,
            S.validating,
            f"validating: image {prepared.digest[:19]} "
            f"({prepared.size / 2**30:.2f} GiB) started in the sandbox, conformance check running",
        )
    if job.upload and not p.settings.keep_uploads_until_done:
        remove_quietly(job.upload)
    return source


def _record(p: Pipeline, submission_id: str, outcome: ValidationOutcome) -> bool:
    """Store the validation's report, the policy's output and metadata; fail the submission when
    the check failed. True when it passed (and was not cancelled meanwhile): plan it."""
    with transaction(p.sessions) as s:
        sub = get_submission(s, submission_id, lock=True)
        if sub.state != S.validating.value:
            return False  # cancelled meanwhile
        sub.validation_report = outcome.report
        sub.policy_log = "=== validation ===\n" + (outcome.policy_log or "(no output)\n")
        if outcome.metadata:
            sub.policy_metadata = outcome.metadata
            sub.policy_name = outcome.metadata.get("policy_name")
            sub.spec_version = outcome.metadata.get("spec_version")
        if not outcome.ok:
            fail(s, sub, "validation", outcome.failure or "validation failed", outcome.fix or "")
            return False
    return True


def _beat(p: Pipeline, submission_id: str) -> bool:
    """Heartbeat of a validation; False when the submission was cancelled (stop now)."""
    with transaction(p.sessions) as s:
        s.execute(update(Submission).where(Submission.id == submission_id).values(heartbeat_at=p.now()))
        return s.scalar(select(Submission.state).where(Submission.id == submission_id)) == S.validating.value


def _infrastructure_error(p: Pipeline, submission_id: str, detail: str) -> None:
    """A platform fault during validation: queued again with a backoff, or failed once its
    attempts are used up (``max_stage_attempts``); ``detail`` goes to the admins."""
    log.warning("validation of %s: infrastructure error: %s", submission_id, detail)
    with transaction(p.sessions) as s:
        sub = get_submission(s, submission_id, lock=True)
        if sub.state != S.validating.value:
            return
        if sub.attempts >= p.settings.max_stage_attempts:
            fail(
                s,
                sub,
                "validation",
                f"the platform could not validate the image (internal error, {sub.attempts} attempts)",
                INTERNAL_FIX,
            )
            add_event(s, sub, f"[admin] last error: {detail[:2000]}")
            return
        set_state(
            s,
            sub,
            S.queued,
            f"validation will be retried after a platform error "
            f"(attempt {sub.attempts} of {p.settings.max_stage_attempts})",
            worker=None,
        )
        add_event(s, sub, f"[admin] {detail[:2000]}")
        attempts = sub.attempts
    p.enqueue.validate(submission_id, countdown=min(60.0, 5.0 * 2**attempts))
