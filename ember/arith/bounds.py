"""Interval (bound) analysis: symbolic ranges of integer expressions over variable ranges.

Variables not in `ranges` are symbols (points); the result's endpoints are simplified, e.g.
`io*32 + ii` with ii in [0, 31] is [io*32, io*32 + 31].
"""

from __future__ import annotations

from ember.arith.const_fold import widening
from ember.arith.interval import Interval, union
from ember.arith.simplifier import Simplifier
from ember.dtype import DType
from ember.tir.expr import (
    Add, Broadcast, Cast, Expr, FloorDiv, IntImm, Let, Max, Min, Mul, Ramp, Select,
    Sub, Var,
)
from ember.tir.functor import used_vars

__all__ = ["Interval", "can_prove", "const_bounds", "eval_interval", "union"]


def const_bounds(e: Expr, ranges: dict[Var, Interval] | None = None
                 ) -> tuple[int | None, int | None]:
    """Numeric inclusive bounds of integer `e` (None where unknown): (0, 127) for io*32 + ii."""
    s = Simplifier(ranges)
    return s.bound(s.visit(e))


def can_prove(cond: Expr, ranges: dict[Var, Interval] | None = None) -> bool:
    """True only when `cond` certainly holds for every value of the ranged variables."""
    result = Simplifier(ranges).visit(cond)
    if isinstance(result, Broadcast):
        result = result.value
    return isinstance(result, IntImm) and result.dtype.is_bool and result.value == 1


def eval_interval(e: Expr, ranges: dict[Var, Interval]) -> Interval:
    """The interval of `e` when each variable in `ranges` varies over its interval."""
    s = Simplifier(ranges)
    return _Evaluator(s).interval(s.visit(e))


class _Evaluator:
    def __init__(self, s: Simplifier) -> None:
        self.s = s
        self.ranges = s.ranges
        self._active: set[Var] = set()

    def _final(self, lo: Expr | None, hi: Expr | None) -> Interval:
        return Interval(None if lo is None else self.s.visit(lo),
                        None if hi is None else self.s.visit(hi))

    def _numeric(self, e: Expr) -> Interval:
        lo, hi = self.s.bound(e)
        dtype = e.dtype.element
        return Interval(None if lo is None else IntImm(lo, dtype),
                        None if hi is None else IntImm(hi, dtype))

    def _is_symbol(self, e: Expr) -> bool:
        return not any(v in self.ranges for v in used_vars(e))

    def interval(self, e: Expr) -> Interval:
        if not (e.dtype.is_int or e.dtype.is_bool):
            return Interval.point(e) if self._is_symbol(e) else Interval(None, None)
        if isinstance(e, IntImm):
            return Interval(e, e)
        if isinstance(e, Var):
            return self._var(e)
        scalar = e.dtype.lanes == 1
        if scalar and self._is_symbol(e):
            return Interval(e, e)
        if scalar and isinstance(e, (Add, Sub, Mul)):
            return self._sum(e)
        match e:
            case Add(a, b):
                return self._add(self.interval(a), self.interval(b))
            case Sub(a, b):
                return self._add(self.interval(a), self._scale(self.interval(b), -1, e.dtype))
            case FloorDiv(a, IntImm(c)) if c > 0:  # floor is monotone: [lo // c, hi // c]
                x = self.interval(a)
                return self._final(None if x.lo is None else FloorDiv(x.lo, e.b),
                                   None if x.hi is None else FloorDiv(x.hi, e.b))
            case Min(a, b) | Max(a, b):
                x, y = self.interval(a), self.interval(b)
                cls = type(e)
                lo = _pair(cls, x.lo, y.lo, keep_one=isinstance(e, Max))
                hi = _pair(cls, x.hi, y.hi, keep_one=isinstance(e, Min))
                return self._final(lo, hi)
            case Select(_, t, f):
                return union(self.interval(t), self.interval(f))
            case Cast(dtype, value) if widening(value.dtype.element, dtype.element):
                x = self.interval(value)  # a widening cast is monotone
                lo = None if x.lo is None else Cast(dtype.element, x.lo)
                hi = None if x.hi is None else Cast(dtype.element, x.hi)
                return self._final(lo, hi)
            case Broadcast(value):
                return self.interval(value)
            case Ramp(base, stride, lanes):
                steps = self._scale(self.interval(stride), lanes - 1, base.dtype)
                span = union(steps, Interval(IntImm(0, base.dtype), IntImm(0, base.dtype)))
                return self._add(self.interval(base), span)
            case Let(_, _, body):
                return self.interval(body)
        return self._numeric(e)  # FloorMod, loads of ranged indices, ...: numbers only

    def _var(self, v: Var) -> Interval:
        rng = self.ranges.get(v)
        if rng is None:
            return Interval(v, v)
        if v in self._active:
            return self._numeric(v)
        self._active.add(v)
        try:
            # an endpoint may mention other ranged variables: take its own outer bound
            lo = None if rng.lo is None else self.interval(self.s.visit(rng.lo)).lo
            hi = None if rng.hi is None else self.interval(self.s.visit(rng.hi)).hi
        finally:
            self._active.discard(v)
        return self._final(lo, hi)

    def _sum(self, e: Expr) -> Interval:
        """A canonical sum: each term's interval scaled by its coefficient, then added."""
        s = self.s
        total = s.to_sum(e)
        dtype = e.dtype
        acc = Interval(IntImm(total.const, dtype), IntImm(total.const, dtype))
        for mono, c in total.terms.items():
            term = s.canon.monomial_expr(mono)
            if len(mono) == 1 and type(term) is not Mul:
                x = self.interval(term)
            elif self._is_symbol(term):
                x = Interval(term, term)
            else:
                x = self._numeric(term)
            acc = self._add(acc, self._scale(x, c, dtype))
        return acc

    def _add(self, x: Interval, y: Interval) -> Interval:
        lo = None if x.lo is None or y.lo is None else Add(x.lo, y.lo)
        hi = None if x.hi is None or y.hi is None else Add(x.hi, y.hi)
        return self._final(lo, hi)

    def _scale(self, x: Interval, c: int, dtype: DType) -> Interval:
        if c == 1:
            return x
        if c == 0:
            return Interval(IntImm(0, dtype.element), IntImm(0, dtype.element))
        k = IntImm(c, dtype.element)
        lo = None if x.lo is None else Mul(x.lo, k)
        hi = None if x.hi is None else Mul(x.hi, k)
        return self._final(lo, hi) if c >= 0 else self._final(hi, lo)


def _pair(cls: type, a: Expr | None, b: Expr | None, keep_one: bool) -> Expr | None:
    """cls(a, b) of two endpoints; with keep_one, an unbounded side defers to the other."""
    if a is None or b is None:
        return (a if b is None else b) if keep_one else None
    return cls(a, b)  # type: ignore[no-any-return]
