"""LLVM IR for math intrinsics (exp, sqrt, erf, ...) on scalars and vectors of floats."""

from __future__ import annotations

import math
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
    if name == "sigmoid" and not (dtype.bits == 32 and dtype.lanes > 1):  # 1 / (1 + exp(-x))
        negated = b_.fneg(args[0], flags=em.fmf)
        denominator = b_.fadd(one, em.call_intrinsic("llvm.exp", ty, [negated], fastmath=True),
                              flags=em.fmf)
        return b_.fdiv(one, denominator, flags=em.fmf)
    if dtype.bits == 32 and dtype.lanes > 1 and name in _VECTOR_F32:
        return _VECTOR_F32[name](_Poly(em, dtype), args[0])
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


# ------------------------------------------------------------------------------------------
# float32 vectors: exp, tanh and sigmoid as inline polynomials (libm would run lane by lane)
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # ln 2 = _LN2_HI + _LN2_LO; _LN2_HI has few bits, so n * _LN2_HI is exact
_LN2_LO = -2.12194440e-4
_EXP_HI = 89.0  # e^89 overflows float32 to +inf, as does anything larger
_EXP_LO = -104.0  # e^-104 underflows float32 to 0, as does anything smaller
_INV_FACTORIALS = [1.0 / math.factorial(k) for k in range(8)]


class _Poly:
    """Small helpers for float32 vector formulas."""

    def __init__(self, em: ExprEmitter, dtype: DType) -> None:
        self.em, self.b, self.dtype = em, em.builder, dtype
        self.ty = llvm_type(dtype)
        self.int_ty = llvm_type(DType("int", 32, dtype.lanes))

    def c(self, value: float) -> ir.Value:
        return constant(self.dtype, value)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        # fused where the CPU has FMA, a multiply and an add elsewhere (wasm, x86-64-v2):
        # llvm.fma would become a call to libm's fmaf there
        return self.em.call_intrinsic("llvm.fmuladd", self.ty, [a, b, c])

    def reduce(self, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """x = n ln2 + r with |r| <= ln2 / 2: (n as float, n as int, r), x clamped first."""
        b_ = self.b
        x = self.em.call_intrinsic("llvm.minnum", self.ty, [x, self.c(_EXP_HI)])
        x = self.em.call_intrinsic("llvm.maxnum", self.ty, [x, self.c(_EXP_LO)])
        n = self.em.call_intrinsic("llvm.roundeven", self.ty, [b_.fmul(x, self.c(_LOG2E))])
        r = self.fma(b_.fneg(n), self.c(_LN2_HI), x)
        r = self.fma(b_.fneg(n), self.c(_LN2_LO), r)
        return n, b_.fptosi(n, self.int_ty), r

    def exp_minus_one_small(self, r: ir.Value) -> ir.Value:
        """e^r - 1 for |r| <= ln2 / 2 by its Taylor series to r^7 (error < 1e-8)."""
        acc = self.c(_INV_FACTORIALS[7])
        for k in range(6, 0, -1):
            acc = self.fma(acc, r, self.c(_INV_FACTORIALS[k]))
        return self.b.fmul(acc, r)

    def scale(self, value: ir.Value, n_int: ir.Value) -> ir.Value:
        """value * 2^n as value * 2^(n/2) * 2^(n - n/2): no factor leaves the normal range
        for |n| <= 252, so results overflow to inf or underflow gradually like e^x does."""
        b_ = self.b
        int_dtype = DType("int", 32, self.dtype.lanes)
        first = b_.ashr(n_int, constant(int_dtype, 1))
        for part in (first, b_.sub(n_int, first)):
            bits = b_.shl(b_.add(part, constant(int_dtype, 127)), constant(int_dtype, 23))
            value = b_.fmul(value, b_.bitcast(bits, self.ty))
        return value


def _vector_exp(p: _Poly, x: ir.Value) -> ir.Value:
    b_ = p.b
    # Below _EXP_LO e^x rounds to 0. Those lanes compute e^0 instead and take 0 at the end,
    # so they never go through float32 underflow, which costs a microcode assist per vector
    # on many CPUs (a softmax over masked attention scores of -10000: 2.7x slower on Zen 3).
    # Lanes whose result is a subnormal still compute it exactly (gradual underflow).
    gone = b_.fcmp_ordered("<", x, p.c(_EXP_LO))
    zero = p.c(0.0)
    _, n_int, r = p.reduce(b_.select(gone, zero, x))
    result = p.scale(b_.fadd(p.exp_minus_one_small(r), p.c(1.0)), n_int)  # 2^n e^r
    result = b_.select(gone, zero, result)
    return b_.select(b_.fcmp_unordered("uno", x, x), x, result)  # NaN stays NaN


def _vector_expm1(p: _Poly, x: ir.Value) -> ir.Value:
    """e^x - 1 = 2^n (e^r - 1) + (2^n - 1), accurate near 0 (used for x <= 18)."""
    b_ = p.b
    _, n_int, r = p.reduce(x)
    power = p.scale(p.c(1.0), n_int)
    return p.fma(power, p.exp_minus_one_small(r), b_.fsub(power, p.c(1.0)))


def _vector_tanh(p: _Poly, x: ir.Value) -> ir.Value:
    b_ = p.b
    # tanh|x| = e / (e + 2) with e = expm1(2|x|); tanh saturates to 1.0 beyond |x| = 9
    magnitude = p.em.call_intrinsic("llvm.fabs", p.ty, [x])
    magnitude = p.em.call_intrinsic("llvm.minnum", p.ty, [magnitude, p.c(9.0)])
    e = _vector_expm1(p, b_.fmul(magnitude, p.c(2.0)))
    value = b_.fdiv(e, b_.fadd(e, p.c(2.0)))
    result = p.em.call_intrinsic("llvm.copysign", p.ty, [value, x])
    return b_.select(b_.fcmp_unordered("uno", x, x), x, result)


def _vector_sigmoid(p: _Poly, x: ir.Value) -> ir.Value:
    b_ = p.b
    # with e = exp(-|x|) <= 1: 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0 (no overflow)
    e = _vector_exp(p, b_.fneg(p.em.call_intrinsic("llvm.fabs", p.ty, [x])))
    numerator = b_.select(b_.fcmp_ordered("<", x, p.c(0.0)), e, p.c(1.0))
    return b_.fdiv(numerator, b_.fadd(p.c(1.0), e))


_VECTOR_F32 = {"exp": _vector_exp, "tanh": _vector_tanh, "sigmoid": _vector_sigmoid}
