"""The evaluator's events as the platform consumes them: marked stdout lines parsed into the typed
union (``liberopro.schema.results.Event``) and handed to the shard callbacks by the one
``dispatch_event`` both backends use. No database, no simulator."""

from __future__ import annotations

from liberopro.schema.reasons import TerminationReason
from liberopro.schema.results import (
    DoneEvent,
    EpisodeEvent,
    EpisodeRecord,
    ErrorEvent,
    HelloEvent,
    MetadataEvent,
    event_json,
)
from liberopro.schema.shard import MARK, parse_event
from liberopro_platform.sandbox.base import POLICY_CRASHED, dispatch_event

from tests.evaluator.report_runs import policy_records


class Callbacks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def on_hello(self, info):
        self.calls.append(("hello", info))

    def on_metadata(self, metadata):
        self.calls.append(("metadata", metadata))

    def on_record(self, record):
        self.calls.append(("record", record))

    def heartbeat(self):
        pass

    def should_stop(self):
        return False


def test_marked_lines_become_typed_events_and_reach_the_callbacks():
    record = policy_records({"D01": 0.0}, diagnostics=False)[0].model_copy(
        update={"termination_reason": TerminationReason.policy_timeout}
    )
    lines = [
        MARK + event_json(HelloEvent(evaluator_version="0.1.0", stack={"mujoco": "2.3.7"})),
        "some other output",
        MARK + "{not json",
        MARK + '{"type": "unknown"}',
        MARK + event_json(MetadataEvent(metadata={"policy_name": "p"})),
        MARK + event_json(EpisodeEvent(record=record)),
        MARK + event_json(DoneEvent(episodes=1)),
    ]
    events = [e for e in map(parse_event, lines) if e is not None]
    assert [e.type for e in events] == ["hello", "metadata", "episode", "done"]

    def name_cause(rec: EpisodeRecord) -> EpisodeRecord:
        return rec.with_cause(POLICY_CRASHED, "the policy container exited with code 3 during the episode")

    cb = Callbacks()
    ends = [dispatch_event(e, cb, name_cause) for e in events]
    assert ends[:3] == [None, None, None] and isinstance(ends[3], DoneEvent)
    assert cb.calls[0] == ("hello", {"evaluator_version": "0.1.0", "stack": {"mujoco": "2.3.7"}})
    assert cb.calls[1] == ("metadata", {"policy_name": "p"})
    kind, stored = cb.calls[2]
    assert kind == "record" and isinstance(stored, EpisodeRecord)
    # Typed end to end: the named cause, the evaluator's reason kept in the detail, all else as sent.
    assert stored.model_dump(mode="json") == {
        **record.model_dump(mode="json"),
        "termination_reason": "policy_crashed",
        "detail": "the policy container exited with code 3 during the episode; the evaluator saw policy_timeout:",
    }
    assert isinstance(dispatch_event(ErrorEvent(kind="internal", message="x"), cb), ErrorEvent)


def test_a_named_cause_keeps_what_the_evaluator_saw():
    """``EpisodeRecord.with_cause``: the platform's account first, the evaluator's reason and detail
    after it; a copy (the evaluator's record is not changed), typed (the vocabulary's enum)."""
    record = policy_records({"D01": 0.0}, diagnostics=False)[0].model_copy(
        update={"termination_reason": TerminationReason.policy_http_error, "detail": "HTTP 500: boom"}
    )
    named = record.with_cause(TerminationReason.policy_out_of_memory, "the policy container was killed (1g)")
    assert named.termination_reason is TerminationReason.policy_out_of_memory
    assert named.detail == "the policy container was killed (1g); the evaluator saw policy_http_error: HTTP 500: boom"
    assert record.termination_reason is TerminationReason.policy_http_error and record.detail == "HTTP 500: boom"
    assert named.model_dump(exclude={"termination_reason", "detail"}) == record.model_dump(
        exclude={"termination_reason", "detail"}
    )
