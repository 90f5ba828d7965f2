"""Expression helpers for compute bodies: math functions, min/max, select, all/any."""

from __future__ import annotations

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import DTypeError
from ember.tir.expr import (
    And, Call, Expr, ExprLike, Max, Min, Not, Or, Select, _pair, const, convert,
)


def _float_call(name: str, x: ExprLike) -> Expr:
    e = convert(x)
    if not e.dtype.is_float:
        raise DTypeError(f"{name} needs a float argument, got {e.dtype}; cast it first")
    return Call(e.dtype, name, (e,))


def exp(x: ExprLike) -> Expr:
    return _float_call("exp", x)


def exp2(x: ExprLike) -> Expr:
    return _float_call("exp2", x)


def log(x: ExprLike) -> Expr:
    return _float_call("log", x)


def log2(x: ExprLike) -> Expr:
    return _float_call("log2", x)


def sqrt(x: ExprLike) -> Expr:
    return _float_call("sqrt", x)


def rsqrt(x: ExprLike) -> Expr:
    return _float_call("rsqrt", x)


def tanh(x: ExprLike) -> Expr:
    return _float_call("tanh", x)


def sigmoid(x: ExprLike) -> Expr:
    return _float_call("sigmoid", x)


def erf(x: ExprLike) -> Expr:
    return _float_call("erf", x)


def floor(x: ExprLike) -> Expr:
    return _float_call("floor", x)


def ceil(x: ExprLike) -> Expr:
    return _float_call("ceil", x)


def round(x: ExprLike) -> Expr:  # noqa: A001
    """Round half to even, like numpy.round."""
    return _float_call("round", x)


def trunc(x: ExprLike) -> Expr:
    return _float_call("trunc", x)


def reinterpret(x: ExprLike, dtype: str | DType) -> Expr:
    """The bits of `x` read as `dtype`, of the same width: reinterpret(f32, "uint32") gives
    the IEEE-754 pattern. The one operation storage-only types (bfloat16, float8, ...) allow
    besides loads and stores."""
    e = convert(x)
    target = dt.parse(dtype).with_lanes(e.dtype.lanes)
    if e.dtype.is_bool or target.is_bool or e.dtype.storage.bits != target.storage.bits:
        raise DTypeError(f"reinterpret needs types of one width, got {e.dtype} -> {target}")
    return e if target == e.dtype else Call(target, "reinterpret", (e,))


def sin(x: ExprLike) -> Expr:
    return _float_call("sin", x)


def cos(x: ExprLike) -> Expr:
    return _float_call("cos", x)


def asin(x: ExprLike) -> Expr:
    return _float_call("asin", x)


def acos(x: ExprLike) -> Expr:
    return _float_call("acos", x)


def atan(x: ExprLike) -> Expr:
    return _float_call("atan", x)


def asinh(x: ExprLike) -> Expr:
    return _float_call("asinh", x)


def acosh(x: ExprLike) -> Expr:
    return _float_call("acosh", x)


def atanh(x: ExprLike) -> Expr:
    return _float_call("atanh", x)


def pow(x: ExprLike, y: ExprLike) -> Expr:  # noqa: A001
    a, b = _pair(x, y)
    if not a.dtype.is_float:
        raise DTypeError(f"pow needs float arguments, got {a.dtype}")
    return Call(a.dtype, "pow", (a, b))


def abs(x: ExprLike) -> Expr:  # noqa: A001
    e = convert(x)
    if e.dtype.is_float:
        return Call(e.dtype, "fabs", (e,))
    if e.dtype.kind == "uint" or e.dtype.is_bool:
        return e
    return Select(e < 0, -e, e)


def min(a: ExprLike, b: ExprLike) -> Expr:  # noqa: A001
    return Min(*_pair(a, b))


def max(a: ExprLike, b: ExprLike) -> Expr:  # noqa: A001
    return Max(*_pair(a, b))


def if_then_else(condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    """`condition ? true_value : false_value`; loads in the branch not taken never happen,
    so `if_then_else(i > 0, A[i - 1], 0.0)` is a safe padding read."""
    c = convert(condition)
    if not c.dtype.is_bool:
        raise DTypeError(f"if_then_else condition must be bool, got {c.dtype}")
    t, f = _pair(true_value, false_value)
    return Call(t.dtype, "if_then_else", (c, t, f))


def all(*conditions: ExprLike) -> Expr:  # noqa: A001
    """Logical and of several conditions: `te.all(i >= 0, i < n)`."""
    if not conditions:
        return const(True)
    result = convert(conditions[0])
    for c in conditions[1:]:
        result = And(result, convert(c))
    return result


def any(*conditions: ExprLike) -> Expr:  # noqa: A001
    if not conditions:
        return const(False)
    result = convert(conditions[0])
    for c in conditions[1:]:
        result = Or(result, convert(c))
    return result


def logical_not(x: ExprLike) -> Expr:
    return Not(convert(x))


def cast(x: ExprLike, dtype: str | DType) -> Expr:
    return convert(x).astype(dtype)


def fma(a: ExprLike, b: ExprLike, c: ExprLike) -> Expr:
    x, y = _pair(a, b)
    x, z = _pair(x, c)
    return Call(x.dtype, "fma", (x, y, z))


def call_extern(dtype: str | DType, name: str, *args: ExprLike) -> Expr:
    """Call an external C function by name (resolved when the code is linked/loaded)."""
    d: DType = dt.parse(dtype)
    return Call(d, name, tuple(convert(a) for a in args))
