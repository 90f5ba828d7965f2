"""ONNX's quantized operators as ember graph nodes: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

Correct first. Integer products are exact: MatMul runs on int32; convolutions (ember's Conv
is floating point) run on zero-point-shifted values in float32 when every partial sum stays
below 2**24 (so each is an exact integer), else in float64. Requantizing follows
onnxruntime: float(acc) * (a_scale * b_scale / y_scale), rounded half to even, plus the
zero point, saturated to the output type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import UnsupportedOpError
from ember.frontend.onnx_fold import elem_type, onnx_dtype
from ember.graph.ir import Value

if TYPE_CHECKING:
    from ember.frontend.onnx import NodeContext, _Importer

EXACT_FLOAT32 = 2 ** 24          # integers up to this magnitude are exact in float32
_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
           "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
           "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}
# quantized types that are floats: x / scale + zero point is rounded by the Cast to them
_FLOAT_FORMATS = frozenset({"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                            "float4e2m1"})


class _Emit:
    """Adds the nodes of one ONNX node's expansion, named after it."""

    def __init__(self, imp: _Importer, ctx: NodeContext) -> None:
        self.imp, self.ctx, self.count = imp, ctx, 0

    def __call__(self, op: str, inputs: Sequence[Value | None], **attrs: Any) -> Value:
        self.count += 1
        name = f"{self.ctx.label}/{op.lower()}{self.count}"
        return self.imp.builder.add(op, list(inputs), attrs, name=name)[0]

    def const(self, array: np.ndarray) -> Value:
        self.count += 1
        return self.imp._constant(f"{self.ctx.label}/c{self.count}", np.asarray(array))

    def cast(self, v: Value, dtype: DType) -> Value:
        return v if v.type.dtype == dtype else self("Cast", [v], to=elem_type(dtype))

    def along(self, v: Value, axis: int | None, rank: int,
              blocked: tuple[int, tuple[int, ...]] | None = None) -> Value:
        """A per-tensor (scalar) or per-axis (1-D) parameter shaped to broadcast at `axis`;
        `blocked` = (block size, x's shape) repeats a blocked one along `axis` to x's shape."""
        if blocked is not None and blocked[0] > 0:
            return self.blocks(v, axis, *blocked)
        if v.type.ndim == 0 or v.type.shape == (1,):
            return v
        if axis is None:
            raise UnsupportedOpError(f"a per-axis parameter of shape {v.type.shape} needs an "
                                     f"axis within the input's rank {rank}")
        if v.type.ndim != 1:
            raise UnsupportedOpError(f"a scale or zero point of shape {v.type.shape} is not "
                                     "supported (per-tensor or per-axis 1-D only; blocked "
                                     "quantization is not supported)")
        shape = tuple(v.type.shape[0] if d == axis else 1 for d in range(rank))
        if v.is_constant:
            return self.const(np.asarray(v.data).reshape(shape))
        return self("Reshape", [v], shape=shape)

    def blocks(self, v: Value, axis: int | None, block: int, x_shape: tuple[int, ...]
               ) -> Value:
        """Blocked quantization: each element of `v` covers `block` consecutive elements of
        x along `axis` (the last block may be short): v repeated to x's shape."""
        rank = len(x_shape)
        if axis is None or v.type.ndim != rank:
            raise UnsupportedOpError(f"blocked quantization needs a scale of x's rank {rank} "
                                     f"and an axis within it, got shape {v.type.shape}")
        want = tuple(-(-d // block) if i == axis else d for i, d in enumerate(x_shape))
        if v.type.shape != want:
            raise UnsupportedOpError(f"a scale or zero point of shape {v.type.shape} does not "
                                     f"fit x of shape {x_shape} with block_size={block} on "
                                     f"axis {axis} (expected {want})")
        shape = v.type.shape
        wide = shape[:axis + 1] + (block,) + shape[axis + 1:]
        u = self("Unsqueeze", [v], axes=(axis + 1,))
        u = self("Expand", [u], shape=wide)
        full = shape[:axis] + (shape[axis] * block,) + shape[axis + 1:]
        u = self("Reshape", [u], shape=full)
        if full[axis] != x_shape[axis]:
            u = self("Slice", [u], starts=(0,), ends=(x_shape[axis],), axes=(axis,))
        return u


def _axis(ctx: NodeContext, rank: int) -> int | None:
    """The quantization axis, None when out of range (only per-axis parameters need one)."""
    axis = int(ctx.attrs.get("axis", 1))
    if not -rank <= axis < rank:
        return None
    return axis + rank if axis < 0 else axis


def _blocking(ctx: NodeContext, x: Value) -> tuple[int, tuple[int, ...]]:
    """(block_size, x's shape): block_size 0 means per-tensor or per-axis parameters."""
    block = int(ctx.attrs.get("block_size", 0))
    if block < 0:
        raise UnsupportedOpError(f"block_size must be >= 0, got {block}")
    return block, x.type.shape


def _arg(ctx: NodeContext, index: int) -> Value | None:
    return ctx.values[index] if index < len(ctx.values) else None


def _requantize(emit: _Emit, acc: Value, scale: Value, zero: Value | None, out: DType
                ) -> Value:
    """saturate(round_half_even(acc * scale) + zero) as `out` (acc and scale floats)."""
    q = emit("Round", [emit("Mul", [acc, emit.cast(scale, acc.type.dtype)])])
    if zero is not None:
        q = emit("Add", [q, emit.cast(zero, q.type.dtype)])
    lo, hi = _RANGES[str(out)]
    return emit.cast(emit("Clip", [q], min=float(lo), max=float(hi)), out)


def _output_dtype(ctx: NodeContext, zero: Value | None) -> DType:
    if zero is not None:
        return zero.type.dtype
    code = int(ctx.attrs.get("output_dtype", 0))
    return onnx_dtype(code, "output_dtype") if code else dt.uint8


def _check_integer(what: str, v: Value) -> None:
    if str(v.type.dtype) not in _RANGES:
        raise UnsupportedOpError(f"{what} must be an integer tensor (2 to 32 bits), got "
                                 f"{v.type.dtype}")


def convert_quantize_linear(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """Integers: saturate(round_half_even(x / scale) + zero); float8 / float4:
    Cast(x / scale + zero, saturate), which rounds to the format's nearest even value."""
    x, scale, zero = ctx.values[0], _arg(ctx, 1), _arg(ctx, 2)
    assert x is not None and scale is not None
    blocked = _blocking(ctx, x)
    out = _output_dtype(ctx, zero)
    if str(out) not in _RANGES and str(out) not in _FLOAT_FORMATS or out == dt.int32:
        raise UnsupportedOpError(f"quantizing to {out} is not supported (8/16/4/2-bit "
                                 "integers, float8, float4e2m1)")
    emit = _Emit(imp, ctx)
    axis = _axis(ctx, x.type.ndim)
    xf = emit.cast(x, dt.float32) if x.type.dtype != dt.float64 else x
    scale_x = emit.cast(emit.along(scale, axis, x.type.ndim, blocked), xf.type.dtype)
    scaled = emit("Div", [xf, scale_x])
    z = None if zero is None else emit.along(zero, axis, x.type.ndim, blocked)
    if str(out) in _FLOAT_FORMATS:
        if z is not None:
            scaled = emit("Add", [scaled, emit.cast(z, scaled.type.dtype)])
        saturate = int(ctx.attrs.get("saturate", 1))
        return [emit("Cast", [scaled], to=elem_type(out), saturate=saturate)]
    one = emit.const(np.array(1, xf.type.dtype.numpy))
    return [_requantize(emit, scaled, one, z, out)]   # `saturate` concerns floats only


def convert_dequantize_linear(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """(x - zero) * scale: integers subtract in int32 (exact), float8 / float4 in float32."""
    x, scale, zero = ctx.values[0], _arg(ctx, 1), _arg(ctx, 2)
    assert x is not None and scale is not None
    blocked = _blocking(ctx, x)
    is_float = str(x.type.dtype) in _FLOAT_FORMATS
    if not is_float:
        _check_integer("x", x)
    emit = _Emit(imp, ctx)
    axis = _axis(ctx, x.type.ndim)
    # (x - zero) is exact in int32 for integers up to 16 bits, in float32 for float8
    wide = dt.float32 if is_float else dt.int32
    shifted = emit.cast(x, wide)
    if zero is not None:
        shifted = emit("Sub", [shifted, emit.cast(emit.along(zero, axis, x.type.ndim, blocked),
                                                  wide)])
    out = scale.type.dtype
    return [emit("Mul", [emit.cast(shifted, out), emit.along(scale, axis, x.type.ndim,
                                                             blocked)])]


def convert_dynamic_quantize_linear(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """uint8 with scale = (max(x, 0) - min(x, 0)) / 255 and zero = round(-min / scale)."""
    x = ctx.values[0]
    assert x is not None
    emit = _Emit(imp, ctx)
    zero_f = emit.const(np.array(0, np.float32))
    axes = tuple(range(x.type.ndim))
    hi = emit("Max", [emit("ReduceMax", [x], axes=axes, keepdims=0), zero_f])
    lo = emit("Min", [emit("ReduceMin", [x], axes=axes, keepdims=0), zero_f])
    scale = emit("Div", [emit("Sub", [hi, lo]), emit.const(np.array(255, np.float32))])
    zp_f = emit("Clip", [emit("Round", [emit("Div", [emit("Neg", [lo]), scale])])],
                min=0.0, max=255.0)
    zero = emit.cast(zp_f, dt.uint8)
    y = _requantize(emit, emit("Div", [x, scale]), emit.const(np.array(1, np.float32)),
                    zero, dt.uint8)
    return [y, scale, zero]


def _shifted_int32(emit: _Emit, v: Value, zero: Value | None, axis: int) -> Value:
    _check_integer("input", v)
    s = emit.cast(v, dt.int32)
    if zero is not None:
        s = emit("Sub", [s, emit.cast(emit.along(zero, axis, v.type.ndim), dt.int32)])
    return s


def _matmul_int(emit: _Emit, a: Value, a_zero: Value | None, b: Value,
                b_zero: Value | None) -> Value:
    # a's zero point is per row (axis -2 of a), b's per column (its last axis)
    return emit("MatMul", [_shifted_int32(emit, a, a_zero, max(a.type.ndim - 2, 0)),
                           _shifted_int32(emit, b, b_zero, b.type.ndim - 1)])


def convert_matmul_integer(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    a, b = ctx.values[0], ctx.values[1]
    assert a is not None and b is not None
    return [_matmul_int(_Emit(imp, ctx), a, _arg(ctx, 2), b, _arg(ctx, 3))]


def convert_qlinear_matmul(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = \
        (_arg(ctx, i) for i in range(8))
    assert a is not None and b is not None and a_scale is not None and b_scale is not None
    assert y_scale is not None and y_zero is not None
    emit = _Emit(imp, ctx)
    acc = emit.cast(_matmul_int(emit, a, a_zero, b, b_zero), dt.float32)
    # a's scale is per tensor (or per row), b's per column: both broadcast as given
    a_scale = emit.along(a_scale, max(a.type.ndim - 2, 0), a.type.ndim)
    scale = emit("Div", [emit("Mul", [a_scale, b_scale]), y_scale])
    return [_requantize(emit, acc, scale, y_zero, y_zero.type.dtype)]


def _conv_attrs(ctx: NodeContext) -> dict[str, Any]:
    keep = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
    return {k: v for k, v in ctx.attrs.items() if k in keep}


def _conv_int(emit: _Emit, ctx: NodeContext, x: Value, x_zero: Value | None, w: Value,
              w_zero: Value | None, bias_bound: int) -> Value:
    """The exact integer convolution sum(x - x_zero)(w - w_zero) as a float tensor."""
    _check_integer("x", x)
    _check_integer("w", w)
    terms = int(np.prod(w.type.shape[1:]))
    largest = terms * 255 * 255 + bias_bound       # |(x - zx)(w - zw)| <= 255 * 255
    ftype = dt.float32 if largest <= EXACT_FLOAT32 else dt.float64
    xs = emit.cast(_shifted_int32(emit, x, x_zero, 1), ftype)
    ws = emit.cast(_shifted_int32(emit, w, w_zero, 0), ftype)   # w's zero point per filter
    return emit("Conv", [xs, ws], **_conv_attrs(ctx))


def convert_conv_integer(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    x, w = ctx.values[0], ctx.values[1]
    assert x is not None and w is not None
    emit = _Emit(imp, ctx)
    return [emit.cast(_conv_int(emit, ctx, x, _arg(ctx, 2), w, _arg(ctx, 3), 0), dt.int32)]


def convert_qlinear_conv(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = \
        (_arg(ctx, i) for i in range(9))
    assert x is not None and w is not None and x_scale is not None and w_scale is not None
    assert y_scale is not None
    emit = _Emit(imp, ctx)
    bound = EXACT_FLOAT32 + 1 if bias is not None else 0     # unknown bias: float64
    if bias is not None and bias.is_constant:
        bound = int(np.abs(np.asarray(bias.data, np.int64)).max(initial=0))
    acc = _conv_int(emit, ctx, x, x_zero, w, w_zero, bound)
    rank = x.type.ndim
    if bias is not None:
        acc = emit("Add", [acc, emit.cast(emit.along(bias, 1, rank), acc.type.dtype)])
    acc = emit.cast(acc, dt.float32)            # onnxruntime: float(int32 accumulator)
    scale = emit("Div", [emit("Mul", [x_scale, emit.along(w_scale, 1, rank)]), y_scale])
    out = y_zero.type.dtype if y_zero is not None else dt.uint8
    z = None if y_zero is None else emit.along(y_zero, 1, rank)
    return [_requantize(emit, acc, scale, z, out)]


CONVERTERS = {
    "QuantizeLinear": convert_quantize_linear,
    "DequantizeLinear": convert_dequantize_linear,
    "DynamicQuantizeLinear": convert_dynamic_quantize_linear,
    "MatMulInteger": convert_matmul_integer,
    "QLinearMatMul": convert_qlinear_matmul,
    "ConvInteger": convert_conv_integer,
    "QLinearConv": convert_qlinear_conv,
}
