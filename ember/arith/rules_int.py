"""Rules for arithmetic nodes: canonical sums, floor division and modulo, min and max."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember.arith.canonical import Sum
from ember.arith.const_fold import is_const_value, make_const, scalar_const
from ember.arith.modular import modular_set
from ember.tir.expr import (
    Add, Div, Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Sub,
)

if TYPE_CHECKING:
    from ember.arith.simplifier import Simplifier


def _canonical(e: Expr) -> bool:
    dtype = e.dtype
    return dtype.kind == "int" and dtype.lanes == 1


def rewrite_add(s: Simplifier, e: Add) -> Expr | None:
    if _canonical(e):  # sum the linear forms: (i*32 + j) + 1 - ... collects like terms
        return s.finish(s.to_sum(e.a) + s.to_sum(e.b), e.dtype, e)
    match e:
        case Add(x, y) if is_const_value(y, 0):  # x + 0 -> x (for floats too, as -0.0 + 0.0)
            return x
        case Add(x, y) if is_const_value(x, 0):  # 0 + y -> y
            return y
    return None


def rewrite_sub(s: Simplifier, e: Sub) -> Expr | None:
    if _canonical(e):
        return s.finish(s.to_sum(e.a) - s.to_sum(e.b), e.dtype, e)
    match e:
        case Sub(x, y) if is_const_value(y, 0):  # x - 0 -> x (exact for floats too)
            return x
        case Sub(x, y) if not e.dtype.is_float and s.same(x, y):  # x - x -> 0 (not inf - inf)
            return make_const(0, e.dtype)
    return None


def rewrite_mul(s: Simplifier, e: Mul) -> Expr | None:
    if _canonical(e):
        return s.finish(s.to_sum(e), e.dtype, e)
    match e:
        case Mul(x, y) if is_const_value(y, 1):  # x * 1 -> x (exact for floats too)
            return x
        case Mul(x, y) if is_const_value(x, 1):  # 1 * y -> y
            return y
        case Mul(x, y) if not e.dtype.is_float and (is_const_value(x, 0)
                                                    or is_const_value(y, 0)):
            return make_const(0, e.dtype)  # x * 0 -> 0 (integers only: inf * 0 is nan)
    return None


def _positive_divisor(e: Expr) -> int | None:
    c = scalar_const(e)
    return c if isinstance(c, int) and c > 0 else None


def rewrite_floordiv(s: Simplifier, e: FloorDiv) -> Expr | None:
    a, b = e.a, e.b
    c = _positive_divisor(b)
    if c is None:
        return None
    if c == 1:  # x // 1 -> x
        return a
    if not _canonical(e):
        return None
    match a:
        case FloorDiv(x, IntImm(c1)) if c1 > 0:  # (x // c1) // c -> x // (c1*c)
            return s.visit(FloorDiv(x, IntImm(c1 * c, e.dtype)))
    total = s.to_sum(a)
    divisible, rest = total.split(c)
    lo, hi = s.sum_bound(rest)
    if lo is not None and hi is not None and lo // c == hi // c:
        # (c*q + r) // c -> q + k   when r in [k*c, k*c + c)
        return s.finish(divisible.exact_div(c).add_const(lo // c), e.dtype)
    if divisible.terms:
        # (c*q + r) // c -> q + r // c   (exact for integer q)
        inner = s.visit(FloorDiv(s.finish(rest, e.dtype), b))
        return s.finish(divisible.exact_div(c) + s.to_sum(inner), e.dtype)
    single = _single_term(rest)
    if single is not None:
        mono, k = single
        if k > 1 and c % k == 0:  # (x*k) // c -> x // (c/k)   when k | c, k > 0
            x = s.visit(s.canon.monomial_expr(mono))
            return s.visit(FloorDiv(x, IntImm(c // k, e.dtype)))
    return None


def rewrite_floormod(s: Simplifier, e: FloorMod) -> Expr | None:
    a, b = e.a, e.b
    c = _positive_divisor(b)
    if c is None:
        return None
    if c == 1:  # x % 1 -> 0
        return make_const(0, e.dtype)
    if not _canonical(e):
        return None
    match a:
        case FloorMod(x, IntImm(c1)) if c1 > 0 and c1 % c == 0:  # (x % c1) % c -> x % c, c | c1
            return s.visit(FloorMod(x, b))
    total = s.to_sum(a)
    divisible, rest = total.split(c)
    lo, hi = s.sum_bound(rest)
    if lo is not None and hi is not None and lo // c == hi // c:
        # (c*q + r) % c -> r - k*c   when r in [k*c, k*c + c)
        return s.finish(rest.add_const(-c * (lo // c)), e.dtype)
    reduced = Sum(rest.terms, rest.const % c)
    if divisible.terms or reduced.const != rest.const:
        # (c*q + r + k) % c -> (r + k % c) % c
        return s.visit(FloorMod(s.finish(reduced, e.dtype), b))
    single = _single_term(rest)
    if single is not None:
        mono, k = single
        if k > 1 and c % k == 0:  # (x*k) % c -> (x % (c/k)) * k   when k | c, k > 0
            x = s.visit(s.canon.monomial_expr(mono))
            inner = s.visit(FloorMod(x, IntImm(c // k, e.dtype)))
            return s.finish(s.to_sum(inner).scale(k), e.dtype)
    m = modular_set(a, s.ranges)
    if m.coeff % c == 0:  # a = c*j*k + base  ->  a % c = base % c
        return make_const(m.base % c, e.dtype)
    return None


def _single_term(total: Sum) -> tuple[tuple[int, ...], int] | None:
    if total.const != 0 or len(total.terms) != 1:
        return None
    (mono, k), = total.terms.items()
    return mono, k


def rewrite_div(s: Simplifier, e: Div) -> Expr | None:
    a, b = e.a, e.b
    if e.dtype.is_float:
        if is_const_value(b, 1):  # x / 1.0 -> x (exact)
            return a
        return None
    c = _positive_divisor(b)
    if c is None:
        return None
    if c == 1:  # x / 1 -> x
        return a
    lo = s.bound(a)[0]
    if lo is not None and lo >= 0:  # truncation is floor when x >= 0 and c > 0
        return s.visit(FloorDiv(a, b))
    return None


def _rewrite_min_max(s: Simplifier, e: Any, is_min: bool) -> Expr | None:
    cls = Min if is_min else Max
    a, b = e.a, e.b
    if s.same(a, b):  # min(x, x) -> x
        return a  # type: ignore[no-any-return]
    if not e.dtype.is_int:
        return None
    lo, hi = s.diff_bound(a, b)
    if hi is not None and hi <= 0:  # a <= b: min(a, b) -> a, max(a, b) -> b
        return a if is_min else b  # type: ignore[no-any-return]
    if lo is not None and lo >= 0:  # a >= b: min(a, b) -> b, max(a, b) -> a
        return b if is_min else a  # type: ignore[no-any-return]
    other = Max if is_min else Min
    if scalar_const(a) is not None:  # min(c, x) -> min(x, c): constant last
        return s.visit(cls(b, a))
    if type(a) is cls and scalar_const(a.b) is not None and scalar_const(b) is not None:
        # min(min(x, c1), c2) -> min(x, min(c1, c2))
        return s.visit(cls(a.a, s.visit(cls(a.b, b))))
    if type(a) is other and (s.same(a.a, b) or s.same(a.b, b)):
        return b  # type: ignore[no-any-return]  # min(max(x, y), x) -> x
    if type(b) is other and (s.same(b.a, a) or s.same(b.b, a)):
        return a  # type: ignore[no-any-return]  # min(x, max(x, y)) -> x
    return None


def rewrite_min(s: Simplifier, e: Min) -> Expr | None:
    return _rewrite_min_max(s, e, True)


def rewrite_max(s: Simplifier, e: Max) -> Expr | None:
    return _rewrite_min_max(s, e, False)


INT_RULES: dict[type, Any] = {
    Add: rewrite_add, Sub: rewrite_sub, Mul: rewrite_mul, Div: rewrite_div,
    FloorDiv: rewrite_floordiv, FloorMod: rewrite_floormod, Min: rewrite_min, Max: rewrite_max,
}
