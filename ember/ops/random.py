"""Random tensors (ONNX RandomUniform, RandomNormal, their *Like forms, Bernoulli) from a
counter-based generator.

Element i of a node's output is a function of (seed, i) alone: two rounds of a 32-bit
integer mixer (xor-shift-multiply, "lowbias32") over the element's counter and the seed. So
a kernel computes each element on its own, in any order, vector lane or thread, and a node
gives the same tensor on every run, target and thread count. ONNX leaves the generator to
the runtime: the values differ from onnxruntime's and numpy's, their distribution does not.

    uniform   low + (high - low) * u,  u = (h >> 8) / 2^24 in [0, 1)  (float64: 53 bits
              from two hashes)
    normal    mean + scale * sqrt(-2 ln u1) * cos(2 pi u2)            (Box-Muller)
    Bernoulli 1 where u < p, else 0

`seed` (a float attribute in ONNX) selects the stream by its float32 bits; a node without
one uses seed 0, so it too is reproducible (not a fresh draw per run).
"""

from __future__ import annotations

import math
import struct

from ember import dtype as dt
from ember import te
from ember.dtype import DType
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.registry import REQUIRED, Attrs, OpDef
from ember.ops.elementwise import ONNX_DTYPES
from ember.ops.transform import (
    as_ints,
    flat_index,
    injective,
    keep_inputs,
    shape_of,
)
from ember.te.tensor import Tensor
from ember.tir.expr import BitwiseXor, Expr

Shape = tuple[int, ...]
_U32 = dt.parse("uint32")


def _u32(value: int) -> Expr:
    return te.const(value & 0xFFFFFFFF, _U32)


def _shift_right(x: Expr, bits: int) -> Expr:
    return x // _u32(1 << bits)


# lowbias32: x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16
_ROUNDS = ((16, 0x7FEB352D), (15, 0x846CA68B))
_FINAL_SHIFT = 16


def mix(x: Expr) -> Expr:
    """The lowbias32 mixer of a uint32 expression (wrapping multiplies)."""
    for shift, factor in _ROUNDS:
        x = BitwiseXor(x, _shift_right(x, shift)) * _u32(factor)
    return BitwiseXor(x, _shift_right(x, _FINAL_SHIFT))


def seed_key(seed: float | None) -> int:
    """The stream of a `seed` attribute: its float32 bits, mixed (0 when absent); the same
    mixer as `mix`, computed here at compile time."""
    bits = 0 if seed is None else struct.unpack("<I", struct.pack("<f", float(seed)))[0]
    x = bits ^ 0x9E3779B9
    for shift, factor in _ROUNDS:
        x = ((x ^ (x >> shift)) * factor) & 0xFFFFFFFF
    return x ^ (x >> _FINAL_SHIFT)


def hashes(seed: float | None, counter: Expr, count: int) -> list[Expr]:
    """`count` independent uint32 hashes of element `counter` in the stream of `seed`."""
    base = counter.astype(_U32) * _u32(count)
    key = _u32(seed_key(seed))
    return [mix(BitwiseXor(mix(base + _u32(k)), key)) for k in range(count)]


def unit(seed: float | None, counter: Expr, real: DType, stream: int = 0) -> Expr:
    """A uniform value in [0, 1) of float32 or float64 `real` for element `counter`."""
    if real.bits == 64:
        high, low = hashes(seed, counter * 2 + stream, 2)
        top = _shift_right(high, 5).astype(real) * te.const(2.0 ** 26, real)
        return (top + _shift_right(low, 6).astype(real)) * te.const(2.0 ** -53, real)
    (h,) = hashes(seed, counter * 2 + stream, 1)
    return _shift_right(h, 8).astype(real) * te.const(2.0 ** -24, real)


def _real(dtype: DType) -> DType:
    return dt.float64 if dtype.bits == 64 else dt.float32


def _out_dtype(op: str, a: Attrs, default: DType | None) -> DType:
    code = a.get("dtype")
    if code is None:
        if default is None:
            return dt.float32
        dtype = default
    elif isinstance(code, int) and code not in ONNX_DTYPES:
        raise UnsupportedOpError(f"{op}: dtype code {code} is not supported")
    else:
        dtype = ONNX_DTYPES[code] if isinstance(code, int) else dt.parse(code)
    if op != "Bernoulli" and not dtype.is_float:
        raise ShapeError(f"{op}: dtype must be a float type, got {dtype}")
    return dtype


def _value(op: str, a: Attrs, counter: Expr, dtype: DType) -> Expr:
    """The random value of element `counter` of a Random* op, as `dtype`."""
    real = _real(dtype)
    seed = a.get("seed")
    if op.startswith("RandomUniform"):
        low, high = float(a["low"]), float(a["high"])
        value = te.const(low, real) + te.const(high - low, real) * unit(seed, counter, real)
        return value.astype(dtype)
    u1 = te.const(1.0, real) - unit(seed, counter, real, 0)  # (0, 1]: the log is finite
    u2 = unit(seed, counter, real, 1)
    radius = te.sqrt(te.const(-2.0, real) * te.log(u1))
    normal = radius * te.cos(te.const(2 * math.pi, real) * u2)
    return (te.const(float(a["mean"]), real) + te.const(float(a["scale"]), real)
            * normal).astype(dtype)


def _shape_plan(op: str):  # type: ignore[no-untyped-def]
    def plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
        shape = as_ints(a["shape"])
        if min(shape, default=0) < 0:
            raise ShapeError(f"{op}: shape {shape} has a negative dimension")
        return shape, _out_dtype(op, a, None)
    return plan


def _like_plan(op: str):  # type: ignore[no-untyped-def]
    def plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
        dtype = _out_dtype(op, a, dtypes[0])
        if op == "Bernoulli" and not dtypes[0].is_float:
            raise ShapeError(f"Bernoulli: input must be a float tensor of probabilities, got "
                             f"{dtypes[0]}")
        return shapes[0], dtype
    return plan


def _body(op: str, plan):  # type: ignore[no-untyped-def]
    def body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
        shapes = [shape_of(t) for t in ts]
        shape, dtype = plan(a, shapes, [t.dtype for t in ts])
        counter = flat_index(i, shape)
        if op == "Bernoulli":
            p = ts[0][i]
            real = _real(p.dtype)
            hit = unit(a.get("seed"), counter, real) < p.astype(real)
            return hit if dtype.is_bool else hit.astype(dtype)
        value = _value(op, a, counter, dtype)
        # the *Like forms read only their input's shape; it stays a kernel argument
        return keep_inputs(value, ts[:1])
    return body


def _op(name: str, attrs: dict[str, object], like: bool) -> OpDef:
    plan = _like_plan(name) if like else _shape_plan(name)
    return injective(name, ("input",) if like else (), plan, _body(name, plan), attrs,
                     n_data=1 if like else 0)


_UNIFORM = {"dtype": None, "high": 1.0, "low": 0.0, "seed": None}
_NORMAL = {"dtype": None, "mean": 0.0, "scale": 1.0, "seed": None}

OPS: dict[str, OpDef] = {
    "RandomUniform": _op("RandomUniform", {**_UNIFORM, "shape": REQUIRED}, like=False),
    "RandomUniformLike": _op("RandomUniformLike", _UNIFORM, like=True),
    "RandomNormal": _op("RandomNormal", {**_NORMAL, "shape": REQUIRED}, like=False),
    "RandomNormalLike": _op("RandomNormalLike", _NORMAL, like=True),
    "Bernoulli": _op("Bernoulli", {"dtype": None, "seed": None}, like=True),
}

__all__ = ["OPS", "hashes", "mix", "seed_key", "unit"]
