"""A shift's specification: everything known about it without the simulator, in the spirit of
Gymnasium's ``EnvSpec``. The behaviour (the hooks that edit the scene, the observations and the
actions) lives in the class its ``entry_point`` names, imported only by
:func:`liberopro.catalog.registry.shift_class`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from liberopro.catalog.sampling import draws, sample_fields

if TYPE_CHECKING:
    from liberopro.semantics import TaskSemantics
    from liberopro.sim.tasks import TaskRef

Category = Literal["Condition", "Environment", "Observation", "Execution", "Robot", "Language"]
#: The six categories, by primary intervention target (``docs/shifts.md``).
CATEGORIES: tuple[Category, ...] = ("Condition", "Environment", "Observation", "Execution", "Robot", "Language")
ShiftKind = Literal["static", "runtime"]
#: Task phases a runtime shift may be triggered by (:mod:`liberopro.episode.phases`).
Phase = Literal["approach", "grasp", "transport", "placement"]
PHASES: tuple[Phase, ...] = ("approach", "grasp", "transport", "placement")

#: What a shift may take over, as ``channel:detail`` strings. Channels, grouped by what they
#: touch: the scene model (``space`` table regions a prop occupies, ``instance`` an object's
#: model, ``view`` a prop in the camera's line of sight, ``appearance`` materials, ``lights``,
#: ``camera`` a camera's pose), object poses (``pose``), the observation images (``pixels``,
#: ``stream``), proprioception (``proprio``), the robot (``robot``), the actions (``actions``) and
#: the instruction (``instruction``). Two shifts of a composition may not own one resource at
#: one moment (:mod:`liberopro.catalog.compositions`).
RESOURCE_CHANNELS: tuple[str, ...] = (
    "space",
    "instance",
    "view",
    "appearance",
    "lights",
    "camera",
    "pose",
    "pixels",
    "stream",
    "proprio",
    "robot",
    "actions",
    "instruction",
)


class ShiftParams(BaseModel):
    """Typed, immutable parameters of one shift instance. Field constraints are validity bounds;
    the sampling distribution of a field is declared beside them
    (:mod:`liberopro.catalog.sampling`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FallbackRule(BaseModel):
    """When a runtime shift fires if its trigger phase is never reached: the one rule of
    :mod:`liberopro.catalog.fallbacks`, ``F(task, phase) = max(10, floor(FRACTION[phase] *
    S(task)))`` with ``S(task)`` the oracle's fastest success on the task (issue 11, item 4).
    A shift declares only the phases it may be triggered by; every shift and phase follows the
    same rule. Callers ask :meth:`step` only."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    triggers: tuple[Phase, ...] = Field(min_length=1)

    def step(self, trigger: str, task: str | None = None) -> int:
        """The fallback step (policy-loop step, 0-based) for ``trigger`` on ``task``
        (``"libero_goal:3"``, :func:`liberopro.catalog.fallbacks.fallback_step`); without a task,
        the earliest over all tasks. ``KeyError`` for a phase the shift cannot be triggered by or
        a task the table does not list."""
        from liberopro.catalog import fallbacks

        if trigger not in self.triggers:
            raise KeyError(trigger)
        return fallbacks.fallback_step(task, trigger) if task is not None else fallbacks.earliest_fallback_step(trigger)

    @property
    def steps(self) -> dict[str, int]:
        """Trigger -> the fallback step without a task (the earliest over all tasks)."""
        return {t: self.step(t) for t in self.triggers}

    def describe(self) -> str | dict[str, str]:
        """The listing's value: the rule, or the rule per trigger where a shift has several."""
        from liberopro.catalog import fallbacks

        rules = {str(t): fallbacks.describe(t) for t in self.triggers}
        return next(iter(rules.values())) if len(rules) == 1 else rules


def phase_fallback(*triggers: str) -> FallbackRule:
    """``phase_fallback("approach", "transport")``: the fallback rule for a shift triggered by
    these phases (the first is the default trigger)."""
    return FallbackRule(triggers=triggers)


class RuntimeParams(ShiftParams):
    """Parameters every runtime shift has: its trigger phase (subclasses narrow it to a
    ``Literal`` of the phases allowed, the first being the default) and the fallback step.

    ``fallback`` (a class attribute) is the shift's :class:`FallbackRule`; when ``fallback_step``
    is not given it is the rule's step for the trigger without a task (the earliest over all
    tasks); :meth:`ShiftSpec.sample_params` gives the task's own step."""

    fallback: ClassVar[FallbackRule]
    trigger: str
    fallback_step: int = Field(ge=0)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass declaring ``fallback`` gets the rule's step for its default trigger, without a
        task (the earliest over all tasks), as the field's default (so the JSON schema shows it);
        instances drawn for a task carry that task's step (:meth:`ShiftSpec.sample_params`)."""
        super().__pydantic_init_subclass__(**kwargs)
        rule = cls.__dict__.get("fallback")
        if rule is not None:
            info = copy.copy(cls.__pydantic_fields__["fallback_step"])
            info.default = rule.step(cls.__pydantic_fields__["trigger"].default)
            cls.__pydantic_fields__["fallback_step"] = info
            cls.model_rebuild(force=True)

    @model_validator(mode="before")
    @classmethod
    def _fallback_from_rule(cls, data: Any) -> Any:
        rule = getattr(cls, "fallback", None)
        if isinstance(data, dict) and "fallback_step" not in data and rule is not None:
            trigger = data.get("trigger", cls.model_fields["trigger"].default)
            if trigger in rule.triggers:  # else validation names the bad trigger
                data = {**data, "fallback_step": rule.step(trigger)}
        return data


_ID = re.compile(r"^[SD]\d\d$")
_ENTRY = re.compile(r"^[\w.]+:\w+$")


@dataclass(frozen=True, kw_only=True)
class ShiftSpec:
    """One shift of the catalog.

    Attributes:
        id: ``S01``...``S22`` (static), ``D01``...``D20`` (runtime).
        name, category, summary: the catalog entry (``docs/shifts.md``).
        post_condition: what the realisation measures before the episode counts (an instance
            whose post-condition fails is invalid, never run unshifted).
        Params: the :class:`ShiftParams` model: validity bounds and the sampling declaration.
        resources: what the shift takes over (:data:`RESOURCE_CHANNELS`).
        entry_point: ``"module:Class"`` of the simulator-side class, imported only by
            :func:`liberopro.catalog.registry.shift_class` / :func:`~liberopro.catalog.registry.make_shift`.
        notes: extra lines of the listing (units, what is left untouched).
        differs_from_definition: field -> why its default magnitude differs from the
            benchmark's definition (shown in ``docs/shifts.md``).

    Derived: ``kind`` (runtime when ``Params`` is a :class:`RuntimeParams`), ``triggers`` (the
    phases of ``Params.trigger``'s ``Literal``, the first the default) and ``fallback``.
    """

    id: str
    name: str
    category: Category
    summary: str
    post_condition: str
    Params: type[ShiftParams]
    resources: tuple[str, ...]
    entry_point: str
    notes: Mapping[str, Any] = field(default_factory=dict)
    differs_from_definition: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if not _ID.match(self.id):
            problems.append("id must be S01-S99 or D01-D99")
        if (self.id[0] == "D") != (self.kind == "runtime"):
            problems.append(f"id {self.id} but Params {self.Params.__name__} is {self.kind}")
        if self.category not in CATEGORIES:
            problems.append(f"unknown category {self.category!r}")
        if not _ENTRY.match(self.entry_point):
            problems.append(f"entry_point {self.entry_point!r} is not 'module:Class'")
        bad = [r for r in self.resources if r.partition(":")[0] not in RESOURCE_CHANNELS]
        if not self.resources or bad:
            problems.append(f"resources {bad or '()'} outside {RESOURCE_CHANNELS}")
        if self.kind == "runtime":
            if not self.triggers or any(t not in PHASES for t in self.triggers):
                problems.append(f"triggers {self.triggers} are not phases {PHASES}")
            rule = getattr(self.Params, "fallback", None)
            if rule is None or set(rule.triggers) != set(self.triggers):
                problems.append("Params.fallback must give a step for every trigger")
        unknown = set(self.differs_from_definition) - set(self.Params.model_fields)
        if unknown:
            problems.append(f"differs_from_definition names no field: {sorted(unknown)}")
        if problems:
            raise ValueError(f"shift spec {self.id}: " + "; ".join(problems))

    # ------------------------------------------------------------------ derived metadata
    @property
    def kind(self) -> ShiftKind:
        return "runtime" if issubclass(self.Params, RuntimeParams) else "static"

    @property
    def triggers(self) -> tuple[str, ...]:
        """Runtime shifts: the phases allowed as trigger (the first is the default); static: ()."""
        if self.kind != "runtime":
            return ()
        return tuple(get_args(self.Params.model_fields["trigger"].annotation))

    @property
    def fallback(self) -> FallbackRule | None:
        """Runtime shifts: when they fire if the trigger phase is never reached."""
        return getattr(self.Params, "fallback", None) if self.kind == "runtime" else None

    # ------------------------------------------------------------------ parameters
    def sample_params(
        self, rng: np.random.Generator, ref: TaskRef | None = None, sem: TaskSemantics | None = None
    ) -> ShiftParams:
        """Draw parameters from the declared distributions (``rng``: the instance's generator).

        ``ref``/``sem`` are needed by task-dependent draws only (``ValueError`` without them).
        A runtime shift drawn for a task gets that task's fallback step for its drawn trigger
        (:mod:`liberopro.catalog.fallbacks`; no generator call, so the other draws are unchanged)."""
        fields = sample_fields(self.Params, rng, ref, sem)
        if self.fallback is not None and ref is not None and "fallback_step" not in fields:
            trigger = fields.get("trigger", self.triggers[0])
            fields["fallback_step"] = self.fallback.step(trigger, str(ref))
        return self.Params(**fields)

    def validate_params(self, params: Mapping[str, Any] | ShiftParams) -> ShiftParams:
        """``params`` as this shift's model; ``pydantic.ValidationError`` names the bad field."""
        return params if isinstance(params, self.Params) else self.Params.model_validate(params)

    def default_params(self) -> dict[str, Any]:
        """The listing's parameters: each drawn field's distribution (``[low, high]`` for a
        range), each other field's default, then :attr:`notes`."""
        declared = draws(self.Params)
        out: dict[str, Any] = {}
        for name, info in self.Params.model_fields.items():
            if name in declared:
                out[name] = declared[name].describe()
            elif name == "fallback_step" and self.fallback is not None:
                out[name] = self.fallback.describe()
            elif name == "trigger":
                out[name] = " or ".join(self.triggers)
            elif not info.is_required() and info.default is not None:
                out[name] = info.default
        return {**out, **self.notes}
