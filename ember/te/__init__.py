"""Tensor expressions: what to compute (placeholder, compute, reductions) and how (schedules)."""

from ember.te.intrinsics import (
    abs, acos, acosh, all, any, asin, asinh, atan, atanh, call_extern, cast, ceil, cos, erf, exp,
    exp2, floor, fma, if_then_else, log, log2, logical_not, max, min, pow, reinterpret, round,
    rsqrt, sigmoid, sin, sqrt, tanh, trunc,

)
from ember.te.lower import lower, lower_schedule
from ember.te.reduction import comm_reducer, max_value, min_value
from ember.te.reduction import max as _max_reducer
from ember.te.reduction import min as _min_reducer
from ember.te.reduction import sum
from ember.te.schedule import Schedule, Stage, create_schedule
from ember.te.tensor import (
    ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor, compute, extern, placeholder,
    reduce_axis, scan, thread_axis,
)
from ember.tir.expr import IterVar, Var, const


def _reducer_or_binary(reducer, binary):  # type: ignore[no-untyped-def]
    """te.max(a, b) is the element-wise maximum; te.max(x, axis=k) reduces over k."""

    def dispatch(*args, axis=None, where=None):  # type: ignore[no-untyped-def]
        if axis is not None:
            return reducer(*args, axis=axis, where=where)
        if len(args) == 2 and not _is_axis(args[1]):
            return binary(*args)
        return reducer(*args, where=where)

    dispatch.__doc__ = binary.__doc__
    return dispatch


def _is_axis(value: object) -> bool:
    return isinstance(value, IterVar) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, IterVar) for v in value))


max = _reducer_or_binary(_max_reducer, max)  # noqa: A001
min = _reducer_or_binary(_min_reducer, min)  # noqa: A001

__all__ = [
    "abs", "acos", "acosh", "all", "any", "asin", "asinh", "atan", "atanh", "call_extern",
    "cast", "ceil", "cos", "erf", "exp", "exp2", "floor",
    "fma", "if_then_else", "log", "log2", "logical_not", "max", "min", "pow", "reinterpret",
    "round", "rsqrt",

    "sigmoid", "sin", "sqrt", "tanh", "trunc", "lower", "lower_schedule", "comm_reducer",
    "max_value", "min_value", "sum", "Schedule", "Stage", "create_schedule", "ComputeOp",
    "ExternOp", "Operation", "PlaceholderOp", "ScanOp", "Tensor", "compute", "extern",
    "placeholder", "reduce_axis", "scan", "thread_axis", "IterVar", "Var", "const",
]
