"""LLVM IR for math intrinsics (exp, sqrt, erf, ...) on scalars and vectors of floats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ember.codegen import intrinsics
from ember.codegen.llvm_expr import I32, constant, llvm_type
from ember.dtype import DType

if TYPE_CHECKING:
    from ember.codegen.llvm_expr import ExprEmitter


def emit_math(em: ExprEmitter, name: str, dtype: DType, args: list[ir.Value]) -> ir.Value:
    """`name(args)` on float32/float64 scalars or vectors of `dtype`."""
    b_ = em.builder
    ty = llvm_type(dtype)
    one = constant(dtype, 1.0)
    if name == "rsqrt":
        return b_.fdiv(one, em.call_intrinsic("llvm.sqrt", ty, args, fastmath=True),
                       flags=em.fmf)
    if name == "sigmoid":  # 1 / (1 + exp(-x))
        negated = b_.fneg(args[0], flags=em.fmf)
        denominator = b_.fadd(one, em.call_intrinsic("llvm.exp", ty, [negated], fastmath=True),
                              flags=em.fmf)
        return b_.fdiv(one, denominator, flags=em.fmf)
    info = intrinsics.INTRINSICS[name]
    if info.llvm:
        return em.call_intrinsic(info.llvm, ty, args, fastmath=True)
    return _libm_per_lane(em, intrinsics.c_function(name, dtype.bits), dtype, args)


def _libm_per_lane(em: ExprEmitter, func: str, dtype: DType,
                   args: list[ir.Value]) -> ir.Value:
    """Call the scalar C function `func` once per lane (LLVM has no intrinsic for it)."""
    b_ = em.builder
    scalar = llvm_type(dtype.element)
    fn = em.declare(func, scalar, [scalar] * len(args))
    if dtype.lanes == 1:
        return b_.call(fn, args)
    result: ir.Value = ir.Constant(llvm_type(dtype), ir.Undefined)
    for lane in range(dtype.lanes):
        position = ir.Constant(I32, lane)
        lane_args = [b_.extract_element(a, position) for a in args]
        result = b_.insert_element(result, b_.call(fn, lane_args), position)
    return result
