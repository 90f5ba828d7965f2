"""Float math the AMDGPU backend cannot select, written as LLVM IR from what it can (exp2,
log2, exp, fma, floor): erf, pow, tanh, log10, exp10, tan.

ROCm programs get these from the device library (OCML), which ember does not link; the
formulas here are float32-accurate (erf within 2e-7 absolute, pow within a few ulp of
exp2(y log2 x)) and float32 only: a float64 call is refused by name, since the same
polynomials would give float32 accuracy in a double.

Each function takes an `Intrinsic` callback (name, type, args) -> value, so the same IR can
be built inside a GPU kernel or in a host function that tests it against numpy.
"""

from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

Intrinsic = Callable[[str, ir.Type, list[ir.Value]], ir.Value]

# erf(x) for |x| < 0.5: 2/sqrt(pi) * sum_k (-1)^k x^(2k+1) / (k! (2k+1)), to x^13
_ERF_TAYLOR = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) * 2 / math.sqrt(math.pi)
               for k in range(7)]
# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0: the Chebyshev fit of
# Numerical Recipes (erfcc), relative error below 1.2e-7 for every z >= 0
_ERFC_FIT = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277]
_LOG10_2 = math.log10(2.0)
_LOG2_10 = math.log2(10.0)


def _c(ty: ir.Type, value: float) -> ir.Constant:
    return ir.Constant(ty, value)


def _horner(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value,
            coefficients: list[float]) -> ir.Value:
    """c0 + c1 x + c2 x^2 + ... with fused multiply-adds."""
    acc: ir.Value = _c(ty, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = call("llvm.fma", ty, [acc, x, _c(ty, c)])
    return acc


def emit_erf(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value) -> ir.Value:
    """erf(x): its Taylor series near 0 (relative accuracy there), 1 - erfc(|x|) beyond."""
    ax = call("llvm.fabs", ty, [x])
    x2 = b.fmul(x, x)
    near = b.fmul(x, _horner(b, call, ty, x2, _ERF_TAYLOR))
    t = b.fdiv(_c(ty, 1.0), call("llvm.fma", ty, [ax, _c(ty, 0.5), _c(ty, 1.0)]))
    exponent = b.fsub(_horner(b, call, ty, t, _ERFC_FIT), b.fmul(ax, ax))
    erfc = b.fmul(t, call("llvm.exp", ty, [exponent]))
    far = call("llvm.copysign", ty, [b.fsub(_c(ty, 1.0), erfc), x])
    small = b.fcmp_ordered("<", ax, _c(ty, 0.5))
    return b.select(small, near, far)  # NaN: the comparison is false, erfc(NaN) is NaN


def emit_pow(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value,
             y: ir.Value) -> ir.Value:
    """x^y as exp2(y log2|x|), negative for a negative x and an odd integer y, NaN for a
    negative x and a non-integer y, 1 for y = 0 (C's pow on the cases models meet)."""
    magnitude = call("llvm.exp2", ty, [b.fmul(y, call("llvm.log2", ty,
                                                      [call("llvm.fabs", ty, [x])]))])
    integer = b.fcmp_ordered("==", call("llvm.floor", ty, [y]), y)
    half = b.fmul(y, _c(ty, 0.5))
    odd = b.and_(integer, b.fcmp_ordered("!=", call("llvm.floor", ty, [half]), half))
    negative = b.fcmp_ordered("<", x, _c(ty, 0.0))
    signed = b.select(odd, b.fneg(magnitude), magnitude)
    value = b.select(negative, b.select(integer, signed, _c(ty, math.nan)), magnitude)
    return b.select(b.fcmp_ordered("==", y, _c(ty, 0.0)), _c(ty, 1.0), value)


def emit_tanh(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value) -> ir.Value:
    """tanh x = sign(x) (1 - 2 / (exp(2|x|) + 1)): exact at +-inf, no overflow to NaN."""
    e = call("llvm.exp", ty, [b.fmul(call("llvm.fabs", ty, [x]), _c(ty, 2.0))])
    magnitude = b.fsub(_c(ty, 1.0), b.fdiv(_c(ty, 2.0), b.fadd(e, _c(ty, 1.0))))
    return call("llvm.copysign", ty, [magnitude, x])


def emit_log10(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value) -> ir.Value:
    return b.fmul(call("llvm.log2", ty, [x]), _c(ty, _LOG10_2))


def emit_exp10(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value) -> ir.Value:
    return call("llvm.exp2", ty, [b.fmul(x, _c(ty, _LOG2_10))])


def emit_tan(b: ir.IRBuilder, call: Intrinsic, ty: ir.Type, x: ir.Value) -> ir.Value:
    return b.fdiv(call("llvm.sin", ty, [x]), call("llvm.cos", ty, [x]))


# function stem (as in erff / llvm.pow) -> formula
FORMULAS: dict[str, Callable[..., ir.Value]] = {
    "erf": emit_erf, "pow": emit_pow, "tanh": emit_tanh, "log10": emit_log10,
    "exp10": emit_exp10, "tan": emit_tan,
}
# what the AMDGPU backend selects itself (float32): the formulas above build on these
NATIVE = ("llvm.exp", "llvm.exp2", "llvm.log", "llvm.log2", "llvm.sin", "llvm.cos",
          "llvm.fabs", "llvm.floor", "llvm.fma", "llvm.copysign")

__all__ = ["FORMULAS", "NATIVE", "emit_erf", "emit_pow", "emit_tanh"]
