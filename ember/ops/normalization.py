"""Normalization ops (ONNX semantics): BatchNormalization (inference), LayerNormalization,
InstanceNormalization, LpNormalization, MeanVarianceNormalization, LRN.

The statistics are te reductions (mean first, then the centred variance: two passes over a
row, which stay in cache because the generic reduction schedule computes both per row inside
the output's parallel loop); the normalization itself is their fused elementwise epilogue.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ember import dtype as dt
from ember import te
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.elementwise import FLOATS, broadcast_shape, check_kinds, const_like, shape_of
from ember.ops.generic import InjectiveKnobs, schedule_injective
from ember.ops.knobs import Knobs
from ember.ops.reduction import normalize_axes, normalize_axis, reduce_compute
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor
from ember.tir.expr import Expr, const


def _row(index: Sequence[Expr], axes: Sequence[int]) -> tuple[Expr, ...]:
    """The index of a keepdims reduction result for an index of the full tensor."""
    return tuple(const(0) if d in axes else v for d, v in enumerate(index))


def moments(x: Tensor, axes: Sequence[int], name: str, tag: str
            ) -> tuple[Callable[[Sequence[Expr]], Expr], Callable[[Sequence[Expr]], Expr]]:
    """Per-row mean and (biased) variance of `x` over `axes` as index -> Expr functions of a
    full-tensor index; the sums are keepdims reductions tagged `tag`."""
    shape = shape_of(x)
    n = 1
    for d in axes:
        n *= shape[d]
    total = reduce_compute(x, axes, True, te.sum, name=f"{name}_sum", tag=tag)

    def mean(i: Sequence[Expr]) -> Expr:
        v = total[_row(i, axes)]
        return v / const_like(n, v)

    centred = te.compute(shape, lambda *i: x[i] - mean(i), name=f"{name}_centred")
    squares = reduce_compute(centred, axes, True, te.sum,  # type: ignore[arg-type]
                             lambda v: v * v, name=f"{name}_sqsum", tag=tag)

    def variance(i: Sequence[Expr]) -> Expr:
        v = squares[_row(i, axes)]
        return v / const_like(n, v)

    return mean, variance


def _require(name: str, types: Sequence[TensorType | None], count: int) -> list[TensorType]:
    given = list(types[:count])
    if len(given) < count or any(t is None for t in given):
        raise ShapeError(f"{name} needs {count} inputs, got "
                         f"{sum(t is not None for t in types)}")
    return given  # type: ignore[return-value]


def _check_broadcast_to(name: str, what: str, t: TensorType, shape: tuple[int, ...]) -> None:
    try:
        ok = broadcast_shape(t.shape, shape) == shape
    except ShapeError:
        ok = False
    if not ok:
        raise ShapeError(f"{name}: {what} of shape {t.shape} does not broadcast to {shape}")


# ------------------------------------------------------------------------------------------
# BatchNormalization (inference)
def _infer_batch_norm(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    if attrs["training_mode"]:
        raise UnsupportedOpError("BatchNormalization: training_mode=1 is not supported "
                                 "(inference only)")
    x, *params = _require("BatchNormalization", types, 5)
    check_kinds("BatchNormalization", FLOATS, x)
    if x.ndim < 2:
        raise ShapeError(f"BatchNormalization: X must have rank >= 2 (N, C, ...), got {x.shape}")
    for what, p in zip(("scale", "B", "input_mean", "input_var"), params):
        if p.shape != (x.shape[1],):
            raise ShapeError(f"BatchNormalization: {what} must have shape ({x.shape[1]},), "
                             f"got {p.shape}")
    return [TensorType(x.shape, x.dtype)]


def _batch_norm(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, scale, bias, mean, var = tensors[:5]
    assert x is not None and scale is not None and bias is not None
    assert mean is not None and var is not None
    eps = float(attrs["epsilon"])
    c = shape_of(scale)
    # per channel: y = x * factor + shift (two small stages the schedule computes once)
    factor = te.compute(c, lambda k: scale[k] / te.sqrt(var[k] + const_like(eps, var[k])),
                        name="bn_factor", tag="bn_channel")
    shift = te.compute(c, lambda k: bias[k] - mean[k] * factor[k],  # type: ignore[index]
                       name="bn_shift", tag="bn_channel")
    out = te.compute(shape_of(x), lambda *i: x[i] * factor[i[1]] + shift[i[1]],  # type: ignore
                     name="batchnormalization", tag="BatchNormalization")
    return [out]  # type: ignore[list-item]


def _schedule_batch_norm(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                         ) -> Schedule:
    """Per-channel factors once at root; everything else inlined into the flat outputs."""
    return schedule_injective(outs, target, knobs, root_tags=("bn_channel",))


# ------------------------------------------------------------------------------------------
# LayerNormalization, InstanceNormalization, MeanVarianceNormalization
def _infer_layer_norm(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x, scale = _require("LayerNormalization", types, 2)
    check_kinds("LayerNormalization", FLOATS, x)
    if attrs["stash_type"] not in (1, 11):
        raise UnsupportedOpError(f"LayerNormalization: stash_type {attrs['stash_type']} is not "
                                 "supported (1 = float32, 11 = float64)")
    axis = normalize_axis(int(attrs["axis"]), x.ndim, "LayerNormalization")
    normalized = x.shape[axis:]
    _check_broadcast_to("LayerNormalization", "Scale", scale, normalized)
    bias = types[2] if len(types) > 2 else None
    if bias is not None:
        _check_broadcast_to("LayerNormalization", "B", bias, normalized)
    stat_type = dt.float64 if attrs["stash_type"] == 11 else dt.float32
    stats = TensorType(x.shape[:axis] + (1,) * (x.ndim - axis), stat_type)
    return [x, stats, stats]


def _layer_norm(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, scale = tensors[0], tensors[1]
    bias = tensors[2] if len(tensors) > 2 else None
    assert x is not None and scale is not None
    shape = shape_of(x)
    rank = len(shape)
    axis = normalize_axis(int(attrs["axis"]), rank, "LayerNormalization")
    stat_type = "float64" if attrs["stash_type"] == 11 else "float32"
    xs = x if str(x.dtype) == stat_type else te.compute(
        shape, lambda *i: x[i].astype(stat_type), name="stash")
    axes = tuple(range(axis, rank))
    mean, var = moments(xs, axes, "layernorm", "LayerNormalization")  # type: ignore[arg-type]
    eps = float(attrs["epsilon"])

    def inv_std(i: Sequence[Expr]) -> Expr:
        v = var(i)
        return te.rsqrt(v + const_like(eps, v))

    def param(t: Tensor, i: Sequence[Expr]) -> Expr:
        tail = tuple(i[axis:])
        offset = len(tail) - len(t.shape)
        index = [const(0) if int(d.value) == 1 else tail[offset + k]  # type: ignore[attr-defined]
                 for k, d in enumerate(t.shape)]
        return t[tuple(index)].astype(stat_type)

    def normalized(*i: Expr) -> Expr:
        y = (xs[i] - mean(i)) * inv_std(i) * param(scale, i)
        if bias is not None:
            y = y + param(bias, i)
        return y.astype(x.dtype)

    y = te.compute(shape, normalized, name="layernormalization", tag="LayerNormalization")
    stat_shape = tuple(shape[:axis]) + (1,) * (rank - axis)
    mean_out = te.compute(stat_shape, lambda *i: mean(i), name="layernorm_mean",
                          tag="LayerNormalization")
    inv_out = te.compute(stat_shape, lambda *i: inv_std(i), name="layernorm_invstd",
                         tag="LayerNormalization")
    return [y, mean_out, inv_out]  # type: ignore[list-item]


def _infer_instance_norm(attrs: Attrs, types: Sequence[TensorType | None]
                         ) -> list[TensorType]:
    x, scale, bias = _require("InstanceNormalization", types, 3)
    check_kinds("InstanceNormalization", FLOATS, x)
    if x.ndim < 3:
        raise ShapeError(f"InstanceNormalization: input must have rank >= 3 (N, C, D1, ...), "
                         f"got {x.shape}")
    for what, p in (("scale", scale), ("B", bias)):
        if p.shape != (x.shape[1],):
            raise ShapeError(f"InstanceNormalization: {what} must have shape ({x.shape[1]},), "
                             f"got {p.shape}")
    return [x]


def _instance_norm(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, scale, bias = tensors[:3]
    assert x is not None and scale is not None and bias is not None
    shape = shape_of(x)
    mean, var = moments(x, tuple(range(2, len(shape))), "instancenorm", "InstanceNormalization")
    eps = float(attrs["epsilon"])

    def body(*i: Expr) -> Expr:
        v = var(i)
        return (x[i] - mean(i)) * te.rsqrt(v + const_like(eps, v)) * scale[i[1]] + bias[i[1]]

    return [te.compute(shape, body, name="instancenormalization",  # type: ignore[list-item]
                       tag="InstanceNormalization")]


def _mvn_axes(attrs: Attrs, rank: int) -> tuple[int, ...]:
    return normalize_axes(tuple(attrs["axes"]), rank, "MeanVarianceNormalization")


def _infer_mvn(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    (x,) = _require("MeanVarianceNormalization", types, 1)
    check_kinds("MeanVarianceNormalization", FLOATS, x)
    _mvn_axes(attrs, x.ndim)
    return [x]


def _mvn(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    assert x is not None
    shape = shape_of(x)
    mean, var = moments(x, _mvn_axes(attrs, len(shape)), "mvn", "MeanVarianceNormalization")

    def body(*i: Expr) -> Expr:
        v = var(i)
        return (x[i] - mean(i)) / (te.sqrt(v) + const_like(1e-9, v))

    return [te.compute(shape, body, name="meanvariancenormalization",  # type: ignore
                       tag="MeanVarianceNormalization")]


# ------------------------------------------------------------------------------------------
def _infer_lp_norm(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    (x,) = _require("LpNormalization", types, 1)
    check_kinds("LpNormalization", FLOATS, x)
    if attrs["p"] not in (1, 2):
        raise UnsupportedOpError(f"LpNormalization: p must be 1 or 2, got {attrs['p']!r}")
    normalize_axis(int(attrs["axis"]), x.ndim, "LpNormalization")
    return [x]


def _lp_norm(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    assert x is not None
    shape = shape_of(x)
    axis = normalize_axis(int(attrs["axis"]), len(shape), "LpNormalization")
    p = int(attrs["p"])
    prologue = te.abs if p == 1 else (lambda v: v * v)
    norm = reduce_compute(x, (axis,), True, te.sum, prologue, name="lpnorm_sum",
                          tag="LpNormalization")

    zero = te.const(0, x.dtype)

    def body(*i: Expr) -> Expr:
        # a row whose norm is 0 is all zeros and stays so (not 0 / 0)
        n = norm[_row(i, (axis,))]
        return te.if_then_else(n == zero, zero, x[i] / (n if p == 1 else te.sqrt(n)))

    return [te.compute(shape, body, name="lpnormalization",  # type: ignore[list-item]
                       tag="LpNormalization")]


# ------------------------------------------------------------------------------------------
def _infer_lrn(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    (x,) = _require("LRN", types, 1)
    check_kinds("LRN", FLOATS, x)
    if x.ndim < 3:
        raise ShapeError(f"LRN: input must be (N, C, D1, ...), got shape {x.shape}")
    size = attrs["size"]
    if not isinstance(size, int) or size < 1:
        raise ShapeError(f"LRN: size must be a positive integer, got {size!r}")
    return [x]


def _lrn(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    """y = x / (bias + alpha / size * sum of x^2 over channels c - floor((size-1)/2) ..
    c + ceil((size-1)/2))^beta (channels outside the tensor count as 0)."""
    x = tensors[0]
    assert x is not None
    shape = shape_of(x)
    size, channels = int(attrs["size"]), shape[1]
    before = (size - 1) // 2
    k = te.reduce_axis((0, size), name="lrn_k")

    def squares(n: Expr, c: Expr, *rest: Expr) -> Expr:
        src = c + k.var - before
        v = x[(n, te.max(te.min(src, channels - 1), 0), *rest)]
        inside = te.all(src >= 0, src < channels)
        return te.sum(te.if_then_else(inside, v * v, const_like(0.0, v)), axis=k)

    total = te.compute(shape, squares, name="lrn_sqsum", tag="LRN")

    def body(*i: Expr) -> Expr:
        t = total[i]
        scale = const_like(float(attrs["bias"]), t) + \
            const_like(float(attrs["alpha"]) / size, t) * t
        return x[i] / te.pow(scale, const_like(float(attrs["beta"]), t))

    return [te.compute(shape, body, name="lrn", tag="LRN")]  # type: ignore[list-item]


OPS: dict[str, OpDef] = {
    "LRN": OpDef(
        "LRN", ("X",), _infer_lrn, _lrn, Pattern.REDUCTION,
        attrs={"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": REQUIRED}),
    "BatchNormalization": OpDef(
        "BatchNormalization", ("X", "scale", "B", "input_mean", "input_var"),
        _infer_batch_norm, _batch_norm, Pattern.BROADCAST, _schedule_batch_norm,
        attrs={"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1},
        knobs=InjectiveKnobs),
    "LayerNormalization": OpDef(
        "LayerNormalization", ("X", "Scale", "B"), _infer_layer_norm, _layer_norm,
        Pattern.REDUCTION, attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
        num_outputs=3),
    "InstanceNormalization": OpDef(
        "InstanceNormalization", ("input", "scale", "B"), _infer_instance_norm,
        _instance_norm, Pattern.REDUCTION, attrs={"epsilon": 1e-5}),
    "MeanVarianceNormalization": OpDef(
        "MeanVarianceNormalization", ("X",), _infer_mvn, _mvn, Pattern.REDUCTION,
        attrs={"axes": (0, 2, 3)}),
    "LpNormalization": OpDef(
        "LpNormalization", ("input",), _infer_lp_norm, _lp_norm, Pattern.REDUCTION,
        attrs={"axis": -1, "p": 2}),
}
