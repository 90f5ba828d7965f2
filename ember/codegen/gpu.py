"""GPU code for a PrimFunc: split into kernels, then source (OpenCL, CUDA, Metal) or, for
rocm, AMDGPU assembly from LLVM.

    program, text = gpu_code(func, Target("opencl"))
"""

from __future__ import annotations

from ember.codegen.gpu_kernels import DeviceProgram, split_kernels
from ember.errors import CodegenError, TargetError
from ember.target import Target
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.tir.functor import post_order_visit

GPU_KINDS = ("cuda", "rocm", "opencl", "metal")


def max_threads(target: Target) -> int:
    """Threads per block the target allows (-max-threads-per-block, else 1024; Metal 1024,
    OpenCL 256: the smallest work-group limit common devices promise)."""
    default = 256 if target.kind == "opencl" else 1024
    return int(target.option("max-threads-per-block", str(default)))


# static shared memory per block when -max-shared-memory-per-block is not given: CUDA's
# static limit (also what the GPU knobs size tiles for, ember.ops.gpu.knobs), an AMD
# workgroup's LDS, Apple's threadgroup memory
SHARED_LIMITS = {"cuda": 48 * 1024, "rocm": 64 * 1024, "metal": 32 * 1024,
                 "opencl": 48 * 1024}


def max_shared_bytes(target: Target) -> int:
    """Shared memory one block may declare (-max-shared-memory-per-block, else the kind's)."""
    return int(target.option("max-shared-memory-per-block",
                             str(SHARED_LIMITS.get(target.kind, 48 * 1024))))


def check_shared_memory(program: DeviceProgram, target: Target) -> None:
    """CodegenError naming the kernel and its buffers when one declares more shared memory
    than the target allows (the device would refuse the launch, LLVM would abort)."""
    limit = max_shared_bytes(target)
    for kernel in program.kernels:
        sizes: dict[int, tuple[str, int]] = {}

        def visit(node: object) -> None:
            if isinstance(node, S.Allocate) and node.buffer.scope == "shared":
                count = 1
                for d in node.buffer.shape:
                    count *= E.as_const_int(d) or 0
                sizes[id(node.buffer.data)] = (node.buffer.name,
                                               count * node.buffer.dtype.storage_bytes)

        post_order_visit(kernel.body, visit)
        total = sum(n for _, n in sizes.values())
        if total > limit:
            listed = ", ".join(f"{name} {n} B" for name, n in sizes.values())
            raise CodegenError(f"kernel '{kernel.name}' declares {total} bytes of shared memory "
                               f"({listed}), more than the target's {limit} per block; use "
                               "smaller tiles (knobs) or set -max-shared-memory-per-block")


def gpu_code(func: PrimFunc, target: Target) -> tuple[DeviceProgram, str]:
    """The kernels of `func` (after the GPU pipeline) and their code for `target`: OpenCL C,
    CUDA C or Metal source, or AMDGPU assembly (rocm)."""
    program = split_kernels(func, max_threads(target))
    check_shared_memory(program, target)
    if target.kind == "rocm":
        from ember.codegen.gpu_llvm_build import emit_amdgpu_assembly

        return program, emit_amdgpu_assembly(program, target)
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
