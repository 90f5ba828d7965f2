"""TopK (ONNX semantics) by ranking: each element's rank is how many elements come before it
in the requested order, and output j gathers the element whose rank is j.

    rank[.., i, ..]    = sum_k before(x[.., k, ..], x[.., i, ..], k, i)
    values[.., j, ..]  = sum_i (rank[.., i, ..] == j) ? x[.., i, ..] : 0
Ties keep the smaller index first, as ONNX requires. The cost is O(n^2) along the axis,
fine for the short axes TopK sees in models (class scores, beam candidates).
"""

from __future__ import annotations

from typing import Any, Sequence

from ember import dtype as dt
from ember import te
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.elementwise import shape_of
from ember.ops.generic import ReductionKnobs, schedule_reduction
from ember.ops.knobs import Knobs
from ember.ops.reduction import normalize_axis
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Expr, Select, const


def _k(attrs: Attrs) -> int:
    value: Any = attrs["K"]
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ShapeError(f"TopK: K must hold one value, got {tuple(value)}")
        value = value[0]
    k = int(value)
    if k < 0:
        raise ShapeError(f"TopK: K must be non-negative, got {k}")
    return k


def _infer(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    x = inputs[0]
    assert x is not None
    if not (x.dtype.is_float or x.dtype.is_int):
        raise UnsupportedOpError(f"TopK: input type {x.dtype} is not supported")
    axis = normalize_axis(int(attrs["axis"]), x.ndim, "TopK")
    k = _k(attrs)
    if k > x.shape[axis]:
        raise ShapeError(f"TopK: K={k} exceeds the axis length {x.shape[axis]}")
    shape = list(x.shape)
    shape[axis] = k
    return [TensorType(tuple(shape), x.dtype), TensorType(tuple(shape), dt.int64)]


def _compute(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x = inputs[0]
    assert x is not None
    shape = shape_of(x)
    axis = normalize_axis(int(attrs["axis"]), len(shape), "TopK")
    k, n = _k(attrs), shape[axis]
    largest = bool(attrs["largest"])

    def at(index: Sequence[Expr], position: Expr) -> Expr:
        full = list(index)
        full[axis] = position
        return x[tuple(full)]

    def before(other: Expr, mine: Expr, other_i: Expr, my_i: Expr) -> Expr:
        better = other > mine if largest else other < mine
        return better | ((other == mine) & (other_i < my_i))

    r = te.reduce_axis((0, n), name="r")
    rank = te.compute(shape, lambda *i: te.sum(
        Select(before(at(i, r), at(i, i[axis]), r, i[axis]), const(1), const(0)), axis=r),
        name="TopK.rank", tag="TopK")
    out_shape = list(shape)
    out_shape[axis] = k

    def pick(value_of: Any, dtype: str) -> Tensor:
        s = te.reduce_axis((0, n), name="s")
        return te.compute(out_shape, lambda *j: te.sum(
            Select(at_rank(j, s) == j[axis], value_of(j, s), const(0, dtype)), axis=s),
            name=f"TopK.{dtype}", tag="TopK.pick")  # type: ignore[return-value]

    def at_rank(j: Sequence[Expr], s: Expr) -> Expr:
        full = list(j)
        full[axis] = s
        return rank[tuple(full)]

    values = pick(lambda j, s: at(j, s), str(x.dtype))
    indices = pick(lambda j, s: s.astype("int64"), "int64")
    return [values, indices]


def _schedule(outs: Sequence[Tensor], target: Any, knobs: Knobs | None = None) -> Any:
    return schedule_reduction(outs, target, knobs)


OPS: dict[str, OpDef] = {
    "TopK": OpDef("TopK", ("X", "K"), _infer, _compute, Pattern.OPAQUE, _schedule,
                  attrs={"K": REQUIRED, "axis": -1, "largest": 1, "sorted": 1},
                  attr_inputs=("K",), num_outputs=2, knobs=ReductionKnobs),
}
