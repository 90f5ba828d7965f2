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


def build(schedule: Schedule | PrimFunc, args: Sequence[Any] | None = None,
          target: Any = "llvm", name: str = "main", opt_level: int = 3) -> Module:
    """Compile a schedule (or a PrimFunc) for `target` and return a callable Module.

        f = ember.build(s, [A, B, C], target="llvm")
        f(a, b, c)            # numpy arrays; the result is written into c
    """
    from ember.target import Target

    tgt = Target(target)
    check_symbol_name(name if not isinstance(schedule, PrimFunc) else schedule.name)
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
                      "this machine yet; use 'llvm' or 'c'")
