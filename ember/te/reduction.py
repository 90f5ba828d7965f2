"""Reducers: te.sum, te.max, te.min, te.comm_reducer (user-defined, e.g. argmax)."""

from __future__ import annotations

from typing import Callable, Sequence

from ember.dtype import DType
from ember.errors import EmberError
from ember.tir.expr import (
    CommReducer, Expr, ExprLike, IterKind, IterVar, Max, Min, Reduce, Var, const, convert,
)

Reducer = Callable[..., Expr | tuple[Expr, ...]]


def comm_reducer(fcombine: Callable[..., object], fidentity: Callable[..., object],
                 name: str = "reduce") -> Reducer:
    """Define a commutative reduction from a combine function and an identity.

        argmax = te.comm_reducer(
            lambda x, y: (te.if_then_else(x[1] >= y[1], x[0], y[0]), te.max(x[1], y[1])),
            lambda idx_t, val_t: (te.const(-1, idx_t), te.min_value(val_t)))
        idx, val = te.compute((n,), lambda i: argmax((k, A[i, k]), axis=k))

    For one value, fcombine(x, y) takes two scalars; for several, two tuples.
    """

    def reduce(source: ExprLike | Sequence[ExprLike], axis: IterVar | Sequence[IterVar],
               where: ExprLike | None = None) -> Expr | tuple[Expr, ...]:
        multi = isinstance(source, (tuple, list))
        sources = tuple(convert(s) for s in (source if multi else (source,)))  # type: ignore
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        for ax in axes:
            if not isinstance(ax, IterVar) or ax.kind != IterKind.REDUCE:
                raise EmberError(f"{name}: axis must be created by te.reduce_axis, got {ax!r}")
        dtypes = [s.dtype for s in sources]
        lhs = tuple(Var(f"x{i}", d) for i, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}", d) for i, d in enumerate(dtypes))
        combined = fcombine(lhs, rhs) if multi else fcombine(lhs[0], rhs[0])
        results = tuple(convert(r) for r in (combined if multi else (combined,)))  # type: ignore
        ident = fidentity(*dtypes)
        identity = tuple(convert(v) for v in (ident if multi else (ident,)))  # type: ignore
        if len(results) != len(sources) or len(identity) != len(sources):
            raise EmberError(f"{name}: combine and identity must give {len(sources)} values")
        for r, i, d in zip(results, identity, dtypes):
            if r.dtype != d or i.dtype != d:
                raise EmberError(f"{name}: combine/identity types {r.dtype}/{i.dtype} do not "
                                 f"match the source type {d}")
        combiner = CommReducer(lhs, rhs, results, identity)
        condition = const(True) if where is None else convert(where)
        outs = tuple(Reduce(combiner, sources, axes, condition, i) for i in range(len(sources)))
        return outs if multi else outs[0]

    reduce.__name__ = name
    return reduce


def min_value(dtype: str | DType) -> Expr:
    from ember import dtype as dt

    d = dt.parse(dtype)
    return const(d.min_value(), d)


def max_value(dtype: str | DType) -> Expr:
    from ember import dtype as dt

    d = dt.parse(dtype)
    return const(d.max_value(), d)


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")  # noqa: A001
max = comm_reducer(lambda x, y: Max(x, y), lambda t: min_value(t), name="max")  # noqa: A001
min = comm_reducer(lambda x, y: Min(x, y), lambda t: max_value(t), name="min")  # noqa: A001
