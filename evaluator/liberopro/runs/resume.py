"""Resume, shards and merge of ``liberopro evaluate`` runs (docs/evaluator.md, "Resume, shards and
merge").

A run folder holds ``run.json``, the run's identity (:func:`run_identity`), written before its
first episode: the whole plan (one ``[instance_id, episode_index, observations, recovery,
init_state_index, seed]`` entry per episode, in the order one process runs and writes them:
:func:`liberopro.runs.workers.canonical_order`, grouped by task), the content hash of its instances,
the settings (the run directory left out), the policy (protocol and ``/metadata``) and the shard
(``[I, N]``, or None for the whole plan).

- Resume: a run folder whose identity equals this run's keeps its finished episodes
  (:func:`kept_records`; a last line cut mid-write is dropped) and runs only the rest; a different
  identity is refused naming what differs (:func:`identity_difference`).
- Shards: :func:`shard_plans` takes the I-th of N contiguous blocks of the plan in that order (a
  pure function of the plan; block sizes differ by at most one; a task's episodes mostly in one).
- Merge: :func:`merge_runs` combines the finished runs of every shard of one plan into one run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from liberopro.instances.build import EpisodePlan
from liberopro.runs.summary import ResultsWriter
from liberopro.runs.workers import canonical_order
from liberopro.schema.manifest import content_hash
from liberopro.schema.results import EpisodeRecord, Summary

IDENTITY_FILE = "run.json"

#: An episode of a plan: (instance id, episode index, observations, recovery protocol).
EpisodeKey = tuple[str, int, str, str]

#: Header fields a merged summary takes from its shards' summaries as they are (all equal).
_TIMING = ("started", "finished", "workers", "command", "shard")


class ResumeError(ValueError):
    """A run folder that cannot be resumed into, or runs that cannot be merged; the message is one
    line naming what differs."""


def plan_key(plan: EpisodePlan) -> EpisodeKey:
    """The episode ``plan`` runs (what its record's :func:`record_key` gives back)."""
    return (plan.instance.instance_id, plan.episode_index, plan.diagnostic.observations, plan.diagnostic.recovery)


def record_key(record: EpisodeRecord) -> EpisodeKey:
    """The episode ``record`` is the outcome of (:func:`plan_key` of its plan)."""
    return (record.instance_id, record.episode_index, record.observations, record.recovery.get("protocol", "none"))


def shard_plans(plans: list[EpisodePlan], shard: tuple[int, int] | None) -> list[EpisodePlan]:
    """The I-th of N contiguous blocks of ``plans`` (``shard = (I, N)``; None: all of them;
    :func:`run_evaluation <liberopro.runs.evaluation.run_evaluation>` gives them in
    :func:`ordered_plans` order). The
    blocks are disjoint, cover the plan and differ in size by at most one; raises ``ValueError``
    when the plan has fewer than N episodes (a shard would be empty)."""
    if shard is None:
        return plans
    i, n = shard
    if n > len(plans):
        raise ValueError(f"--shard {i}/{n}: the plan has only {len(plans)} episode(s); use at most {len(plans)} shards")
    return plans[i * len(plans) // n : (i + 1) * len(plans) // n]


def ordered_plans(plans: list[EpisodePlan]) -> list[EpisodePlan]:
    """``plans`` in the order one process runs them and writes their records
    (:func:`liberopro.runs.workers.canonical_order`: grouped by task): the order shards cut."""
    return [plans[i] for i in canonical_order(plans)]


def run_identity(
    plans: list[EpisodePlan], settings: dict[str, Any], policy: dict[str, Any], shard: tuple[int, int] | None
) -> dict[str, Any]:
    """The identity ``run.json`` records of ``plans`` (in plan order): the whole plan (before
    sharding; :func:`ordered_plans`), its instances' ids (in plan order, as ``instances.jsonl``
    lists them) and content hash, ``settings`` (``output_dir`` left out), ``policy``
    (``{"protocol", "metadata"}``) and ``shard``."""
    instances = list({p.instance.instance_id: p.instance for p in plans}.values())
    return {
        "instance_ids": [i.instance_id for i in instances],
        "plan": [[*plan_key(p), p.init_state_index, p.seed] for p in ordered_plans(plans)],
        "instances_sha256": content_hash(instances),
        "settings": {k: v for k, v in settings.items() if k != "output_dir"},
        "policy": policy,
        "shard": list(shard) if shard else None,
    }


def _changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``"max_steps 20 -> 8, ..."``: the keys whose values differ."""
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return ", ".join(f"{k} {json.dumps(old.get(k))} -> {json.dumps(new.get(k))}" for k in keys)[:300]


def _set(settings: dict[str, Any] | None) -> dict[str, Any]:
    """``settings`` without its None values: a setting added since a run was written (absent in
    its ``run.json``) and left at None is the same run."""
    return {k: v for k, v in (settings or {}).items() if v is not None}


def identity_difference(old: dict[str, Any], new: dict[str, Any], *, shard: bool = True) -> str | None:
    """What differs between two run identities (:func:`run_identity`), in a few words, or None
    when they are the same run (``shard=False``: the shard left out)."""
    a, b = {tuple(e) for e in old.get("plan", [])}, {tuple(e) for e in new.get("plan", [])}
    if a != b:
        return f"a run of another plan: {len(a ^ b)} episode(s) differ ({len(a)} planned there, {len(b)} here)"
    if old.get("instances_sha256") != new.get("instances_sha256"):
        return "a run of other instances under the same ids (their content hash differs)"
    if _set(old.get("settings")) != _set(new.get("settings")):
        return f"a run with other settings: {_changed(old.get('settings') or {}, new.get('settings') or {})}"
    if old.get("policy") != new.get("policy"):
        po, pn = old.get("policy") or {}, new.get("policy") or {}
        what = _changed(po.get("metadata") or {}, pn.get("metadata") or {}) or _changed(po, pn)
        return f"a run of another policy: {what}"
    if shard and old.get("shard") != new.get("shard"):
        return f"{_shard_name(old.get('shard'))} of this plan, not {_shard_name(new.get('shard'))}"
    return None


def _shard_name(shard: list[int] | None) -> str:
    return "a run of the whole" if shard is None else f"shard {shard[0]}/{shard[1]}"


def load_identity(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/run.json`` (None when absent)."""
    path = Path(run_dir) / IDENTITY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_identity(run_dir: Path, identity: dict[str, Any]) -> None:
    """Write ``run_dir/run.json``."""
    (Path(run_dir) / IDENTITY_FILE).write_text(json.dumps(identity) + "\n")


def kept_records(run_dir: Path) -> list[EpisodeRecord]:
    """The finished episodes of ``run_dir/episodes.jsonl`` (none when absent): a last line that
    does not parse (cut mid-write by a kill) is dropped; a later episode repeated keeps the first.
    Raises :class:`ResumeError` for a line before the last that does not parse."""
    path = Path(run_dir) / "episodes.jsonl"
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    records: dict[EpisodeKey, EpisodeRecord] = {}
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValueError as exc:
            if any(rest.strip() for rest in lines[n + 1 :]):
                msg = f"{path}: line {n + 1} is not an episode record (only a last line may be cut)"
                raise ResumeError(msg) from exc
            break
        records.setdefault(record_key(record), record)
    return list(records.values())


def prepare_run_dir(out_dir: Path, identity: dict[str, Any], resume: bool) -> list[EpisodeRecord]:
    """The records kept from an earlier run in ``out_dir`` (:func:`kept_records`), after checking
    that its identity is ``identity``; with ``resume`` False, or no earlier run, none (an earlier
    run's videos and action logs are removed then). Raises :class:`ResumeError` when ``out_dir``
    holds episodes of another run, or episodes without ``run.json``."""
    out_dir = Path(out_dir)
    if not (out_dir / "episodes.jsonl").exists():
        return []
    if not resume:
        for sub in ("videos", "actions"):
            shutil.rmtree(out_dir / sub, ignore_errors=True)
        return []
    old = load_identity(out_dir)
    if old is None:
        raise ResumeError(f"{out_dir} holds episodes without {IDENTITY_FILE}; use another --out or --fresh")
    diff = identity_difference(old, identity)
    if diff is not None:
        raise ResumeError(f"{out_dir} holds {diff}; use another --out or --fresh")
    return kept_records(out_dir)


def check_before_start(
    out_dir: Path, plans: list[EpisodePlan], settings: dict[str, Any], shard: tuple[int, int] | None, resume: bool
) -> None:
    """The part of :func:`prepare_run_dir`'s check that needs no policy, made before the policy
    starts (a slow server start is not waited for to be refused): with ``resume`` and episodes in
    ``out_dir``, raises :class:`ResumeError` for episodes without ``run.json``, an earlier run of
    another plan, other instances, other ``settings`` (``render_size`` None: chosen from the
    policy's metadata, so compared after it starts, as the policy is) or another shard, and for a
    line before the last of ``episodes.jsonl`` that does not parse. Changes nothing."""
    out_dir = Path(out_dir)
    if not resume or not (out_dir / "episodes.jsonl").exists():
        return
    old = load_identity(out_dir)
    if old is None:
        raise ResumeError(f"{out_dir} holds episodes without {IDENTITY_FILE}; use another --out or --fresh")
    settings = dict(settings)
    if settings.get("render_size") is None:
        settings["render_size"] = (old.get("settings") or {}).get("render_size")
    diff = identity_difference(old, run_identity(plans, settings, old.get("policy") or {}, shard))
    if diff is not None:
        raise ResumeError(f"{out_dir} holds {diff}; use another --out or --fresh")
    kept_records(out_dir)


def plan_order(plans: Sequence[EpisodePlan]) -> dict[EpisodeKey, int]:
    """Episode -> its position in ``plans`` (records are written in this order)."""
    return {plan_key(p): n for n, p in enumerate(plans)}


def _shard_runs(runs: list[Path], identities: list[dict[str, Any]]) -> None:
    """Check that ``runs`` are the N shards of one run, each once; raises :class:`ResumeError`."""
    first = identities[0]
    for run, ident in zip(runs, identities, strict=True):
        diff = identity_difference(first, ident, shard=False)
        if diff is not None:
            raise ResumeError(f"{run} is {diff} than {runs[0]}")
        if ident.get("shard") is None:
            raise ResumeError(f"{run} is not a shard (it ran the whole plan); merge only --shard runs")
    n = {tuple(i["shard"])[1] for i in identities}
    if len(n) != 1:
        raise ResumeError(f"the runs split the plan differently: into {', '.join(map(str, sorted(n)))} shards")
    total = n.pop()
    seen: dict[int, Path] = {}
    for run, ident in zip(runs, identities, strict=True):
        i = ident["shard"][0]
        if i in seen:
            raise ResumeError(f"shard {i}/{total} given twice: {seen[i]} and {run}")
        seen[i] = run
    missing = [f"{i}/{total}" for i in range(total) if i not in seen]
    if missing:
        raise ResumeError(f"shard(s) {', '.join(missing)} missing")


def _merged_header(runs: list[Path], instances: int) -> dict[str, Any]:
    """The merged run's header: the first shard's with its ``instances``, started at the earliest
    start, finished at the latest end, the shards' workers summed, ``shards`` naming the runs."""
    summaries = [json.loads((r / "summary.json").read_text()) for r in runs]
    tail = {"schema_version", "episodes", "termination_reasons", "headline", "cases"}
    header = {k: v for k, v in summaries[0].items() if k not in tail and k not in _TIMING}
    return {
        **header,
        "instances": instances,
        "started": min(s.get("started") or "" for s in summaries) or None,
        "finished": max(s.get("finished") or "" for s in summaries) or None,
        "workers": sum(s.get("workers") or 0 for s in summaries) or None,
        "shards": [str(r) for r in runs],
    }


def _finished(runs: list[Path]) -> list[dict[str, Any]]:
    """The identities of ``runs``; raises :class:`ResumeError` for one without ``run.json`` or
    ``summary.json`` (not finished)."""
    identities = []
    for run in runs:
        ident = load_identity(run)
        if ident is None:
            raise ResumeError(f"{run} is not an evaluation run (no {IDENTITY_FILE})")
        if not (run / "summary.json").exists():
            raise ResumeError(f"{run} is not finished (no summary.json): rerun its command to resume it")
        identities.append(ident)
    return identities


def _instance_lines(runs: list[Path], order: list[str]) -> list[str]:
    """Each instance of ``order`` (ids) once, its line from the shards' ``instances.jsonl``."""
    lines: dict[str, str] = {}
    for run in runs:
        for line in (run / "instances.jsonl").read_text().splitlines():
            if line.strip():
                lines.setdefault(json.loads(line)["instance_id"], line)
    return [lines[i] for i in order if i in lines]


def merge_runs(runs: list[Path], out_dir: Path) -> Summary:
    """Combine the finished runs of every shard of one plan (``liberopro evaluate --shard I/N``)
    into ``out_dir``: ``episodes.jsonl`` in plan order, ``instances.jsonl``, ``run.json`` (shard
    None), videos and action logs copied, and ``summary.json`` computed over every record (equal to
    an unsharded run's apart from ``started``, ``finished``, ``workers``, ``command``, the policy's
    ``pids`` and ``shards``). Returns the summary. Raises :class:`ResumeError` naming the run for
    runs of different plans, policies or settings, a shard given twice or missing, a run not
    finished, or records that do not cover the plan exactly once."""
    runs = [Path(r) for r in runs]
    identities = _finished(runs)
    _shard_runs(runs, identities)
    order = {tuple(e[:4]): n for n, e in enumerate(identities[0]["plan"])}
    records: dict[tuple, EpisodeRecord] = {}
    for run in runs:
        for record in kept_records(run):
            key = record_key(record)
            if key not in order or key in records:
                raise ResumeError(f"{run}: episode {key} is {'not in the plan' if key not in order else 'twice'}")
            records[key] = record
    if len(records) != len(order):
        raise ResumeError(f"the shards hold {len(records)} of the plan's {len(order)} episodes")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for run in runs:
        for sub in ("videos", "actions"):
            if (run / sub).is_dir():
                shutil.copytree(run / sub, out_dir / sub, dirs_exist_ok=True)
    ids = identities[0].get("instance_ids") or list(dict.fromkeys(str(e[0]) for e in identities[0]["plan"]))
    (out_dir / "instances.jsonl").write_text("".join(line + "\n" for line in _instance_lines(runs, ids)))
    write_identity(out_dir, {**identities[0], "shard": None})
    writer = ResultsWriter(out_dir)
    for key in sorted(records, key=order.__getitem__):
        writer.add(records[key])
    return writer.finish(_merged_header(runs, len(ids)))


__all__ = [
    "IDENTITY_FILE",
    "ResumeError",
    "identity_difference",
    "kept_records",
    "merge_runs",
    "ordered_plans",
    "plan_key",
    "plan_order",
    "prepare_run_dir",
    "record_key",
    "run_identity",
    "shard_plans",
    "write_identity",
]
