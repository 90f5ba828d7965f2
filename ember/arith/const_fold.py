"""Constant folding of arithmetic, comparisons and casts, exact in the operands' own precision."""

from __future__ import annotations

import math

import numpy as np

from ember.arith.canonical import wrap_int
from ember.dtype import DType
from ember.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BitwiseAnd, BitwiseOr, BitwiseXor, Broadcast, Div, Expr,
    FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Or, Sub,
)


def scalar_const(e: Expr) -> int | float | None:
    """The value of an IntImm/FloatImm, or of a Broadcast of one; else None."""
    if type(e) is Broadcast:
        e = e.value  # type: ignore[attr-defined]
    if type(e) is IntImm or type(e) is FloatImm:
        return e.value  # type: ignore[attr-defined, no-any-return]
    return None


def is_const_value(e: Expr, value: int | float) -> bool:
    """True if `e` (or every lane of it) is the constant `value`."""
    v = scalar_const(e)
    return v is not None and v == value and not (isinstance(v, float) and math.isnan(v))


def make_const(value: int | float, dtype: DType) -> Expr:
    """A constant of `dtype`, broadcast over its lanes; integers wrap to the type."""
    element = dtype.element
    if element.is_float:
        scalar: Expr = FloatImm(round_float(float(value), element), element)
    else:
        scalar = IntImm(wrap_int(int(value), element), element)
    return scalar if dtype.lanes == 1 else Broadcast(scalar, dtype.lanes)


def round_float(value: float, dtype: DType) -> float:
    """`value` rounded to the precision of the float type."""
    if dtype.bits == 64:
        return value
    with np.errstate(all="ignore"):
        return float(np.float32(value) if dtype.bits == 32 else np.float16(value))


def trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero (C semantics)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_COMPARE = {EQ: lambda x, y: x == y, NE: lambda x, y: x != y, LT: lambda x, y: x < y,
            LE: lambda x, y: x <= y, GT: lambda x, y: x > y, GE: lambda x, y: x >= y}


def fold_binary(e: Expr, a: int | float, b: int | float) -> Expr | None:
    """Fold `e` (a binary node) given the constant values of its operands, or None."""
    t = type(e)
    dtype = e.dtype
    compare = _COMPARE.get(t)
    if compare is not None:
        return make_const(int(bool(compare(a, b))), dtype)
    operand_type = e.a.dtype.element  # type: ignore[attr-defined]
    if operand_type.is_float:
        return _fold_float(t, float(a), float(b), dtype, operand_type)
    a_int, b_int = int(a), int(b)
    if t is Add:
        value = a_int + b_int
    elif t is Sub:
        value = a_int - b_int
    elif t is Mul:
        value = a_int * b_int
    elif t is Min:
        value = min(a_int, b_int)
    elif t is Max:
        value = max(a_int, b_int)
    elif t is And:
        value = int(bool(a_int) and bool(b_int))
    elif t is Or:
        value = int(bool(a_int) or bool(b_int))
    elif t is BitwiseAnd:  # Python's ints are two's complement; make_const wraps to the type
        value = a_int & b_int
    elif t is BitwiseOr:
        value = a_int | b_int
    elif t is BitwiseXor:
        value = a_int ^ b_int
    elif b_int == 0:
        return None  # division by zero stays for the program to face
    elif t is FloorDiv:
        value = a_int // b_int
    elif t is FloorMod:
        value = a_int % b_int
    elif t is Div:
        value = trunc_div(a_int, b_int)
    else:
        return None
    return make_const(value, dtype)


def _fold_float(t: type, a: float, b: float, dtype: DType, element: DType) -> Expr | None:
    kind = {16: np.float16, 32: np.float32, 64: np.float64}[element.bits]
    x, y = kind(a), kind(b)
    with np.errstate(all="ignore"):
        if t is Add:
            value = x + y
        elif t is Sub:
            value = x - y
        elif t is Mul:
            value = x * y
        elif t is Div:
            value = x / y
        elif t in (Min, Max) and _orderable(a, b):
            value = min(x, y) if t is Min else max(x, y)
        else:
            return None
    return make_const(float(value), dtype)


def _orderable(a: float, b: float) -> bool:
    # NaN and min(0.0, -0.0) depend on the target's min/max instruction: do not fold them
    return not (math.isnan(a) or math.isnan(b) or (a == b and a == 0.0))


def _fits(value: int, dtype: DType) -> bool:
    return dtype.min_value() <= value <= dtype.max_value()


def fold_cast(target: DType, value: int | float, source: DType) -> Expr | None:
    """Fold Cast(target, constant) exactly, or None when the result is undefined."""
    element = target.element
    if element.is_bool:
        return make_const(int(value != 0), target)
    if element.is_float:
        if isinstance(value, int) and abs(value) > 2**53 and element.bits != 64:
            return None  # float(value) would round twice
        return make_const(float(value), target)
    if source.element.is_float:
        if math.isnan(value) or math.isinf(value):
            return None
        truncated = int(value)  # float -> int truncates toward zero
        if not _fits(truncated, element):
            return None  # undefined behaviour in C/LLVM: leave it alone
        return make_const(truncated, target)
    return make_const(int(value), target)


def widening(inner: DType, outer: DType) -> bool:
    """True if every value of integer type `inner` is representable in `outer`."""
    if not (inner.is_int or inner.is_bool) or not outer.is_int:
        return False
    return _fits(int(inner.min_value()), outer) and _fits(int(inner.max_value()), outer)
