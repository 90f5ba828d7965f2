"""Ops that move data by indices read at run time (ONNX semantics): ReverseSequence,
TensorScatter.

ReverseSequence reverses the first sequence_lens[b] steps of every batch entry b along the
time axis and copies the rest: out[t] = x[L - 1 - t] for t < L, else x[t]. A length
outside [0, T] is clamped into it, so no read leaves the buffer (ONNX leaves it undefined;
onnxruntime rejects it). One te compute; the generic injective schedule.

TensorScatter writes update (a key/value cache's new steps) into past_cache along `axis`
from position write_indices[b] of every batch entry b (axis 0; 0 when the input is
absent): out[s] = update[s - w] for w <= s < w + U, else past_cache[s]; mode circular
wraps the positions around the cache, out[s] = update[(s - w) mod S] where that is < U.
Positions past the cache's end are not written in linear mode (ONNX leaves it undefined).
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


_SCATTER_MODES = ("linear", "circular")


def _scatter_axis(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> int:
    past, update = shapes[0], shapes[1]
    if a["mode"] not in _SCATTER_MODES:
        raise ShapeError(f"TensorScatter: mode={a['mode']!r} is not one of {_SCATTER_MODES}")
    rank = len(past)
    if rank < 2:
        raise ShapeError(f"TensorScatter: past_cache must have rank >= 2, got {past}")
    axis = int(a["axis"])
    if not -rank <= axis < rank or axis % rank == 0:
        raise ShapeError(f"TensorScatter: axis {axis} must be a sequence axis of rank {rank} "
                         "(not the batch axis 0)")
    axis %= rank
    if len(update) != rank or any(u != p for k, (u, p) in enumerate(zip(update, past))
                                  if k != axis) or update[axis] > past[axis]:
        raise ShapeError(f"TensorScatter: update {update} must match past_cache {past} "
                         f"except along axis {axis}, where it may not be longer")
    if dtypes[1] != dtypes[0]:
        raise ShapeError(f"TensorScatter: update ({dtypes[1]}) must have past_cache's type "
                         f"({dtypes[0]})")
    if len(shapes) > 2:
        if shapes[2] != (past[0],) or not dtypes[2].is_int:
            raise ShapeError(f"TensorScatter: write_indices must be ({past[0]},) integers, "
                             f"got {shapes[2]} {dtypes[2]}")
    return axis


def _scatter_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    _scatter_axis(a, shapes, dtypes)
    return shapes[0], dtypes[0]


def _scatter_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    past, update = ts[0], ts[1]
    shapes = [shape_of(t) for t in ts]
    axis = _scatter_axis(a, shapes, [t.dtype for t in ts])
    size, steps = shapes[0][axis], shapes[1][axis]
    start = te.const(0) if len(ts) < 3 else ts[2][(i[0],)].astype("int32")
    offset = i[axis] - start
    if a["mode"] == "circular":
        offset = tir.FloorMod(offset, te.const(size))
    source = list(i)
    source[axis] = offset
    return te.if_then_else((offset >= 0) & (offset < steps), update[tuple(source)],
                           past[i])


OPS: dict[str, OpDef] = {
    "TensorScatter": injective("TensorScatter", ("past_cache", "update", "write_indices"),
                               _scatter_plan, _scatter_body, {"axis": -2, "mode": "linear"},
                               n_data=2),
    "ReverseSequence": injective("ReverseSequence", ("input", "sequence_lens"), _reverse_plan,
                                 _reverse_body, {"batch_axis": 1, "time_axis": 0}, n_data=2),
}
