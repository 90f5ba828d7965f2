"""schedule_gpu: the GPU schedule of a fused group, by the anchor op's family."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember.ops.gpu.conv import GpuConvKnobs
from ember.ops.gpu.pool import POOL_OPS, GpuPoolKnobs
from ember.ops.gpu.rnn import GpuRNNKnobs, schedule_rnn_gpu
from ember.ops.gpu.knobs import GpuInjectiveKnobs, GpuMatmulKnobs, GpuReductionKnobs
from ember.ops.knobs import Knobs, Task
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor

GPU_KINDS = ("cuda", "rocm", "opencl", "metal")

# anchor ops whose reduction is a matrix product (shared-memory tiles)
MATMUL_OPS = ("MatMul", "Gemm", "Dense", "BatchMatMul", "MatMulInteger")
CONV_OPS = ("Conv", "ConvTranspose")
RNN_OPS = ("LSTM", "GRU", "RNN")


def is_gpu(target: Target) -> bool:
    return target.kind in GPU_KINDS


def gpu_compute(opdef: OpDef) -> Callable[[Attrs, Sequence[Tensor | None]], list[Tensor]]:
    """The compute of `opdef` on GPU targets: a form the GPU schedules tile where the CPU one
    is laid out for vector registers (Conv), else the op's own."""
    if opdef.name == "Conv":
        from ember.ops.gpu.conv_compute import compute_conv_gpu

        return lambda attrs, inputs: compute_conv_gpu(attrs, inputs, opdef.compute)
    if opdef.name in ("MatMul", "Gemm"):
        # B read in place: the CPU's packed panels are laid out for vector registers, and
        # a shared tile of them would span every panel (bounds of j // panel are loose)
        return lambda attrs, inputs: opdef.compute(attrs, inputs, panel=0)  # type: ignore
    return opdef.compute


def gpu_knobs(opdef: OpDef) -> type[Knobs]:
    """The knob family of the GPU schedule for groups anchored at `opdef`."""
    if opdef.name == "Conv":
        return GpuConvKnobs
    if opdef.name in RNN_OPS:
        return GpuRNNKnobs
    if opdef.name in POOL_OPS:
        return GpuPoolKnobs
    if opdef.name in MATMUL_OPS or opdef.name in CONV_OPS:
        return GpuMatmulKnobs
    if opdef.pattern > Pattern.INJECTIVE:
        return GpuReductionKnobs
    return GpuInjectiveKnobs


def schedule_gpu(opdef: OpDef, outs: Sequence[Tensor], target: Target,
                 knobs: Knobs | None = None) -> Schedule:
    """The default (or `knobs`') GPU schedule of a group anchored at `opdef`."""
    from ember.ops.gpu import generic, matmul

    from ember.errors import ScheduleError
    from ember.te.graph import post_order
    from ember.te.tensor import ScanOp

    family = gpu_knobs(opdef)
    task = Task(tuple(outs), target, opdef.name)
    chosen = knobs if isinstance(knobs, family) else family.default(task)
    if family is GpuRNNKnobs:
        return schedule_rnn_gpu(outs, target, chosen)  # type: ignore[arg-type]
    if any(isinstance(op, ScanOp) for op in post_order([t.op for t in outs])):
        raise ScheduleError(f"op '{opdef.name}': recurrences (scan) have no GPU schedule yet; "
                            "compile this model for a CPU target")
    if family is GpuConvKnobs:
        from ember.ops.gpu.conv import schedule_conv_gpu

        scheduled = schedule_conv_gpu(outs, target, chosen)  # type: ignore[arg-type]
        if scheduled is not None:
            return scheduled
        return matmul.schedule_matmul(outs, target, GpuMatmulKnobs.default(task), conv=True)
    if family is GpuPoolKnobs:
        from ember.ops.gpu.pool import schedule_pool_gpu

        scheduled = schedule_pool_gpu(outs, target, chosen)  # type: ignore[arg-type]
        if scheduled is not None:
            return scheduled
        return generic.schedule_reduction(outs, target, GpuReductionKnobs.default(task))
    if family is GpuMatmulKnobs:
        return matmul.schedule_matmul(outs, target, chosen,  # type: ignore[arg-type]
                                      conv=opdef.name == "Conv")
    if family is GpuReductionKnobs:
        return generic.schedule_reduction(outs, target, chosen)  # type: ignore[arg-type]
    return generic.schedule_injective(outs, target, chosen)  # type: ignore[arg-type]
