"""Image ops (ONNX semantics): Resize (nearest, linear, cubic), Upsample, DepthToSpace,
SpaceToDepth.

Resize follows opsets 11-19: `scales`, `sizes` and `roi` are attr-inputs (an empty tuple
counts as absent). Source coordinates are computed in float32
with the same expression order as onnxruntime, so nearest-neighbour ties agree with it.
Resize-10 and Upsample-7/9 use the same compute with coordinate_transformation_mode
"asymmetric"; their nearest mode is onnxruntime's legacy rule (see `_legacy_nearest`).

antialias=1 widens the linear (triangle) or cubic filter of every downsampled axis by
1 / scale, as ONNX defines it: 2 - 2 * (floor(-support / scale) + 1) taps around the source
coordinate (support 1 for linear, 2 for cubic), each weighted by the filter at
scale * its distance, the weights divided by their sum; taps past the edges read the edge
(or, with exclude_outside, are left out of the sum). Upsampled axes interpolate as without
antialias, which is what the widened filter reduces to at scale >= 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember import te, tir
from ember.dtype import DType
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.registry import REQUIRED, Attrs, OpDef
from ember.ops.transform import Shape, injective, normalize_axis, shape_of
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

_MODES = ("nearest", "linear", "cubic")
_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                     "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy")
_POLICIES = ("stretch", "not_larger", "not_smaller")

F32 = np.float32


@dataclass(frozen=True)
class AxisPlan:
    """How one axis is resized: sizes, the scale used for coordinates and the roi.

    `length` is the resized length as a real number (ONNX's `length_resized`, which
    align_corners divides by): scale * in_dim when `scales` is given, out_dim for `sizes`."""

    in_dim: int
    out_dim: int
    scale: float
    roi: tuple[float, float]
    length: float = 0.0

    def identity(self, coordinate_mode: str) -> bool:
        return (self.in_dim == self.out_dim and self.scale == 1.0
                and coordinate_mode != "tf_crop_and_resize")


def _floats(value: Any) -> tuple[float, ...]:
    if value is None:
        return ()
    return tuple(float(v) for v in np.asarray(value, dtype="float64").reshape(-1))


def _check_modes(a: Attrs) -> None:
    for key, allowed in (("mode", _MODES), ("coordinate_transformation_mode", _COORDINATE_MODES),
                         ("nearest_mode", _NEAREST_MODES),
                         ("keep_aspect_ratio_policy", _POLICIES)):
        if a[key] not in allowed:
            raise UnsupportedOpError(f"Resize: {key}='{a[key]}' is not supported "
                                     f"(expected one of {allowed})")
    if a["antialias"] not in (0, 1):
        raise UnsupportedOpError(f"Resize: antialias must be 0 or 1, got {a['antialias']!r}")
    if int(a["antialias"]) and a["mode"] == "nearest":
        raise UnsupportedOpError("Resize: antialias=1 needs mode linear or cubic (nearest has "
                                 "no filter to widen)")


def resize_plan(a: Attrs, shape: Shape) -> list[AxisPlan]:
    """Per-axis sizes and scales of a Resize, from `scales` or `sizes` (and `axes`)."""
    _check_modes(a)
    rank = len(shape)
    axes = ([normalize_axis(x, rank, "Resize", "axes entry") for x in a["axes"]]
            if a.get("axes") is not None else list(range(rank)))
    scales, sizes = _floats(a.get("scales")), _floats(a.get("sizes"))
    if bool(scales) == bool(sizes):
        raise ShapeError("Resize: give exactly one of scales and sizes")
    given = scales or sizes
    if len(given) != len(axes):
        raise ShapeError(f"Resize: {'scales' if scales else 'sizes'} {given} must have "
                         f"{len(axes)} entries, one per resized axis of shape {shape}")
    if min(given) <= 0:
        raise ShapeError(f"Resize: {'scales' if scales else 'sizes'} {given} must be positive")
    roi = _floats(a.get("roi"))
    if roi and len(roi) != 2 * len(axes):
        raise ShapeError(f"Resize: roi {roi} must have {2 * len(axes)} entries")
    plan = [AxisPlan(d, d, 1.0, (0.0, 1.0), float(d)) for d in shape]
    policy = a["keep_aspect_ratio_policy"]
    if sizes and policy != "stretch":
        ratios = [F32(s) / F32(shape[k]) for s, k in zip(sizes, axes)]
        common = F32(min(ratios) if policy == "not_larger" else max(ratios))
        outs = [math.floor(float(common * F32(shape[k])) + 0.5) for k in axes]
        factors = [float(common)] * len(axes)
        lengths = [float(o) for o in outs]
    elif sizes:
        outs = [int(s) for s in sizes]
        factors = [float(F32(s) / F32(shape[k])) for s, k in zip(sizes, axes)]
        lengths = [float(o) for o in outs]
    else:
        outs = [int(F32(shape[k]) * F32(s)) for s, k in zip(scales, axes)]
        factors = [float(F32(s)) for s in scales]
        # float32 rounding of a scale (0.6 * 5 = 3.0000001) must not move sampling points
        lengths = [f * shape[k] if abs(f * shape[k] - o) > 1e-6 * o else float(o)
                   for f, k, o in zip(factors, axes, outs)]
    for n, k in enumerate(axes):
        window = (roi[n], roi[n + len(axes)]) if roi else (0.0, 1.0)
        plan[k] = AxisPlan(shape[k], outs[n], factors[n], window, lengths[n])
    return plan


def source_coordinate(mode: str, x: Expr, p: AxisPlan) -> Expr:
    """The input coordinate (float32) of output index `x` along one axis."""
    xf = x.astype("float32")
    scale = te.const(p.scale, "float32")
    match mode:
        case "half_pixel":
            return (xf + 0.5) / scale - 0.5
        case "half_pixel_symmetric":
            adjustment = F32(p.out_dim) / (F32(p.scale) * F32(p.in_dim))
            offset = F32(p.in_dim) / F32(2) * (F32(1) - adjustment)
            return te.const(float(offset), "float32") + ((xf + 0.5) / scale - 0.5)
        case "pytorch_half_pixel":
            return (xf + 0.5) / scale - 0.5 if p.out_dim > 1 else te.const(0.0)
        case "align_corners":
            # the spec divides by length_resized - 1, fractional when it comes from a scale
            if p.out_dim == 1:
                return te.const(0.0)
            return xf * float((p.in_dim - 1) / (p.length - 1))
        case "asymmetric":
            return xf / scale
        case "tf_half_pixel_for_nn":
            return (xf + 0.5) / scale
        case _:  # tf_crop_and_resize
            start, end = (float(F32(v)) for v in p.roi)
            if p.out_dim == 1:
                return te.const(float(F32(0.5) * F32(start + end) * F32(p.in_dim - 1)))
            step = float(F32(end - start) * F32(p.in_dim - 1) / F32(p.out_dim - 1))
            return te.const(float(F32(start) * F32(p.in_dim - 1))) + xf * step


def _nearest_index(a: Attrs, c: Expr, p: AxisPlan) -> Expr:
    match a["nearest_mode"]:
        case "round_prefer_floor":
            r = te.ceil(c - 0.5)
        case "round_prefer_ceil":
            r = te.floor(c + 0.5)
        case "floor":
            r = te.floor(c)
        case "ceil":
            r = te.ceil(c)
        case _:  # legacy (Resize-10, Upsample): truncate when enlarging, ceil when shrinking
            r = te.ceil(c) if p.scale < 1.0 else te.trunc(c)
    return te.max(te.min(r.astype("int32"), p.in_dim - 1), 0)


def _cubic_weights(a: Attrs, t: Expr) -> list[Expr]:
    """Keys' cubic convolution weights of the 4 taps around a point at fraction t."""
    A = float(a["cubic_coeff_a"])
    d = [t + 1.0, t, 1.0 - t, 2.0 - t]   # distances of the taps
    far = [((x * A - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A for x in (d[0], d[3])]
    near = [((A + 2.0) * x - (A + 3.0)) * x * x + 1.0 for x in (d[1], d[2])]
    return [far[0], near[0], near[1], far[1]]


@dataclass(frozen=True)
class Taps:
    """The input points one output point reads along an axis: indices, their weights (None:
    a single point, copied), and the sum to divide by (exclude_outside renormalizes)."""

    indices: list[Expr]
    weights: list[Expr] | None = None
    total: Expr | None = None


Bindings = list[tuple[tir.Var, Expr]]


def bind(bindings: Bindings, value: Expr, name: str) -> Expr:
    """A variable standing for `value` (bound by a Let around the body), so a coordinate or
    weight used by several taps is computed once instead of copied into every use."""
    var = tir.Var(name, value.dtype)
    bindings.append((var, value))
    return var


def _taps(a: Attrs, mode: str, c: Expr, p: AxisPlan, lets: Bindings, axis: int) -> Taps:
    """The taps of one axis for linear or cubic interpolation."""
    coordinate_mode = a["coordinate_transformation_mode"]
    last = p.in_dim - 1
    if mode == "linear":
        if coordinate_mode != "tf_crop_and_resize":
            c = te.max(te.min(c, float(last)), 0.0)
        c = bind(lets, c, f"c{axis}")
        base = te.floor(c)
        frac = bind(lets, c - base, f"t{axis}")
        i0 = bind(lets, te.max(te.min(base.astype("int32"), last), 0), f"i{axis}")
        return Taps([i0, te.min(i0 + 1, last)], [1.0 - frac, frac])
    base = bind(lets, te.floor(c), f"b{axis}")
    i0 = bind(lets, base.astype("int32"), f"i{axis}")
    frac = bind(lets, c - base, f"t{axis}")
    weights = [bind(lets, w, f"w{axis}_{k}") for k, w in enumerate(_cubic_weights(a, frac))]
    raw = [i0 + (k - 1) for k in range(4)]
    indices = [te.max(te.min(r, last), 0) for r in raw]
    if not int(a["exclude_outside"]):
        return Taps(indices, weights)
    weights = [bind(lets, tir.Select((r >= 0) & (r <= last), w, te.const(0.0)), f"v{axis}_{k}")
               for k, (r, w) in enumerate(zip(raw, weights))]
    total = bind(lets, weights[0] + weights[1] + weights[2] + weights[3], f"s{axis}")
    return Taps(indices, weights, total)


def _filter(a: Attrs, mode: str, x: Expr) -> Expr:
    """The interpolation filter at distance x: the triangle, or Keys' cubic."""
    d = te.abs(x)
    if mode == "linear":
        return te.max(1.0 - d, 0.0)
    A = float(a["cubic_coeff_a"])
    near = ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0
    far = ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A
    return tir.Select(d <= 1.0, near, tir.Select(d < 2.0, far, te.const(0.0)))


def _antialias_taps(a: Attrs, mode: str, c: Expr, p: AxisPlan, lets: Bindings, axis: int
                    ) -> Taps:
    """The taps of one downsampled axis under antialias (see the module docstring)."""
    last = p.in_dim - 1
    scale = p.scale
    start = math.floor(-(1.0 if mode == "linear" else 2.0) / scale) + 1
    count = 2 - 2 * start
    c = bind(lets, c, f"c{axis}")
    base = te.floor(c)
    # the fraction is taken in (0, 1]: a point on a pixel is 1 past the pixel before it
    ratio = bind(lets, tir.Select(c == base, te.const(1.0), c - base), f"t{axis}")
    first = bind(lets, (c - ratio).astype("int32") + start, f"i{axis}")
    raw = [first + k for k in range(count)]
    weights = [bind(lets, _filter(a, mode, (float(start + k) - ratio) * scale), f"w{axis}_{k}")
               for k in range(count)]
    if int(a["exclude_outside"]):
        weights = [bind(lets, tir.Select((r >= 0) & (r <= last), w, te.const(0.0)),
                        f"v{axis}_{k}") for k, (r, w) in enumerate(zip(raw, weights))]
    total: Expr = weights[0]
    for w in weights[1:]:
        total = total + w
    indices = [te.max(te.min(r, last), 0) for r in raw]
    return Taps(indices, weights, bind(lets, total, f"s{axis}"))


def _interpolate(x: Tensor, per_axis: list[Taps], prefix: tuple[Expr, ...] = ()) -> Expr:
    """Separable interpolation: each axis sums its taps over the interpolated rest, so the
    weights of an axis appear once per tap of the axes before it, not once per corner."""
    axis = len(prefix)
    if axis == len(per_axis):
        return x[prefix].astype("float32")
    taps = per_axis[axis]
    if taps.weights is None:
        return _interpolate(x, per_axis, (*prefix, taps.indices[0]))
    value: Expr | None = None
    for index, weight in zip(taps.indices, taps.weights):
        term = _interpolate(x, per_axis, (*prefix, index)) * weight
        value = term if value is None else value + term
    assert value is not None
    return value / taps.total if taps.total is not None else value


def _resize_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x = ts[0]
    plan = resize_plan(a, shape_of(x))
    coordinate_mode, mode = a["coordinate_transformation_mode"], a["mode"]
    inside: list[Expr] = []     # tf_crop_and_resize: points outside the input extrapolate
    per_axis: list[Taps] = []
    lets: Bindings = []
    for axis, (o, p) in enumerate(zip(i, plan)):
        if p.identity(coordinate_mode):
            per_axis.append(Taps([o]))
            continue
        c = source_coordinate(coordinate_mode, o, p)
        if coordinate_mode == "tf_crop_and_resize":
            c = bind(lets, c, f"x{axis}")
            inside += [c >= 0.0, c <= float(p.in_dim - 1)]
        if mode == "nearest":
            per_axis.append(Taps([_nearest_index(a, c, p)]))
        elif int(a["antialias"]) and p.scale < 1.0:
            per_axis.append(_antialias_taps(a, mode, c, p, lets, axis))
        else:
            per_axis.append(_taps(a, mode, c, p, lets, axis))
    if mode == "nearest":
        value = x[tuple(taps.indices[0] for taps in per_axis)]
    else:
        value = _interpolate(x, per_axis).astype(x.dtype)
    if inside:
        fill = te.const(float(a["extrapolation_value"]), "float32").astype(x.dtype)
        value = te.if_then_else(te.all(*inside), value, fill)
    for var, bound in reversed(lets):
        value = tir.Let(var, bound, value)
    return value


def _resize_shape(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    plan = resize_plan(a, shapes[0])
    if a["mode"] != "nearest" and not dtypes[0].is_float:
        raise UnsupportedOpError(f"Resize: mode '{a['mode']}' on {dtypes[0]} input is not "
                                 "supported (float inputs only)")
    return tuple(p.out_dim for p in plan), dtypes[0]


_RESIZE_DEFAULTS = {
    "antialias": 0, "axes": None, "coordinate_transformation_mode": "half_pixel",
    "cubic_coeff_a": -0.75, "exclude_outside": 0, "extrapolation_value": 0.0,
    "keep_aspect_ratio_policy": "stretch", "mode": "nearest",
    "nearest_mode": "round_prefer_floor", "roi": None, "scales": None, "sizes": None,
}


def _upsample_attrs(a: Attrs) -> dict[str, Any]:
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(a["mode"], a["mode"])
    if mode not in ("nearest", "linear"):
        raise UnsupportedOpError(f"Upsample: mode '{a['mode']}' is not supported "
                                 "(expected 'nearest' or 'linear')")
    return {**_RESIZE_DEFAULTS, "mode": mode, "scales": a["scales"],
            "coordinate_transformation_mode": "asymmetric", "nearest_mode": "legacy"}


def _upsample_shape(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    return _resize_shape(_upsample_attrs(a), shapes, dtypes)


def _upsample_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    return _resize_body(_upsample_attrs(a), ts, i)


# ------------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth
def _block(op: str, a: Attrs, shape: Shape) -> int:
    if len(shape) != 4:
        raise ShapeError(f"{op}: input must be 4-D (N, C, H, W), got shape {shape}")
    b = int(a["blocksize"])
    if b < 1:
        raise ShapeError(f"{op}: blocksize must be positive, got {b}")
    return b


def _d2s_shape(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    n, c, h, w = shapes[0]
    b = _block("DepthToSpace", a, shapes[0])
    if c % (b * b):
        raise ShapeError(f"DepthToSpace: channels {c} are not divisible by blocksize^2 = {b * b}")
    if a["mode"] not in ("DCR", "CRD"):
        raise UnsupportedOpError(f"DepthToSpace: mode '{a['mode']}' is not supported "
                                 "(expected 'DCR' or 'CRD')")
    return (n, c // (b * b), h * b, w * b), dtypes[0]


def _d2s_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x = ts[0]
    b = int(a["blocksize"])
    c_out = shape_of(x)[1] // (b * b)
    n, c, h, w = i
    offset = h % b * b + w % b
    channel = offset * c_out + c if a["mode"] == "DCR" else c * (b * b) + offset
    return x[n, channel, h // b, w // b]


def _s2d_shape(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    n, c, h, w = shapes[0]
    b = _block("SpaceToDepth", a, shapes[0])
    if h % b or w % b:
        raise ShapeError(f"SpaceToDepth: height {h} and width {w} must be divisible by "
                         f"blocksize {b}")
    if a["mode"] not in ("DCR", "CRD"):
        raise UnsupportedOpError(f"SpaceToDepth: mode '{a['mode']}' is not supported "
                                 "(expected 'DCR' or 'CRD')")
    return (n, c * b * b, h // b, w // b), dtypes[0]


def _s2d_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x = ts[0]
    b = int(a["blocksize"])
    c_in = shape_of(x)[1]
    n, c, h, w = i
    if a["mode"] == "DCR":  # channel = block * C + c
        block, channel = c // c_in, c % c_in
    else:  # CRD: channel = c * b * b + block
        block, channel = c % (b * b), c // (b * b)
    return x[n, channel, h * b + block // b, w * b + block % b]


OPS: dict[str, OpDef] = {
    "Resize": injective("Resize", ("X", "roi", "scales", "sizes"), _resize_shape, _resize_body,
                        dict(_RESIZE_DEFAULTS), ("roi", "scales", "sizes")),
    "Upsample": injective("Upsample", ("X", "scales"), _upsample_shape, _upsample_body,
                          {"mode": "nearest", "scales": None}, ("scales",)),
    "DepthToSpace": injective("DepthToSpace", ("input",), _d2s_shape, _d2s_body,
                              {"blocksize": REQUIRED, "mode": "DCR"}),
    "SpaceToDepth": injective("SpaceToDepth", ("input",), _s2d_shape, _s2d_body,
                              {"blocksize": REQUIRED, "mode": "DCR"}),
}
