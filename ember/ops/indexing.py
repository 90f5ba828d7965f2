"""Ops that move data by indices read at run time (ONNX semantics): ReverseSequence.

ReverseSequence reverses the first sequence_lens[b] steps of every batch entry b along the
time axis and copies the rest: out[t] = x[L - 1 - t] for t < L, else x[t]. A length
outside [0, T] is clamped into it, so no read leaves the buffer (ONNX leaves it undefined;
onnxruntime rejects it). One te compute; the generic injective schedule.
"""

from __future__ import annotations

from ember import dtype as dt
from ember import te, tir
from ember.dtype import DType
from ember.errors import ShapeError
from ember.ops.registry import Attrs, OpDef
from ember.ops.transform import Shape, injective, shape_of
from ember.te.tensor import Tensor
from ember.tir.expr import Expr


def _axes(a: Attrs, rank: int) -> tuple[int, int]:
    batch, time = a["batch_axis"], a["time_axis"]
    if rank < 2:
        raise ShapeError(f"ReverseSequence: input must have rank >= 2, got {rank}")
    if sorted((batch, time)) != [0, 1]:
        raise ShapeError(f"ReverseSequence: batch_axis and time_axis must be 0 and 1 (in "
                         f"either order), got batch_axis={batch!r}, time_axis={time!r}")
    return batch, time


def _reverse_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    x, lens = shapes[0], shapes[1]
    batch, _ = _axes(a, len(x))
    if dtypes[1] != dt.int64:
        raise ShapeError(f"ReverseSequence: sequence_lens must be int64, got {dtypes[1]}")
    if lens != (x[batch],):
        raise ShapeError(f"ReverseSequence: sequence_lens of shape {lens} must be "
                         f"({x[batch]},), one length per batch entry")
    return x, dtypes[0]


def _reverse_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x, lens = ts[0], ts[1]
    batch, time = _axes(a, len(x.shape))
    steps = shape_of(x)[time]
    length = te.max(te.min(lens[(i[batch],)], te.const(steps, "int64")),
                    te.const(0, "int64")).astype("int32")
    t = i[time]
    source = list(i)
    source[time] = tir.Select(t < length, length - 1 - t, t)
    return x[tuple(source)]


OPS: dict[str, OpDef] = {
    "ReverseSequence": injective("ReverseSequence", ("input", "sequence_lens"), _reverse_plan,
                                 _reverse_body, {"batch_axis": 1, "time_axis": 0}, n_data=2),
}
