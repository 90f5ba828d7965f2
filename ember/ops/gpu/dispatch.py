"""schedule_gpu: the GPU schedule of a fused group, by the anchor op's family."""

from __future__ import annotations

from typing import Sequence

from ember.ops.gpu.knobs import GpuInjectiveKnobs, GpuMatmulKnobs, GpuReductionKnobs
from ember.ops.knobs import Knobs, Task
from ember.ops.registry import OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor

GPU_KINDS = ("cuda", "rocm", "opencl", "metal")

# anchor ops whose reduction is a matrix product (shared-memory tiles)
MATMUL_OPS = ("MatMul", "Gemm", "Dense", "BatchMatMul", "MatMulInteger")
CONV_OPS = ("Conv", "ConvTranspose")


def is_gpu(target: Target) -> bool:
    return target.kind in GPU_KINDS


def gpu_knobs(opdef: OpDef) -> type[Knobs]:
    """The knob family of the GPU schedule for groups anchored at `opdef`."""
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

    if any(isinstance(op, ScanOp) for op in post_order([t.op for t in outs])):
        raise ScheduleError(f"op '{opdef.name}': recurrences (scan) have no GPU schedule yet; "
                            "compile this model for a CPU target")
    family = gpu_knobs(opdef)
    task = Task(tuple(outs), target, opdef.name)
    chosen = knobs if isinstance(knobs, family) else family.default(task)
    if family is GpuMatmulKnobs:
        return matmul.schedule_matmul(outs, target, chosen,  # type: ignore[arg-type]
                                      conv=opdef.name == "Conv")
    if family is GpuReductionKnobs:
        return generic.schedule_reduction(outs, target, chosen)  # type: ignore[arg-type]
    return generic.schedule_injective(outs, target, chosen)  # type: ignore[arg-type]
