"""Synthetic run directories for the report tests: real :class:`EpisodeRecord` objects and the
real :func:`summarize`, written the way ``liberopro evaluate --out DIR`` writes them (no simulator)."""

from __future__ import annotations

import json
from pathlib import Path

from liberopro.runs.summary import EpisodeRecord, summarize
from liberopro.schema.results import RunHeader, run_header

SHIFT = {
    "S01": ("object pose", "Condition", "static"),
    "S12": ("lighting", "Environment", "static"),
    "D01": ("object pose", "Condition", "runtime"),
    "D10": ("observation freeze", "Observation", "runtime"),
}
TASKS = (0, 1)
EPISODES = 4


def record(
    case: str,
    task: int,
    episode: int,
    ok: bool,
    *,
    observations: str = "live",
    recovery: str = "none",
    replan: int = 5,
    seed: int = 0,
    instance_suffix: str = "",
) -> EpisodeRecord:
    ids = [] if case == "nominal" else case.split("+")
    shifts = [
        {
            "id": i,
            "name": SHIFT[i][0],
            "category": SHIFT[i][1],
            "kind": SHIFT[i][2],
            "params": {},
            "applied": {},
            **({"fired_at_step": 40, "fired_by": "fallback"} if SHIFT[i][2] == "runtime" else {}),
        }
        for i in ids
    ]
    return EpisodeRecord(
        instance_id=f"inst-{case}-{task}{instance_suffix}",
        case=case,
        suite="libero_goal",
        task_index=task,
        task_name=f"task {task}",
        episode_index=episode,
        init_state_id=episode,
        seed=seed + episode,
        shifts=shifts,
        success=ok,
        steps=10,
        horizon=300,
        termination_reason="success" if ok else "horizon",
        instruction="do it",
        observations=observations,
        recovery={"protocol": recovery},
        replan_steps=replan,
        episode_id=f"e{episode}",
        wall_s=1.0,
    )


def header(
    name: str,
    *,
    cmd: str | None = None,
    manifest: str | None = None,
    own_replan: int = 5,
    replan_override: int | None = None,
    max_steps: int | None = None,
) -> RunHeader:
    """What ``liberopro.runs.evaluation.run_evaluation`` (plus the CLI's extra header) records, built
    by the same :func:`~liberopro.schema.results.run_header`."""
    return run_header(
        evaluator_version="0.1.0",
        stack={"mujoco": "2.3.7"},
        started="2025-01-01T00:00:00+00:00",
        finished="2025-01-01T01:00:00+00:00",
        command=["liberopro", "evaluate"],
        policy={
            "url": None,
            "cmd": cmd or f"python serve_{name}.py",
            "protocol": "liberopro",
            "encoding": "msgpack",
            "protocol_options": {},
            "metadata": {"policy_name": name, "chunk_length": 10, "replan_steps": own_replan},
            "restarts": 0,
            "pids": [],
        },
        settings={
            "render_size": 128,
            "max_steps": max_steps,
            "episode_policy_budget_s": 600.0,
            "replan_steps": replan_override,
            "recovery_hold_steps": 20,
            "recovery_extra_steps": 60,
            "stop_when_shifts_done": False,
        },
        instances=0,
        skipped_pairs=[],
        manifest=None,
        manifest_sha256=manifest,
    )


def write_run(out: Path, records: list[EpisodeRecord], head: RunHeader) -> Path:
    """Write ``episodes.jsonl``, ``instances.jsonl`` and ``summary.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "episodes.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    ids = sorted({(r.instance_id, r.suite, r.task_index) for r in records})
    (out / "instances.jsonl").write_text(
        "".join(json.dumps({"instance_id": i, "suite": s, "task_index": t}) + "\n" for i, s, t in ids)
    )
    summary = summarize(records, head.model_copy(update={"instances": len(ids)}))
    (out / "summary.json").write_text(json.dumps(summary.to_json(), indent=2))
    return out


def policy_records(
    success: dict[str, float], *, seed: int = 0, replan: int = 5, instance_suffix: str = "", diagnostics: bool = True
) -> list[EpisodeRecord]:
    """Records of one policy: per case a success pattern (episode e of task t succeeds when
    ``(t * EPISODES + e) / (len(TASKS) * EPISODES) < rate``), standard rows, plus D10 frozen and
    D01 under hold when ``diagnostics``."""
    n = len(TASKS) * EPISODES
    out = []
    for case, rate in success.items():
        for t in TASKS:
            for e in range(EPISODES):
                out.append(
                    record(
                        case,
                        t,
                        e,
                        (t * EPISODES + e) / n < rate,
                        replan=replan,
                        seed=seed,
                        instance_suffix=instance_suffix,
                    )
                )
    if diagnostics:
        for t in TASKS:
            for e in range(EPISODES):
                out.append(
                    record(
                        "D10",
                        t,
                        e,
                        False,
                        observations="frozen",
                        replan=replan,
                        seed=seed,
                        instance_suffix=instance_suffix,
                    )
                )
                out.append(
                    record(
                        "D01", t, e, True, recovery="hold", replan=replan, seed=seed, instance_suffix=instance_suffix
                    )
                )
    return out


#: Policy A is better than B everywhere; A's nominal 1.0, S01 0.5, ...
RATES_A = {"nominal": 1.0, "S01": 0.5, "S12": 1.0, "D01": 0.25, "D10": 0.75, "S01+D10": 0.25}
RATES_B = {"nominal": 0.75, "S01": 0.25, "S12": 0.5, "D01": 0.0, "D10": 0.5, "S01+D10": 0.0}
