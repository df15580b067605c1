"""Result records as typed, versioned models: ``episodes.jsonl``, ``summary.json`` and the events
the evaluator emits to the platform (``docs/results.md``).

* :class:`EpisodeRecord`: one line of ``episodes.jsonl`` (and the ``record`` of an ``episode``
  event); its ``shifts`` are :class:`ShiftRecord`.
* :class:`Summary`: ``summary.json``; a :class:`RunHeader` (built by :func:`run_header`, the one
  place a header is made) plus the episode counts, the :class:`Headline` metrics and one
  :class:`CaseSummary` per row.
* :data:`Event`: what the shard runner (``liberopro.runs.shard``) writes on its ``LIBEROPRO-EVENT``
  lines (:mod:`liberopro.schema.shard`), one pydantic discriminated union keyed on ``type``
  (:func:`parse_event_json`).

Versioning: :data:`RESULTS_SCHEMA_VERSION` is written in every record and summary; it is bumped
on any incompatible change (a key removed or renamed, a meaning or unit changed). Adding an
optional key is compatible. Readers are tolerant: the summary models keep unknown keys
(``extra="allow"``) and give every field a default, so summaries stored by an older evaluator
(the platform's database holds them) still load. ``docs/results.schema.json`` is generated from
these models (``python -m liberopro.schema.results``; a test fails when it is stale).

Rates are fractions in [0, 1], intervals ``[low, high]`` 95% intervals, durations seconds
(``_s``) or milliseconds (``_ms``), steps policy steps (20 Hz control). Nothing here imports the
simulator (robosuite, mujoco, libero, cv2): the platform and the leaderboard import this module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from liberopro.metrics import PairKey
from liberopro.schema.reasons import TerminationReason

RESULTS_SCHEMA_VERSION = 2
#: Version history: 2 (issue 11): a runtime shift that never fired (the episode ended before its
#: phase and its fallback step) leaves the episode valid for every shift, D20 included (version 1
#: made an unfired D20 invalid); ``runtime_fired`` gained ``succeeded_before_firing``,
#: ``fallback_steps`` and ``by_shift``; degenerate rate intervals are no longer zero-width.

#: Where the committed JSON Schema of the results lives (repository root ``docs/``).
SCHEMA_PATH = Path(__file__).resolve().parents[3] / "docs" / "results.schema.json"

Interval = tuple[float, float]
#: The solvability proof's verdict on an episode's instance (:attr:`EpisodeRecord.proof`).
ProofVerdict = Literal["proved_under_shift", "proved_by_nominal", "unproved"]
#: How summaries name each verdict, with ``not_proved`` for records without one.
PROOF_VERDICTS = ("proved_under_shift", "proved_by_nominal", "unproved", "not_proved")


# ------------------------------------------------------------------------------ episode records
class LatencyStats(BaseModel):
    """HTTP round trips of ``/act`` in one episode, milliseconds as the evaluator saw them
    (``server_mean_ms``: the policy's own ``server_ms`` when it reports one)."""

    requests: int = 0
    mean_ms: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    max_ms: float | None = None
    server_mean_ms: float | None = None


#: Keys of a shift record written only when set (static shifts, never-deferred runtime shifts).
_OPTIONAL_KEYS = ("fired_at_step", "fired_by", "due_at_step", "delay_steps", "deferred_reason")


class ShiftRecord(BaseModel):
    """One shift of an episode as it was realised (``liberopro.shifts.base.Shift.record``).

    ``params`` are the instance's parameters (units in their names: ``_m`` metres, ``_deg``
    degrees, ``_step(s)`` policy steps, see ``docs/shifts.md``), ``applied`` what the shift
    measured it did. Runtime shifts also carry ``fired_at_step`` (the policy step it fired at;
    None when the episode ended first) and ``fired_by`` (``phase`` or ``fallback``: what made it
    due); static shifts carry neither key (a key not set is not written, so records keep their
    bytes). A runtime shift whose fire was deferred (the robot or the carried object in the way
    at that moment, :class:`liberopro.shifts.base.ShiftDeferred`) also carries ``due_at_step``
    (the step it came due), ``delay_steps`` (``fired_at_step - due_at_step``, or the steps
    waited when it never fired; at most ``MAX_DELAY_STEPS`` = 25, beyond which the episode is
    invalid) and ``deferred_reason`` (why the first attempt could not act); shifts never
    deferred carry none of the three. Unknown keys are kept (``extra="allow"``).
    """

    model_config = ConfigDict(extra="allow")
    id: str
    name: str
    category: str
    kind: Literal["static", "runtime"]
    params: dict[str, Any] = Field(default_factory=dict)
    applied: dict[str, Any] = Field(default_factory=dict)
    fired_at_step: int | None = None
    fired_by: Literal["phase", "fallback"] | None = None
    due_at_step: int | None = None
    delay_steps: int | None = None
    deferred_reason: str | None = None

    @model_serializer(mode="wrap")
    def _written_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        for key in _OPTIONAL_KEYS:
            if key not in self.model_fields_set:
                out.pop(key, None)
        return out

    # Dict-style reads, as when a shift record was a plain dict (keys not written raise KeyError).
    def __getitem__(self, key: str) -> Any:
        if key in _OPTIONAL_KEYS and key not in self.model_fields_set:
            raise KeyError(key)
        if key in type(self).model_fields:
            return getattr(self, key)
        if self.model_extra and key in self.model_extra:
            return self.model_extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` as a dict would give it, else ``default``."""
        try:
            return self[key]
        except KeyError:
            return default


class EpisodeRecord(BaseModel):
    """One line of ``episodes.jsonl``.

    ``termination_reason`` is a :class:`~liberopro.schema.reasons.TerminationReason` (the one
    vocabulary, each reason charged to a side). ``valid`` is True when that side is the policy's
    (the episode counts in success rates, as a success or the policy's failure); False when a
    shift could not be realised as stated (``shift_invalid``) or the platform failed
    (``evaluator_error``, ``worker_crashed``): such an episode is reported but counts in no rate.
    ``shifts`` lists each shift (:class:`ShiftRecord`). ``steps`` and ``horizon`` are policy
    steps; ``phases`` maps each task phase reached to its step. ``wall_s`` is the whole episode
    (reset, settle, loop) and ``loop_s`` the policy loop alone, in seconds.
    ``observations`` (live/frozen) and ``recovery`` (``protocol``: none, hold, retry, restore;
    with ``at_step``, ``hold_steps``, ``extra_steps`` or ``restored_eef_m`` once applied) are the
    diagnostic conditions; ``replan_steps`` the actions executed per chunk. ``renders`` counts
    the camera renders for observations per camera (from the reset to the end of the episode;
    evaluator work, not an outcome: on-demand rendering makes about steps / replan_steps plus
    what shifts keeping past frames need, eager rendering one per step, settle step and sample;
    None in records written before it existed). ``video`` and ``actions`` name the episode's
    video (MP4) and actions file (``.npz``: executed and commanded actions, (T, 7) float64 each),
    paths relative to the run directory, when ``liberopro evaluate --video`` / ``--record-actions``
    wrote them (:mod:`liberopro.episode.video`); left out of the line otherwise.

    ``proof`` is the solvability proof's verdict on the episode's instance (the manifest's
    ``oracle`` record, ``liberopro.schema.manifest.OracleProof.kind``; issue 22, item 4):
    ``proved_under_shift`` (the privileged oracle solved the instance itself), ``proved_by_nominal``
    (the nominal oracle run of the task stands in: the shift changes only what the policy
    perceives or is told) or ``unproved`` (kept without a proof: no evidence the oracle can solve
    it; scored apart, never in the headline or the ranking). The key is left out when the
    instance has no proof record: an ad-hoc run (no manifest), a manifest generated with
    ``--no-proof``, or a record written before the key existed; readers take a missing key as
    "not proved" and count such episodes as before (in the rates, marked not proved).
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: int = RESULTS_SCHEMA_VERSION
    instance_id: str
    case: str
    suite: str
    task_index: int
    task_name: str
    episode_index: int
    init_state_id: int
    seed: int
    shifts: list[ShiftRecord] = Field(default_factory=list)
    success: bool
    valid: bool = True
    steps: int
    horizon: int
    termination_reason: TerminationReason
    detail: str | None = None
    phases: dict[str, int] = Field(default_factory=dict)
    instruction: str
    observations: str = "live"
    recovery: dict[str, Any] = Field(default_factory=lambda: {"protocol": "none"})
    replan_steps: int | None = None
    latency: LatencyStats = Field(default_factory=LatencyStats)
    episode_id: str
    wall_s: float
    loop_s: float = 0.0
    renders: dict[str, int] | None = None
    video: str | None = None
    actions: str | None = None
    proof: ProofVerdict | None = None

    @model_serializer(mode="wrap")
    def _written_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        if self.proof is None:  # no proof record: the key is not written (older lines keep their bytes)
            out.pop("proof", None)
        return out

    @property
    def scored(self) -> bool:
        """Counted in the rates of the headline and the case rows: valid, and its instance not
        ``unproved`` (those are summarised apart, :class:`UnprovedRate`)."""
        return self.valid and self.proof != "unproved"

    def outcome_key(self) -> tuple:
        """Everything that must be identical when the same episode is run again (whatever the
        rendering mode and recording: ``renders``, ``video`` and ``actions`` are left out)."""
        d = self.model_dump(exclude={"latency", "episode_id", "wall_s", "loop_s", "renders", "video", "actions"})
        return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in d.items()))

    def with_cause(self, reason: TerminationReason, cause: str) -> EpisodeRecord:
        """This record charged to ``reason`` for ``cause``, which the evaluator could not see (the
        platform saw the policy's process or container die during the episode): a copy whose
        ``detail`` is ``cause``, then what the evaluator saw, ``"CAUSE; the evaluator saw
        REASON: DETAIL"``, so the original reason stays readable."""
        saw = f"{self.termination_reason}: {self.detail or ''}".strip()
        return self.model_copy(update={"termination_reason": reason, "detail": f"{cause}; the evaluator saw {saw}"})

    @property
    def diagnostic_label(self) -> str:
        parts = [
            p
            for p in (
                self.observations if self.observations != "live" else "",
                self.recovery.get("protocol", "none") if self.recovery.get("protocol") != "none" else "",
            )
            if p
        ]
        return ",".join(parts)

    @property
    def row_key(self) -> str:
        """The summary row: the case, with non-standard diagnostic conditions in brackets."""
        label = self.diagnostic_label
        return f"{self.case} [{label}]" if label else self.case

    @property
    def task_key(self) -> str:
        return f"{self.suite}:{self.task_index}"

    @property
    def pair_key(self) -> PairKey:
        """(task, init state, seed): the same start in every case of a run (pairing key of
        :mod:`liberopro.metrics`' paired differences)."""
        return self.task_key, self.init_state_id, self.seed


# ------------------------------------------------------------------------------ summary parts
class _Tolerant(BaseModel):
    """Summary parts: unknown keys kept, every field defaulted (old summaries still load)."""

    model_config = ConfigDict(extra="allow")


class SuccessRate(_Tolerant):
    """:func:`liberopro.metrics.success_rate`: the task-averaged success rate (None without
    episodes), its Wilson interval, valid ``episodes``, ``successes``, ``tasks`` and the rate of
    each task (``per_task``, keyed ``suite:index``)."""

    success_rate: float | None = None
    ci95: Interval | None = None
    episodes: int = 0
    successes: int = 0
    tasks: int = 0
    per_task: dict[str, float] = Field(default_factory=dict)


class MeanRate(_Tolerant):
    """:func:`liberopro.metrics.bootstrap_mean_of_rates`: the mean over ``cases`` of their
    task-averaged rates, with a percentile bootstrap interval over tasks and episodes."""

    mean: float | None = None
    ci95: Interval | None = None
    cases: int = 0
    episodes: int = 0


class PairedDifference(_Tolerant):
    """:func:`liberopro.metrics.paired_bootstrap`: a difference of success rates over the same
    tasks, init states and seeds (``pairs`` episodes per side, over ``tasks`` tasks), with its
    paired bootstrap interval; None values without pairs."""

    value: float | None = None
    ci95: Interval | None = None
    tasks: int = 0
    pairs: int = 0


class ShiftFiredCounts(_Tolerant):
    """One runtime shift of a case, over the case's valid episodes: fired by its trigger phase
    (``phase``), by its fallback step (``fallback``), or never (``not_fired``: the episode ended
    before both), or could not act once due (``blocked``: the episode ended ``shift_blocked``, a
    failure of the policy). ``delayed``: of the episodes in ``phase`` and ``fallback``, those in which the
    shift acted later than it came due (its fire was deferred because the robot or the carried
    object was in the way; ``delay_steps`` in the shift record, at most 25 steps)."""

    phase: int = 0
    fallback: int = 0
    not_fired: int = 0
    blocked: int = 0
    delayed: int = 0


class FiredCounts(_Tolerant):
    """For a case with runtime shifts, how its valid episodes met them (issue 11, item 4; the
    fallback rule is :mod:`liberopro.catalog.fallbacks`). Every valid episode is in exactly one of
    ``phase`` (every runtime shift fired by its trigger phase), ``fallback`` (at least one by its
    fallback step, none unfired), ``blocked`` (a shift could not be realised once the policy had
    acted: ``shift_blocked``, a failure) and ``not_fired`` (the episode ended before at least one
    fired: "ended before firing"); all four count in the case's success rate with their outcome.

    ``succeeded_before_firing``: episodes of ``not_fired`` that ended in a success. The fallback
    step comes before any success is possible, so this is 0 unless a policy beat the rule's margin
    on some task: then ``late_fallback_tasks`` names those tasks. ``fallback_steps``: the smallest
    and largest fallback step of the case's runtime shifts over its episodes (policy steps; they
    differ per task). ``by_shift``: the three counts per runtime shift id (compositions may hold
    two runtime shifts)."""

    phase: int = 0
    fallback: int = 0
    not_fired: int = 0
    blocked: int = 0
    succeeded_before_firing: int = 0
    late_fallback_tasks: list[str] = Field(default_factory=list)
    fallback_steps: tuple[int, int] | None = None
    by_shift: dict[str, ShiftFiredCounts] = Field(default_factory=dict)


class UnprovedRate(_Tolerant):
    """The episodes of ``unproved`` instances (:attr:`EpisodeRecord.proof`), kept out of every
    other rate: how many ``instances``, valid ``episodes`` and ``successes``, and their plain
    success rate (None without valid episodes). An unproved instance may be unsolvable as drawn,
    so a failure there is no evidence against the policy."""

    instances: int = 0
    episodes: int = 0
    successes: int = 0
    success_rate: float | None = None


class CaseSummary(_Tolerant):
    """One row of ``summary.json``'s ``cases``: a case with its diagnostic conditions (``case``
    is e.g. ``S01``, ``D10+S01`` or ``D10 [frozen]``), its shifts, the :class:`SuccessRate`
    fields over its valid episodes, ``invalid_episodes`` (and their distinct reasons),
    ``shift_blocked`` (valid episodes ended because a shift could not be realised after the policy
    acted: failures, counted in the rate),
    ``runtime_fired`` (None without runtime shifts; ``runtime_not_fired`` repeats its
    ``not_fired``, 0 without) and ``drop_from_nominal``: SR(nominal) - SR(case), paired (None for
    nominal, diagnostic rows, or without a nominal). Every rate is over the row's scored episodes
    (:attr:`EpisodeRecord.scored`: valid, instance not ``unproved``); ``proof`` counts the row's
    instances per verdict and ``unproved`` (None when it has none) summarises the rest apart."""

    case: str = ""
    shift_ids: list[str] = Field(default_factory=list)
    shift_names: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    kind: str = Field("nominal", description="nominal, static, runtime or mixed.")
    observations: str = "live"
    recovery: str = "none"
    success_rate: float | None = None
    ci95: Interval | None = None
    episodes: int = 0
    successes: int = 0
    tasks: int = 0
    per_task: dict[str, float] = Field(default_factory=dict)
    invalid_episodes: int = 0
    shift_blocked: int = 0
    runtime_not_fired: int = 0
    invalid_reasons: list[str] = Field(default_factory=list)
    runtime_fired: FiredCounts | None = None
    drop_from_nominal: PairedDifference | None = None
    proof: dict[str, int] = Field(
        default_factory=dict,
        description="Instances of the row per proof verdict (proved_under_shift, proved_by_nominal, unproved, "
        "not_proved); empty in summaries written before it.",
    )
    unproved: UnprovedRate | None = None

    @property
    def standard(self) -> bool:
        """Live observations and no recovery protocol (a row of the ranking)."""
        return self.observations == "live" and self.recovery == "none"


class CompositionSummary(_Tolerant):
    """A composition's weakest-single gap SR(C) - min_i SR(c_i), every rate over the
    composition's own tasks and starts (:func:`liberopro.metrics.weakest_single_gap`); the gap
    fields are None (counts 0) when a constituent was not run. ``constituents``: each
    constituent's SR over its own tasks (context only); ``paired_rates``: the rates the gap used
    (``composition`` and each constituent id)."""

    case: str = ""
    success_rate: float | None = None
    constituents: dict[str, float | None] = Field(default_factory=dict)
    weakest_constituent: str | None = None
    weakest_single: float | None = None
    weakest_single_gap: float | None = None
    gap_ci95: Interval | None = None
    paired_tasks: int = 0
    paired_episodes: int = 0
    paired_rates: dict[str, float | None] = Field(default_factory=dict)


class FrozenGap(_Tolerant):
    """One case run live and frozen: both rates and SR(live) - SR(frozen) over the starts both
    ran, with its paired interval."""

    case: str = ""
    live: float | None = None
    frozen: float | None = None
    gap: float | None = None
    ci95: Interval | None = None
    paired_episodes: int = 0


class LiveMinusFrozen(_Tolerant):
    """The frozen-observation study: per case, and the mean gap over cases with its interval."""

    cases: list[FrozenGap] = Field(default_factory=list)
    mean_gap: float | None = None
    mean_gap_ci95: Interval | None = None
    mean_gap_paired_episodes: int = 0


class RecoveryGain(_Tolerant):
    """One recovery protocol: mean over ``cases`` of SR(protocol) - SR(none), paired."""

    mean_gain: float | None = None
    ci95: Interval | None = None
    cases: int = 0
    paired_episodes: int = 0


class Headline(_Tolerant):
    """The benchmark's aggregate metrics (``docs/evaluator.md``, "Metrics"; standard rows only
    for the first five): ``nominal`` (None without a nominal row), ``overall`` (mean over every
    single-shift case: the ranking score), ``static_mean``, ``runtime_mean``, ``categories``
    (kind -> category -> mean), ``compositions``, ``live_minus_frozen`` and ``recovery_gain``
    (protocol -> gain). All of them leave out the episodes of ``unproved`` instances (issue 22,
    item 4): ``proof`` counts the run's instances per verdict and ``unproved`` summarises those
    episodes apart (``instances`` 0 when there are none)."""

    nominal: SuccessRate | None = None
    overall: MeanRate = Field(default_factory=MeanRate)
    static_mean: MeanRate = Field(default_factory=MeanRate)
    runtime_mean: MeanRate = Field(default_factory=MeanRate)
    categories: dict[str, dict[str, MeanRate]] = Field(default_factory=dict)
    compositions: list[CompositionSummary] = Field(default_factory=list)
    live_minus_frozen: LiveMinusFrozen = Field(default_factory=LiveMinusFrozen)
    recovery_gain: dict[str, RecoveryGain] = Field(default_factory=dict)
    proof: dict[str, int] = Field(
        default_factory=dict,
        description="Instances of the run per proof verdict (proved_under_shift, proved_by_nominal, unproved, "
        "not_proved); the headline is over every instance but the unproved ones. Empty in older summaries.",
    )
    unproved: UnprovedRate = Field(default_factory=UnprovedRate)

    def category(self, kind: str, category: str) -> MeanRate | None:
        """The mean over the single-shift cases of ``kind`` in ``category``; None when not run."""
        return (self.categories.get(kind) or {}).get(category)


class EpisodeCounts(_Tolerant):
    """Episodes of the run: all, valid, invalid, successes among the valid, and ``shift_blocked``:
    valid episodes whose shift could not be realised after the policy acted (failures)."""

    total: int = 0
    valid: int = 0
    invalid: int = 0
    successes: int = 0
    shift_blocked: int = 0


# ------------------------------------------------------------------------------ header + summary
class _Sparse(_Tolerant):
    """A header part whose keys depend on the writer: only the fields given are written (a
    local run and a platform run record different keys; none is written as a null it never had)."""

    @model_serializer(mode="wrap")
    def _given_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        keep = set(self.model_fields_set) | set(self.model_extra or {}) | self._always()
        return self._arrange({k: v for k, v in out.items() if k in keep})

    @classmethod
    def _always(cls) -> set[str]:
        """Fields written even when not given."""
        return set()

    @staticmethod
    def _arrange(out: dict[str, Any]) -> dict[str, Any]:
        """The written keys in file order."""
        return out

    def to_json(self) -> dict[str, Any]:
        """The JSON content as written (only the keys given, in file order)."""
        return self.model_dump(mode="json")


class RunPolicy(_Sparse):
    """The policy that ran. Local runs (``liberopro evaluate``) record ``url`` or ``cmd``,
    ``encoding``, ``protocol_options`` (``api_key`` masked), ``restarts`` and ``pids`` of the
    policy process; platform runs ``image_ref``, ``image_digest`` and ``source``. Both record
    ``protocol`` and ``metadata`` (the policy's ``/metadata``, ``submission_spec.PolicyMetadata``).
    Evaluator tooling run in process (``liberopro demo``'s privileged oracle,
    ``liberopro.oracle.policy``) records ``in_process``: its policy name, and neither url nor cmd."""

    in_process: str | None = None
    url: str | None = None
    cmd: str | None = None
    image_ref: str | None = None
    image_digest: str | None = None
    source: str | None = None
    protocol: str | None = None
    encoding: str | None = None
    protocol_options: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    restarts: int | None = None
    pids: list[int] | None = None


class RunSettingsRecord(_Sparse):
    """The settings of the run. Local runs record ``liberopro.episode.runner.RunSettings`` (render size
    in px, ``max_steps``, per-episode policy budget in s, replan override, recovery steps,
    ``stop_when_shifts_done``); platform runs ``episodes_per_instance``, the episode ``seed``,
    ``max_steps``, ``request_timeout_s``, ``episode_budget_s`` and the sandbox ``backend``.
    Durations are seconds, ints kept as ints (a value is written as it was given)."""

    render_size: int | None = None
    episodes_per_instance: int | None = None
    seed: int | None = None
    max_steps: int | None = None
    episode_policy_budget_s: float | int | None = None
    replan_steps: int | None = None
    recovery_hold_steps: int | None = None
    recovery_extra_steps: int | None = None
    stop_when_shifts_done: bool | None = None
    request_timeout_s: float | int | None = None
    episode_budget_s: float | int | None = None
    backend: str | None = None


class RunHeader(_Sparse):
    """What produced a run: the evaluator version, the simulation ``stack`` versions
    (``liberopro.stack.check_stack``), start and end (ISO 8601, UTC, seconds), the policy, the
    settings and the number of instances; local runs add ``command`` (argv), ``skipped_pairs``,
    ``manifest`` (path) and ``workers`` (simulator processes, :mod:`liberopro.runs.workers`); platform
    runs ``submission_id`` and ``team``; both may give
    ``manifest_sha256`` (the manifest's content hash, None without one). Built by
    :func:`run_header`; only the fields given are written."""

    evaluator_version: str | None = None
    stack: dict[str, str | None] = Field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    command: list[str] | None = None
    submission_id: str | None = None
    team: str | None = None
    policy: RunPolicy = Field(default_factory=RunPolicy)
    settings: RunSettingsRecord = Field(default_factory=RunSettingsRecord)
    instances: int | None = None
    skipped_pairs: list[str] | None = None
    manifest: str | None = None
    manifest_sha256: str | None = None
    workers: int | None = None


def run_header(
    *,
    evaluator_version: str | None,
    stack: dict[str, str | None],
    started: str,
    finished: str,
    policy: dict[str, Any],
    settings: dict[str, Any],
    instances: int,
    **context: Any,
) -> RunHeader:
    """The header of a run, for every writer (``liberopro.runs.evaluation.run_evaluation``, the
    platform's aggregation, test seeds). ``context`` holds the writer's own fields (``command``,
    ``skipped_pairs``, ``manifest``, ``manifest_sha256``, ``submission_id``, ``team``; other keys
    are kept as given). Raises ``pydantic.ValidationError`` for a value of the wrong type."""
    return RunHeader.model_validate(
        {
            "evaluator_version": evaluator_version,
            "stack": stack,
            "started": started,
            "finished": finished,
            "policy": policy,
            "settings": settings,
            "instances": instances,
            **context,
        }
    )


_SUMMARY_TAIL = ("episodes", "termination_reasons", "headline", "cases")


class Summary(RunHeader):
    """``summary.json``: ``schema_version``, the :class:`RunHeader` fields, then ``episodes``
    (:class:`EpisodeCounts`), ``termination_reasons`` (episodes per reason), the
    :class:`Headline` and one :class:`CaseSummary` per row (nominal rows first, then by name).

    Written by ``liberopro.runs.summary.summarize``; read by the CLI, the platform and the
    leaderboard (:meth:`load`)."""

    schema_version: int = RESULTS_SCHEMA_VERSION
    episodes: EpisodeCounts = Field(default_factory=EpisodeCounts)
    termination_reasons: dict[str, int] = Field(default_factory=dict)
    headline: Headline = Field(default_factory=Headline)
    cases: list[CaseSummary] = Field(default_factory=list)

    @staticmethod
    def _arrange(out: dict[str, Any]) -> dict[str, Any]:
        head = {"schema_version": out.pop("schema_version")}
        tail = {k: out.pop(k) for k in _SUMMARY_TAIL}
        return head | out | tail

    @classmethod
    def _always(cls) -> set[str]:
        return {"schema_version", *_SUMMARY_TAIL}

    @classmethod
    def load(cls, raw: dict[str, Any] | str | bytes | None) -> Summary:
        """Parse a stored summary (a dict, or JSON text). Tolerant: missing parts take their
        defaults and unknown keys are kept, so summaries of older evaluators load. Raises
        ``pydantic.ValidationError`` when a present value has the wrong type."""
        if raw is None:
            return cls()
        if isinstance(raw, (str, bytes)):
            return cls.model_validate_json(raw)
        return cls.model_validate(raw)

    @property
    def header(self) -> RunHeader:
        """The run header part of the summary."""
        data = self.to_json()
        for key in ("schema_version", *_SUMMARY_TAIL):
            data.pop(key)
        return RunHeader.model_validate(data)

    def case(self, name: str) -> CaseSummary | None:
        """The row named ``name`` (e.g. ``nominal``, ``S01``, ``D10 [frozen]``), or None."""
        return next((c for c in self.cases if c.case == name), None)


# ------------------------------------------------------------------------------ events
class HelloEvent(BaseModel):
    """First event of a shard: the evaluator and simulation stack versions."""

    type: Literal["hello"] = "hello"
    evaluator_version: str | None = None
    stack: dict[str, str | None] = Field(default_factory=dict)


class MetadataEvent(BaseModel):
    """The policy's ``/metadata`` (``submission_spec.PolicyMetadata`` as JSON)."""

    type: Literal["metadata"] = "metadata"
    metadata: dict[str, Any]


class EpisodeEvent(BaseModel):
    """One finished episode."""

    type: Literal["episode"] = "episode"
    record: EpisodeRecord


class DoneEvent(BaseModel):
    """The shard ran all its ``episodes``."""

    type: Literal["done"] = "done"
    episodes: int


class ErrorEvent(BaseModel):
    """The shard stopped: ``kind`` ``policy`` (with the ``submission_spec.FailureReason`` in
    ``reason``) or ``internal`` (the evaluator's own failure; ``message`` for admins)."""

    type: Literal["error"] = "error"
    kind: Literal["policy", "internal"]
    reason: str | None = None
    message: str | None = None


class ConformanceEvent(BaseModel):
    """The validation check's result: ``submission_spec.conformance.ConformanceReport.to_dict``."""

    type: Literal["conformance"] = "conformance"
    report: dict[str, Any]


Event = Annotated[
    HelloEvent | MetadataEvent | EpisodeEvent | DoneEvent | ErrorEvent | ConformanceEvent, Field(discriminator="type")
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event_json(text: str | bytes) -> Event:
    """The event in JSON ``text``. Raises ``pydantic.ValidationError`` for malformed JSON, an
    unknown ``type`` or a field of the wrong shape."""
    return EVENT_ADAPTER.validate_json(text)


def event_json(event: Event) -> str:
    """``event`` as compact JSON (one line)."""
    return event.model_dump_json()


# ------------------------------------------------------------------------------ JSON Schema
def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the results, one definition per file or line under
    ``$defs``: ``Summary`` (``summary.json``), ``EpisodeRecord`` (a line of ``episodes.jsonl``),
    ``RunHeader`` and ``Event`` (an event line's JSON), with the parts they refer to
    (validation mode: what a reader accepts)."""
    doc: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "LIBERO-Pro2.0 results",
        "description": f"summary.json, episodes.jsonl lines and evaluator events; results schema_version "
        f"{RESULTS_SCHEMA_VERSION}. Generated by `python -m liberopro.schema.results`; see docs/results.md.",
        "x-results-schema-version": RESULTS_SCHEMA_VERSION,
        "$defs": {},
    }
    defs: dict[str, Any] = doc["$defs"]
    for name, schema in (
        ("Summary", Summary.model_json_schema(ref_template="#/$defs/{model}")),
        ("EpisodeRecord", EpisodeRecord.model_json_schema(ref_template="#/$defs/{model}")),
        ("RunHeader", RunHeader.model_json_schema(ref_template="#/$defs/{model}")),
        ("Event", EVENT_ADAPTER.json_schema(ref_template="#/$defs/{model}")),
    ):
        for sub, sub_schema in schema.pop("$defs", {}).items():
            defs.setdefault(sub, sub_schema)
        defs[name] = schema
    doc["$defs"] = dict(sorted(defs.items()))
    return doc


def render_json_schema() -> str:
    """:func:`json_schema` as the committed file's text."""
    return json.dumps(json_schema(), indent=2) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_PATH
    target.write_text(render_json_schema())
    print(f"wrote {target}")
