"""Knobs: the declared choices of a schedule, their space and their default.

Every schedule with a choice declares it as a frozen dataclass subclassing `Knobs`:

    @dataclass(frozen=True)
    class PoolKnobs(Knobs):
        ow_tile: int = 1

        @classmethod
        def space(cls, task: Task) -> Space:      # the enumerable choices for this task
            return Space({"ow_tile": up_to(width_of(task), 32)})

        @classmethod
        def default(cls, task: Task) -> PoolKnobs:   # a heuristic over target facts
            return cls(min(width_of(task), task.target.vector_lanes("float32")))

        def check(self, task: Task) -> None:      # what the schedule cannot honour
            in_range(self, "ow_tile", 1, width_of(task), "output columns")

A schedule is `schedule(outs, target, knobs)` and starts with
`k = resolve_knobs(PoolKnobs, knobs, outs, target)` (the default when None; wrong family or
values raise ScheduleError); the op's `OpDef.knobs` names the class (ops with the generic
schedules: InjectiveKnobs / ReductionKnobs, see `OpDef.knob_family`). The tuner searches
`space(task)`, the tuning database stores `knobs.to_dict()`, and `ember.compile(...,
knobs=...)` applies what it found. No schedule reads process state: thread count
(`Task.threads`, the target's -num-cores), vector width and cache sizes come from the target.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ember.errors import ScheduleError

if TYPE_CHECKING:
    from ember.target import Target
    from ember.te.tensor import ComputeOp, Tensor

K = TypeVar("K", bound="Knobs")


@dataclass(frozen=True)
class Task:
    """What a schedule's knobs are chosen for: the fused kernel's outputs, its anchor op
    (name and attributes) and the target."""

    outs: tuple[Tensor, ...]
    target: Target
    op: str = ""
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def threads(self) -> int:
        return self.target.num_cores

    def find(self, *tags: str) -> ComputeOp | None:
        """The first compute stage (outputs first) whose tag is one of `tags`; a tag that
        starts with "." matches as a suffix ("." + "rec" finds "LSTM.rec")."""
        from ember.te.graph import post_order
        from ember.te.tensor import ComputeOp

        exact = {t for t in tags if not t.startswith(".")}
        suffixes = tuple(t for t in tags if t.startswith("."))
        for op in reversed(post_order([t.op for t in self.outs])):
            if isinstance(op, ComputeOp) and (op.tag in exact or
                                              (suffixes and op.tag.endswith(suffixes))):
                return op
        return None


@dataclass(frozen=True)
class Space:
    """An enumerable knob space: each knob name with its tuple of allowed values; a point is
    one value per knob (the product of the choices), where `valid` (if given) holds for it:
    combinations the schedule could build but that can never be good (a register tile of
    more accumulators than the register file) are left out."""

    choices: Mapping[str, tuple[Any, ...]]
    valid: Callable[[Mapping[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        for name, values in self.choices.items():
            assert isinstance(values, tuple) and values, f"knob {name}: no choices"

    @functools.cached_property
    def size(self) -> int:
        if self.valid is not None:
            return sum(1 for _ in self.points())
        n = 1
        for values in self.choices.values():
            n *= len(values)
        return n

    def points(self) -> Iterator[dict[str, Any]]:
        names = list(self.choices)
        for combo in itertools.product(*(self.choices[n] for n in names)):
            point = dict(zip(names, combo))
            if self.valid is None or self.valid(point):
                yield point

    def sample(self, rng: random.Random) -> dict[str, Any]:
        for _ in range(64):
            point = {name: rng.choice(values) for name, values in self.choices.items()}
            if self.valid is None or self.valid(point):
                return point
        return rng.choice(list(self.points()))  # a constraint that leaves few points

    def contains(self, point: Mapping[str, Any]) -> bool:
        return all(name in point and point[name] in values
                   for name, values in self.choices.items()) and \
            (self.valid is None or self.valid(point))


@dataclass(frozen=True)
class Knobs:
    """Base of every knob family. Subclasses add fields and override `space` / `default`."""

    @classmethod
    def family(cls) -> str:
        return cls.__name__

    @classmethod
    def space(cls, task: Task) -> Space:
        """The choices declared for `task` (a family without choices has one point)."""
        return Space({})

    @classmethod
    def default(cls: type[K], task: Task) -> K:
        """The heuristic choice for `task`, from the target's facts."""
        return cls()

    def check(self, task: Task) -> None:
        """Raise ScheduleError (via `self.reject`) for a value the schedule cannot honour
        for `task`; values outside `space` that it can honour are allowed."""

    def reject(self, name: str, why: str) -> ScheduleError:
        """The error for knob `name` of these knobs: what it is and why it cannot be."""
        return ScheduleError(f"{self.family()}: knob {name}={getattr(self, name)!r} {why}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: type[K], values: Mapping[str, Any], where: str = "") -> K:
        """Knobs from stored values; unknown names are an error naming the family."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ScheduleError(f"{where}{cls.family()}: unknown knob(s) {unknown}; "
                                f"known: {sorted(names)}")
        return cls(**dict(values))

    def replace(self: K, **changes: Any) -> K:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class NoKnobs(Knobs):
    """The family of schedules without a choice."""


def knobs_at(cls: type[K], task: Task, point: Mapping[str, Any]) -> K:
    """The default knobs of `task` with the values of `point` (a point of `cls.space`)."""
    return cls.default(task).replace(**dict(point))


def check_knobs(cls: type[Knobs], knobs: Knobs | None, where: str) -> None:
    """Reject knobs of another family for a schedule of family `cls`."""
    if knobs is not None and not isinstance(knobs, cls):
        raise ScheduleError(f"{where}: expected {cls.family()} knobs, got "
                            f"{type(knobs).__name__}")


def resolve_knobs(cls: type[K], knobs: Knobs | None, outs: Sequence[Tensor],
                  target: Target, op: str = "", attrs: Mapping[str, Any] | None = None) -> K:
    """The knobs a schedule of family `cls` runs with: `knobs` checked (family and values),
    or the family's default for the task when None."""
    task = Task(tuple(outs), target, op, dict(attrs or {}))
    check_knobs(cls, knobs, f"op '{op}'" if op else "schedule")
    chosen = cls.default(task) if knobs is None else knobs
    chosen.check(task)
    return chosen  # type: ignore[return-value]


def in_range(knobs: Knobs, name: str, lo: int, hi: int, what: str) -> None:
    """Reject knob `name` unless lo <= value <= hi (`what` names the bound's meaning)."""
    value = getattr(knobs, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise knobs.reject(name, f"must be a Python int in [{lo}, {hi}] ({what}), not a "
                                 f"{type(value).__name__}")
    if not lo <= value <= hi:
        raise knobs.reject(name, f"is outside [{lo}, {hi}] ({what})")


def only(knobs: Knobs, name: str, allowed: tuple[Any, ...], why: str) -> None:
    """Reject knob `name` unless its value is one of `allowed` (`why`: for which case)."""
    if getattr(knobs, name) not in allowed:
        raise knobs.reject(name, f"must be one of {allowed} {why}")


def divisors(n: int, limit: int | None = None) -> tuple[int, ...]:
    """The divisors of n up to `limit` (tile sizes without tails), ascending."""
    top = n if limit is None else min(n, limit)
    return tuple(d for d in range(1, top + 1) if n % d == 0)


def up_to(n: int, limit: int) -> tuple[int, ...]:
    """1 .. min(n, limit): tile sizes where a tail tile is allowed."""
    return tuple(range(1, max(1, min(n, limit)) + 1))


def powers_of_two(lo: int, hi: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return tuple(out)


__all__ = ["Knobs", "NoKnobs", "Space", "Task", "check_knobs", "divisors", "in_range",
           "knobs_at", "only", "powers_of_two", "resolve_knobs", "up_to"]

