"""The termination-reason vocabulary (liberopro.schema.reasons): every reason the policy client
raises is in it, every reason has a side and a meaning, and only policy-side reasons are scored."""

from __future__ import annotations

from typing import get_args

from liberopro.schema.reasons import Side, TerminationReason, reasons_of, side_of
from submission_spec.client import FailureReason


def test_every_client_failure_reason_is_in_the_vocabulary_and_charged_to_the_policy():
    for reason in get_args(FailureReason):
        assert side_of(reason) is Side.policy, reason


def test_each_reason_has_one_side_and_a_meaning():
    assert set().union(*(reasons_of(s) for s in Side)) == set(TerminationReason)
    assert all(r.meaning for r in TerminationReason)
    assert {r for r in TerminationReason if r.scored} == reasons_of(Side.policy)
    assert reasons_of(Side.platform) == {TerminationReason.evaluator_error, TerminationReason.worker_crashed}
    assert reasons_of(Side.instance) == {TerminationReason.shift_invalid}


def test_a_string_outside_the_vocabulary_is_refused():
    import pytest

    with pytest.raises(ValueError):
        side_of("made_up")
