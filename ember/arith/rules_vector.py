"""Rules for vector expressions: Ramp and Broadcast arithmetic, division of ramps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember.arith.const_fold import scalar_const
from ember.arith.modular import modular_set
from ember.tir.expr import Add, Broadcast, Expr, FloorDiv, FloorMod, IntImm, Mul, Ramp, Sub

if TYPE_CHECKING:
    from ember.arith.simplifier import Simplifier


def _ramp(s: Simplifier, base: Expr, stride: Expr, lanes: int) -> Expr:
    return s.visit(Ramp(s.visit(base), s.visit(stride), lanes))


def rule_vector(s: Simplifier, e: Any) -> Expr | None:
    """Rewrite a binary node whose operands are vectors, or return None."""
    a, b = e.a, e.b
    op = type(e)
    if type(a) is Broadcast and type(b) is Broadcast:  # op(x{n}, y{n}) -> op(x, y){n}
        return Broadcast(s.visit(op(a.value, b.value)), a.lanes)
    if not e.dtype.is_int:
        return None
    match e:
        case Add(Ramp(base, stride, n), Broadcast(x)):  # ramp(b, s) + x -> ramp(b + x, s)
            return _ramp(s, base + x, stride, n)
        case Add(Broadcast(x), Ramp(base, stride, n)):  # x + ramp(b, s) -> ramp(x + b, s)
            return _ramp(s, x + base, stride, n)
        case Add(Ramp(b1, s1, n), Ramp(b2, s2)):  # ramp(b1, s1) + ramp(b2, s2)
            return _ramp(s, b1 + b2, s1 + s2, n)
        case Sub(Ramp(base, stride, n), Broadcast(x)):  # ramp(b, s) - x -> ramp(b - x, s)
            return _ramp(s, base - x, stride, n)
        case Sub(Broadcast(x), Ramp(base, stride, n)):  # x - ramp(b, s) -> ramp(x - b, -s)
            return _ramp(s, x - base, 0 - stride, n)
        case Sub(Ramp(b1, s1, n), Ramp(b2, s2)):  # ramp(b1, s1) - ramp(b2, s2)
            return _ramp(s, b1 - b2, s1 - s2, n)
        case Mul(Ramp(base, stride, n), Broadcast(x)):  # ramp(b, s) * x -> ramp(b*x, s*x)
            return _ramp(s, base * x, stride * x, n)
        case Mul(Broadcast(x), Ramp(base, stride, n)):
            return _ramp(s, x * base, x * stride, n)
        case FloorDiv(Ramp(base, stride, n), Broadcast(IntImm(c))) if c > 0:
            return _ramp_div(s, base, stride, n, c, is_mod=False)
        case FloorMod(Ramp(base, stride, n), Broadcast(IntImm(c))) if c > 0:
            return _ramp_div(s, base, stride, n, c, is_mod=True)
    return None


def _ramp_div(s: Simplifier, base: Expr, stride: Expr, lanes: int, c: int,
              is_mod: bool) -> Expr | None:
    """ramp(b, st, n) // c and % c when the lanes' quotients are alike or step evenly."""
    st = scalar_const(stride)
    if not isinstance(st, int):
        return None
    dtype = base.dtype
    divisor = IntImm(c, dtype)
    if st % c == 0:
        # (b + st*i) // c = b // c + (st/c)*i  and  (b + st*i) % c = b % c
        if is_mod:
            return Broadcast(s.visit(FloorMod(base, divisor)), lanes)
        return _ramp(s, FloorDiv(base, divisor), IntImm(st // c, dtype), lanes)
    # every lane lies in one block [k*c, k*c + c): the quotient is the same for all lanes
    span = st * (lanes - 1)
    lo_step, hi_step = min(0, span), max(0, span)
    if _one_block(s, base, c, lo_step, hi_step):
        if is_mod:  # (b + st*i) % c = b % c + st*i
            return _ramp(s, FloorMod(base, divisor), stride, lanes)
        return Broadcast(s.visit(FloorDiv(base, divisor)), lanes)
    return None


def _one_block(s: Simplifier, base: Expr, c: int, lo_step: int, hi_step: int) -> bool:
    m = modular_set(base, s.ranges)
    if m.coeff % c == 0:  # base = c*k + r: lanes are c*k + r + [lo_step, hi_step]
        r = m.base % c
        if 0 <= r + lo_step and r + hi_step < c:
            return True
    lo, hi = s.bound(base)
    return (lo is not None and hi is not None
            and (lo + lo_step) // c == (hi + hi_step) // c)


def simplify_ramp(s: Simplifier, e: Ramp) -> Expr:
    base, stride = s.visit(e.base), s.visit(e.stride)
    if scalar_const(stride) == 0:  # ramp(b, 0, n) -> b{n}
        return Broadcast(base, e.lanes)
    if base is e.base and stride is e.stride:
        return e
    return Ramp(base, stride, e.lanes)


def simplify_broadcast(s: Simplifier, e: Broadcast) -> Expr:
    value = s.visit(e.value)
    return e if value is e.value else Broadcast(value, e.lanes)


VECTOR_HANDLERS: dict[type, Any] = {Ramp: simplify_ramp, Broadcast: simplify_broadcast}
