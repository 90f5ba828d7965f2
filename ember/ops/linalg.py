"""Linear algebra ops (ONNX semantics): Det.

Det of every square matrix in the last two axes ([..., n, n] -> [...]) by Gaussian
elimination with partial pivoting, a te.scan over the n columns in float64: step k picks
the row at or below k with the largest |a[i, k]| (an argmax reduction), swaps it with row
k, subtracts multiples of row k from the rows below, and multiplies the running determinant
by the pivot (negated when the rows were swapped). A zero pivot (a singular matrix) makes
the determinant 0 and skips the elimination, so no division by zero happens.
"""

from __future__ import annotations

import math
from typing import Sequence

from ember import te, tir
from ember.errors import ShapeError
from ember.ops.generic import InjectiveKnobs, schedule_flat
from ember.ops.knobs import Knobs, resolve_knobs
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor
from ember.tir.expr import Expr
from ember.types import TensorType

_ARGMAX = te.comm_reducer(
    lambda x, y: (tir.Select(x[1] >= y[1], x[0], y[0]), te.max(x[1], y[1])),
    lambda idx_t, val_t: (te.const(-1, idx_t), te.min_value(val_t)), name="argmax")


def _infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x = types[0] if types else None
    if x is None:
        raise ShapeError("Det needs an input")
    if not x.dtype.is_float:
        raise ShapeError(f"Det needs a float input, got {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 1:
        raise ShapeError(f"Det: the input must be [..., n, n] with n >= 1, got {x.shape}")
    return [TensorType(x.shape[:-2], x.dtype)]


def _compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    assert x is not None
    shape = tuple(int(d.value) for d in x.shape)  # type: ignore[attr-defined]
    lead, n = shape[:-2], shape[-1]
    batch = math.prod(lead)
    real = "float64"
    one, zero = te.const(1.0, real), te.const(0.0, real)

    def source(b: Expr) -> list[Expr]:
        """The leading index of flat batch entry b."""
        index: list[Expr] = []
        for d in reversed(lead):
            index.append(b % d)
            b = b // d
        return list(reversed(index))

    # one state: rows 0..n-1 the matrix, row n the running determinant (in every column)
    def initial(_: Expr, b: Expr, i: Expr, j: Expr) -> Expr:
        return tir.Select(i < n, x[(*source(b), te.min(i, te.const(n - 1)), j)].astype(real),
                          one)

    m0 = te.compute((1, batch, n + 1, n), initial, name="det_m0", tag="Det.init")
    ms = te.placeholder((n + 1, batch, n + 1, n), real, name="det_m")
    r = te.reduce_axis((0, n), name="det_r")

    def magnitude(t: Expr, b: Expr) -> tuple[Expr, Expr]:
        k = t - 1
        value = te.if_then_else(r.var >= k, te.abs(ms[t - 1, b, r.var, k]), -one)
        return _ARGMAX((r.var, value), axis=r)  # type: ignore[return-value]

    pivot_row, _ = te.compute((n + 1, batch), magnitude, name="det_pivot", tag="Det.pivot")

    def swapped(t: Expr, b: Expr, i: Expr, j: Expr) -> Expr:
        """Row i of the matrix after swapping rows k and the pivot row."""
        k, p = t - 1, pivot_row[t, b]
        row = tir.Select(i == k, p, tir.Select(i == p, k, i))
        return ms[t - 1, b, row, j]

    def step(t: Expr, b: Expr, i: Expr, j: Expr) -> Expr:
        k, p = t - 1, pivot_row[t, b]
        pivot = ms[t - 1, b, p, k]
        row_k = ms[t - 1, b, p, j]
        factor = tir.Select(pivot != zero, swapped(t, b, i, k) / pivot, zero)
        own = swapped(t, b, i, j)
        running = ms[t - 1, b, te.const(n), j] * tir.Select(p != k, -pivot, pivot)
        return tir.Select(i == n, running, tir.Select(i > k, own - factor * row_k, own))

    m_upd = te.compute((n + 1, batch, n + 1, n), step, name="det_update", tag="Det.step")
    m_out = te.scan(m0, m_upd, ms, name="det")

    def result(*i: Expr) -> Expr:
        flat: Expr = te.const(0)
        for index, d in zip(i, lead):
            flat = flat * d + index
        return m_out[n, flat, n, 0].astype(x.dtype)

    out = te.compute(lead, result, name="det", tag="Det")
    return [out]  # type: ignore[list-item]


def schedule_det(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                 ) -> Schedule:
    """The elimination steps as they are (n small, each step reads the last); the result's
    own loops flat (InjectiveKnobs)."""
    k = resolve_knobs(InjectiveKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        schedule_flat(s[t], target, str(t.dtype), k)
    return s


OPS: dict[str, OpDef] = {
    "Det": OpDef("Det", ("X",), _infer, _compute, Pattern.OPAQUE, schedule_det,
                 knobs=InjectiveKnobs),
}
