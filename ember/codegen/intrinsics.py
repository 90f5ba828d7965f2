"""The table of math intrinsics: each TIR Call name -> LLVM intrinsic and C libm functions."""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import CodegenError


@dataclass(frozen=True)
class Intrinsic:
    """How each back end computes `name(args)` on floats.

    `llvm` is an LLVM intrinsic (overloaded on the type, e.g. "llvm.sqrt" -> llvm.sqrt.v16f32)
    or "" when the LLVM back end expands it itself (see `expansion`). `c32` / `c64` are the C
    math library functions for float and double. `expansion` names a formula in terms of
    other intrinsics that back ends without a native function use.
    """

    name: str
    arity: int
    llvm: str
    c32: str
    c64: str
    expansion: str = ""


INTRINSICS: dict[str, Intrinsic] = {i.name: i for i in (
    Intrinsic("exp", 1, "llvm.exp", "expf", "exp"),
    Intrinsic("exp2", 1, "llvm.exp2", "exp2f", "exp2"),
    Intrinsic("log", 1, "llvm.log", "logf", "log"),
    Intrinsic("log2", 1, "llvm.log2", "log2f", "log2"),
    Intrinsic("sqrt", 1, "llvm.sqrt", "sqrtf", "sqrt"),
    Intrinsic("rsqrt", 1, "", "", "", expansion="1 / sqrt(x)"),
    Intrinsic("tanh", 1, "llvm.tanh", "tanhf", "tanh"),
    Intrinsic("sigmoid", 1, "", "", "", expansion="1 / (1 + exp(-x))"),
    Intrinsic("erf", 1, "", "erff", "erf"),
    Intrinsic("pow", 2, "llvm.pow", "powf", "pow"),
    Intrinsic("floor", 1, "llvm.floor", "floorf", "floor"),
    Intrinsic("ceil", 1, "llvm.ceil", "ceilf", "ceil"),
    # round half to even, as numpy.round does
    Intrinsic("round", 1, "llvm.roundeven", "nearbyintf", "nearbyint"),
    Intrinsic("trunc", 1, "llvm.trunc", "truncf", "trunc"),
    Intrinsic("fabs", 1, "llvm.fabs", "fabsf", "fabs"),
    Intrinsic("sin", 1, "llvm.sin", "sinf", "sin"),
    Intrinsic("cos", 1, "llvm.cos", "cosf", "cos"),
    # inverse trigonometric and hyperbolic functions: libm on every back end (LLVM's own
    # intrinsics for them are too new for the LLVM llvmlite links)
    Intrinsic("asin", 1, "", "asinf", "asin"),
    Intrinsic("acos", 1, "", "acosf", "acos"),
    Intrinsic("atan", 1, "", "atanf", "atan"),
    Intrinsic("asinh", 1, "", "asinhf", "asinh"),
    Intrinsic("acosh", 1, "", "acoshf", "acosh"),
    Intrinsic("atanh", 1, "", "atanhf", "atanh"),
    Intrinsic("fma", 3, "llvm.fma", "fmaf", "fma"),
)}


def lookup(name: str, arity: int | None = None) -> Intrinsic | None:
    """The intrinsic called `name`, or None for an external function; checks the arity."""
    info = INTRINSICS.get(name)
    if info is not None and arity is not None and arity != info.arity:
        raise CodegenError(f"intrinsic '{name}' takes {info.arity} argument(s), got {arity}")
    return info


def c_function(name: str, bits: int) -> str:
    """The libm function for intrinsic `name` on `bits`-bit floats (16-bit uses float's)."""
    info = INTRINSICS[name]
    func = info.c64 if bits == 64 else info.c32
    if not func:
        raise CodegenError(f"intrinsic '{name}' has no C library function; expand it as "
                           f"{info.expansion}")
    return func
