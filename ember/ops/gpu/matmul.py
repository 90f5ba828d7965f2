"""Shared-memory tiled GPU schedule for matrix products: dense, (batched) matmul and
convolution as an implicit GEMM (output channels x output pixels, reducing over input
channels x kernel window).

A block of tile x tile threads computes a tile x tile piece of the output, one element per
thread in a register (scope "local"). The reduction runs `tile` steps at a time: the block
first copies the inputs' slices for the step into shared memory together (each thread a
few elements), waits at a barrier, and then every thread reads its row and column there.
Products too thin for such tiles (a batch-1 dense, a depthwise convolution's 3x3 window)
get one thread per output instead.
"""

from __future__ import annotations

from typing import Sequence

from ember import te
from ember.ops.generic import inline_injective
from ember.ops.gpu.generic import bind_flat, extent, product, root_stages, schedule_reduction
from ember.ops.gpu.knobs import GpuMatmulKnobs, GpuReductionKnobs
from ember.ops.knobs import Task
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor, TensorLoad
from ember.tir.expr import IterVar
from ember.tir.functor import Visitor


class _Inputs(Visitor):
    def __init__(self) -> None:
        self.tensors: list[Tensor] = []

    def visit_TensorLoad(self, node: TensorLoad) -> None:
        if not any(t.op is node.tensor.op for t in self.tensors):
            self.tensors.append(node.tensor)
        self.generic_visit(node)


def _inputs(op: ComputeOp) -> list[Tensor]:
    found = _Inputs()
    for b in op.body:
        found.visit(b)
    return found.tensors


def _work(stage: Stage) -> int:
    op = stage.op
    assert isinstance(op, ComputeOp)
    return product(op.axis) * product(op.reduce_axis)


def _gemm_axes(host: Stage, conv: bool) -> tuple[list[IterVar], IterVar, IterVar]:
    """(batch axes, M axis, N axis) of the host stage's loops, fused as needed."""
    axes = list(host.op.axis)  # type: ignore[attr-defined]
    if conv and len(axes) == 4:
        n, co, h, w = axes
        host.reorder(co, n, h, w)
        return [], co, host.fuse(n, h, w)
    batch = axes[:-2]
    return batch, axes[-2], axes[-1]


def stage_shared(s: Schedule, work: Tensor, at: IterVar, tile: int) -> None:
    """Copy each input of `work` into shared memory at loop `at`, all threads together."""
    op = s[work].op
    assert isinstance(op, ComputeOp)
    for tensor in _inputs(op):
        cached = s.cache_read(tensor, "shared", [work])
        stage = s[cached]
        stage.compute_at(s[work], at)
        axes = list(stage.op.axis)  # type: ignore[attr-defined]
        fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
        rest, tx = stage.split(fused, tile)
        _, ty = stage.split(rest, tile)
        stage.bind(ty, "threadIdx.y")
        stage.bind(tx, "threadIdx.x")


def schedule_tiled(s: Schedule, out: Tensor, product_stage: Stage, tile: int,
                   conv: bool) -> bool:
    """Tile the product (see the module docstring); False when its shape does not fit."""
    op = product_stage.op
    assert isinstance(op, ComputeOp)
    if product_stage is s[out]:
        work = s.cache_write(out, "local")
        host = s[out]
    else:
        same = [int(d.value) for d in out.shape] == [extent(iv) for iv in op.axis]  # type: ignore
        if not same or not s[out].op.axis:  # type: ignore[attr-defined]
            return False
        work = op.output(0)
        product_stage.set_scope("local")
        host = s[out]
    batch, m, n = _gemm_axes(host, conv)
    bm, tm = host.split(m, tile)
    bn, tn = host.split(n, tile)
    if batch:
        b = host.fuse(*batch) if len(batch) > 1 else batch[0]
        host.reorder(b, bm, bn, tm, tn)
        host.bind(b, "blockIdx.z")
    else:
        host.reorder(bm, bn, tm, tn)
    host.bind(bm, "blockIdx.y")
    host.bind(bn, "blockIdx.x")
    host.bind(tm, "threadIdx.y")
    host.bind(tn, "threadIdx.x")
    work_stage = s[work]
    work_stage.compute_at(host, tn)
    work_op = work_stage.op
    assert isinstance(work_op, ComputeOp)
    reduce_axes = list(work_op.reduce_axis)
    k = work_stage.fuse(*reduce_axes) if len(reduce_axes) > 1 else reduce_axes[0]
    ko, _ = work_stage.split(k, tile)
    stage_shared(s, work, ko, tile)
    return True


def schedule_matmul(outs: Sequence[Tensor], target: Target,
                    knobs: GpuMatmulKnobs | None = None, conv: bool = False) -> Schedule:
    """Dense / matmul / convolution groups: shared-memory tiles when the product is big
    enough in M, N and K for `knobs.tile`, else one thread per output."""
    knobs = knobs or GpuMatmulKnobs.default(Task(tuple(outs), target))
    tile = knobs.tile
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    products = [st for st in root_stages(s) if st.op.reduce_axis]  # type: ignore[attr-defined]
    if not products or len(outs) != 1:
        return schedule_reduction(outs, target, GpuReductionKnobs(cooperative=False))
    main = max(products, key=_work)
    op = main.op
    assert isinstance(op, ComputeOp)
    if conv and len(op.axis) == 4:
        n, co, h, w = (extent(iv) for iv in op.axis)
        m_size, n_size = co, n * h * w
    elif len(op.axis) >= 2:
        m_size, n_size = extent(op.axis[-2]), extent(op.axis[-1])
    else:
        m_size = n_size = 0
    big = min(m_size, n_size) >= tile and product(op.reduce_axis) >= tile
    if not big or not schedule_tiled(s, outs[0], main, tile, conv):
        return schedule_reduction(outs, target, GpuReductionKnobs(cooperative=False))
    threads = min(256, tile * tile)
    for stage in root_stages(s):
        if stage is not s[outs[0]] and stage.op is not main.op and not stage.relations:
            bind_flat(stage, threads)
    return s
