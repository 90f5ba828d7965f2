"""build(schedule, args, target) -> callable Module: lower, run the TIR pipeline, generate code."""

from __future__ import annotations

from typing import Any, Sequence

from ember.errors import TargetError
from ember.runtime.module import Module
from ember.te.lower import lower_schedule
from ember.te.schedule import Schedule
from ember.tir.function import PrimFunc


# C library functions generated code calls; a kernel of the same name would shadow them
_RESERVED = {"malloc", "free", "aligned_alloc", "memcpy", "memset", "abort", "abs"}


def check_symbol_name(name: str) -> None:
    """Reject kernel names that would collide with the C library functions kernels call."""
    from ember.codegen.intrinsics import INTRINSICS

    libm = {n for i in INTRINSICS.values() for n in (i.c32, i.c64) if n}
    if name in libm or name in _RESERVED or name.startswith(("GOMP_", "omp_", "llvm.")):
        raise TargetError(f"kernel name '{name}' collides with a C library or runtime "
                          "function the generated code calls; choose another name")


def optimize(func: PrimFunc, opt_level: int = 3) -> PrimFunc:
    """The TIR pass pipeline for code generation."""
    from ember.tir.pipeline import run_passes

    return run_passes(func, opt_level=opt_level)


GPU_KINDS = ("cuda", "rocm", "opencl", "metal")


def lower_gpu(schedule: Schedule | PrimFunc, args: Sequence[Any] | None = None,
              name: str = "main", opt_level: int = 3) -> PrimFunc:
    """The GPU loop program: lowered with the thread-binding check, barriers inserted,
    then the TIR pipeline."""
    from ember.tir.pipeline import gpu_passes, run_passes

    if isinstance(schedule, PrimFunc):
        func = schedule
    else:
        if args is None:
            raise TargetError("build: pass the argument tensors, e.g. build(s, [A, B, C])")
        func = lower_schedule(schedule, args, name, gpu=True)
    return run_passes(func, gpu_passes(opt_level))


def gpu_source(schedule: Schedule | PrimFunc, args: Sequence[Any] | None = None,
               target: Any = "opencl", name: str = "main", opt_level: int = 3) -> str:
    """The device code of a GPU schedule (OpenCL C, CUDA C, Metal, AMDGPU/NVPTX text)
    without running it: `print(ember.lowering.build.gpu_source(s, [A, B], "cuda"))`."""
    from ember.codegen.gpu import gpu_code
    from ember.target import Target

    return gpu_code(lower_gpu(schedule, args, name, opt_level), Target(target))[1]


def build_gpu(func: PrimFunc, target: Any, device: Any = None) -> Any:
    """A DeviceModule running `func` (after lower_gpu) on `device` (default: the target's
    first device)."""
    from ember.codegen.gpu import gpu_code
    from ember.runtime.device_module import DeviceModule, Launch
    from ember.runtime.devices import default_device
    from ember.codegen.params import params_of
    from ember.tir.function import Buffer
    from ember.tir.expr import Var

    program, code = gpu_code(func, target)
    device = device if device is not None else default_device(target.kind)
    buffers = [p for p in func.params if isinstance(p, Buffer)] + list(program.temporaries)
    scalars = [p for p in func.params if isinstance(p, Var)]
    position = {b.data: i for i, b in enumerate(buffers)}
    launches = [Launch(k.name, tuple(position[b.data] for b in k.buffers),
                       tuple(scalars.index(v) for v in k.scalars), k.grid, k.block)
                for k in program.kernels]
    sizes = [_nbytes(b) for b in program.temporaries]
    if target.kind == "cuda":
        from ember.codegen.nvptx import cuda_to_ptx

        code = cuda_to_ptx(code, target)
    return DeviceModule(func.name, device, code, params_of(func), sizes, launches,
                        {target.kind: code, "tir": str(func)})


def _nbytes(buf: Any) -> int:
    from ember.tir.expr import as_const_int

    count = 1
    for extent in buf.shape:
        value = as_const_int(extent)
        if value is None:
            raise TargetError(f"GPU temporary '{buf.name}' has a non-constant size")
        count *= value
    return count * buf.dtype.storage_bytes


def build(schedule: Schedule | PrimFunc, args: Sequence[Any] | None = None,
          target: Any = "llvm", name: str = "main", opt_level: int = 3) -> Module:
    """Compile a schedule (or a PrimFunc) for `target` and return a callable Module.

        f = ember.build(s, [A, B, C], target="llvm")
        f(a, b, c)            # numpy arrays; the result is written into c
    """
    from ember.target import Target

    tgt = Target(target)
    check_symbol_name(name if not isinstance(schedule, PrimFunc) else schedule.name)
    if tgt.kind in GPU_KINDS:
        return build_gpu(lower_gpu(schedule, args, name, opt_level), tgt)  # type: ignore
    if isinstance(schedule, PrimFunc):
        func = schedule
    else:
        if args is None:
            raise TargetError("build: pass the argument tensors, e.g. build(s, [A, B, C])")
        func = lower_schedule(schedule, args, name)
    func = optimize(func, opt_level)
    if tgt.kind == "llvm":
        from ember.codegen.jit import build_llvm

        return build_llvm(func, tgt)
    if tgt.kind == "c":
        from ember.codegen.cbuild import build_c

        return build_c(func)
    raise TargetError(f"target kind '{tgt.kind}' cannot be built into a callable module on "
                      "this machine; use 'llvm', 'c' or a GPU kind")
