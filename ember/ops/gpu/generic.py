"""Generic GPU schedules: one thread per output element, and cooperative row reductions.

Every stage left after inlining the elementwise ones becomes a kernel. Its spatial axes are
fused and split into blocks of `threads` threads (blockIdx.x, threadIdx.x), and each thread
runs its reductions serially: any op compiles this way. A reduction over a long axis
(softmax, layer norm, global pooling) instead spreads each output over one block: the block's
threads reduce strided parts of the row into shared memory (rfactor), then one thread adds
the partial results.
"""

from __future__ import annotations

from typing import Sequence

from ember import te
from ember.ops.generic import inline_injective
from ember.ops.gpu.knobs import GpuInjectiveKnobs, GpuReductionKnobs
from ember.ops.knobs import Task
from ember.target import Target
from ember.te.schedule import Attach, Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import IntImm, IterVar


def extent(iv: IterVar) -> int:
    assert isinstance(iv.dom.extent, IntImm)
    return iv.dom.extent.value


def product(ivs: Sequence[IterVar]) -> int:
    total = 1
    for iv in ivs:
        total *= extent(iv)
    return total


def bind_flat(stage: Stage, threads: int, axes: Sequence[IterVar] | None = None) -> None:
    """Fuse `axes` (default: the stage's spatial axes) and bind them to blocks of threads."""
    axes = list(stage.op.axis if axes is None else axes)  # type: ignore[attr-defined]
    if not axes:
        return
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    total = product(axes)
    if total <= threads:
        stage.bind(fused, "threadIdx.x")
        return
    block, thread = stage.split(fused, threads)
    stage.bind(block, "blockIdx.x")
    stage.bind(thread, "threadIdx.x")


def root_stages(s: Schedule) -> list[Stage]:
    return [st for st in s.stages if st.attach == Attach.ROOT and isinstance(st.op, ComputeOp)]


def schedule_injective(outs: Sequence[Tensor], target: Target,
                       knobs: GpuInjectiveKnobs | None = None) -> Schedule:
    """Inline elementwise stages; every other stage gets one thread per output element."""
    knobs = knobs or GpuInjectiveKnobs.default(Task(tuple(outs), target))
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    for stage in root_stages(s):
        bind_flat(stage, knobs.threads)
    return s


def cooperative(stage: Stage, threads: int) -> bool:
    """Whether a reduction stage is long enough per output for a block to share it."""
    op = stage.op
    return (isinstance(op, ComputeOp) and bool(op.reduce_axis) and not stage.relations
            and product(op.reduce_axis) >= 2 * threads)


def reduce_by_block(s: Schedule, stage: Stage, threads: int) -> None:
    """One block per output element: rfactor `threads` strided partial results into shared
    memory, then thread 0 combines them.

        R[i] = sum(A[i, k])  ->  R.rf[t] = sum(A[i, ko * T + t], ko)   (shared, thread t)
                                 barrier; if t == 0: R[i] = sum(R.rf[t], t)
    """
    op = stage.op
    assert isinstance(op, ComputeOp)
    reduce_axes = list(op.reduce_axis)
    k = stage.fuse(*reduce_axes) if len(reduce_axes) > 1 else reduce_axes[0]
    _, ki = stage.split(k, threads)
    partial = s.rfactor(op.output(0), ki)
    rf = s[partial]
    rf.set_scope("shared")
    axes = list(op.axis)
    fused = stage.fuse(*axes) if len(axes) > 1 else (axes[0] if axes else None)
    if fused is None:
        fused = None
        block = None
    else:
        block, lone = stage.split(fused, 1)
        stage.bind(block, "blockIdx.x")
        stage.bind(lone, "threadIdx.x")  # extent 1: only thread 0 writes the result
    rf_op = rf.op
    assert isinstance(rf_op, ComputeOp)
    if block is not None:
        rf.compute_at(stage, block)
    rf.bind(rf_op.axis[0], "threadIdx.x")


def schedule_reduction(outs: Sequence[Tensor], target: Target,
                       knobs: GpuReductionKnobs | None = None) -> Schedule:
    """Reductions (sums, means, softmax, layer norm, pooling) and their elementwise epilogues."""
    knobs = knobs or GpuReductionKnobs.default(Task(tuple(outs), target))
    inject = GpuInjectiveKnobs.default(Task(tuple(outs), target))
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    for stage in root_stages(s):
        op = stage.op
        if knobs.cooperative and op.axis and cooperative(stage, knobs.threads):  # type: ignore
            reduce_by_block(s, stage, knobs.threads)
        else:
            bind_flat(stage, inject.threads)
    return s
