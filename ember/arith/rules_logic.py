"""Rules for comparisons, And/Or/Not, Select, Cast and Let."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember.arith.canonical import Sum
from ember.arith.const_fold import fold_cast, is_const_value, make_const, scalar_const, widening
from ember.tir.expr import (
    EQ, GE, GT, LE, LT, NE, And, Broadcast, Cast, CompareOp, Expr, FloatImm, IntImm, Let, Not,
    Or, Ramp, Select, Var,
)
from ember.tir.functor import substitute

if TYPE_CHECKING:
    from ember.arith.simplifier import Bound, Simplifier

_FLIP = {LT: GT, LE: GE, GT: LT, GE: LE, EQ: EQ, NE: NE}
_NEGATE = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}


def _decide(op: type, bound: Bound) -> bool | None:
    """The value of `d op 0` for every d in `bound`, or None when it varies."""
    lo, hi = bound
    if op is LT:
        return True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
    if op is LE:
        return True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
    if op is GT:
        return True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
    if op is GE:
        return True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
    if lo is not None and lo == hi == 0:
        return op is EQ
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return op is NE
    return None


def rewrite_compare(s: Simplifier, e: Any) -> Expr | None:
    a, b = e.a, e.b
    op = type(e)
    if not a.dtype.is_int:
        if not a.dtype.is_float and s.same(a, b) and op in (EQ, LE, GE):
            return make_const(1, e.dtype)  # x == x -> true (bools; floats may be NaN)
        return None
    if a.dtype.lanes > 1:
        decided = _decide(op, s.diff_bound(a, b))
        return None if decided is None else make_const(int(decided), e.dtype)
    d = s.to_sum(a) - s.to_sum(b)
    decided = _decide(op, s.sum_bound_deep(d))
    if decided is not None:  # decided by bounds, e.g. i < 64 with i in [0, 32)
        return make_const(int(decided), e.dtype)
    if a.dtype.kind != "int":
        return None  # unsigned: moving terms across could wrap
    return _normalize(s, op, d, e)


def _normalize(s: Simplifier, op: type, d: Sum, e: Any) -> Expr:
    """Rewrite `a op b` as `positive terms op negative terms + constant`, gcd divided out."""
    g = d.coeff_gcd()
    k = d.const
    # g*T + k op 0  <=>  T + k' op 0, rounding k/g the way that keeps the set of solutions
    if op is LT or op is GE:
        k2 = k // g  # g*T < -k  <=>  T < ceil(-k/g) = -floor(k/g)
    elif op is LE or op is GT:
        k2 = -((-k) // g)  # g*T <= -k  <=>  T <= floor(-k/g) = -ceil(k/g)
    elif k % g != 0:
        return make_const(int(op is NE), e.dtype)  # g*T == -k has no integer solution
    else:
        k2 = k // g
    terms = {m: c // g for m, c in d.terms.items()}
    if all(c < 0 for c in terms.values()):  # -T + k op 0  <=>  T - k flip(op) 0
        terms = {m: -c for m, c in terms.items()}
        k2 = -k2
        op = _FLIP[op]
    lhs = Sum({m: c for m, c in terms.items() if c > 0}, 0)
    rhs = Sum({m: -c for m, c in terms.items() if c < 0}, -k2)
    dtype = e.a.dtype
    left, right = s.finish(lhs, dtype), s.finish(rhs, dtype)
    if op is type(e) and s.same(left, e.a) and s.same(right, e.b):
        return e  # type: ignore[no-any-return]
    return op(left, right)  # type: ignore[no-any-return]


def _negations(s: Simplifier, a: Expr, b: Expr) -> bool:
    """True if `b` is `!a`, also as a negated comparison: (x < y, x >= y)."""
    if (type(b) is Not and s.same(b.a, a)) or (type(a) is Not and s.same(a.a, b)):  # type: ignore
        return True
    if isinstance(a, CompareOp) and isinstance(b, CompareOp) and not a.a.dtype.is_float:
        return (_NEGATE[type(a)] is type(b) and s.same(a.a, b.a)
                and s.same(a.b, b.b))
    return False


def rewrite_and(s: Simplifier, e: And) -> Expr | None:
    a, b = e.a, e.b
    if is_const_value(a, 1):  # true && x -> x
        return b
    if is_const_value(b, 1):  # x && true -> x
        return a
    if is_const_value(a, 0) or is_const_value(b, 0):  # false && x -> false
        return make_const(0, e.dtype)
    if s.same(a, b):  # x && x -> x
        return a
    if _negations(s, a, b):
        return make_const(0, e.dtype)  # x && !x -> false
    return None


def rewrite_or(s: Simplifier, e: Or) -> Expr | None:
    a, b = e.a, e.b
    if is_const_value(a, 0):  # false || x -> x
        return b
    if is_const_value(b, 0):  # x || false -> x
        return a
    if is_const_value(a, 1) or is_const_value(b, 1):  # true || x -> true
        return make_const(1, e.dtype)
    if s.same(a, b):  # x || x -> x
        return a
    if _negations(s, a, b):
        return make_const(1, e.dtype)  # x || !x -> true
    return None


def simplify_not(s: Simplifier, e: Not) -> Expr:
    a = s.visit(e.a)
    value = scalar_const(a)
    if value is not None and e.dtype.is_bool:  # !true -> false
        return make_const(int(not value), e.dtype)
    if value is not None and e.dtype.is_int:  # ~c, the complement, wrapped to the type
        return make_const(~int(value), e.dtype)
    match a:
        case Not(x):  # !!x -> x
            return x
        case CompareOp(x, y) if not x.dtype.is_float:  # !(x < y) -> x >= y (not with NaN)
            return s.visit(_NEGATE[type(a)](x, y))
        case Broadcast(x, lanes):  # !x{n} -> (!x){n}
            return Broadcast(s.visit(Not(x)), lanes)
    return e if a is e.a else Not(a)


def simplify_select(s: Simplifier, e: Select) -> Expr:
    c, t, f = s.visit(e.condition), s.visit(e.true_value), s.visit(e.false_value)
    value = scalar_const(c)
    if value is not None:  # select(true, t, f) -> t
        return t if value else f
    if s.same(t, f):  # select(c, x, x) -> x
        return t
    match c, t, f:
        case Not(inner), _, _:  # select(!c, t, f) -> select(c, f, t)
            return s.visit(Select(inner, f, t))
        case Broadcast(cv, lanes), Broadcast(tv), Broadcast(fv):  # all lanes alike
            return Broadcast(s.visit(Select(cv, tv, fv)), lanes)
    if c is e.condition and t is e.true_value and f is e.false_value:
        return e
    return Select(c, t, f)


def simplify_cast(s: Simplifier, e: Cast) -> Expr:
    value = s.visit(e.value)
    target = e.dtype
    if value.dtype == target:  # T(x) -> x when x is already T
        return value
    constant = scalar_const(value)
    if constant is not None:
        folded = fold_cast(target, constant, value.dtype)
        if folded is not None:
            return folded
    match value:
        case Cast(inner_type, x) if x.dtype == target and widening(target.element,
                                                                   inner_type.element):
            return x  # T(U(x)) -> x when x is a T and U holds every T
        case Broadcast(x, lanes):  # T(x{n}) -> T(x){n}
            return Broadcast(s.visit(Cast(target.element, x)), lanes)
        case Ramp(base, stride, lanes) if widening(value.dtype.element, target.element):
            # widening a ramp lane by lane: ramp(T(b), T(s), n), assuming no index overflow
            element = target.element
            return s.visit(Ramp(s.visit(Cast(element, base)), s.visit(Cast(element, stride)),
                                lanes))
    return e if value is e.value else Cast(target, value)


def simplify_let(s: Simplifier, e: Let) -> Expr:
    value = s.visit(e.value)
    if type(value) in (IntImm, FloatImm, Var):  # let x = 3 in x + 1 -> 3 + 1
        return s.visit(substitute(e.body, {e.var: value}))
    body = s.visit(e.body)
    if value is e.value and body is e.body:
        return e
    return Let(e.var, value, body)


LOGIC_RULES: dict[type, Any] = {
    EQ: rewrite_compare, NE: rewrite_compare, LT: rewrite_compare, LE: rewrite_compare,
    GT: rewrite_compare, GE: rewrite_compare, And: rewrite_and, Or: rewrite_or,
}
LOGIC_HANDLERS: dict[type, Any] = {
    Not: simplify_not, Select: simplify_select, Cast: simplify_cast, Let: simplify_let,
}
