"""Instance manifests: the one file format that the evaluator writes and that both the evaluator
and the platform read (``docs/evaluator.md``, "Instances and manifests").

A manifest is a UTF-8 JSON-lines file:

* line 1: a :class:`ManifestHeader` (kind, schema version, split, a SHA-256 commitment to the
  seed, the evaluator and simulator versions, counts, ``content_hash``);
* every further line: one :class:`Instance` as canonical JSON (:func:`instance_line`: sorted
  keys, no spaces).

``content_hash`` is the SHA-256 of the instance lines exactly as :func:`write_manifest` writes
them, each followed by ``\\n``; :func:`read_manifest` recomputes it, so an instance altered after
generation is detected.

This module checks the format (every line parses, every task exists, ids are unique, counts and
hash agree). Whether each shift id is known and each parameter set validates against its shift's
``Params`` model is the shift catalog's check (:func:`liberopro.catalog.shift_problems`, light as
well): :func:`liberopro.instances.generation.check_manifest` in the evaluator and the platform's loader add
it. Nothing here imports the simulator (robosuite, mujoco, libero, cv2):
the platform, whose image has none of them, imports this module.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from liberopro import EVALUATOR_VERSION
from liberopro.sim.tasks import TaskRef

#: Version 2 added :attr:`Instance.oracle` (the scripted oracle's solvability proof, issue 11,
#: item 2). A version-1 line is refused with the advice to regenerate: its instances were never
#: proved, and an unproved instance must not pass for a proved one.
INSTANCE_SCHEMA_VERSION = 2
NOMINAL = "nominal"
MANIFEST_KIND = "liberopro-instance-manifest"
MANIFEST_SCHEMA_VERSION = 1
#: Episodes per instance of the evaluation protocol: episode ``e`` of an instance starts from init
#: state ``e`` (0-9). The default of ``instances generate --episodes`` and of the platform's
#: ``EPISODES_PER_INSTANCE``; the leaderboard marks a result run with fewer as a trial run.
EPISODES_PER_INSTANCE = 10
#: How many bad lines one error message lists before it says how many more there are.
MAX_LISTED_PROBLEMS = 20

Split = Literal["train", "eval", "all"]
#: What the solvability proof established for an instance (:attr:`OracleProof.kind`).
ProofKind = Literal["proved_under_shift", "proved_by_nominal", "unproved"]


class ManifestError(ValueError):
    """A manifest is missing, malformed, of another kind or schema, or altered (hash mismatch).

    The message names the file, the line (``path:N:``) where one is at fault, and what is wrong.
    """


class ShiftEntry(BaseModel):
    """One shift of an instance: the shift's id (``S01``...``S22``, ``D01``...``D20``, see
    ``docs/shifts.md``) and its fixed parameters as plain JSON values (units in the parameter
    names: ``_m`` metres, ``_deg`` degrees, ``_step(s)`` policy steps). The parameters are
    checked against the shift's ``Params`` model by the evaluator, which knows the catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    params: dict[str, Any]


class OracleProof(BaseModel):
    """The privileged scripted oracle's solvability proof of one instance (``docs/instances.md``,
    "Solvability proof"), recorded by ``liberopro instances generate``.

    ``basis``: ``shifted`` when the oracle (:class:`liberopro.oracle.scripted.ScriptedController`,
    tooling only) ran this instance through the episode runner: a shift that changes what must
    be done physically (Condition, Robot, Execution, and Environment shifts that add a prop or
    swap an object model), and the nominal instance itself; ``nominal`` when the instance is
    proved by the nominal run of its task (Observation, Language and the other Environment
    shifts: they change what the policy perceives, not what the robot must do).

    ``init_states`` are the LIBERO init states run (the manifest's episodes' ones: episode ``e``
    uses init state ``e``), with env seed ``seed + init state`` (``seed`` is the episodes' seed,
    :func:`liberopro.instances.build.plan_episodes`). ``successes`` of ``attempts`` episodes (one per
    init state) reached LIBERO's goal predicate within the suite's horizon; ``steps`` and
    ``stages`` are, per attempt, the policy-loop steps taken and the controller's stage at the
    end (``done`` once every stage ran). ``nominal_successes`` is the nominal oracle's success
    count on the same init states. ``fired_by`` maps each runtime shift to how it fired in the
    instance's *validation* episode (init state 0), which suspends the fallbacks so that the
    oracle meets each shift at its trigger phase (``phase``; ``fallback``: the oracle did not reach
    the phase, and the draw was validated at its fallback step; ``null``: it never fired): it
    says where the realisation was checked, not how the proof's episodes met the shift.
    ``episodes_fired_by`` is how they did, one map per attempt (aligned with ``init_states``,
    ``steps`` and ``stages``): the proof episodes keep the instance's fallback steps, so a shift
    the validation episode met at its phase may fire by its fallback there (issue 22, item 6). It
    is written for a ``shifted`` basis only (a ``nominal`` basis ran no episode under the shift)
    and absent from records generated before it (the key is not written when unset, so those
    manifests keep their content hash). ``verdict``: ``proved`` (the oracle solved the instance at least once)
    or ``unproved`` (kept without a proof; ``reason`` says why: the oracle does not solve the
    nominal task there, or an Execution shift, which is never dropped for an oracle failure).
    :attr:`kind` combines verdict and basis: ``proved_under_shift`` (the oracle solved the
    instance itself; the nominal instance, proved by its own run, is one), ``proved_by_nominal``
    (the nominal run of its task stands in: no episode ran under the shift) or ``unproved``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    verdict: Literal["proved", "unproved"]
    basis: Literal["shifted", "nominal"]
    init_states: list[int]
    seed: int = 0
    successes: int = Field(ge=0)
    attempts: int = Field(ge=0)
    steps: list[int] = Field(default_factory=list)
    stages: list[str] = Field(default_factory=list)
    nominal_successes: int = Field(ge=0)
    fired_by: dict[str, Literal["phase", "fallback"] | None] = Field(default_factory=dict)
    episodes_fired_by: list[dict[str, Literal["phase", "fallback"] | None]] | None = None
    reason: str = ""

    @model_serializer(mode="wrap")
    def _written_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        if self.episodes_fired_by is None:  # records before the key keep their bytes (content hash)
            out.pop("episodes_fired_by", None)
        return out

    @property
    def kind(self) -> ProofKind:
        """``proved_under_shift``, ``proved_by_nominal`` or ``unproved`` (see the class docstring)."""
        if self.verdict != "proved":
            return "unproved"
        return "proved_under_shift" if self.basis == "shifted" else "proved_by_nominal"


class Instance(BaseModel):
    """A task under a case with every parameter fixed (``docs/instances.md``).

    ``shifts`` is empty for the nominal case, else one :class:`ShiftEntry` per shift of the case
    (a composition has two or three). ``task_index`` is LIBERO's task index 0-9 in its task order
    0 of ``suite``. ``oracle`` is the solvability proof (:class:`OracleProof`; None when the
    manifest was generated with ``--no-proof`` or ``--no-validate``). Raises
    ``pydantic.ValidationError`` for an unknown suite, an index out of range or another instance
    schema version (version 1, before the proof, is refused with the advice to regenerate).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int = INSTANCE_SCHEMA_VERSION
    instance_id: str = Field(min_length=1)
    suite: str
    task_index: int
    shifts: list[ShiftEntry] = Field(default_factory=list)
    oracle: OracleProof | None = None

    @model_validator(mode="after")
    def _known_task(self) -> Instance:
        if self.schema_version != INSTANCE_SCHEMA_VERSION:
            why = " (before the oracle's solvability proof)" if self.schema_version < INSTANCE_SCHEMA_VERSION else ""
            raise ValueError(
                f"instance schema version {self.schema_version}{why}; this reader reads version "
                f"{INSTANCE_SCHEMA_VERSION}: regenerate the manifest with `liberopro instances generate`"
            )
        TaskRef(self.suite, self.task_index)  # ValueError naming the unknown suite or index
        return self

    @property
    def task(self) -> TaskRef:
        return TaskRef(self.suite, self.task_index)

    @property
    def case(self) -> str:
        """``nominal`` or the shift ids joined by ``+`` (the summary's and leaderboard's case key)."""
        return "+".join(s.id for s in self.shifts) or NOMINAL


class ManifestHeader(BaseModel):
    """First line of a manifest file.

    ``seed_sha256`` is :func:`seed_commitment` of the seed (never the seed: evaluation manifests
    come from a secret one); ``stack`` the simulator versions that validated the instances
    (:func:`liberopro.stack.check_stack`); ``per_shift`` counts instances per case (``nominal``
    included), ``per_suite`` per suite; ``dropped`` the (task, case) pairs left out, listed in
    the report beside the manifest; ``content_hash`` see the module docstring.
    """

    model_config = ConfigDict(extra="forbid")
    kind: str = MANIFEST_KIND
    schema_version: int = MANIFEST_SCHEMA_VERSION
    split: Split
    seed_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    episodes_per_instance: int = Field(ge=1)
    evaluator_version: str = EVALUATOR_VERSION
    stack: dict[str, Any] = Field(default_factory=dict)
    created: str
    instances: int = Field(ge=0)
    per_shift: dict[str, int]
    per_suite: dict[str, int]
    dropped: int = Field(ge=0)
    content_hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class Manifest(BaseModel):
    """A whole manifest: its header and its instances in file order.

    Construction checks that the two agree (kind and schema version, the instance count, the
    content hash, unique instance ids) and raises ``pydantic.ValidationError`` otherwise;
    :func:`read_manifest` turns every problem into a :class:`ManifestError` with its line.
    ``path``, ``sha256`` (of the file's bytes) and ``lines`` (the 1-based line of each
    instance) say where a manifest was read from; they are not part of the format.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    header: ManifestHeader
    instances: list[Instance]
    path: str | None = Field(None, exclude=True)
    sha256: str | None = Field(None, exclude=True)
    lines: list[int] = Field(default_factory=list, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        h = self.header
        if h.kind != MANIFEST_KIND or h.schema_version != MANIFEST_SCHEMA_VERSION:
            raise ValueError(
                f"kind {h.kind!r} schema {h.schema_version}; this reader reads {MANIFEST_KIND!r} "
                f"schema {MANIFEST_SCHEMA_VERSION}"
            )
        if len(self.instances) != h.instances:
            raise ValueError(f"the header says {h.instances} instances, the file has {len(self.instances)}")
        dupes = [i for i, n in Counter(i.instance_id for i in self.instances).items() if n > 1]
        if dupes:
            raise ValueError(f"instance ids appear more than once: {', '.join(dupes[:5])}")
        if content_hash(self.instances) != h.content_hash:
            raise ValueError("content hash mismatch: the instances were altered after generation")
        return self

    def by_id(self) -> dict[str, Instance]:
        """Instances by id."""
        return {i.instance_id: i for i in self.instances}

    def where(self, index: int) -> str:
        """``path:line`` of the ``index``-th instance (for error messages)."""
        line = self.lines[index] if index < len(self.lines) else index + 2
        return f"{self.path or '<manifest>'}:{line}"


def seed_commitment(seed: int) -> str:
    """SHA-256 commitment to a manifest seed (publishable; the seed itself is not)."""
    return hashlib.sha256(f"liberopro-manifest-seed:{seed}".encode()).hexdigest()


def instance_line(inst: Instance) -> str:
    """The canonical JSON line of an instance (sorted keys, no spaces, no newline)."""
    return json.dumps(inst.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def content_hash(instances: list[Instance]) -> str:
    """SHA-256 (hex) of the instance lines, each with its newline, in order."""
    h = hashlib.sha256()
    for inst in instances:
        h.update(instance_line(inst).encode() + b"\n")
    return h.hexdigest()


def make_header(
    split: Split,
    seed: int,
    instances: list[Instance],
    *,
    episodes: int,
    dropped: int = 0,
    stack: dict[str, Any] | None = None,
    created: str | None = None,
) -> ManifestHeader:
    """The header of a manifest holding ``instances``: counts, seed commitment and content hash
    computed here; ``created`` defaults to now (UTC, ISO 8601, seconds)."""
    return ManifestHeader(
        split=split,
        seed_sha256=seed_commitment(seed),
        episodes_per_instance=episodes,
        stack=stack or {},
        created=created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        instances=len(instances),
        per_shift=dict(sorted(Counter(i.case for i in instances).items())),
        per_suite=dict(sorted(Counter(i.suite for i in instances).items())),
        dropped=dropped,
        content_hash=content_hash(instances),
    )


def write_manifest(path: Path, header: ManifestHeader, instances: list[Instance]) -> Manifest:
    """Write a manifest file (parent directories created). Raises :class:`ManifestError` when
    header and instances disagree (count, hash, duplicate ids): nothing is written then."""
    path = Path(path)
    try:
        manifest = Manifest(header=header, instances=instances, path=str(path))
    except ValidationError as exc:
        raise ManifestError(f"{path}: not written: {describe_errors(exc)}") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write(header.model_dump_json() + "\n")
        for inst in instances:
            fh.write(instance_line(inst) + "\n")
    return manifest


def read_manifest(path: Path) -> Manifest:
    """Read a manifest and check its format whole.

    Every line is parsed; every problem is reported as ``path:LINE: what is wrong`` (up to
    :data:`MAX_LISTED_PROBLEMS` of them), then the header's counts and content hash are
    verified. Raises :class:`ManifestError` (also for an unreadable file); ``OSError`` never
    escapes.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read the manifest {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not numbered:
        raise ManifestError(
            f"{path} is empty: a manifest starts with a header line (write one with `liberopro instances generate`)"
        )
    header = _read_header(path, *numbered[0])
    problems: list[str] = []
    instances: list[Instance] = []
    lines: list[int] = []
    first_line: dict[str, int] = {}
    for n, ln in numbered[1:]:
        try:
            inst = Instance.model_validate_json(ln)
        except ValidationError as exc:
            problems.append(f"{path}:{n}: {describe_errors(exc)}")
            continue
        if inst.instance_id in first_line:
            problems.append(
                f"{path}:{n}: instance {inst.instance_id} appears twice (first on line {first_line[inst.instance_id]})"
            )
            continue
        first_line[inst.instance_id] = n
        instances.append(inst)
        lines.append(n)
    if problems:
        raise ManifestError(listing(path, problems))
    try:
        return Manifest(
            header=header, instances=instances, path=str(path), sha256=hashlib.sha256(data).hexdigest(), lines=lines
        )
    except ValidationError as exc:
        raise ManifestError(f"{path}: {describe_errors(exc)}") from exc


def _read_header(path: Path, n: int, line: str) -> ManifestHeader:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}:{n}: the header line is not JSON ({exc.msg} at column {exc.colno})") from exc
    if isinstance(raw, dict) and "instance_id" in raw and "kind" not in raw:
        raise ManifestError(
            f"{path}:{n}: an instance where the manifest header belongs: this file has no header "
            "line (not written by `liberopro instances generate`, or by a version before headers); "
            "regenerate it, or write it with liberopro.schema.manifest.write_manifest"
        )
    if not isinstance(raw, dict) or raw.get("kind") != MANIFEST_KIND:
        kind = raw.get("kind") if isinstance(raw, dict) else type(raw).__name__
        raise ManifestError(
            f"{path}:{n}: not a LIBERO-Pro2.0 instance manifest (kind {kind!r}, expected {MANIFEST_KIND!r})"
        )
    if raw.get("schema_version") != MANIFEST_SCHEMA_VERSION:
        raise ManifestError(
            f"{path}:{n}: manifest schema version {raw.get('schema_version')!r}; this reader reads "
            f"version {MANIFEST_SCHEMA_VERSION}: regenerate the manifest with this evaluator"
        )
    try:
        return ManifestHeader.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(f"{path}:{n}: bad manifest header: {describe_errors(exc)}") from exc


def describe_errors(exc: ValidationError) -> str:
    """A pydantic validation error as ``field: message; ...`` on one line."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def listing(path: Path | str, problems: list[str]) -> str:
    """One message for several ``path:LINE: problem`` lines (at most :data:`MAX_LISTED_PROBLEMS`)."""
    more = len(problems) - MAX_LISTED_PROBLEMS
    shown = problems[:MAX_LISTED_PROBLEMS] + ([f"... and {more} more"] if more > 0 else [])
    return f"{path}: {len(problems)} problem(s):\n" + "\n".join(shown)
