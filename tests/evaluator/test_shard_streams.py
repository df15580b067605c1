"""The one rule for a shard's simulator streams (``liberopro.schema.shard.shard_streams``), which
the platform uses to size ``ShardSpec.streams`` (light: no simulator, no policy object)."""

from __future__ import annotations

from liberopro.schema.shard import declared_concurrency, shard_streams, shard_streams_reason


def test_streams_never_exceed_what_the_policy_declares_or_the_episodes():
    assert shard_streams(4, "liberopro", 16, 20) == 4
    assert shard_streams(8, "liberopro", 2, 20) == 2
    assert shard_streams(8, "liberopro", 16, 3) == 3
    assert shard_streams(4, "liberopro", None, 20) == 1  # spec 1.0 declares none: one at a time
    assert shard_streams(4, "liberopro", 0, 20) == 1
    assert shard_streams(8, "openpi", 16, 20) == 1  # no episodes on its wire: serialised
    assert shard_streams(8, "openvla", None, 20) == 1
    assert shard_streams(0, "liberopro", 16, 0) == 1  # at least one
    assert declared_concurrency(None) == 1 and declared_concurrency(6) == 6


def test_the_reason_names_each_bound():
    assert shard_streams_reason(8, "liberopro", 16, 2) == (
        "2 stream(s): 8 asked, the policy serves 16 at once, 2 episode(s)"
    )
    assert "the policy serves 1 at once" in shard_streams_reason(8, "openpi", 16, 20)
