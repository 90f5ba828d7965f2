"""Generic CPU schedules by pattern: injective (elementwise, broadcast, layout) and reduction.

Every default schedule is parallel over the outer loops and vectorized over the innermost
contiguous loop; fused elementwise producers are inlined into their consumer.
"""

from __future__ import annotations

from typing import Sequence

from ember import te
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import IntImm, IterKind, IterVar

# below this many output elements a kernel runs on one thread: waking workers costs more
PARALLEL_MIN_ELEMENTS = 16384


def _extent(iv: IterVar) -> int:
    assert isinstance(iv.dom.extent, IntImm)
    return iv.dom.extent.value


def vector_lanes(target: Target, dtype: str = "float32") -> int:
    try:
        return max(1, target.vector_lanes(dtype))
    except Exception:  # a target without a vector unit
        return 1


def inline_injective(s: Schedule) -> None:
    """Inline every non-output compute stage without a reduction."""
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and not op.reduce_axis and not stage.is_output:
            stage.compute_inline()


def schedule_flat(stage: Stage, target: Target, dtype: str = "float32") -> None:
    """Parallel outer loops, vectorized innermost loop, for an injective stage's own axes."""
    axes = list(stage.op.axis)  # type: ignore[attr-defined]
    if not axes:
        return
    lanes = vector_lanes(target, dtype)
    total = 1
    for iv in axes:
        total *= _extent(iv)
    last = axes[-1]
    if _extent(last) >= lanes and lanes > 1:
        outer_axes = axes[:-1]
        inner_o, inner_i = stage.split(last, lanes)
        stage.vectorize(inner_i)
        outer = stage.fuse(*outer_axes, inner_o) if outer_axes else inner_o
    else:
        fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
        if lanes > 1 and total >= lanes:
            outer, inner = stage.split(fused, lanes)
            stage.vectorize(inner)
        else:
            outer = fused
    if total >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(outer)


def schedule_injective(outs: Sequence[Tensor], target: Target) -> Schedule:
    """Generic schedule for a group of elementwise / broadcast / injective ops."""
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    for t in outs:
        schedule_flat(s[t], target, str(t.dtype))
    return s


def schedule_reduction_stage(stage: Stage, target: Target, dtype: str = "float32") -> None:
    """Parallel over the output, serial reduction; vectorize the innermost output axis when
    the reduction runs over outer axes (then each lane accumulates its own column)."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    axes = list(op.axis)
    reduce_axes = list(op.reduce_axis)
    lanes = vector_lanes(target, dtype)
    total = 1
    for iv in axes:
        total *= _extent(iv)
    if not axes:
        return
    inner = axes[-1]
    vectorizable = lanes > 1 and _extent(inner) >= lanes and _reduces_outer(op)
    if vectorizable:
        io, ii = stage.split(inner, lanes)
        outer = stage.fuse(*axes[:-1], io) if len(axes) > 1 else io
        stage.reorder(outer, *reduce_axes, ii)
        stage.vectorize(ii)
    else:
        outer = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    work = total
    for iv in reduce_axes:
        work *= _extent(iv)
    if work >= PARALLEL_MIN_ELEMENTS and total > 1:
        stage.parallel(outer)


def _reduces_outer(op: ComputeOp) -> bool:
    """True when the innermost output axis is not reduced over (it indexes the inputs)."""
    from ember.te.analysis import tensors_read  # noqa: F401 (kept for symmetry)

    return len(op.axis) > 0 and all(iv.kind == IterKind.REDUCE for iv in op.reduce_axis)


def schedule_reduction(outs: Sequence[Tensor], target: Target) -> Schedule:
    """Generic schedule for a reduction with fused elementwise prologue and epilogue."""
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and op.reduce_axis and stage.attach.value != "inline":
            if stage.is_output:
                schedule_reduction_stage(stage, target, str(op.outputs[0].dtype))
            else:
                # a reduction feeding an elementwise epilogue: compute it per output row
                schedule_reduction_stage(stage, target, str(op.outputs[0].dtype))
    for t in outs:
        stage = s[t]
        if not stage.op.reduce_axis:  # type: ignore[attr-defined]
            schedule_flat(stage, target, str(t.dtype))
    return s
