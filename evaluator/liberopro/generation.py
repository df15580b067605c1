"""Generating instance manifests: every (task, case) of a split with fixed, validated parameters.

A manifest is a JSON-lines file: a header line, then one :class:`~liberopro.instances.Instance`
per line. The format (models, reader, writer, content hash) is :mod:`liberopro.schema.manifest`,
which the platform reads without the simulator; this module generates manifests and checks them
against the shift catalog (:func:`check_manifest`). Generation is a pure function of (split,
seed, shift catalog, simulator stack):

1. For each task of the split and each case (nominal and every single shift, or the given cases
   and compositions), the shift's applicability rule may drop the pair with its reason.
2. Otherwise parameters are drawn from (seed, task, case, attempt) and the instance is realised
   in the simulator on init state 0 through the real episode runner: static shifts are applied,
   settled and their post-conditions measured; runtime shifts are fired (at their phase, reached
   by a privileged scripted controller where one exists, else at their fallback step) and
   measured. A failed post-condition redraws the parameters (up to ``attempts``); a pair whose
   every draw fails is dropped with the checked reasons.

The header records the schema version, split, a SHA-256 commitment to the seed (never the seed:
evaluation manifests come from a secret seed), the evaluator and stack versions, the counts per
shift and suite, and ``content_hash``: SHA-256 of the instance lines, which readers verify.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from liberopro import EVALUATOR_VERSION
from liberopro.instances import Instance, instance_problems, make_instance
from liberopro.schema.manifest import (
    NOMINAL,
    Manifest,
    ManifestError,
    ManifestHeader,
    listing,
    make_header,
    read_manifest,
    seed_commitment,
)

__all__ = [
    "REFERENCE",
    "DroppedPair",
    "check_manifest",
    "default_cases",
    "first_valid_static",
    "generate",
    "report",
    "validate_instance",
]

#: Reference counts of the study this benchmark follows (``docs/definition.md``, "Instances"):
#: shifted instances only (40 tasks x 42 shifts = 1,680 pairs); nominal instances come on top.
REFERENCE = {"train": 1313, "eval": 335, "total": 1648, "pairs": 1680}


class DroppedPair(BaseModel):
    """A (task, case) pair that is not in the manifest, and the checked reason."""

    suite: str
    task_index: int
    case: str
    stage: str  # "applicability" or "validation"
    reason: str


def check_manifest(path: Path) -> Manifest:
    """Read a manifest and validate it whole before anything runs: its format and header
    (:func:`liberopro.schema.manifest.read_manifest`: every line parses, every task exists,
    unique ids, counts and content hash), then every instance against the shift catalog
    (:func:`liberopro.instances.instance_problems`: known shift ids, parameters valid for the
    shift's ``Params`` model, compositions allowed).

    Raises :class:`ManifestError` listing each bad line as ``path:LINE: what is wrong``.
    """
    manifest = read_manifest(path)
    problems = [
        f"{manifest.where(k)}: {p}" for k, inst in enumerate(manifest.instances) for p in instance_problems(inst)
    ]
    if problems:
        raise ManifestError(listing(path, problems))
    return manifest


# ------------------------------------------------------------------------------ validation
def _validation_metadata(shift_ids: list[str]):
    """What the validation policy asks for: no cameras (fast) unless a shift works on images."""
    from liberopro.catalog import get_spec
    from submission_spec import CameraSpec, PolicyMetadata

    needs_images = any(get_spec(s).category == "Observation" for s in shift_ids)
    cams = [CameraSpec(name="agentview", height=64, width=64), CameraSpec(name="wrist", height=64, width=64)]
    return PolicyMetadata(
        policy_name="liberopro-validator (privileged, not a submission)",
        cameras=cams if needs_images else [],
        chunk_length=1,
        replan_steps=1,
    )


class _ValidationPolicy:
    """Holds still (static shifts) or follows the privileged scripted controller when the
    tooling provides one (runtime shifts), so that a trigger phase is really reached."""

    def __init__(self, metadata, runner, ref) -> None:
        self.metadata = metadata
        self._runner = runner
        self._ref = ref
        self._controller = None

    def reset(self, episode_id: str, instruction: str) -> None:
        self._controller = None
        try:
            from liberopro import scripted
        except ImportError:
            return
        # the episode's own scene: a prop or swap variant runs in a scene of its own, and a
        # controller reading the task's plain scene would steer by a robot that never moves
        scene = self._runner.current_scene
        if scene is not None and hasattr(scripted, "ScriptedController"):
            from liberopro.instances import semantics_of

            self._controller = scripted.ScriptedController(scene, semantics_of(self._ref))

    def act(self, obs) -> np.ndarray:
        if self._controller is None:
            return np.array([[0, 0, 0, 0, 0, 0, -1.0]])
        return np.asarray(self._controller())[None]


def validate_instance(inst: Instance, runner_cache: dict, seed: int) -> tuple[bool, str, dict]:
    """Realise ``inst`` on init state 0 and measure its post-conditions.

    Returns (valid, reason, per-shift applied records). Static-only instances run one policy
    step; runtime ones run until every shift fired and its window closed (fallback + 40 steps).
    """
    from liberopro.catalog import get_spec
    from liberopro.instances import EpisodePlan
    from liberopro.local_policy import LocalPolicyClient
    from liberopro.runner import EpisodeRunner, RunSettings

    ids = [s.id for s in inst.shifts]
    meta = _validation_metadata(ids)
    runtime = [s for s in inst.shifts if get_spec(s.id).kind == "runtime"]
    steps = 1 + max([int(s.params.get("fallback_step", 0)) + 40 for s in runtime] or [0])
    settings = RunSettings(render_size=64, max_steps=steps, stop_when_shifts_done=True)
    runner = EpisodeRunner(None, meta, settings, scenes=runner_cache)  # type: ignore[arg-type]
    runner.client = LocalPolicyClient(_ValidationPolicy(meta, runner, inst.task))
    rec = runner.run_episode(EpisodePlan(inst, 0, 0, seed))
    applied = {s.id: s.model_dump(mode="json") for s in rec.shifts}
    if not rec.valid:
        return False, rec.detail or "invalid", applied
    if rec.termination_reason not in ("horizon", "success"):
        return False, f"{rec.termination_reason}: {rec.detail}", applied
    unfired = [s.id for s in rec.shifts if s.kind == "runtime" and s.fired_at_step is None]
    if unfired:
        return False, f"{', '.join(unfired)} did not fire within {steps} steps", applied
    return True, "", applied


def _draw_valid(ref, case: list[str], seed: int, cache: dict, attempts: int) -> tuple[Instance | str | None, int, str]:
    """Draw parameters for (ref, case) until a draw's realisation passes its post-conditions on
    init state 0. Returns (instance, attempt, reasons of the failed draws joined by "; "); the
    instance is the applicability reason (a string) when the pair does not apply, and None when
    all ``attempts`` draws failed."""
    reasons: list[str] = []
    for attempt in range(attempts):
        inst = make_instance(ref, case, seed, attempt)
        if isinstance(inst, str):
            return inst, attempt, "; ".join(reasons)
        ok, why, _ = validate_instance(inst, cache, seed)
        _drop_variant_scenes(cache)
        if ok:
            return inst, attempt, "; ".join(reasons)
        reasons.append(f"attempt {attempt + 1}: {why}")
    return None, attempts, "; ".join(reasons)


def first_valid_static(
    ref, case: list[str], seed: int, cache: dict, attempts: int = 5
) -> tuple[Instance | str, int, str]:
    """For an ad-hoc run (no manifest): the first parameter draw of a static-only case whose
    realisation passes its post-conditions on init state 0, as manifest generation picks it
    (a cheap check: one policy step, no cameras unless an Observation shift needs them).

    Returns (instance, attempt, reasons of the failed draws); the instance is attempt 0's when
    every draw fails (its episodes are then recorded invalid with the reason), or the
    applicability reason (a string) when the pair does not apply. Runtime cases are not checked
    here (that needs the scripted controller): they run with attempt 0.
    """
    from liberopro.catalog import get_spec

    first = make_instance(ref, case, seed, 0)
    if isinstance(first, str) or any(get_spec(sid).kind == "runtime" for sid in case):
        return first, 0, ""
    inst, attempt, why = _draw_valid(ref, case, seed, cache, attempts)
    if isinstance(inst, Instance):
        return inst, attempt, why
    return first, 0, why


def _drop_variant_scenes(cache: dict) -> None:
    """Keep only the task's own scenes: a scene holds 1.5-2.5 GB and each prop or swap variant is
    needed by one case only."""
    from liberopro.sim import SceneVariant

    for key in [k for k in cache if k[-1] != SceneVariant()]:
        cache.pop(key).close()


def _die_with_parent() -> None:
    """Worker initializer: on Linux, have the kernel send SIGTERM to this worker when the
    generating process dies (killed by a signal, not only Ctrl-C), instead of leaving orphaned
    workers that hold a scene each and keep validating (seen: four orphans from two killed
    runs kept both cores busy)."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _generate_task(args: tuple) -> tuple[list[Instance], list[DroppedPair]]:
    ref, cases, seed, attempts, validate = args
    kept, dropped = [], []
    cache: dict = {}
    try:
        for case in cases:
            label = "+".join(case) or NOMINAL
            if validate:
                inst, _, why = _draw_valid(ref, case, seed, cache, attempts)
            else:
                inst, why = make_instance(ref, case, seed, 0), ""
            if isinstance(inst, str):
                dropped.append(
                    DroppedPair(suite=ref.suite, task_index=ref.index, case=label, stage="applicability", reason=inst)
                )
            elif inst is None:
                dropped.append(
                    DroppedPair(
                        suite=ref.suite,
                        task_index=ref.index,
                        case=label,
                        stage="validation",
                        reason=f"no valid parameters in {attempts} draws: {why}",
                    )
                )
            else:
                kept.append(inst)
    finally:
        for scene in cache.values():
            scene.close()
    return kept, dropped


class _TaskParts:
    """Per-task results of a generation run kept in ``directory``, so that an interrupted run
    (hours for a whole split) resumes where it stopped. A part is reused only when its key (seed
    commitment, cases, attempts, validation, evaluator and stack versions) matches. Parts of an
    evaluation manifest hold hidden instances: they are as secret as the manifest itself."""

    def __init__(self, directory: Path | None, key: dict[str, Any]) -> None:
        self.directory = directory
        self.key = key
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def _path(self, ref) -> Path:
        assert self.directory is not None
        return self.directory / f"{ref.suite}-{ref.index}.json"

    def load(self, ref) -> tuple[list[Instance], list[DroppedPair]] | None:
        if self.directory is None or not self._path(ref).exists():
            return None
        try:
            data = json.loads(self._path(ref).read_text())
        except (OSError, ValueError):
            return None
        if data.get("key") != self.key:
            return None
        return (
            [Instance.model_validate(i) for i in data["kept"]],
            [DroppedPair.model_validate(d) for d in data["dropped"]],
        )

    def save(self, ref, result: tuple[list[Instance], list[DroppedPair]]) -> None:
        if self.directory is None:
            return
        kept, dropped = result
        tmp = self._path(ref).with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "key": self.key,
                    "kept": [i.model_dump(mode="json") for i in kept],
                    "dropped": [d.model_dump(mode="json") for d in dropped],
                }
            )
        )
        tmp.replace(self._path(ref))


def generate(
    split: str,
    seed: int,
    *,
    tasks=None,
    cases: list[list[str]] | None = None,
    episodes: int = 10,
    attempts: int = 5,
    workers: int = 1,
    validate: bool = True,
    parts_dir: Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[ManifestHeader, list[Instance], list[DroppedPair]]:
    """Generate the manifest of ``split`` (train/eval/all) for ``seed``.

    ``tasks`` restricts the split's tasks; ``cases`` (lists of shift ids, ``[]`` for nominal)
    defaults to nominal and every single shift of the catalog. ``validate=False`` skips the
    simulator (for a quick look; such a manifest says so in its report only; do not score on it). ``parts_dir`` keeps each task's result as it
    completes and reuses matching ones (resume after an interruption). The output order and
    content do not depend on ``workers`` or on resuming.
    """
    from liberopro.split import tasks_in_split
    from liberopro.stack import check_stack

    stack = check_stack()
    refs = tasks_in_split(split, tasks)  # type: ignore[arg-type]
    cases = cases or default_cases()
    parts = _TaskParts(
        parts_dir,
        {
            "seed_sha256": seed_commitment(seed),
            "cases": ["+".join(c) for c in cases],
            "attempts": attempts,
            "validate": validate,
            "evaluator": EVALUATOR_VERSION,
            "stack": stack,
        },
    )
    done: dict[int, tuple[list[Instance], list[DroppedPair]]] = {}
    for i, ref in enumerate(refs):
        part = parts.load(ref)
        if part is not None:
            done[i] = part
    todo = [i for i in range(len(refs)) if i not in done]
    jobs = {i: (refs[i], cases, seed, attempts, validate) for i in todo}

    def finished(i: int, res) -> None:
        done[i] = res
        parts.save(refs[i], res)
        if progress:
            progress(str(refs[i]), len(done), len(refs))

    if workers <= 1 or len(todo) <= 1:
        for i in todo:
            finished(i, _generate_task(jobs[i]))
    else:
        import multiprocessing
        from concurrent.futures import as_completed

        with ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent
        ) as pool:
            futures = {pool.submit(_generate_task, jobs[i]): i for i in todo}
            for fut in as_completed(futures):
                finished(futures[fut], fut.result())
    results = [done[i] for i in range(len(refs))]
    instances = [inst for kept, _ in results for inst in kept]
    dropped = [d for _, drops in results for d in drops]
    header = make_header(split, seed, instances, episodes=episodes, dropped=len(dropped), stack=stack)  # type: ignore[arg-type]
    return header, instances, dropped


def default_cases() -> list[list[str]]:
    """The cases of a manifest when none are given: nominal, then every single shift of the
    catalog in id order (``[]`` is nominal)."""
    from liberopro.catalog import SPECS

    return [[]] + [[sid] for sid in SPECS]


def report(header: ManifestHeader, dropped: list[DroppedPair], pairs: int) -> dict[str, Any]:
    """The drop report written beside a manifest: counts against the reference and every dropped
    pair with its reason. The reference counts shifted instances only, so the difference leaves
    the nominal instances out."""
    ref = REFERENCE.get(header.split)
    nominal = header.per_shift.get(NOMINAL, 0)
    return {
        "split": header.split,
        "pairs": pairs,
        "instances": header.instances,
        "nominal_instances": nominal,
        "dropped": len(dropped),
        "reference_instances": ref,
        "difference_vs_reference": None if ref is None else header.instances - nominal - ref,
        "per_shift": header.per_shift,
        "per_suite": header.per_suite,
        "dropped_pairs": [d.model_dump() for d in dropped],
        "dropped_by_shift": dict(sorted(Counter(d.case for d in dropped).items())),
    }
