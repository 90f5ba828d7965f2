"""Elementwise and broadcast ops (ONNX semantics): arithmetic, comparisons, logic, unary math,
activations, Clip, Cast.

Every op here is one te.compute over the (broadcast) output shape, tagged with the op name;
the generic injective schedule makes it parallel and vectorized.
"""

from __future__ import annotations

import inspect
import math
from functools import reduce
from typing import Any, Callable, Sequence

from ember import dtype as dt
from ember import te
from ember.dtype import DType
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops import lowp
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import (
    BitwiseAnd, BitwiseOr, BitwiseXor, Div, Expr, FloorMod, Not, Select, const,
)

FLOATS = "f"
INTS = "iu"
NUMBERS = "fiu"
ANY = "fiub"
STORED = "fiubs"   # also the storage-only types: ops that only move or convert bits


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy broadcasting of shapes; raises ShapeError when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        for k, d in enumerate(padded):
            if d != out[k] and d != 1 and out[k] != 1:
                raise ShapeError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not "
                                 "broadcast")
            if out[k] == 1:
                out[k] = d
    return tuple(out)


def broadcast_index(t: Tensor, index: Sequence[Expr]) -> list[Expr]:
    """Index of `t` for an output index of higher or equal rank (size-1 dims read 0)."""
    offset = len(index) - len(t.shape)
    return [te.const(0) if int(d.value) == 1 else index[offset + k]  # type: ignore[attr-defined]
            for k, d in enumerate(t.shape)]


def shape_of(t: Tensor) -> tuple[int, ...]:
    """The static shape of a te tensor as Python ints."""
    return tuple(int(d.value) for d in t.shape)  # type: ignore[attr-defined]


def _kind(d: DType) -> str:
    """f, i, u, b; "s" for storage-only types (bfloat16, float8, int4, ...)."""
    if d.is_storage_only:
        return "s"
    return "b" if d.is_bool else {"float": "f", "int": "i", "uint": "u"}[d.kind]


def check_kinds(op: str, kinds: str, *types: TensorType) -> None:
    """Raise ShapeError when an input's element type is not of the allowed kinds."""
    names = {"f": "float", "i": "int", "u": "uint", "b": "bool", "s": "storage-only"}
    for t in types:
        if _kind(t.dtype) not in kinds:
            allowed = "/".join(names[k] for k in kinds)
            raise ShapeError(f"{op} needs {allowed} inputs, got {t.dtype}")


def const_like(value: float | int | bool, like: Expr) -> Expr:
    """A scalar constant of `like`'s element type (floats truncate for int types)."""
    d = like.dtype.element
    if d.is_bool:
        return te.const(bool(value), d)
    if d.is_int:
        return te.const(int(value), d)
    return te.const(float(value), d)


# ------------------------------------------------------------------------------------------
# n-ary broadcast ops
BinaryFn = Callable[..., Expr]


def nary(name: str, fn: BinaryFn, kinds: str = ANY, out_dtype: str | None = None,
         inputs: tuple[str, ...] = ("A", "B"), attrs: dict[str, Any] | None = None,
         variadic: bool = False, check: Callable[[Attrs, Sequence[TensorType]], None] | None
         = None, same_types: int | None = None, dtype_from: int = 0) -> OpDef:
    """A broadcast op `out[i] = fn(x0[i], x1[i], ...)` (fn also gets attrs if it takes them).

    `same_types`: how many leading inputs must share one dtype (default: all);
    `out_dtype`: the output type ("bool"), default that of input `dtype_from`.
    """
    takes_attrs = len(inspect.signature(fn).parameters) == (
        (len(inputs) if not variadic else 1) + 1) and not variadic

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        given = [t for t in types if t is not None]
        if not given or (not variadic and len(given) < len(inputs)):
            raise ShapeError(f"{name} needs {len(inputs)} inputs, got {len(given)}")
        if not variadic:
            given = given[:len(inputs)]
        count = len(given) if same_types is None else same_types
        for t in given[1:count]:
            if t.dtype != given[0].dtype:
                raise ShapeError(f"input types differ: {given[0].dtype} and {t.dtype}")
        check_kinds(name, kinds, *given[:count])
        if check is not None:
            check(attrs, given)
        shape = broadcast_shape(*[t.shape for t in given])
        dtype = dt.parse(out_dtype) if out_dtype else given[dtype_from].dtype
        return [TensorType(shape, dtype)]

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        args = [t for t in tensors if t is not None]
        if not variadic:
            args = args[:len(inputs)]
        shape = broadcast_shape(*[shape_of(t) for t in args])

        def body(*i: Expr) -> Expr:
            values = [t[tuple(broadcast_index(t, i))] for t in args]
            if variadic:
                return reduce(fn, values)
            return fn(*values, attrs) if takes_attrs else fn(*values)

        return [te.compute(shape, body, name=name.lower(), tag=name)]  # type: ignore[list-item]

    return OpDef(name, inputs, infer, compute, Pattern.BROADCAST, attrs=dict(attrs or {}))


def binary(name: str, fn: Callable[[Expr, Expr], Expr]) -> OpDef:
    """A two-input broadcast op over any dtype (inputs share a dtype)."""
    return nary(name, fn)


def unary(name: str, fn: Callable[..., Expr], kinds: str = ANY,
          attrs: dict[str, Any] | None = None, inputs: tuple[str, ...] = ("X",),
          out_dtype: str | Callable[[Attrs, TensorType], DType] | None = None,
          attr_inputs: tuple[str, ...] = (), num_outputs: int = 1) -> OpDef:
    """An elementwise op `out[i] = fn(x[i])` (or fn(x[i], attrs) when fn takes two args)."""
    takes_attrs = len(inspect.signature(fn).parameters) == 2

    def result_dtype(attrs: Attrs, x: TensorType) -> DType:
        if out_dtype is None:
            return x.dtype
        if isinstance(out_dtype, str):
            return dt.parse(out_dtype)
        return out_dtype(attrs, x)

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0] if types else None
        if x is None:
            raise ShapeError(f"{name} needs an input")
        check_kinds(name, kinds, x)
        out = [TensorType(x.shape, result_dtype(attrs, x))]
        return out + [TensorType(x.shape, dt.bool_)] * (num_outputs - 1)

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        x = tensors[0]
        assert x is not None
        want = result_dtype(attrs, TensorType(shape_of(x), x.dtype))

        def body(*i: Expr) -> Expr:
            value = fn(x[i], attrs) if takes_attrs else fn(x[i])
            return value if value.dtype == want else value.astype(want)

        outs = [te.compute(shape_of(x), body, name=name.lower(), tag=name)]
        for k in range(1, num_outputs):  # Dropout's mask in inference: all True
            outs.append(te.compute(shape_of(x), lambda *i: te.const(True), name=f"mask{k}"))
        return outs  # type: ignore[return-value]

    return OpDef(name, inputs, infer, compute, Pattern.ELEMWISE, attrs=dict(attrs or {}),
                 attr_inputs=attr_inputs, num_outputs=num_outputs)


# ------------------------------------------------------------------------------------------
# arithmetic with ONNX's integer rules
def _safe_divisor(b: Expr) -> Expr:
    """b, or 1 where b is 0: integer division by zero is undefined in ONNX, and the masked-off
    lanes of a vectorized loop tail load 0, which must not trap."""
    return Select(b == const_like(0, b), const_like(1, b), b)


def _div(a: Expr, b: Expr) -> Expr:
    if a.dtype.is_float:
        return a / b
    # integers truncate toward zero, like C; a zero divisor gives 0 (numpy's answer)
    zero = const_like(0, b)
    return Select(b == zero, const_like(0, a), Div(a, _safe_divisor(b)))


def _fmod(a: Expr, b: Expr) -> Expr:
    """C fmod (the sign of the dividend): a - trunc(a / b) * b, and a itself for finite a
    and infinite b (where the formula gives nan)."""
    r = a - te.trunc(a / b) * b
    infinite_b = (b == const_like(math.inf, b)) | (b == const_like(-math.inf, b))
    finite_a = (a - a) == const_like(0, a)
    return Select(infinite_b & finite_a, a, r)


def _mod(a: Expr, b: Expr, attrs: Attrs) -> Expr:
    if a.dtype.is_float:
        zero = const_like(0, a)
        r = _fmod(a, b)
        if attrs["fmod"]:
            return r
        # opset 28 allows fmod=0 on floats: numpy's mod, with the sign of the divisor
        r = Select((r != zero) & ((r < zero) != (b < zero)), r + b, r)
        return Select(r == zero, Select(b < zero, const_like(-0.0, a), zero), r)
    b = _safe_divisor(b)
    if attrs["fmod"]:
        return a - Div(a, b) * b
    return FloorMod(a, b)  # Python's %: the sign of the divisor


def _check_mod(attrs: Attrs, types: Sequence[TensorType]) -> None:
    if attrs["fmod"] not in (0, 1):
        raise UnsupportedOpError(f"Mod: fmod must be 0 or 1, got {attrs['fmod']!r}")


def _pow(x: Expr, y: Expr) -> Expr:
    if x.dtype.is_float:
        return te.pow(x, y.astype(x.dtype))
    wide = te.pow(x.astype("float64"), y.astype("float64"))
    return te.round(wide).astype(x.dtype)


def _mean(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    args = [t for t in tensors if t is not None]
    total = OPS["Sum"].compute(attrs, args)[0]
    n = len(args)
    return [te.compute(shape_of(total), lambda *i: total[i] / const_like(n, total[i]),  # type: ignore
                       name="mean", tag="Mean")]


def _prelu(x: Expr, slope: Expr) -> Expr:
    return Select(x < const_like(0, x), x * slope, x)


def _where(c: Expr, x: Expr, y: Expr) -> Expr:
    return Select(c, x, y)


# ------------------------------------------------------------------------------------------
# unary math and activations
def _sign(x: Expr) -> Expr:
    one, zero = const_like(1, x), const_like(0, x)
    if x.dtype.kind == "uint":
        return Select(x > zero, one, zero)
    # neither > 0 nor < 0: x is 0 or (for floats) nan, and either is its own sign
    return Select(x > zero, one, Select(x < zero, -one, x if x.dtype.is_float else zero))


def _relu(x: Expr) -> Expr:
    """max(x, 0) that keeps nan (as onnxruntime does): nan < 0 is false."""
    return Select(x < const_like(0, x), const_like(0, x), x)


def _nan_max(a: Expr, b: Expr) -> Expr:
    """ONNX Max: nan in either operand gives nan (a plain a > b ? a : b drops a nan in a)."""
    if not a.dtype.is_float:
        return te.max(a, b)
    return Select((a > b) | (a != a), a, b)


def _nan_min(a: Expr, b: Expr) -> Expr:
    if not a.dtype.is_float:
        return te.min(a, b)
    return Select((a < b) | (a != a), a, b)


def _softplus(x: Expr) -> Expr:  # log(1 + exp(x)) without overflow
    zero = const_like(0, x)
    return te.max(x, zero) + te.log(const_like(1, x) + te.exp(-te.abs(x)))


def _gelu(x: Expr, attrs: Attrs) -> Expr:
    half, one = const_like(0.5, x), const_like(1, x)
    if attrs["approximate"] == "tanh":
        inner = const_like(math.sqrt(2 / math.pi), x) * (x + const_like(0.044715, x) * x * x * x)
        return half * x * (one + te.tanh(inner))
    return half * x * (one + te.erf(x * const_like(1 / math.sqrt(2), x)))


def _clip(x: Expr, attrs: Attrs) -> Expr:
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is not None:
        x = te.max(x, const_like(lo, x))
    if hi is not None:
        x = te.min(x, const_like(hi, x))
    return x


def _hard_sigmoid(x: Expr, alpha: float, beta: float) -> Expr:
    y = const_like(alpha, x) * x + const_like(beta, x)
    return te.max(const_like(0, x), te.min(const_like(1, x), y))


def _is_inf(x: Expr, attrs: Attrs) -> Expr:
    pos = x == const_like(math.inf, x)
    neg = x == const_like(-math.inf, x)
    if attrs["detect_positive"] and attrs["detect_negative"]:
        return pos | neg
    if attrs["detect_positive"]:
        return pos
    if attrs["detect_negative"]:
        return neg
    return te.const(False)


def _shrink(x: Expr, attrs: Attrs) -> Expr:
    """x + bias below -lambd, x - bias above lambd, else 0 (integers compare exactly: the
    attributes are floats, so the comparison runs in float64)."""
    lambd, bias = float(attrs["lambd"]), float(attrs["bias"])
    wide = x if x.dtype.is_float else x.astype("float64")
    low = wide < const_like(-lambd, wide)
    high = wide > const_like(lambd, wide)
    # for integers, x -/+ bias is computed in float64 and truncated, as onnxruntime does
    shrunk_high = (wide - const_like(bias, wide)).astype(x.dtype)
    shrunk_low = (wide + const_like(bias, wide)).astype(x.dtype)
    return Select(low, shrunk_low, Select(high, shrunk_high, _zero(x)))


def _check_gelu(attrs: Attrs) -> None:
    if attrs["approximate"] not in ("none", "tanh"):
        raise UnsupportedOpError(f"Gelu: approximate must be 'none' or 'tanh', got "
                                 f"{attrs['approximate']!r}")


# ONNX TensorProto data types ember can hold
ONNX_DTYPES: dict[int, DType] = {
    1: dt.float32, 2: dt.uint8, 3: dt.int8, 4: dt.uint16, 5: dt.int16, 6: dt.int32,
    7: dt.int64, 9: dt.bool_, 10: dt.float16, 11: dt.float64, 12: dt.uint32, 13: dt.uint64,
    16: dt.bfloat16, 17: dt.float8e4m3fn, 18: dt.float8e4m3fnuz, 19: dt.float8e5m2,
    20: dt.float8e5m2fnuz, 21: dt.uint4, 22: dt.int4, 23: dt.float4e2m1, 24: dt.float8e8m0,
    25: dt.uint2, 26: dt.int2,
}


def onnx_dtype(code: int) -> DType:
    """The ember dtype of an ONNX TensorProto data type number."""
    if code not in ONNX_DTYPES:
        raise UnsupportedOpError(f"Cast: ONNX data type {code} is not supported (supported: "
                                 f"{', '.join(f'{k}={v}' for k, v in ONNX_DTYPES.items())})")
    return ONNX_DTYPES[code]


def _cast(x: Expr, to: DType, attrs: Attrs | None = None) -> Expr:
    """ONNX Cast; storage-only types (bfloat16, float8, int4, ...) convert in ember.ops.lowp."""
    attrs = attrs or {}
    round_mode = str(attrs.get("round_mode", "up"))
    if round_mode not in lowp.ROUND_MODES:
        raise UnsupportedOpError(f"Cast: round_mode={round_mode!r} is not supported (one of "
                                 f"{', '.join(lowp.ROUND_MODES)})")
    return lowp.convert(x, to, bool(attrs.get("saturate", 1)), round_mode)


def _bit_cast(x: Expr, attrs: Attrs) -> Expr:
    to = onnx_dtype(int(attrs["to"]))
    if x.dtype.is_bool:                 # a bool is the byte 0 or 1
        return lowp.native_cast(x, to)
    return te.reinterpret(x, to)


def _bit_cast_to(attrs: Attrs, x: TensorType) -> DType:
    to = onnx_dtype(int(attrs["to"]))
    if to.is_bool or x.dtype.storage_bytes != to.storage_bytes or to.bits < 8 \
            or x.dtype.bits < 8 and not x.dtype.is_bool:
        raise UnsupportedOpError(f"BitCast: {x.dtype} and {to} differ in width (BitCast needs "
                                 "types of one size of at least a byte; bool only as input)")
    return to


def _cast_like(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, like = tensors[0], tensors[1]
    assert x is not None and like is not None
    to = like.dtype
    # like's values are never used, but a kernel argument must be read by some stage: the
    # untaken branch of a constant condition keeps it in the schedule and folds away
    origin = tuple(te.const(0) for _ in like.shape)

    def body(*i: Expr) -> Expr:
        return te.if_then_else(te.const(True), _cast(x[i], to, attrs), like[origin])

    return [te.compute(shape_of(x), body, name="castlike", tag="CastLike")]  # type: ignore


def _infer_cast_like(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x, like = types[0], types[1] if len(types) > 1 else None
    if x is None or like is None:
        raise ShapeError("CastLike needs an input and a target_type input")
    return [TensorType(x.shape, like.dtype)]


def _check_dropout(attrs: Attrs) -> None:
    if attrs.get("training_mode"):
        raise UnsupportedOpError("Dropout: training_mode=1 is not supported (inference only)")


def _dropout(x: Expr, attrs: Attrs) -> Expr:
    _check_dropout(attrs)
    return x


def _with_infer_check(opdef: OpDef, check: Callable[[Attrs], None]) -> OpDef:
    """The op with `check(attrs)` run before its type inference."""
    from dataclasses import replace

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        check(attrs)
        return opdef.infer(attrs, types)

    return replace(opdef, infer=infer)


def _zero(x: Expr) -> Expr:
    return const_like(0, x)


def _cast_to(attrs: Attrs, x: TensorType) -> DType:
    return onnx_dtype(int(attrs["to"]))


_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

_UNARY: list[OpDef] = [
    unary("Relu", _relu, NUMBERS),
    unary("LeakyRelu", lambda x, a: Select(x < _zero(x), x * const_like(a["alpha"], x), x),
          FLOATS, {"alpha": 0.01}),
    unary("Elu", lambda x, a: Select(x < _zero(x), const_like(a["alpha"], x)
                                     * (te.exp(x) - const_like(1, x)), x), FLOATS,
          {"alpha": 1.0}),
    unary("Celu", lambda x, a: te.max(_zero(x), x) + te.min(_zero(x), const_like(
        a["alpha"], x) * (te.exp(x / const_like(a["alpha"], x)) - const_like(1, x))),
          FLOATS, {"alpha": 1.0}),
    unary("Selu", lambda x, a: const_like(a["gamma"], x) * Select(
        x > _zero(x), x, const_like(a["alpha"], x) * (te.exp(x) - const_like(1, x))),
          FLOATS, {"alpha": _SELU_ALPHA, "gamma": _SELU_GAMMA}),
    unary("ThresholdedRelu", lambda x, a: Select(x > const_like(a["alpha"], x), x, _zero(x)),
          FLOATS, {"alpha": 1.0}),
    unary("Sigmoid", te.sigmoid, FLOATS),
    unary("HardSigmoid", lambda x, a: _hard_sigmoid(x, a["alpha"], a["beta"]), FLOATS,
          {"alpha": 0.2, "beta": 0.5}),
    unary("HardSwish", lambda x: x * _hard_sigmoid(x, 1 / 6, 0.5), FLOATS),
    unary("Tanh", te.tanh, FLOATS, inputs=("input",)),
    _with_infer_check(unary("Gelu", _gelu, FLOATS, {"approximate": "none"}), _check_gelu),
    unary("Mish", lambda x: x * te.tanh(_softplus(x)), FLOATS),
    unary("Erf", te.erf, FLOATS, inputs=("input",)),
    unary("Exp", te.exp, FLOATS, inputs=("input",)),
    unary("Log", te.log, FLOATS, inputs=("input",)),
    unary("Sqrt", te.sqrt, FLOATS),
    unary("Reciprocal", lambda x: const_like(1, x) / x, FLOATS),
    unary("Abs", te.abs, NUMBERS),
    unary("Neg", lambda x: _zero(x) - x, "fi"),
    unary("Floor", te.floor, FLOATS),
    unary("Ceil", te.ceil, FLOATS),
    unary("Round", te.round, FLOATS),
    unary("Sign", _sign, NUMBERS, inputs=("input",)),
    unary("Softplus", _softplus, FLOATS),
    unary("Softsign", lambda x: x / (const_like(1, x) + te.abs(x)), FLOATS, inputs=("input",)),
    unary("Sin", te.sin, FLOATS, inputs=("input",)),
    unary("Cos", te.cos, FLOATS, inputs=("input",)),
    unary("Tan", lambda x: te.sin(x) / te.cos(x), FLOATS, inputs=("input",)),
    unary("Sinh", lambda x: (te.exp(x) - te.exp(-x)) * const_like(0.5, x), FLOATS,
          inputs=("input",)),
    unary("Cosh", lambda x: (te.exp(x) + te.exp(-x)) * const_like(0.5, x), FLOATS,
          inputs=("input",)),
    unary("Asin", te.asin, FLOATS, inputs=("input",)),
    unary("Acos", te.acos, FLOATS, inputs=("input",)),
    unary("Atan", te.atan, FLOATS, inputs=("input",)),
    unary("Asinh", te.asinh, FLOATS, inputs=("input",)),
    unary("Acosh", te.acosh, FLOATS, inputs=("input",)),
    unary("Atanh", te.atanh, FLOATS, inputs=("input",)),
    unary("Shrink", _shrink, NUMBERS, {"bias": 0.0, "lambd": 0.5}, inputs=("input",)),
    unary("BitwiseNot", lambda x: Not(x), INTS),
    unary("Identity", lambda x: x, STORED, inputs=("input",)),

    unary("IsNaN", lambda x: x != x, FLOATS, out_dtype="bool"),  # noqa: PLR0124
    unary("IsInf", _is_inf, FLOATS, {"detect_negative": 1, "detect_positive": 1},
          out_dtype="bool"),
    unary("Not", lambda x: Not(x), "b"),
    unary("Clip", _clip, NUMBERS, {"min": None, "max": None}, inputs=("input", "min", "max"),
          attr_inputs=("min", "max")),
    unary("Cast", lambda x, a: _cast(x, onnx_dtype(int(a["to"])), a), STORED,
          {"to": REQUIRED, "saturate": 1, "round_mode": "up"}, inputs=("input",),
          out_dtype=_cast_to),
    unary("BitCast", _bit_cast, STORED, {"to": REQUIRED}, inputs=("input",),
          out_dtype=_bit_cast_to),
    _with_infer_check(
        unary("Dropout", _dropout, FLOATS, {"seed": None, "ratio": 0.5, "training_mode": 0},
              inputs=("data", "ratio", "training_mode"), attr_inputs=("ratio", "training_mode"),
              num_outputs=2), _check_dropout),
]

def _bit_shift(a: Expr, b: Expr, attrs: Attrs) -> Expr:
    """ONNX BitShift (opset 28 semantics for signed types too).

    The shift count is read as unsigned. A left shift wraps; a right shift of a signed value
    fills with its sign; shifting by the width or more gives 0 (or the sign fill). Shifts
    are computed as multiplication / floor division by 2**s in 64 bits, which wrap and
    round exactly like the machine shifts for every count below the width.
    """
    bits = a.dtype.bits
    count = b.astype(f"uint{bits}").astype("uint64")
    signed = a.dtype.kind == "int"
    zero = const_like(0, a)
    if attrs["direction"] == "LEFT":
        power = te.exp2(te.min(count, const(bits - 1, "uint64")).astype("float64"))
        wide = a.astype("uint64") * power.astype("uint64")
        shifted = wide.astype(f"uint{bits}").astype(a.dtype)
        return Select(count >= bits, zero, shifted)
    limit = bits - 1 if signed else bits
    power = te.exp2(te.min(count, const(limit - 1, "uint64")).astype("float64"))
    wide_type = "int64" if signed else "uint64"
    shifted = (a.astype(wide_type) // power.astype(wide_type)).astype(a.dtype)
    fill = Select(a < zero, const_like(-1, a), zero) if signed else zero
    return Select(count >= limit, fill, shifted)


def _check_bit_shift(attrs: Attrs, types: Sequence[TensorType]) -> None:
    if attrs["direction"] not in ("LEFT", "RIGHT"):
        raise UnsupportedOpError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got "
                                 f"{attrs['direction']!r}")


_NARY: list[OpDef] = [
    nary("Add", lambda a, b: a + b, NUMBERS),
    nary("Sub", lambda a, b: a - b, NUMBERS),
    nary("Mul", lambda a, b: a * b, NUMBERS),
    nary("Div", _div, NUMBERS),
    nary("Pow", _pow, "fi", inputs=("X", "Y"), same_types=1),
    nary("Mod", _mod, NUMBERS, attrs={"fmod": 0}, check=_check_mod),
    nary("Min", _nan_min, NUMBERS, inputs=("data_0",), variadic=True),
    nary("Max", _nan_max, NUMBERS, inputs=("data_0",), variadic=True),
    nary("Sum", lambda a, b: a + b, NUMBERS, inputs=("data_0",), variadic=True),
    nary("Equal", lambda a, b: a == b, ANY, "bool"),
    nary("Less", lambda a, b: a < b, NUMBERS, "bool"),
    nary("Greater", lambda a, b: a > b, NUMBERS, "bool"),
    nary("LessOrEqual", lambda a, b: a <= b, NUMBERS, "bool"),
    nary("GreaterOrEqual", lambda a, b: a >= b, NUMBERS, "bool"),
    nary("And", lambda a, b: a & b, "b"),
    nary("Or", lambda a, b: a | b, "b"),
    nary("Xor", lambda a, b: a != b, "b"),
    nary("BitwiseAnd", lambda a, b: BitwiseAnd(a, b), INTS),
    nary("BitwiseOr", lambda a, b: BitwiseOr(a, b), INTS),
    nary("BitwiseXor", lambda a, b: BitwiseXor(a, b), INTS),
    nary("BitShift", _bit_shift, INTS, inputs=("X", "Y"), attrs={"direction": REQUIRED},
         check=_check_bit_shift),
    nary("Where", _where, ANY, inputs=("condition", "X", "Y"), same_types=0, dtype_from=1,
         check=lambda attrs, types: _check_where(types)),
]


def _check_where(types: Sequence[TensorType]) -> None:
    cond, x, y = types
    if not cond.dtype.is_bool:
        raise ShapeError(f"Where: condition must be bool, got {cond.dtype}")
    if x.dtype != y.dtype:
        raise ShapeError(f"Where: X and Y types differ: {x.dtype} and {y.dtype}")


def _check_prelu(attrs: Attrs, types: Sequence[TensorType]) -> None:
    x, slope = types
    if broadcast_shape(x.shape, slope.shape) != x.shape:
        raise ShapeError(f"PRelu: slope of shape {slope.shape} must broadcast to X's "
                         f"shape {x.shape}")


def _mean_op() -> OpDef:
    base = nary("Mean", lambda a, b: a + b, FLOATS, inputs=("data_0",), variadic=True)
    from dataclasses import replace

    return replace(base, compute=_mean)


def _prelu_op() -> OpDef:
    return nary("PRelu", _prelu, FLOATS, inputs=("X", "slope"), check=_check_prelu)


def _cast_like_op() -> OpDef:
    return OpDef("CastLike", ("input", "target_type"), _infer_cast_like, _cast_like,
                 Pattern.ELEMWISE, attrs={"saturate": 1, "round_mode": "up"})


OPS: dict[str, OpDef] = {op.name: op for op in [*_UNARY, *_NARY, _mean_op(), _prelu_op(),
                                                 _cast_like_op()]}
