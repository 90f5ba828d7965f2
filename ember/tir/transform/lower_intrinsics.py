"""lower_intrinsics: expand float32 erf, rsqrt (and on request exp, tanh, sigmoid) into arithmetic.

Back ends turn these calls into scalar library calls that block vectorization; the expansions
here use only +, -, *, /, min, max, select, floor, sqrt and integer div/mod, which LLVM maps to
vector instructions. Maximum relative error is about 1e-6 over the float32 range (checked
against numpy in tests/tir/transform/test_lower_intrinsics.py). Other dtypes keep their calls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Collection

from ember.dtype import DType
from ember.errors import EmberError
from ember.tir import expr as E
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator

_LOG2E = 1.4426950408889634
# ln 2 split so that n * _LN2_HI is exact for |n| < 2**15 (Cody and Waite)
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_HI = 88.72283  # exp overflows float32 above this
_EXP_LO = -87.33654  # exp(x) is below the smallest normal float32 here; flushed to zero


# exp, tanh and sigmoid stay calls by default: the LLVM back end expands float32 vectors of
# them itself, building 2**n from exponent bits, which TIR cannot express; the pure arithmetic
# 2**n below is about 2x slower there. erf has no vector expansion in any back end: lowered
# here to one rational function. Back ends without vector math can ask for ALL_NAMES.
DEFAULT_NAMES = ("erf", "rsqrt")
ALL_NAMES = ("exp", "sigmoid", "tanh", "erf", "rsqrt")


def lower_intrinsics(func: PrimFunc, names: Collection[str] = DEFAULT_NAMES) -> PrimFunc:
    """Replace float32 calls of the intrinsics in `names` (a subset of ALL_NAMES) by
    polynomial arithmetic.

        B[i] = erf(A[i])   ->   B[i] = let x = A[i] in ... (polynomials, exp by 2**n * e**r)
    """
    unknown = set(names) - set(ALL_NAMES)
    if unknown:
        raise EmberError(f"lower_intrinsics: no expansion for {sorted(unknown)}; "
                         f"expected a subset of {list(ALL_NAMES)}")
    body = _Lower(frozenset(names)).visit(func.body)
    return func if body is func.body else replace(func, body=body)


class _Lower(Mutator):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def visit_Call(self, e: E.Call) -> E.Expr:
        args = tuple(self.visit(a) for a in e.args)
        rule = EXPANSIONS.get(e.name) if e.name in self.names else None
        if rule is None or e.dtype.element != E.dt.float32 or len(args) != 1:
            if all(a is b for a, b in zip(args, e.args)):
                return e
            return E.Call(e.dtype, e.name, args)
        return _bind(args[0], rule)


# ------------------------------------------------------------------------------------------
# builders that keep the vector width of the argument
def _c(value: float, like: DType) -> E.Expr:
    return E.const(value, like)


def _bind(value: E.Expr, body: Callable[[E.Expr], E.Expr]) -> E.Expr:
    """Evaluate `value` once: body(x) inside `let x = value` unless value is trivial."""
    if isinstance(value, (E.Var, E.FloatImm, E.IntImm)):
        return body(value)
    var = E.Var("x", value.dtype)
    return E.Let(var, value, body(var))


def _horner(x: E.Expr, coeffs: list[float]) -> E.Expr:
    """coeffs[0] + x * (coeffs[1] + x * (...)), highest degree last."""
    acc = _c(coeffs[-1], x.dtype)
    for c in reversed(coeffs[:-1]):
        acc = E.Add(E.Mul(acc, x), _c(c, x.dtype))
    return acc


def _select(cond: E.Expr, a: E.Expr, b: E.Expr) -> E.Expr:
    return E.Select(cond, a, b)


def _pow2(n: E.Expr) -> tuple[E.Expr, E.Expr]:
    """(s, t) with 2**n == s * s * t for an integer-valued float n in [-126, 129].

    s = 2**(n // 2) is built from the bits of n // 2 + 63 in [0, 127]; t is 1 or 2.
    """
    ftype, itype = n.dtype, E.dt.int32.with_lanes(n.dtype.lanes)
    as_int = E.Cast(itype, n)
    half = E.FloorDiv(as_int, _c(2, itype))
    odd = E.NE(E.FloorMod(as_int, _c(2, itype)), _c(0, itype))
    k = E.Var("k", itype)
    scale: E.Expr = _c(2.0 ** -63, ftype)
    for bit in range(7):
        on = E.NE(E.FloorMod(E.FloorDiv(k, _c(1 << bit, itype)), _c(2, itype)), _c(0, itype))
        scale = E.Mul(scale, _select(on, _c(2.0 ** (1 << bit), ftype), _c(1.0, ftype)))
    s = E.Let(k, E.Add(half, _c(63, itype)), scale)
    t = _select(odd, _c(2.0, ftype), _c(1.0, ftype))
    return s, t


def expand_exp(x: E.Expr) -> E.Expr:
    """exp(x) = 2**n * e**r with n = round(x / ln 2), |r| <= ln(2) / 2, e**r by Taylor-7."""
    f = x.dtype
    clamped = E.Min(E.Max(x, _c(_EXP_LO, f)), _c(_EXP_HI, f))
    n_var, r_var, s_var = E.Var("n", f), E.Var("r", f), E.Var("s", f)
    n = E.Call(f, "floor", (E.Add(E.Mul(clamped, _c(_LOG2E, f)), _c(0.5, f)),))
    r = E.Sub(E.Sub(clamped, E.Mul(n_var, _c(_LN2_HI, f))), E.Mul(n_var, _c(_LN2_LO, f)))
    poly = _horner(r_var, [1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040])
    s, t = _pow2(n_var)
    scaled = E.Let(s_var, s, E.Mul(E.Mul(poly, s_var), E.Mul(s_var, t)))
    result = E.Let(n_var, n, E.Let(r_var, r, scaled))
    result = _select(E.GT(x, _c(_EXP_HI, f)), _c(float("inf"), f), result)
    result = _select(E.LT(x, _c(_EXP_LO, f)), _c(0.0, f), result)
    return _select(E.NE(x, x), x, result)  # NaN stays NaN


def expand_sigmoid(x: E.Expr) -> E.Expr:
    """sigmoid(x) = 1 / (1 + exp(-x))."""
    one = _c(1.0, x.dtype)
    return E.Div(one, E.Add(one, _bind(E.Sub(_c(0.0, x.dtype), x), expand_exp)))


# tanh(x) = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835, error < 1e-8 for |x| < 0.25
_TANH_TAYLOR = [1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835]


def expand_tanh(x: E.Expr) -> E.Expr:
    """tanh(x): odd Taylor polynomial near 0, else sign(x) * (1 - 2 / (exp(2|x|) + 1))."""
    f = x.dtype
    one, two = _c(1.0, f), _c(2.0, f)
    ax = E.Var("ax", f)
    x2 = E.Mul(x, x)
    small = E.Mul(x, _horner(x2, _TANH_TAYLOR))
    e2 = _bind(E.Mul(two, ax), expand_exp)
    large = E.Var("y", f)
    signed = _select(E.LT(x, _c(0.0, f)), E.Sub(_c(0.0, f), large), large)
    body = _select(E.LT(ax, _c(0.25, f)), small,
                   E.Let(large, E.Sub(one, E.Div(two, E.Add(e2, one))), signed))
    return E.Let(ax, E.Max(x, E.Sub(_c(0.0, f), x)), body)


# erf(x) = x * P(x^2) / Q(x^2) for |x| < 3.92 (beyond, erf rounds to +-1 in float32): a
# rational fit of degree 5 / 5 in x^2, weighted least squares iterated towards the minimax
# (Lawson) on 4000 Chebyshev points of [0, 3.92]; largest error 1.6e-8 in float64, relative
# error at most 4e-7 evaluated in float32 without FMA (tests/tir/transform)
_ERF_P = [1.1283790225254096, 0.19276137005825755, 0.05306012341971116,
          0.0038682097841273326, 0.00028747633535150183, 2.034751332175011e-06]
_ERF_Q = [1.0, 0.5041619841812529, 0.11508350480951544, 0.015172063347918313,
          0.0011880857057768868, 3.80706484869181e-05]
_ERF_SATURATES = 3.92


def expand_erf(x: E.Expr) -> E.Expr:
    """erf(x) as one rational function of x (no exp, one division: about 3x fewer vector
    instructions than 1 - t * exp(-x^2 + P(t))); +-1 from |x| >= 3.92, NaN stays NaN."""
    f = x.dtype
    ax, t, z = E.Var("ax", f), E.Var("t", f), E.Var("z", f)
    inside = E.LT(ax, _c(_ERF_SATURATES, f))
    rational = E.Div(E.Mul(t, _horner(z, _ERF_P)), _horner(z, _ERF_Q))
    sign = _select(E.LT(x, _c(0.0, f)), _c(-1.0, f), _c(1.0, f))
    outside = _select(E.GE(ax, _c(_ERF_SATURATES, f)), sign, x)  # NaN compares false
    body = E.Let(t, _select(inside, x, _c(0.0, f)),
                 E.Let(z, E.Mul(t, t), _select(inside, rational, outside)))
    return E.Let(ax, E.Max(x, E.Sub(_c(0.0, f), x)), body)


def expand_rsqrt(x: E.Expr) -> E.Expr:
    """rsqrt(x) = 1 / sqrt(x)."""
    return E.Div(_c(1.0, x.dtype), E.Call(x.dtype, "sqrt", (x,)))


EXPANSIONS: dict[str, Callable[[E.Expr], E.Expr]] = {
    "exp": expand_exp,
    "sigmoid": expand_sigmoid,
    "tanh": expand_tanh,
    "erf": expand_erf,
    "rsqrt": expand_rsqrt,
}
