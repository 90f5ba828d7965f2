"""The Simplifier: bottom-up rewriting with per-call memo, numeric bounds and rule dispatch.

Each node's children are simplified first, then the node's rule (see rules_int, rules_logic,
rules_vector) either returns a final simplified expression or None for "no change".
Integer arithmetic assumes no overflow (index arithmetic), like every loop compiler.
"""

from __future__ import annotations

from typing import Any, Callable

from ember.arith.canonical import Canonical, ExprKeys, Sum
from ember.arith.const_fold import fold_binary, scalar_const
from ember.arith.interval import Interval
from ember.dtype import DType
from ember.tir.expr import (
    Add, BinaryOp, Broadcast, Cast, Div, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max,
    Min, Mul, Ramp, Select, StringImm, Sub, Var,
)
from ember.tir.functor import child_fields

Bound = tuple[int | None, int | None]
UNBOUNDED: Bound = (None, None)
Rule = Callable[["Simplifier", Any], "Expr | None"]


def is_canonical_type(dtype: DType) -> bool:
    """Signed scalar integers go through linear canonical forms."""
    return dtype.kind == "int" and dtype.lanes == 1


class Simplifier:
    """Simplifies expressions under variable ranges; one instance per scope (memo is per scope)."""

    def __init__(self, ranges: dict[Var, Interval] | None = None,
                 keys: ExprKeys | None = None) -> None:
        self.ranges: dict[Var, Interval] = dict(ranges) if ranges else {}
        self.keys = keys if keys is not None else ExprKeys()
        self.canon = Canonical(self.keys)
        self._memo: dict[int, tuple[Expr, Expr]] = {}
        self._bounds: dict[int, tuple[Expr, Bound]] = {}
        self._active: set[Var] = set()

    # rewriting --------------------------------------------------------------------------
    def visit(self, e: Expr) -> Expr:
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        handler = _HANDLERS.get(type(e))
        if handler is None:
            handler = _binary if isinstance(e, BinaryOp) else _generic
        result = handler(self, e)
        self._memo[id(e)] = (e, result)
        if result is not e:
            self._memo.setdefault(id(result), (result, result))
        return result

    def finish(self, total: Sum, dtype: DType, like: Expr | None = None) -> Expr:
        """The readable expression of a canonical sum, recorded as already simplified.

        Returns `like` itself when it already is that expression, so unchanged IR stays shared.
        """
        total = self.canon.fuse_div_mod(total)
        out = self.canon.from_sum(total, dtype)
        if like is not None and self._same_sum(out, like):
            out = like
        self._memo.setdefault(id(out), (out, out))
        return out

    def _same_sum(self, x: Expr, y: Expr) -> bool:
        # cheap structural check for from_sum output: its atoms are mostly shared objects
        if x is y:
            return True
        t = type(x)
        if t is not type(y):
            return False
        if t is IntImm:
            return x.value == y.value and x.dtype == y.dtype  # type: ignore[attr-defined]
        if t is Add or t is Sub or t is Mul:
            return (self._same_sum(x.a, y.a)  # type: ignore[attr-defined]
                    and self._same_sum(x.b, y.b))  # type: ignore[attr-defined]
        return self.keys.same(x, y)

    def to_sum(self, e: Expr) -> Sum:
        return self.canon.to_sum(e)

    def same(self, a: Expr, b: Expr) -> bool:
        """Structurally equal, with variables compared by identity."""
        return self.keys.same(a, b)

    # numeric bounds ---------------------------------------------------------------------
    def bound(self, e: Expr) -> Bound:
        """Inclusive integer bounds of `e` over the ranges (None = unknown on that side)."""
        hit = self._bounds.get(id(e))
        if hit is not None:
            return hit[1]
        result = self._bound(e)
        if e.dtype.kind == "uint" and (result[0] is None or result[0] < 0):
            result = (0, result[1])
        self._bounds[id(e)] = (e, result)
        return result

    def sum_bound(self, total: Sum) -> Bound:
        lo: int | None = total.const
        hi: int | None = total.const
        exprs = self.keys.exprs
        for mono, c in total.terms.items():
            b = self._atom_bound(exprs[mono[0]])
            for k in mono[1:]:
                b = mul_bounds(b, self._atom_bound(exprs[k]))
            tlo, thi = scale_bound(b, c)
            lo = None if lo is None or tlo is None else lo + tlo
            hi = None if hi is None or thi is None else hi + thi
            if lo is None and hi is None:
                break
        return lo, hi

    def sum_bound_deep(self, total: Sum) -> Bound:
        """sum_bound, tightened by replacing variables with symbolic range endpoints by them.

        With j in [0, i - 1], j - i <= (i - 1) - i = -1 although neither has constant bounds.
        """
        lo, hi = self.sum_bound(total)
        upper, lower = Sum({}, total.const), Sum({}, total.const)
        changed = False
        exprs = self.keys.exprs
        for mono, c in total.terms.items():
            term = Sum({mono: c}, 0)
            atom = exprs[mono[0]]
            single_var = len(mono) == 1 and type(atom) is Var
            rng = self.ranges.get(atom) if single_var else None  # type: ignore[call-overload]
            if rng is None:
                upper, lower = upper + term, lower + term
                continue
            top, bottom = (rng.hi, rng.lo) if c > 0 else (rng.lo, rng.hi)
            if top is not None and type(top) is not IntImm:
                upper, changed = upper + self.to_sum(top).scale(c), True
            else:
                upper = upper + term
            if bottom is not None and type(bottom) is not IntImm:
                lower, changed = lower + self.to_sum(bottom).scale(c), True
            else:
                lower = lower + term
        if not changed:
            return lo, hi
        hi2, lo2 = self.sum_bound(upper)[1], self.sum_bound(lower)[0]
        lo = lo2 if lo is None else lo if lo2 is None else max(lo, lo2)
        hi = hi2 if hi is None else hi if hi2 is None else min(hi, hi2)
        return lo, hi

    def _atom_bound(self, atom: Expr) -> Bound:
        if type(atom) is Mul:  # a non-linear product (its sum is itself)
            return mul_bounds(self.bound(atom.a), self.bound(atom.b))  # type: ignore[attr-defined]
        return self.bound(atom)

    def diff_bound(self, a: Expr, b: Expr) -> Bound:
        """Bounds of a - b (scalar or vector integers)."""
        if a.dtype.lanes == 1:
            return self.sum_bound_deep(self.to_sum(a) - self.to_sum(b))
        # a - b in the vector's own type may wrap (uint8...): combine the operand bounds
        # in exact integer arithmetic instead
        (alo, ahi), (blo, bhi) = self.bound(a), self.bound(b)
        lo = None if alo is None or bhi is None else alo - bhi
        hi = None if ahi is None or blo is None else ahi - blo
        return lo, hi

    def _bound(self, e: Expr) -> Bound:
        t = type(e)
        dtype = e.dtype
        if dtype.is_bool:
            return 0, 1
        if not dtype.is_int:
            return UNBOUNDED
        if t is IntImm:
            return e.value, e.value  # type: ignore[attr-defined]
        if t is Var:
            return self._var_bound(e)  # type: ignore[arg-type]
        if t in (Add, Sub, Mul):
            if is_canonical_type(dtype):
                return self.sum_bound(self.to_sum(e))
            a, b = self.bound(e.a), self.bound(e.b)  # type: ignore[attr-defined]
            if t is Add:
                return add_bounds(a, b)
            if t is Sub:
                return add_bounds(a, scale_bound(b, -1))
            return mul_bounds(a, b)
        if t is FloorDiv or t is FloorMod or t is Div:
            return _div_bound(t, self.bound(e.a), self.bound(e.b))  # type: ignore[attr-defined]
        if t is Min or t is Max:
            return _min_max_bound(t is Min, self.bound(e.a), self.bound(e.b))  # type: ignore
        if t is Select:
            return union_bounds(self.bound(e.true_value), self.bound(e.false_value))  # type: ignore
        if t is Cast:
            inner = self.bound(e.value)  # type: ignore[attr-defined]
            if (inner[0] is not None and inner[1] is not None
                    and dtype.min_value() <= inner[0] and inner[1] <= dtype.max_value()):
                return inner
            return int(dtype.min_value()), int(dtype.max_value())
        if t is Broadcast:
            return self.bound(e.value)  # type: ignore[attr-defined]
        if t is Ramp:
            steps = scale_bound(self.bound(e.stride), e.lanes - 1)  # type: ignore[attr-defined]
            return add_bounds(self.bound(e.base), union_bounds(steps, (0, 0)))  # type: ignore
        if t is Let:
            return self.bound(e.body)  # type: ignore[attr-defined]
        if dtype.bits <= 16:
            return int(dtype.min_value()), int(dtype.max_value())
        return UNBOUNDED

    def _var_bound(self, v: Var) -> Bound:
        rng = self.ranges.get(v)
        if rng is None or v in self._active:
            return UNBOUNDED
        self._active.add(v)
        try:
            lo = None if rng.lo is None else self.bound(rng.lo)[0]
            hi = None if rng.hi is None else self.bound(rng.hi)[1]
        finally:
            self._active.discard(v)
        return lo, hi


# --------------------------------------------------------------------------------------
# interval arithmetic on numeric bounds
def add_bounds(a: Bound, b: Bound) -> Bound:
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def scale_bound(b: Bound, c: int) -> Bound:
    if c == 0:
        return 0, 0
    lo = None if b[0] is None else b[0] * c
    hi = None if b[1] is None else b[1] * c
    return (lo, hi) if c > 0 else (hi, lo)


def mul_bounds(a: Bound, b: Bound) -> Bound:
    if None not in a and None not in b:
        products = [x * y for x in a for y in b]  # type: ignore[operator]
        return min(products), max(products)
    if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
        hi = None if a[1] is None or b[1] is None else a[1] * b[1]
        return a[0] * b[0], hi
    return UNBOUNDED


def union_bounds(a: Bound, b: Bound) -> Bound:
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def _min_max_bound(is_min: bool, a: Bound, b: Bound) -> Bound:
    pick = min if is_min else max
    if is_min:
        lo = None if a[0] is None or b[0] is None else pick(a[0], b[0])
        hi = b[1] if a[1] is None else a[1] if b[1] is None else pick(a[1], b[1])
    else:
        lo = b[0] if a[0] is None else a[0] if b[0] is None else pick(a[0], b[0])
        hi = None if a[1] is None or b[1] is None else pick(a[1], b[1])
    return lo, hi


def _div_bound(t: type, a: Bound, b: Bound) -> Bound:
    if b[0] is None or b[1] is None or b[0] <= 0:
        return UNBOUNDED  # only positive divisors are bounded here
    lo, hi = a
    if t is FloorMod:
        if b[0] == b[1] and lo is not None and hi is not None and lo // b[0] == hi // b[0]:
            base = (lo // b[0]) * b[0]
            return lo - base, hi - base
        top = b[1] - 1
        if lo is not None and lo >= 0 and hi is not None:
            top = min(top, hi)
        return 0, top
    if t is Div and (lo is None or lo < 0):
        if lo is None or hi is None:
            return UNBOUNDED
        # truncation: the quotient lies between the floor quotients and zero
        qlo = min(-((-lo) // b[0]), 0)
        qhi = max(hi // b[0], 0)
        return qlo, qhi
    # floor division by a positive divisor in [b0, b1]
    qlo = None if lo is None else min(lo // b[0], lo // b[1])
    qhi = None if hi is None else max(hi // b[0], hi // b[1])
    return qlo, qhi


# --------------------------------------------------------------------------------------
# generic handlers
def _leaf(s: Simplifier, e: Expr) -> Expr:
    return e


def _binary(s: Simplifier, e: Any) -> Expr:
    a, b = s.visit(e.a), s.visit(e.b)
    if a is not e.a or b is not e.b:
        e = type(e)(a, b)
    va, vb = scalar_const(a), scalar_const(b)
    if va is not None and vb is not None:
        folded = fold_binary(e, va, vb)
        if folded is not None:
            return folded
    if a.dtype.lanes > 1:
        result = rule_vector(s, e)
        if result is not None:
            return result
    rule = _RULES.get(type(e))
    result = rule(s, e) if rule is not None else None
    return e if result is None else result


def _generic(s: Simplifier, e: Any) -> Expr:
    changes: dict[str, Any] = {}
    for name in child_fields(type(e)):
        old = getattr(e, name)
        if isinstance(old, Expr):
            new: Any = s.visit(old)
        elif isinstance(old, tuple) and any(isinstance(x, Expr) for x in old):
            new = tuple(s.visit(x) if isinstance(x, Expr) else x for x in old)
            if all(x is y for x, y in zip(new, old)):
                new = old
        else:
            continue
        if new is not old:
            changes[name] = new
    if not changes:
        return e  # type: ignore[no-any-return]
    import dataclasses

    return dataclasses.replace(e, **changes)  # type: ignore[no-any-return]


# the rule tables are filled from the rule modules (imported last: they use the names above)
from ember.arith.rules_int import INT_RULES  # noqa: E402
from ember.arith.rules_logic import LOGIC_HANDLERS, LOGIC_RULES  # noqa: E402
from ember.arith.rules_vector import VECTOR_HANDLERS, rule_vector  # noqa: E402

_RULES: dict[type, Rule] = {**INT_RULES, **LOGIC_RULES}
_HANDLERS: dict[type, Callable[[Simplifier, Any], Expr]] = {
    Var: _leaf, IntImm: _leaf, FloatImm: _leaf, StringImm: _leaf,
    **LOGIC_HANDLERS, **VECTOR_HANDLERS,
}
