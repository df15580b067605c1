"""What one evaluation is asked to do: :class:`EvalConfig`, built by ``liberopro evaluate`` (from
its options, by keyword) and ``liberopro demo`` (from embedded defaults), and read by the code that
runs it (``liberopro.cli.evaluate._evaluate``).

A light module: it imports no simulator (robosuite, MuJoCo, LIBERO, OpenCV; the ``light`` contract
in ``pyproject.toml``), so arguments are refused before anything slow loads. The checks that need
LIBERO's data (task references, shift ids, a manifest's content) are made where the instances are
built, not here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

#: Schemes a ``--policy`` URL may have (the policy server, ``submission_spec/README.md``).
POLICY_URL_SCHEMES = ("http://", "https://", "ws://", "wss://")
#: ``--encoding``: the body encoding of the ``liberopro`` protocol's requests and answers.
ENCODINGS = ("msgpack", "json")
#: ``--observations`` (``docs/definition.md``, "Diagnostic studies"; :class:`liberopro.instances.build.Diagnostic`).
ObservationMode = Literal["live", "frozen"]
OBSERVATION_MODES: tuple[ObservationMode, ...] = ("live", "frozen")
#: ``--recovery`` (``docs/definition.md``, "Diagnostic studies"; :class:`liberopro.instances.build.Diagnostic`).
RecoveryProtocol = Literal["none", "hold", "retry", "restore"]
RECOVERY_PROTOCOLS: tuple[RecoveryProtocol, ...] = ("none", "hold", "retry", "restore")


def _items(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


class EvalConfig(BaseModel):
    """One evaluation's arguments, checked together when the model is built.

    Raises :class:`pydantic.ValidationError` whose one error carries the message the command
    line prints (:func:`config_error`), e.g. ``--max-steps must be at least 1 (leave it out to run
    the suite's horizon)``; the checks run in the order the command line has always made them.
    Instances are chosen by ``manifest`` or by ``tasks``/``split`` x ``shifts``; whether those
    name real tasks and shifts is checked where the instances are built (it needs LIBERO's data).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str | None = Field(
        None,
        description="URL of a running policy server (scheme http, https, ws or wss, e.g. "
        "http://127.0.0.1:8000). Exactly one of policy and policy_cmd.",
    )
    policy_cmd: str | None = Field(
        None,
        description="Shell command that starts a policy server on $PORT; the evaluator starts it in a "
        "session of its own, waits for /health and stops it at the end. Exactly one of policy and "
        "policy_cmd.",
    )
    oracle: bool = Field(
        False,
        description="Run the privileged oracle in process instead of a policy (liberopro.oracle.policy: the "
        "scripted controller, which reads the simulator's state; a reference, never a submission; "
        "``liberopro demo`` uses it). Exclusive with policy and policy_cmd.",
    )
    split: str | None = Field(
        None, description="Tasks of the held-out split: train (32 tasks), eval (8) or all (40) (liberopro.split)."
    )
    tasks: str | None = Field(
        None,
        description="Task references SUITE:INDEX, comma separated (e.g. libero_goal:0,libero_10:3); a bare "
        "suite means its 10 tasks. With split: the tasks of both.",
    )
    shifts: str = Field(
        "nominal",
        description="Cases, comma separated: nominal, shift ids and compositions joined by + "
        "(e.g. nominal,S01,D01,S01+D10; docs/shifts.md).",
    )
    manifest: Path | None = Field(
        None,
        description="An instance manifest (JSON lines, `liberopro instances generate`): its instances are run, "
        "so tasks, split and shifts must be left out.",
    )
    episodes: int | None = Field(
        None,
        description="Episodes per instance and diagnostic condition, on init states 0..N-1 (N >= 1); "
        "None: the manifest's episodes_per_instance, else 1.",
    )
    max_steps: int | None = Field(
        None,
        description="Cap on the suite's horizon, in policy steps (>= 1); None: the suite's horizon "
        "(liberopro.sim.tasks: spatial 220, object 280, goal 300, LIBERO-10 520).",
    )
    out: Path | None = Field(
        None, description="Output directory of episodes.jsonl and summary.json; None: runs/<local timestamp>."
    )
    seed: int = Field(0, description="Seed of the shift parameter draws and the env seeds.")
    encoding: str = Field("msgpack", description="Body encoding of the liberopro protocol: msgpack or json.")
    protocol: str = Field(
        "liberopro",
        description="The policy's wire protocol: liberopro (submission spec v1), openpi or openvla "
        "(submission_spec.transports.PROTOCOLS).",
    )
    protocol_options: list[str] | None = Field(
        None,
        description="KEY=VALUE options of the protocol's client, e.g. chunk_length=10 (docs/adapters.md); "
        "a key at most once.",
    )
    render_size: int | None = Field(
        None,
        ge=32,
        le=1024,
        description="Square render resolution in pixels; None: 128 if the policy asks for at most 128 px, "
        "else 256 (liberopro.runs.workers.auto_render_size).",
    )
    request_timeout: float = Field(
        30.0, gt=0, description="Wall-clock seconds for one policy request, to the last byte of the answer."
    )
    episode_budget: float = Field(
        600.0,
        gt=0,
        description="Wall-clock seconds of policy time per episode (RunSettings.episode_policy_budget_s); a "
        "request in flight is cut when it runs out.",
    )
    startup_timeout: float = Field(
        120.0,
        gt=0,
        description="Wall-clock seconds for the policy server to answer /health after it is started or named.",
    )
    observations: str = Field(
        "live",
        description="Diagnostic observation modes, comma separated: live (standard) and/or frozen (the "
        "policy keeps its first observation); every mode runs with every recovery protocol.",
    )
    recovery: str = Field(
        "none",
        description="Diagnostic recovery protocols after a runtime shift fires, comma separated: none, "
        "hold, retry and/or restore.",
    )
    replan_steps: int | None = Field(
        None,
        description="Diagnostic: actions executed of each action chunk before the policy is asked again "
        "(>= 1; overrides the policy's replan steps); None: the policy's own.",
    )
    check_static: bool = Field(
        True,
        description="Without a manifest: realise each static case at reset on every init state of the run's "
        "episodes first and take the first parameter draw whose post-conditions hold on all of them (as manifests "
        "do); False: the seed's first draw.",
    )
    video: Literal["none", "failures", "all"] = Field(
        "none",
        description="Episode videos (liberopro.episode.video): none, failures (only episodes that did not succeed; "
        "frames kept in memory until the outcome is known) or all; OUT/videos/<episode>.mp4, named in the "
        "record's video field. Renders the agentview camera at every other step of a recorded episode, "
        "which on-demand rendering would otherwise skip.",
    )
    video_size: int | None = Field(
        None,
        ge=64,
        le=1024,
        multiple_of=16,
        description="Size (px) of each of the video's two panels (liberopro.episode.video); None: 256. A panel is "
        "the render resized to it (nearest neighbour up, area average down): no render more or larger.",
    )
    record_actions: bool = Field(
        False,
        description="Write each episode's executed and commanded actions to OUT/actions/<episode>.npz "
        "(liberopro.episode.video.load_actions), named in the record's actions field.",
    )

    workers: int | None = Field(
        None,
        description="Simulator processes (liberopro.runs.workers): None chooses the smallest of the CPUs available, "
        "the policy's max_concurrent_episodes (none declared: 1), the scenes that fit in memory and the tasks; "
        ">= 1 otherwise.",
    )

    fresh: bool = Field(
        False,
        description="Replace an earlier run in OUT (default: resume it when it is a run of the same plan, "
        "settings and policy; refuse it otherwise).",
    )
    shard: str | None = Field(
        None,
        description="I/N: run only the I-th of N contiguous blocks of the plan's episodes "
        "(liberopro.runs.resume.shard_plans); merge the N runs with liberopro merge.",
    )

    @property
    def shard_pair(self) -> tuple[int, int] | None:
        """``shard`` as ``(I, N)`` (checked), or None."""
        return None if self.shard is None else parse_shard(self.shard)

    @model_validator(mode="after")
    def _check(self) -> EvalConfig:
        from submission_spec.transports import PROTOCOLS, parse_protocol_options

        if self.oracle and (self.policy is not None or self.policy_cmd is not None):
            raise ValueError("the oracle runs in process: give neither --policy nor --policy-cmd with it")
        if not self.oracle and (self.policy is None) == (self.policy_cmd is None):
            raise ValueError(
                'give exactly one of --policy URL or --policy-cmd "CMD" (or --oracle, the privileged reference)'
            )
        if self.policy is not None and not self.policy.startswith(POLICY_URL_SCHEMES):
            raise ValueError(
                f"--policy {self.policy!r} is not a URL: give it with its scheme, e.g. http://127.0.0.1:8000"
            )
        if self.encoding not in ENCODINGS:
            raise ValueError(f"--encoding must be msgpack or json, not {self.encoding!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        parse_protocol_options(self.protocol_options)  # ValueError naming the bad item
        if self.episodes is not None and self.episodes < 1:
            raise ValueError("--episodes must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise ValueError("--workers must be at least 1 (leave it out to choose by CPUs, policy and memory)")
        if self.replan_steps is not None and self.replan_steps < 1:
            raise ValueError("--replan-steps must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("--max-steps must be at least 1 (leave it out to run the suite's horizon)")
        if self.manifest is not None and (self.tasks or self.split or self.shifts != "nominal"):
            raise ValueError("--manifest fixes the instances: do not combine it with --tasks, --split or --shifts")
        if self.shard is not None:
            parse_shard(self.shard)  # ValueError naming the form
        obs, rec = _items(self.observations), _items(self.recovery)
        if not obs or any(o not in OBSERVATION_MODES for o in obs):
            raise ValueError(f"--observations takes live and/or frozen, not {self.observations!r}")
        if not rec or any(r not in RECOVERY_PROTOCOLS for r in rec):
            raise ValueError(f"--recovery takes none, hold, retry and/or restore, not {self.recovery!r}")
        return self

    def protocol_option_values(self) -> dict[str, str]:
        """``protocol_options`` as ``{key: value}`` (strings; the protocol's client converts them)."""
        from submission_spec.transports import parse_protocol_options

        return parse_protocol_options(self.protocol_options)

    @property
    def observation_modes(self) -> list[ObservationMode]:
        """``observations`` as a list, e.g. ``["live", "frozen"]`` (checked: each is one of
        :data:`OBSERVATION_MODES`)."""
        return [next(m for m in OBSERVATION_MODES if m == o) for o in _items(self.observations)]

    @property
    def recovery_protocols(self) -> list[RecoveryProtocol]:
        """``recovery`` as a list, e.g. ``["none", "hold"]`` (checked: each is one of
        :data:`RECOVERY_PROTOCOLS`)."""
        return [next(r for r in RECOVERY_PROTOCOLS if r == p) for p in _items(self.recovery)]

    def replace(self, **changes: object) -> EvalConfig:
        """A copy with ``changes``, checked again (``model_copy`` would not check them)."""
        return EvalConfig.model_validate({**self.model_dump(), **changes})


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with 0 <= I < N; raises ``ValueError`` otherwise."""
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes I/N (e.g. 0/10), not {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {text}: I must be in 0..N-1 and N at least 1")
    return i, n


def config_error(exc: ValidationError) -> str:
    """The message of a refused :class:`EvalConfig`, as the command line prints it: the checks'
    own messages as they are, a field out of its range or of the wrong type as ``--field-name: what
    pydantic says`` (the command-line option of the same name)."""
    parts = []
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ValueError):
            parts.append(str(cause))
        else:
            parts.append(f"--{'.'.join(map(str, err['loc'])).replace('_', '-')}: {err['msg']}")
    return "; ".join(parts)
