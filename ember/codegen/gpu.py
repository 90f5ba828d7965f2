"""GPU code for a PrimFunc: split into kernels, then source (OpenCL, CUDA, Metal) or PTX.

    program, text = gpu_code(func, Target("opencl"))
"""

from __future__ import annotations

from ember.codegen.gpu_kernels import DeviceProgram, split_kernels
from ember.errors import TargetError
from ember.target import Target
from ember.tir.function import PrimFunc

GPU_KINDS = ("cuda", "rocm", "opencl", "metal")


def max_threads(target: Target) -> int:
    """Threads per block the target allows (-max-threads-per-block, else 1024; Metal 1024,
    OpenCL 256: the smallest work-group limit common devices promise)."""
    default = 256 if target.kind == "opencl" else 1024
    return int(target.option("max-threads-per-block", str(default)))


def gpu_code(func: PrimFunc, target: Target) -> tuple[DeviceProgram, str]:
    """The kernels of `func` (after the GPU pipeline) and their code for `target`: OpenCL C,
    CUDA C or Metal source."""
    program = split_kernels(func, max_threads(target))
    if target.kind == "opencl":
        from ember.codegen.opencl import codegen_opencl

        return program, codegen_opencl(program)
    if target.kind == "cuda":
        from ember.codegen.cuda import codegen_cuda

        return program, codegen_cuda(program)
    if target.kind == "metal":
        from ember.codegen.metal import codegen_metal

        return program, codegen_metal(program)
    raise TargetError(f"target kind '{target.kind}' is not a GPU; expected one of "
                      f"{', '.join(GPU_KINDS)}")


def gpu_dialect(target: Target):  # -> ember.codegen.gpu_source.Dialect
    """The source dialect of a GPU target kind (CUDA C for cuda, OpenCL C, Metal)."""
    if target.kind == "opencl":
        from ember.codegen.opencl import OPENCL

        return OPENCL
    if target.kind == "cuda":
        from ember.codegen.cuda import CUDA

        return CUDA
    if target.kind == "metal":
        from ember.codegen.metal import METAL

        return METAL
    raise TargetError(f"target kind '{target.kind}' has no GPU source dialect; expected one of "
                      "cuda, opencl, metal")
