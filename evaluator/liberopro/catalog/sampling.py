"""How a shift's parameters are drawn: sampling declared once, beside the fields of its Params.

A field's distribution is metadata in its annotation, next to its validity bounds::

    gain: Annotated[float, Field(gt=0, le=3), Coin(Uniform(0.5, 0.8, 3), Uniform(1.2, 1.5, 3))]

The ``Field`` constraints say which values are *valid* (tests and hand-written instances may use
any of them: a fallback at step 2, a gain of 2.5); the distribution says which values instances
are *drawn* from (the published default magnitudes). :func:`sample` draws the fields in the
order the model declares them, each distribution making exactly the generator calls its
docstring states: manifests' instance ids and content hashes depend on these numbers, so a change
of a call, its order or its rounding is a change of every manifest (``tests/evaluator/
test_catalog.py`` pins the draws of every shift).

The listing (``liberopro shifts``, ``docs/shifts.md``, the leaderboard's methodology page)
describes each field from the same object (:meth:`Draw.describe`), and the catalog's tests read
the numeric ranges (:meth:`Draw.intervals`) and membership (:meth:`Draw.contains`) from it.

Task-dependent draws (swap partners, object types, look-alikes, paraphrases) need the task's
semantics: :class:`TaskChoice`, :class:`TaskPermutation`, :class:`TaskSubset`, :class:`TaskValue`
and :class:`TaskIndexed` take a function ``(TaskRef, TaskSemantics) -> options`` from
:mod:`liberopro.catalog.task_options` (light at import; it reads LIBERO's BDDL files when called).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    from liberopro.semantics import TaskSemantics
    from liberopro.sim.tasks import TaskRef

#: A function of the task returning what a task-dependent draw chooses from.
TaskOptions = Callable[["TaskRef", "TaskSemantics"], Sequence[Any]]


def uniform(rng: np.random.Generator, lo: float, hi: float, digits: int = 4) -> float:
    """A uniform draw rounded to ``digits`` (parameters are stored as readable decimals).

    One call: ``rng.uniform(lo, hi)``."""
    return round(float(rng.uniform(lo, hi)), digits)


@dataclass(frozen=True)
class DrawContext:
    """What a draw may read: the task (None where no task is given) and the fields drawn so far."""

    ref: TaskRef | None = None
    sem: TaskSemantics | None = None
    drawn: dict[str, Any] = field(default_factory=dict)


#: Returned by a conditional draw whose condition does not hold: the field keeps its default.
SKIP = object()


class Draw:
    """A field's sampling distribution (base class)."""

    def draw(self, rng: np.random.Generator, ctx: DrawContext) -> Any:
        raise NotImplementedError

    def intervals(self) -> list[tuple[float, float]] | None:
        """The numeric values drawn as a union of closed intervals, or None (not numeric)."""
        return None

    def contains(self, value: Any, ctx: DrawContext) -> bool:
        """Whether ``value`` is one this distribution can draw (``ctx`` holds the task and the
        other fields of the same draw)."""
        iv = self.intervals()
        if iv is None:
            raise NotImplementedError(f"{type(self).__name__} has no membership test")
        return isinstance(value, int | float) and any(lo <= value <= hi for lo, hi in iv)

    def describe(self) -> Any:
        """The listing's value: ``[low, high]`` for a range, text otherwise."""
        raise NotImplementedError


def _describe(v: Any) -> Any:
    return v.describe() if isinstance(v, Draw) else v


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


@dataclass(frozen=True)
class Uniform(Draw):
    """Uniform on [lo, hi], rounded to ``digits``. Calls: ``rng.uniform(lo, hi)``."""

    lo: float
    hi: float
    digits: int = 4

    def draw(self, rng, ctx):
        return uniform(rng, self.lo, self.hi, self.digits)

    def intervals(self):
        return [(self.lo, self.hi)]

    def describe(self):
        return [_num(self.lo), _num(self.hi)]


@dataclass(frozen=True)
class Direction(Draw):
    """A direction (deg) uniform on [0, 360), rounded to ``digits``; a draw that rounds up to 360
    is 0 (the same direction: parameters take directions in [0, 360)). Calls: ``rng.uniform(0, 360)``."""

    digits: int = 1

    def draw(self, rng, ctx):
        v = uniform(rng, 0, 360, self.digits)
        return 0.0 if v >= 360 else v

    def intervals(self):
        return [(0.0, 360 - 10.0**-self.digits)]

    def describe(self):
        return "[0, 360)"


@dataclass(frozen=True)
class Integers(Draw):
    """Uniform over the integers lo..hi (both included). Calls: ``rng.integers(lo, hi + 1)``."""

    lo: int
    hi: int

    def draw(self, rng, ctx):
        return int(rng.integers(self.lo, self.hi + 1))

    def intervals(self):
        return [(self.lo, self.hi)]

    def contains(self, value, ctx):
        return isinstance(value, int) and self.lo <= value <= self.hi

    def describe(self):
        return [self.lo, self.hi]


@dataclass(frozen=True)
class Choice(Draw):
    """One of ``options``, each with the same probability. Calls: ``rng.integers(len(options))``."""

    options: tuple[Any, ...]

    def draw(self, rng, ctx):
        return self.options[int(rng.integers(len(self.options)))]

    def intervals(self):
        if all(isinstance(o, int | float) and not isinstance(o, bool) for o in self.options):
            return [(o, o) for o in self.options]
        return None

    def contains(self, value, ctx):
        return value in self.options

    def describe(self):
        return "one of " + ", ".join(str(o) for o in self.options)


@dataclass(frozen=True)
class Coin(Draw):
    """``heads`` or ``tails`` with probability 1/2 each; either may be a value or a :class:`Draw`
    (then drawn). Calls: ``rng.random()``, then the chosen side's calls."""

    heads: Any
    tails: Any

    def draw(self, rng, ctx):
        side = self.heads if rng.random() < 0.5 else self.tails
        return side.draw(rng, ctx) if isinstance(side, Draw) else side

    def _side_intervals(self, side) -> list[tuple[float, float]] | None:
        if isinstance(side, Draw):
            return side.intervals()
        if isinstance(side, int | float) and not isinstance(side, bool):
            return [(side, side)]
        return None

    def intervals(self):
        a, b = self._side_intervals(self.heads), self._side_intervals(self.tails)
        return None if a is None or b is None else a + b

    def contains(self, value, ctx):
        return any(s.contains(value, ctx) if isinstance(s, Draw) else s == value for s in (self.heads, self.tails))

    def describe(self):
        a, b = _describe(self.heads), _describe(self.tails)
        return f"{a} or {b}"


@dataclass(frozen=True)
class Fixed(Draw):
    """Always ``value``; no generator call."""

    value: Any

    def draw(self, rng, ctx):
        return self.value

    def intervals(self):
        v = self.value
        return [(v, v)] if isinstance(v, int | float) and not isinstance(v, bool) else None

    def contains(self, value, ctx):
        return value == self.value

    def describe(self):
        return self.value


@dataclass(frozen=True)
class Repeat(Draw):
    """A tuple of ``n`` independent draws of ``each``. Calls: ``each``'s, ``n`` times."""

    n: int
    each: Draw
    label: str = "each"

    def draw(self, rng, ctx):
        return tuple(self.each.draw(rng, ctx) for _ in range(self.n))

    def intervals(self):
        return self.each.intervals()

    def contains(self, value, ctx):
        return len(value) == self.n and all(self.each.contains(v, ctx) for v in value)

    def describe(self):
        return f"{self.label} in {_describe(self.each)}"


@dataclass(frozen=True)
class SignedUniform(Draw):
    """A magnitude uniform on [lo, hi] (rounded to ``digits``) with a random sign.
    Calls: ``rng.uniform(lo, hi)``, then ``rng.random()`` (negative when >= 0.5)."""

    lo: float
    hi: float
    digits: int = 4

    def draw(self, rng, ctx):
        return uniform(rng, self.lo, self.hi, self.digits) * (1 if rng.random() < 0.5 else -1)

    def intervals(self):
        return [(-self.hi, -self.lo), (self.lo, self.hi)]

    def describe(self):
        return f"+-[{_num(self.lo)}, {_num(self.hi)}]"


@dataclass(frozen=True)
class SphereElevation(Draw):
    """The elevation (deg) of a direction uniform on the sphere: asin of a uniform on [-1, 1],
    rounded to ``digits``. Calls: ``rng.uniform(-1, 1)``."""

    digits: int = 1

    def draw(self, rng, ctx):
        return round(math.degrees(math.asin(rng.uniform(-1, 1))), self.digits)

    def intervals(self):
        return [(-90.0, 90.0)]

    def describe(self):
        return "[-90, 90], uniform on the sphere"


@dataclass(frozen=True)
class DistinctSorted(Draw):
    """``size`` distinct integers of 0..n-1, sorted, as a tuple.
    Calls: ``size``'s, then ``rng.choice(n, size=k, replace=False)``."""

    n: int
    size: Integers

    def draw(self, rng, ctx):
        k = self.size.draw(rng, ctx)
        return tuple(sorted(int(j) for j in rng.choice(self.n, size=k, replace=False)))

    def intervals(self):
        return self.size.intervals()

    def contains(self, value, ctx):
        return (
            self.size.contains(len(value), ctx)
            and len(set(value)) == len(value)
            and all(0 <= v < self.n for v in value)
            and list(value) == sorted(value)
        )

    def describe(self):
        return f"{self.size.lo}-{self.size.hi} distinct of 0-{self.n - 1}"


@dataclass(frozen=True)
class PerItem(Draw):
    """One draw of ``each`` per item of the already drawn field ``of``, as a tuple."""

    of: str
    each: Draw

    def draw(self, rng, ctx):
        return tuple(self.each.draw(rng, ctx) for _ in ctx.drawn[self.of])

    def intervals(self):
        return self.each.intervals()

    def contains(self, value, ctx):
        return len(value) == len(ctx.drawn[self.of]) and all(self.each.contains(v, ctx) for v in value)

    def describe(self):
        return f"{_describe(self.each)} for each of {self.of}"


@dataclass(frozen=True)
class When(Draw):
    """``then`` when the already drawn field ``field`` equals ``value``; otherwise the field is
    not drawn (it keeps its default). No call of its own."""

    field: str
    value: Any
    then: Draw

    def draw(self, rng, ctx):
        return self.then.draw(rng, ctx) if ctx.drawn.get(self.field) == self.value else SKIP

    def intervals(self):
        return self.then.intervals()

    def contains(self, value, ctx):
        if ctx.drawn.get(self.field) != self.value:
            return value is None
        return self.then.contains(value, ctx)

    def describe(self):
        return f"{_describe(self.then)} ({self.field} {self.value})"


# ------------------------------------------------------------------------ task-dependent draws
def _options(fn: TaskOptions, ctx: DrawContext) -> Sequence[Any]:
    if ctx.ref is None or ctx.sem is None:
        raise ValueError(f"this draw depends on the task ({fn.__name__}): give ref and sem")
    return fn(ctx.ref, ctx.sem)


@dataclass(frozen=True)
class TaskValue(Draw):
    """A value of the task (no generator call), e.g. the target's BDDL name."""

    fn: TaskOptions
    text: str

    def draw(self, rng, ctx):
        return _options(self.fn, ctx)

    def contains(self, value, ctx):
        return value == _options(self.fn, ctx)

    def describe(self):
        return self.text


@dataclass(frozen=True)
class TaskChoice(Draw):
    """One of the task's options. Calls: ``rng.integers(len(options))``."""

    fn: TaskOptions
    text: str

    def draw(self, rng, ctx):
        options = _options(self.fn, ctx)
        return options[int(rng.integers(len(options)))]

    def contains(self, value, ctx):
        return value in _options(self.fn, ctx)

    def describe(self):
        return self.text


@dataclass(frozen=True)
class TaskIndex(Draw):
    """An index into the task's options. Calls: ``rng.integers(len(options))``."""

    fn: TaskOptions
    text: str

    def draw(self, rng, ctx):
        return int(rng.integers(len(_options(self.fn, ctx))))

    def contains(self, value, ctx):
        return isinstance(value, int) and 0 <= value < len(_options(self.fn, ctx))

    def describe(self):
        return self.text


@dataclass(frozen=True)
class TaskIndexed(Draw):
    """The task's option at the already drawn index field ``by`` (no generator call)."""

    fn: TaskOptions
    by: str
    text: str

    def draw(self, rng, ctx):
        return _options(self.fn, ctx)[ctx.drawn[self.by]]

    def contains(self, value, ctx):
        return value == _options(self.fn, ctx)[ctx.drawn[self.by]]

    def describe(self):
        return self.text


@dataclass(frozen=True)
class TaskPermutation(Draw):
    """The task's options in a random order, as a tuple. Calls: ``rng.permutation(len(options))``."""

    fn: TaskOptions
    text: str

    def draw(self, rng, ctx):
        options = _options(self.fn, ctx)
        return tuple(options[i] for i in rng.permutation(len(options)))

    def contains(self, value, ctx):
        return sorted(value) == sorted(_options(self.fn, ctx))

    def describe(self):
        return self.text


@dataclass(frozen=True)
class TaskSubset(Draw):
    """``size`` distinct options of the task (fewer where it has fewer), as a list.
    Calls: ``size``'s, then ``rng.choice(len(options), size=min(k, len(options)), replace=False)``."""

    fn: TaskOptions
    size: Integers
    text: str

    def draw(self, rng, ctx):
        pool = _options(self.fn, ctx)
        n = self.size.draw(rng, ctx)
        picks = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [pool[int(i)] for i in picks]

    def intervals(self):
        return self.size.intervals()  # the count

    def contains(self, value, ctx):
        pool = _options(self.fn, ctx)
        return (
            len(set(value)) == len(value)
            and all(v in pool for v in value)
            and (self.size.contains(len(value), ctx) or len(value) == len(pool) < self.size.lo)
        )

    def describe(self):
        return self.text


# ------------------------------------------------------------------------ reading a model
def draw_of(info: FieldInfo) -> Draw | None:
    """The distribution declared in a field's annotation, if any."""
    found = [m for m in info.metadata if isinstance(m, Draw)]
    if len(found) > 1:
        raise TypeError(f"a field declares {len(found)} distributions")
    return found[0] if found else None


def draws(model: type[BaseModel]) -> dict[str, Draw]:
    """Field name -> distribution, in draw order (the model's field order)."""
    return {name: d for name, info in model.model_fields.items() if (d := draw_of(info)) is not None}


def sample_fields(
    model: type[BaseModel], rng: np.random.Generator, ref: TaskRef | None = None, sem: TaskSemantics | None = None
) -> dict[str, Any]:
    """Draw every field that declares a distribution, in field order; fields without one (and
    conditional draws whose condition does not hold) are left out, so they take their defaults.

    Raises ``ValueError`` when a task-dependent field is drawn without ``ref``/``sem``."""
    ctx = DrawContext(ref, sem, {})
    for name, d in draws(model).items():
        value = d.draw(rng, ctx)
        if value is not SKIP:
            ctx.drawn[name] = value
    return ctx.drawn
