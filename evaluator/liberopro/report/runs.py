"""Run directories as the report reads them, and policies grouped from them.

A run directory is what ``liberopro evaluate --out DIR`` writes: ``summary.json``,
``episodes.jsonl`` and ``instances.jsonl`` (:mod:`liberopro.runs.summary`). :func:`read_header` and
:func:`read_summary` are the ONLY places that read ``summary.json``, through its model
(:class:`liberopro.schema.results.Summary`); rates become the leaderboard's
:class:`~liberopro.schema.public.Rate` (the charts draw those).

Runs are grouped per policy by (policy name, identity): the name is the policy's
``/metadata`` ``policy_name``; the identity is the image digest (platform runs), else the
``--policy-cmd`` command, else the ``--policy`` URL. Within a policy, runs are grouped by their
effective replan steps (``--replan-steps`` or the policy's own): each group is one *condition*,
whose records are the union of its runs' (a run of live and a run of frozen observations, or of
singles and of compositions, make one condition; an episode in two runs counts once, from the run
given first). The condition at the policy's own replan steps is its standard one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from liberopro.metrics import wilson
from liberopro.runs.summary import EpisodeRecord, summarize
from liberopro.schema.public import CATEGORIES, KINDS, MISSING_MEAN, PairedDifference, Rate, wilson_rate
from liberopro.schema.results import MeanRate, Summary, UnprovedRate


class ReportError(ValueError):
    """A run directory that cannot be read, or runs that cannot be combined; the message names
    the file and what to do."""


# ------------------------------------------------------------------------------- the summary
@dataclass(frozen=True)
class CaseRow:
    """One row of ``summary.json``'s ``cases``: a case under its diagnostic conditions."""

    case: str
    shift_ids: list[str]
    shift_names: list[str]
    categories: list[str]
    kind: str
    observations: str
    recovery: str
    rate: Rate
    invalid: int
    invalid_reasons: list[str]
    not_fired: int
    #: Episodes ended ``shift_blocked`` (a shift not realised after the policy acted): failures, in the rate.
    blocked: int
    drop: PairedDifference | None
    #: Instances per proof verdict (``CaseSummary.proof``; empty for older summaries).
    proof: dict[str, int] = field(default_factory=dict)
    #: The unproved instances' episodes, kept out of ``rate`` (None when the row has none).
    unproved: UnprovedRate | None = None

    @property
    def standard(self) -> bool:
        """Live observations, no recovery protocol."""
        return self.observations == "live" and self.recovery == "none"

    @property
    def single(self) -> bool:
        """A standard row of exactly one shift."""
        return self.standard and len(self.shift_ids) == 1

    @property
    def label(self) -> str:
        """``S01 object pose``, ``nominal``, ``S01+D10``."""
        if len(self.shift_ids) == 1:
            return f"{self.shift_ids[0]} {self.shift_names[0]}"
        return self.case.split(" [")[0]


@dataclass(frozen=True)
class CompositionRow:
    """A composition and its weakest-single gap (``headline.compositions``)."""

    case: str
    shift_ids: list[str]
    weakest: str | None
    #: The composition's and the weakest constituent's rates over the composition's own starts
    #: (paired), with Wilson intervals at n = paired episodes.
    composition_paired: Rate | None
    weakest_paired: Rate | None
    gap: PairedDifference | None
    paired_tasks: int

    @property
    def group(self) -> str:
        """``static pair``, ``mixed triple``, ... from the constituents' ids."""
        kinds = {"static" if i.startswith("S") else "runtime" for i in self.shift_ids}
        kind = kinds.pop() if len(kinds) == 1 else "mixed"
        return f"{kind} {'pair' if len(self.shift_ids) == 2 else 'triple' if len(self.shift_ids) == 3 else 'set'}"


@dataclass(frozen=True)
class SummaryView:
    """What the report shows of one summary."""

    #: The leaderboard's ranking columns: ``overall``, ``nominal``, ``static_mean``,
    #: ``runtime_mean``, ``static.<Category>``, ``runtime.<Category>``.
    metrics: dict[str, Rate]
    cases: list[CaseRow]
    compositions: list[CompositionRow]
    frozen: dict[str, PairedDifference]  # case -> SR(live) - SR(frozen), paired
    frozen_mean: PairedDifference | None
    frozen_mean_cases: int
    recovery: dict[str, tuple[PairedDifference, int]]  # protocol -> (mean gain, cases)
    episodes: dict[str, int]
    termination_reasons: dict[str, int]
    #: Instances of the run per proof verdict (``headline.proof``; empty for older summaries).
    proof: dict[str, int] = field(default_factory=dict)

    def row(self, case: str, observations: str = "live", recovery: str = "none") -> CaseRow | None:
        """The row of ``case`` (plain case id, e.g. ``D01``) under the given conditions."""
        for c in self.cases:
            if c.case.split(" [")[0] == case and c.observations == observations and c.recovery == recovery:
                return c
        return None


def _interval(raw: Any) -> tuple[float, float] | None:
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and all(isinstance(v, (int, float)) for v in raw):
        return float(raw[0]), float(raw[1])
    return None


def _pair(value: float, ci: Any, pairs: Any) -> PairedDifference:
    return PairedDifference(value=float(value), ci95=_interval(ci), pairs=int(pairs or 0))


def _paired(value: float | None, ci: Any, pairs: Any) -> PairedDifference | None:
    return None if value is None else _pair(value, ci, pairs)


def _paired_rate(value: Any, n: int) -> Rate | None:
    """A rate over ``n`` paired episodes, with its Wilson interval at that n."""
    if value is None or not n:
        return None
    lo, hi = wilson(float(value) * n, n)
    return Rate(value=float(value), ci95=(round(lo, 6), round(hi, 6)), episodes=n, method="wilson")


def bootstrap_rate(raw: MeanRate | None) -> Rate:
    """A :func:`liberopro.metrics.bootstrap_mean_of_rates` result (a summary's mean) as a
    :class:`Rate`, with the run's own percentile bootstrap interval."""
    if raw is None or raw.mean is None:
        return MISSING_MEAN.model_copy(update={"method": "bootstrap"})
    return Rate(value=raw.mean, ci95=_interval(raw.ci95), episodes=raw.episodes, method="bootstrap", cases=raw.cases)


def summary_metrics(summary: Summary) -> dict[str, Rate]:
    """The leaderboard's ranking columns of a local run, with the run's OWN intervals (the
    summary's bootstrap over tasks and episodes): a report reads the episodes of runs its user
    made. The public view computes its intervals from published counts instead
    (:func:`liberopro.schema.public.metrics_of`)."""
    head = summary.headline
    out = {
        "overall": bootstrap_rate(head.overall),
        "nominal": wilson_rate(head.nominal),
        "static_mean": bootstrap_rate(head.static_mean),
        "runtime_mean": bootstrap_rate(head.runtime_mean),
    }
    for kind in KINDS:
        for cat in CATEGORIES:
            out[f"{kind}.{cat}"] = bootstrap_rate(head.category(kind, cat))
    return out


def read_summary(summary: Summary) -> SummaryView:
    """The report's view of a ``summary.json`` (:class:`liberopro.schema.results.Summary`; a
    stored one is read with :meth:`~liberopro.schema.results.Summary.load`)."""
    head = summary.headline
    cases = [
        CaseRow(
            case=c.case,
            shift_ids=list(c.shift_ids),
            shift_names=list(c.shift_names),
            categories=list(c.categories),
            kind=c.kind or "nominal",
            observations=c.observations or "live",
            recovery=c.recovery or "none",
            rate=wilson_rate(c),
            invalid=c.invalid_episodes,
            invalid_reasons=list(c.invalid_reasons),
            not_fired=c.runtime_not_fired,
            blocked=c.shift_blocked,
            drop=_paired(c.drop_from_nominal.value, c.drop_from_nominal.ci95, c.drop_from_nominal.pairs)
            if c.drop_from_nominal
            else None,
            proof=dict(c.proof),
            unproved=c.unproved if c.unproved is not None and c.unproved.instances else None,
        )
        for c in summary.cases
    ]
    comps = []
    for c in head.compositions:
        n = c.paired_episodes
        comps.append(
            CompositionRow(
                case=c.case,
                shift_ids=c.case.split("+"),
                weakest=c.weakest_constituent,
                composition_paired=_paired_rate(c.paired_rates.get("composition"), n),
                weakest_paired=_paired_rate(c.weakest_single, n),
                gap=_paired(c.weakest_single_gap, c.gap_ci95, n),
                paired_tasks=c.paired_tasks,
            )
        )
    lmf = head.live_minus_frozen
    frozen = {f.case: _pair(f.gap, f.ci95, f.paired_episodes) for f in lmf.cases if f.gap is not None}
    recovery = {
        p: (_pair(g.mean_gain, g.ci95, g.paired_episodes), g.cases)
        for p, g in head.recovery_gain.items()
        if g.mean_gain is not None
    }
    ep = summary.episodes
    return SummaryView(
        metrics=summary_metrics(summary),
        cases=cases,
        compositions=comps,
        frozen=frozen,
        frozen_mean=_paired(lmf.mean_gap, lmf.mean_gap_ci95, lmf.mean_gap_paired_episodes),
        frozen_mean_cases=len(frozen),
        recovery=recovery,
        episodes={
            "total": ep.total,
            "valid": ep.valid,
            "invalid": ep.invalid,
            "successes": ep.successes,
            "shift_blocked": ep.shift_blocked,
        },
        termination_reasons=dict(summary.termination_reasons),
        proof=dict(head.proof),
    )


@dataclass(frozen=True)
class HeaderView:
    """What a summary's header says about the run, as the report shows it: the policy, the
    instances, the settings (read from :class:`liberopro.schema.results.RunHeader` by
    :func:`read_header`)."""

    policy_name: str
    identity_kind: str  # image, command, url, in-process or unknown
    identity: str
    metadata: dict[str, Any]
    own_replan: int | None  # the policy's replan_steps (its /metadata)
    replan_override: int | None  # --replan-steps
    manifest_sha256: str | None
    evaluator_version: str | None
    stack: dict[str, Any]
    max_steps: int | None
    render_size: int | None
    finished: str | None

    @property
    def replan(self) -> int | None:
        """The replan steps the run executed (override, else the policy's own)."""
        return self.replan_override or self.own_replan


def read_header(summary: Summary) -> HeaderView:
    """The report's view of the run's header (:class:`liberopro.schema.results.RunHeader`, as
    ``liberopro.runs.evaluation.run_evaluation`` or the platform's aggregation wrote it)."""
    policy, settings = summary.policy, summary.settings
    meta = policy.metadata or {}
    if policy.image_digest:
        kind, ident = "image", str(policy.image_digest)
    elif policy.cmd:
        kind, ident = "command", str(policy.cmd)
    elif policy.url:
        kind, ident = "url", str(policy.url)
    elif policy.in_process:  # evaluator tooling (liberopro demo's privileged oracle)
        kind, ident = "in-process", str(policy.in_process)
    else:
        kind, ident = "unknown", ""

    def _int(v: Any) -> int | None:
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None

    return HeaderView(
        policy_name=str(meta.get("policy_name") or "unnamed policy"),
        identity_kind=kind,
        identity=ident,
        metadata=dict(meta),
        own_replan=_int(meta.get("replan_steps")),
        replan_override=_int(settings.replan_steps),
        manifest_sha256=summary.manifest_sha256 or None,
        evaluator_version=summary.evaluator_version,
        stack=dict(summary.stack),
        max_steps=_int(settings.max_steps),
        render_size=_int(settings.render_size),
        finished=summary.finished,
    )


# ------------------------------------------------------------------------------- run directories
@dataclass
class Run:
    """One run directory."""

    path: Path
    summary: Summary
    header: HeaderView
    records: list[EpisodeRecord]

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)


def find_runs(paths: list[Path]) -> list[Path]:
    """Run directories among ``paths``: each path that holds ``summary.json``, else every
    directory below it that does (``liberopro evaluate --replan-steps 1,2,5`` writes one per value).
    Raises :class:`ReportError` for a path that is neither."""
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if (p / "summary.json").is_file():
            found.append(p)
            continue
        if not p.exists():
            raise ReportError(
                f"{p} does not exist (give what `liberopro evaluate --out DIR` wrote, or a "
                "directory of such directories)"
            )
        below = sorted(s.parent for s in p.rglob("summary.json")) if p.is_dir() else []
        if not below:
            raise ReportError(
                f"{p} is not a run directory: it holds no summary.json (give what "
                "`liberopro evaluate --out DIR` wrote, or a directory of such directories)"
            )
        found += below
    out, seen = [], set()
    for p in found:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def load_run(path: Path) -> Run:
    """Read ``summary.json`` and ``episodes.jsonl`` of a run directory. Raises
    :class:`ReportError` naming the file (and line) that cannot be read."""
    path = Path(path)
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path / 'summary.json'}: cannot be read ({exc})") from None
    if not isinstance(summary, dict) or "cases" not in summary:
        raise ReportError(f"{path / 'summary.json'} is not a summary written by `liberopro evaluate`")
    try:
        summary = Summary.load(summary)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ReportError(
            f"{path / 'summary.json'} is not a summary of this evaluator "
            f"({'.'.join(map(str, first['loc']))}: {first['msg']})"
        ) from None
    episodes = path / "episodes.jsonl"
    if not episodes.is_file():
        raise ReportError(f"{episodes} is missing: the report pairs episodes, so it needs the run's episodes.jsonl")
    records = []
    for n, line in enumerate(episodes.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(EpisodeRecord.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ReportError(
                f"{episodes}:{n} is not an episode record of this evaluator "
                f"({'.'.join(map(str, first['loc']))}: {first['msg']})"
            ) from None
    return Run(path=path, summary=summary, header=read_header(summary), records=records)


# ------------------------------------------------------------------------------- policies
@dataclass
class Condition:
    """A policy's runs at one replan-steps value, combined."""

    replan: int | None
    runs: list[Run]
    records: list[EpisodeRecord]
    view: SummaryView
    summary: Summary
    notes: list[str] = field(default_factory=list)

    @property
    def manifests(self) -> list[str | None]:
        return sorted({r.header.manifest_sha256 for r in self.runs}, key=lambda h: h or "")

    @property
    def override(self) -> bool:
        return any(r.header.replan_override is not None for r in self.runs)


@dataclass
class Policy:
    """All runs of one policy (same name and identity)."""

    name: str
    identity_kind: str
    identity: str
    label: str
    runs: list[Run]
    conditions: dict[int | None, Condition] = field(default_factory=dict)

    @property
    def own_replan(self) -> int | None:
        return self.runs[0].header.own_replan

    @property
    def standard(self) -> Condition | None:
        """The condition at the policy's own replan steps (the study's standard runs)."""
        return self.conditions.get(self.own_replan)


def _combine(runs: list[Run]) -> tuple[list[EpisodeRecord], Summary, list[str]]:
    """The union of the runs' records, its summary, and a note per run whose episodes were
    already in an earlier run (same row, task, init state and seed): such an episode counts once,
    from the run given first (e.g. nominal in both a landscape and an ``@compositions`` run)."""
    if len(runs) == 1:
        return runs[0].records, runs[0].summary, []
    owner: dict[tuple, Run] = {}
    records: list[EpisodeRecord] = []
    repeated: dict[tuple[str, str], int] = {}
    for run in runs:
        seen_here: set[tuple] = set()
        for r in run.records:
            key = (r.row_key, r.pair_key)
            if key in seen_here:
                raise ReportError(
                    f"{run.path / 'episodes.jsonl'} holds episode {r.row_key} on {r.task_key} (init state "
                    f"{r.init_state_id}, seed {r.seed}) twice: it is not one run's output"
                )
            seen_here.add(key)
            if key in owner:
                pair = (str(run.path), str(owner[key].path))
                repeated[pair] = repeated.get(pair, 0) + 1
                continue
            owner[key] = run
            records.append(r)
    header = {**runs[0].summary.header.to_json(), "combined_runs": [str(r.path) for r in runs]}
    notes = [
        f"{n} episode(s) of {later} were already in {first} (same case, task, init state and seed): counted once, "
        f"from {first}"
        for (later, first), n in repeated.items()
    ]
    return records, summarize(records, header), notes


def group_policies(runs: list[Run]) -> list[Policy]:
    """Runs grouped per policy (in order of first appearance), each with its conditions.
    Raises :class:`ReportError` when one run holds an episode twice."""
    groups: dict[tuple[str, str, str], list[Run]] = {}
    for run in runs:
        h = run.header
        groups.setdefault((h.policy_name, h.identity_kind, h.identity), []).append(run)
    names = [k[0] for k in groups]
    policies = []
    for (name, kind, ident), members in groups.items():
        label = name if names.count(name) == 1 else f"{name} ({kind} {_short_identity(kind, ident)})"
        policy = Policy(name=name, identity_kind=kind, identity=ident, label=label, runs=members)
        by_replan: dict[int | None, list[Run]] = {}
        for run in members:
            by_replan.setdefault(run.header.replan, []).append(run)
        for replan in sorted(by_replan, key=lambda k: (k is None, k or 0)):
            records, summary, notes = _combine(by_replan[replan])
            policy.conditions[replan] = Condition(
                replan=replan,
                runs=by_replan[replan],
                records=records,
                view=read_summary(summary),
                summary=summary,
                notes=notes,
            )
        policies.append(policy)
    return policies


def _short_identity(kind: str, ident: str) -> str:
    if kind == "image":
        return ident.split(":", 1)[-1][:12]
    return ident if len(ident) <= 40 else ident[:37] + "..."


__all__ = [
    "CaseRow",
    "CompositionRow",
    "Condition",
    "Policy",
    "ReportError",
    "Run",
    "HeaderView",
    "SummaryView",
    "find_runs",
    "group_policies",
    "load_run",
    "read_header",
    "read_summary",
]
