"""The must-show of the adapters: ``liberopro evaluate`` runs real LIBERO instances against an
openpi-protocol server and an OpenVLA-style server, with results identical in shape to a
``liberopro``-protocol run.

One module so the runs share their cost (tiny rollouts: libero_goal task 8, nominal and the
lighting shift S12, one episode, 8 policy steps):

* the example ``zero`` policy served by the SDK in each of the three protocols
  (``liberopro serve-example zero --protocol P``): same policy, three wires -> the records must be
  identical except timings and ids (``EpisodeRecord.outcome_key``);
* two servers that know nothing of LIBERO-Pro2.0, built to the published behaviour: an openpi
  server (openpi's LIBERO defaults: 224 px images from a 256 render, 8-number state, 10-action
  chunks executed 5 at a time) and an OpenVLA-OFT deploy.py server (json-numpy via the real
  ``json_numpy.patch()``, 8x7 chunks, gripper 1 = open) -> same record fields, no policy error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim  # steps real LIBERO scenes (tier: sim)

PEERS = Path(__file__).with_name("test_adapters_peers.py")
LIBEROPRO = str(Path(sys.executable).parent / "liberopro")
TASKS, SHIFTS, STEPS = "libero_goal:8", "nominal,S12", "8"

RUNS = {
    "liberopro": ("liberopro", "liberopro serve-example zero", []),
    "openpi": ("openpi", "liberopro serve-example zero --protocol openpi", []),
    "openvla": ("openvla", "liberopro serve-example zero --protocol openvla", []),
    "openpi-peer": ("openpi", f"{sys.executable} {PEERS} openpi", []),
    "oft-peer": ("openvla", f"{sys.executable} {PEERS} openvla --variant oft", ["variant=oft"]),
}


def _evaluate(name: str, out: Path) -> tuple[list[dict], dict, float]:
    protocol, cmd, options = RUNS[name]
    argv = [
        LIBEROPRO,
        "evaluate",
        "--policy-cmd",
        cmd,
        "--protocol",
        protocol,
        "--tasks",
        TASKS,
        "--shifts",
        SHIFTS,
        "--episodes",
        "1",
        "--max-steps",
        STEPS,
        "--out",
        str(out),
    ]
    for opt in options:
        argv += ["--protocol-option", opt]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    took = time.perf_counter() - t0
    assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return records, summary, took


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("adapters")
    with ThreadPoolExecutor(max_workers=2) as pool:  # two LIBERO processes at a time
        futures = {name: pool.submit(_evaluate, name, base / name) for name in RUNS}
        results = {name: f.result() for name, f in futures.items()}
    for name, (_, _, took) in results.items():
        print(f"{name}: {took:.1f} s")
    return results


def _outcome(record: dict) -> tuple:
    from liberopro.runs.summary import EpisodeRecord

    return EpisodeRecord.model_validate(record).outcome_key()


def _keys(obj) -> object:
    """The shape of a JSON document: its keys, recursively (lists by their first item; the
    free-form ``protocol_options`` map by nothing)."""
    if isinstance(obj, dict):
        return {k: None if k == "protocol_options" else _keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_keys(obj[0])] if obj and isinstance(obj[0], (dict, list)) else []
    return None


def test_the_same_policy_over_three_protocols_gives_the_same_results(runs):
    base_records, base_summary, _ = runs["liberopro"]
    assert [r["case"] for r in base_records] == ["nominal", "S12"]
    assert all(r["termination_reason"] == "horizon" and r["steps"] == 8 for r in base_records), base_records
    for name in ("openpi", "openvla"):
        records, summary, _ = runs[name]
        assert [_keys(r) for r in records] == [_keys(r) for r in base_records], name
        for mine, ref in zip(records, base_records, strict=True):
            # the evaluator's own definition of "the same episode" (timings and ids excluded)
            assert _outcome(mine) == _outcome(ref), name
            assert mine["latency"]["requests"] == ref["latency"]["requests"] == 8
        assert summary["cases"] == base_summary["cases"]
        assert summary["policy"]["protocol"] == name
        # the same conventions; a foreign protocol is served one episode at a time (docs/adapters.md)
        assert summary["policy"]["metadata"] == {**base_summary["policy"]["metadata"], "max_concurrent_episodes": None}
        assert _keys(summary) == _keys(base_summary)


@pytest.mark.parametrize("name,requests", [("openpi-peer", 2), ("oft-peer", 1)])
def test_servers_that_know_nothing_of_liberopro_run_with_the_same_record_fields(runs, name, requests):
    base_records, base_summary, _ = runs["liberopro"]
    records, summary, _ = runs[name]
    assert [_keys(r) for r in records] == [_keys(r) for r in base_records]
    assert _keys(summary) == _keys(base_summary)
    for r in records:
        # any convention mismatch (image size, state length, keys) fails inside the peer's model
        # and would end the episode with policy_http_error
        assert r["termination_reason"] == "horizon" and r["steps"] == 8, r["detail"]
        assert r["latency"]["requests"] == requests  # openpi: 10-chunks, 5 executed; OFT: 8 of 8
        assert r["latency"]["server_mean_ms"] is not None or name == "oft-peer"
    meta = summary["policy"]["metadata"]
    assert {c["name"]: c["height"] for c in meta["cameras"]} == (
        {"agentview": 224, "wrist": 224} if name == "openpi-peer" else {"agentview": 256, "wrist": 256}
    )
    assert summary["settings"]["render_size"] == 256
