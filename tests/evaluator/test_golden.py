"""The golden run: behaviour pinned across refactors.

A fixed manifest (3 tasks of 3 suites; nominal, S01, S14, S19, D01, D10, D18; 2 episodes of 24
steps) is evaluated through ``liberopro evaluate`` by a recording policy (seeded random actions,
a digest of every observation it receives). Records (without wall-clock fields), observation
digests and the manifest's content hash must equal ``tests/golden/expected.json``, recorded on
the code before the reorganisation of issue 10. A change that alters behaviour on purpose
re-records it (``python -m tests.golden.run --record``) and says why in its commit.
"""

from __future__ import annotations

import json

import pytest

from tests.golden.run import EXPECTED, run_golden

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)


def test_golden_run_is_unchanged(tmp_path):
    expected = json.loads(EXPECTED.read_text())
    got = run_golden(tmp_path)
    assert got["manifest_content_hash"] == expected["manifest_content_hash"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["manifest_sha256"] == expected["manifest_content_hash"], "the summary names the manifest it ran"
    assert sorted(got["records"]) == sorted(expected["records"])
    for key, record in expected["records"].items():
        assert got["records"][key] == record, key
    for key, digests in expected["observations"].items():
        assert len(got["observations"][key]) == len(digests), key
        for i, (a, b) in enumerate(zip(got["observations"][key], digests, strict=True)):
            assert a == b, f"{key}: observation {i} (step {b['step']}) differs"
