"""partition_loops: split loops so that guards from non-divisible splits vanish from the bulk.

    for io in range(32):                        for io in range(31):
      for ii in range(32):                        for ii in range(32):
        if io * 32 + ii < 1000:          ->          B[io * 32 + ii] = ...
          B[io * 32 + ii] = ...                   for io in range(31, 32):
                                                    for ii in range(8):
                                                      B[io * 32 + ii] = ...

A loop is cut where a guard conjunct that is linear in its variable switches from provably
true to unknown (or false); inside each piece, conjuncts provable from the loop ranges are
dropped and ifs provably false lose their then-branch. Anything not provable stays guarded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ember.arith.bounds import can_prove
from ember.arith.interval import Interval
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator, Visitor

Bounds = dict[E.Var, tuple[int, int]]  # inclusive [lo, hi] of each variable in scope
_SPLITTABLE = (S.ForKind.SERIAL, S.ForKind.PARALLEL)


def partition_loops(func: PrimFunc, max_pieces: int = 3) -> PrimFunc:
    """Split SERIAL/PARALLEL loops of constant range at the points where their guards become
    provable, and drop guards proven true (or ifs proven false) inside each piece."""
    body = _Partition(max_pieces).visit(func.body)
    return func if body is func.body else replace(func, body=body)


# ------------------------------------------------------------------------------------------
# integer analysis on linear forms: terms {Var or atom: coeff} + constant
Linear = tuple[dict[Any, int], int]


def linear(e: E.Expr) -> Linear | None:
    """`e` as sum(coeff * term) + const; non-linear parts become atom terms."""
    match e:
        case E.IntImm(value) if not e.dtype.is_bool:
            return {}, value
        case E.Var():
            return {e: 1}, 0
        case E.Add(a, b) | E.Sub(a, b):
            la, lb = linear(a), linear(b)
            if la is None or lb is None:
                return None
            sign = 1 if isinstance(e, E.Add) else -1
            terms = dict(la[0])
            for key, coeff in lb[0].items():
                terms[key] = terms.get(key, 0) + sign * coeff
            return {k: c for k, c in terms.items() if c}, la[1] + sign * lb[1]
        case E.Mul(a, E.IntImm(k)) | E.Mul(E.IntImm(k), a):
            la = linear(a)
            if la is None:
                return None
            return {key: c * k for key, c in la[0].items() if c * k}, la[1] * k
    if e.dtype.is_int and e.dtype.lanes == 1:
        return {e: 1}, 0
    return None


def interval(e: E.Expr, bounds: Bounds) -> tuple[int, int] | None:
    """Inclusive integer bounds of a scalar integer expression, or None if unknown."""
    match e:
        case E.IntImm(value):
            return value, value
        case E.Var():
            return bounds.get(e)
        case E.Cast(_, value) if e.dtype.is_int and value.dtype.is_int:
            return interval(value, bounds)
    if not isinstance(e, E.BinaryOp):
        return None
    ia, ib = interval(e.a, bounds), interval(e.b, bounds)
    if ia is None or ib is None:
        return None
    (alo, ahi), (blo, bhi) = ia, ib
    match e:
        case E.Add():
            return alo + blo, ahi + bhi
        case E.Sub():
            return alo - bhi, ahi - blo
        case E.Mul():
            corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            return min(corners), max(corners)
        case E.Min():
            return min(alo, blo), min(ahi, bhi)
        case E.Max():
            return max(alo, blo), max(ahi, bhi)
        case E.FloorDiv() if blo == bhi and blo > 0:
            return alo // blo, ahi // blo
        case E.FloorMod() if blo == bhi and blo > 0:
            if alo // blo == ahi // blo:
                return alo % blo, ahi % blo
            return 0, blo - 1
    return None


def _linear_bounds(lin: Linear, bounds: Bounds, skip: E.Var | None = None
                   ) -> tuple[int, int] | None:
    lo = hi = lin[1]
    for key, coeff in lin[0].items():
        if key is skip:
            continue
        span = interval(key, bounds)
        if span is None:
            return None
        a, b = span[0] * coeff, span[1] * coeff
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def as_upper_bound(cond: E.Expr) -> Linear | None:
    """A comparison `cond` as a linear form d with cond <=> d <= 0."""
    if not isinstance(cond, E.CompareOp) or not cond.a.dtype.is_int or cond.a.dtype.lanes > 1:
        return None
    match cond:
        case E.LT(a, b) | E.LE(a, b):
            diff = linear(E.Sub(a, b))
        case E.GT(a, b) | E.GE(a, b):
            diff = linear(E.Sub(b, a))
        case _:
            return None
    if diff is None:
        return None
    strict = isinstance(cond, (E.LT, E.GT))
    return diff[0], diff[1] + (1 if strict else 0)


def decide(cond: E.Expr, bounds: Bounds) -> bool | None:
    """True / False if `cond` holds / fails for every value in `bounds`, else None."""
    form = as_upper_bound(cond)
    if form is not None:
        span = _linear_bounds(form, bounds)
        if span is not None:
            if span[1] <= 0:
                return True
            if span[0] > 0:
                return False
    return _can_prove(cond, bounds)


def _can_prove(cond: E.Expr, bounds: Bounds) -> bool | None:
    ranges = {v: Interval.from_range(lo, hi - lo + 1) for v, (lo, hi) in bounds.items()}
    try:
        if can_prove(cond, ranges):
            return True
        if can_prove(E.Not(cond), ranges):
            return False
    except Exception:  # noqa: BLE001 - an expression the prover cannot handle: unknown
        return None
    return None


def conjuncts(cond: E.Expr) -> list[E.Expr]:
    if isinstance(cond, E.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def _floordiv(a: int, b: int) -> int:
    return a // b


def _ceildiv(a: int, b: int) -> int:
    return -((-a) // b)


# ------------------------------------------------------------------------------------------
class _Guards(Visitor):
    """Collect the cut points of loop variable `var` from the guards inside a loop body."""

    def __init__(self, var: E.Var, bounds: Bounds) -> None:
        self.var = var
        self.bounds = dict(bounds)
        self.true_cuts: set[int] = set()
        self.false_cuts: set[int] = set()

    def visit_For(self, loop: S.For) -> None:
        begin, extent = E.as_const_int(loop.begin), E.as_const_int(loop.extent)
        saved = self.bounds.get(loop.var)
        if begin is not None and extent is not None and extent > 0:
            self.bounds[loop.var] = (begin, begin + extent - 1)
        else:
            self.bounds.pop(loop.var, None)
        self.visit(loop.body)
        if saved is None:
            self.bounds.pop(loop.var, None)
        else:
            self.bounds[loop.var] = saved

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        for cond in conjuncts(s.condition):
            self.add(cond)
        self.generic_visit(s)

    def add(self, cond: E.Expr) -> None:
        form = as_upper_bound(cond)
        if form is None:
            return
        coeff = form[0].get(self.var, 0)
        if coeff == 0 or any(self.var is not key and _mentions(key, self.var)
                             for key in form[0]):
            return
        rest = _linear_bounds(form, self.bounds, skip=self.var)
        if rest is None:
            return
        lo, hi = rest  # cond <=> coeff * var + rest <= 0
        if coeff > 0:  # true for var <= -(hi)/coeff, false for var > -(lo)/coeff
            self.true_cuts.add(_floordiv(-hi, coeff) + 1)
            self.false_cuts.add(_floordiv(-lo, coeff) + 1)
        else:  # true for var >= hi/|coeff|, false for var < lo/|coeff|
            self.true_cuts.add(_ceildiv(hi, -coeff))
            self.false_cuts.add(_ceildiv(lo, -coeff))


def _mentions(e: Any, var: E.Var) -> bool:
    from ember.tir.functor import uses_var

    return isinstance(e, E.Expr) and uses_var(e, var)


class _Partition(Mutator):
    def __init__(self, max_pieces: int) -> None:
        self.max_pieces = max_pieces
        self.bounds: Bounds = {}

    def visit_For(self, loop: S.For) -> S.Stmt:
        begin, extent = E.as_const_int(loop.begin), E.as_const_int(loop.extent)
        if begin is None or extent is None or extent <= 0:
            saved = self.bounds.pop(loop.var, None)
            body = self.visit(loop.body)
            if saved is not None:
                self.bounds[loop.var] = saved
            return loop if body is loop.body else replace(loop, body=body)
        end = begin + extent
        cuts = self._cuts(loop, begin, end) if loop.kind in _SPLITTABLE else []
        edges = [begin, *cuts, end]
        pieces = []
        saved = self.bounds.get(loop.var)
        for lo, hi in zip(edges, edges[1:]):
            self.bounds[loop.var] = (lo, hi - 1)
            body = self.visit(loop.body)
            if len(edges) == 2:
                pieces.append(loop if body is loop.body else replace(loop, body=body))
            else:
                pieces.append(replace(loop, begin=E.IntImm(lo, loop.begin.dtype),
                                      extent=E.IntImm(hi - lo, loop.extent.dtype), body=body))
        if saved is None:
            self.bounds.pop(loop.var, None)
        else:
            self.bounds[loop.var] = saved
        return S.seq(*pieces)

    def _cuts(self, loop: S.For, begin: int, end: int) -> list[int]:
        guards = _Guards(loop.var, self.bounds)
        guards.visit(loop.body)
        cuts = sorted(c for c in guards.true_cuts if begin < c < end)
        for c in sorted(guards.false_cuts):
            if begin < c < end and c not in cuts and len(cuts) + 1 < self.max_pieces:
                cuts = sorted([*cuts, c])
        if len(cuts) + 1 > self.max_pieces:
            return []
        return cuts

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        kept = []
        for cond in conjuncts(s.condition):
            verdict = decide(cond, self.bounds)
            if verdict is False:
                if s.else_case is None:
                    return S.Seq(())
                return self.visit(s.else_case)  # type: ignore[no-any-return]
            if verdict is None:
                kept.append(cond)
        then_case = self.visit(s.then_case)
        if not kept:
            return then_case  # type: ignore[no-any-return]
        else_case = None if s.else_case is None else self.visit(s.else_case)
        condition = kept[0]
        for cond in kept[1:]:
            condition = E.And(condition, cond)
        if (condition is s.condition and then_case is s.then_case
                and else_case is s.else_case):
            return s
        return S.IfThenElse(condition, then_case, else_case)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        span = interval(s.value, self.bounds)
        saved = self.bounds.pop(s.var, None)
        if span is not None:
            self.bounds[s.var] = span
        body = self.visit(s.body)
        self.bounds.pop(s.var, None)
        if saved is not None:
            self.bounds[s.var] = saved
        return s if body is s.body else replace(s, body=body)
