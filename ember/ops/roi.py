"""Region ops (ONNX semantics): RoiAlign.

RoiAlign pools each region of interest (rois: (R, 4) as x1, y1, x2, y2 in input
coordinates times spatial_scale; batch_indices: (R,) the image each is in) of X (N, C, H, W)
into an output_height x output_width grid: every bin averages (mode avg) or takes the
largest of (mode max) a sampling_ratio x sampling_ratio grid of bilinear samples. It is one
te reduction over the samples of a bin. half_pixel shifts the region by half a pixel;
output_half_pixel (opset 10's only mode) does not, and makes regions at least 1 x 1.

A sample more than one pixel outside X reads 0; inside, it is clamped to the last row and
column. Mode max follows onnxruntime and ONNX's reference: the largest of the bilinear
taps, each weighted, over the samples (not the largest interpolated value).

sampling_ratio 0 is adaptive: ceil(region height / output_height) samples a bin per axis,
which depends on the region's values. The reduction then runs over at most
ceil((H + 1) / output_height) + 1 (rows; columns alike) samples and masks the rest, enough
for every region inside the image's sampling range [-1, H]; a region larger than that is
sampled at that many points per bin (of its own spacing) instead of more.
"""

from __future__ import annotations

import math
from typing import Sequence

from ember import te, tir
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Expr
from ember.types import TensorType

_MODES = ("avg", "max")
_TRANSFORMS = ("half_pixel", "output_half_pixel")


def _check(a: Attrs, x: tuple[int, ...], rois: tuple[int, ...], idx: tuple[int, ...]
           ) -> tuple[int, int, int]:
    """(output height, output width, sampling ratio), all checked."""
    if a["mode"] not in _MODES:
        raise UnsupportedOpError(f"RoiAlign: mode={a['mode']!r} is not supported (expected "
                                 f"one of {_MODES})")
    if a["coordinate_transformation_mode"] not in _TRANSFORMS:
        raise UnsupportedOpError(f"RoiAlign: coordinate_transformation_mode="
                                 f"{a['coordinate_transformation_mode']!r} is not supported "
                                 f"(expected one of {_TRANSFORMS})")
    if len(x) != 4:
        raise ShapeError(f"RoiAlign: X must be 4-D (N, C, H, W), got shape {x}")
    if len(rois) != 2 or rois[1] != 4:
        raise ShapeError(f"RoiAlign: rois must have shape (num_rois, 4), got {rois}")
    if idx != (rois[0],):
        raise ShapeError(f"RoiAlign: batch_indices of shape {idx} must be ({rois[0]},), one "
                         "per region")
    oh, ow, ratio = int(a["output_height"]), int(a["output_width"]), int(a["sampling_ratio"])
    if oh < 1 or ow < 1:
        raise ShapeError(f"RoiAlign: output_height and output_width must be >= 1, got "
                         f"{oh} and {ow}")
    if ratio < 0:
        raise ShapeError(f"RoiAlign: sampling_ratio must be >= 0, got {ratio}")
    return oh, ow, ratio


def _infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    if len(types) < 3 or any(t is None for t in types[:3]):
        raise ShapeError("RoiAlign needs X, rois and batch_indices")
    x, rois, idx = types[0], types[1], types[2]
    assert x is not None and rois is not None and idx is not None
    if not x.dtype.is_float or rois.dtype != x.dtype:
        raise ShapeError(f"RoiAlign: X and rois must be floats of one type, got {x.dtype} and "
                         f"{rois.dtype}")
    if not idx.dtype.is_int:
        raise ShapeError(f"RoiAlign: batch_indices must be integers, got {idx.dtype}")
    oh, ow, _ = _check(a, x.shape, rois.shape, idx.shape)
    return [TensorType((rois.shape[0], x.shape[1], oh, ow), x.dtype)]


def _compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, rois, idx = tensors[0], tensors[1], tensors[2]
    assert x is not None and rois is not None and idx is not None
    shape = tuple(int(d.value) for d in x.shape)  # type: ignore[attr-defined]
    count = int(rois.shape[0].value)  # type: ignore[attr-defined]
    oh, ow, ratio = _check(a, shape, (count, 4), (count,))
    _, _, height, width = shape
    real = "float64" if x.dtype.bits == 64 else "float32"
    half = a["coordinate_transformation_mode"] == "half_pixel"
    scale = float(a["spatial_scale"])
    use_max = a["mode"] == "max"
    if ratio > 0:
        gy_max, gx_max = ratio, ratio
    else:
        gy_max = math.ceil((height + 1) / oh) + 1
        gx_max = math.ceil((width + 1) / ow) + 1
    iy = te.reduce_axis((0, gy_max), name="roi_iy")
    ix = te.reduce_axis((0, gx_max), name="roi_ix")

    def f(v: float) -> Expr:
        return te.const(v, real)

    def region(r: Expr) -> tuple[Expr, Expr, Expr, Expr]:
        """(start y, start x, bin height, bin width) of region r."""
        offset = 0.5 if half else 0.0
        x1, y1, x2, y2 = (rois[r, te.const(k)].astype(real) * f(scale) for k in range(4))
        rh, rw = y2 - y1, x2 - x1
        if not half:
            rh, rw = te.max(rh, f(1.0)), te.max(rw, f(1.0))
        return y1 - f(offset), x1 - f(offset), rh / f(float(oh)), rw / f(float(ow))

    def grid(size: Expr, top: int) -> Expr:
        """Samples per bin along one axis (int32)."""
        if ratio > 0:
            return te.const(ratio)
        return te.min(te.ceil(size).astype("int32"), te.const(top))

    def axis_taps(pos: Expr, extent: int, lets: list[tuple[tir.Var, Expr]], name: str
                  ) -> tuple[Expr, Expr, Expr, Expr, Expr]:
        """(inside, low index, high index, low weight, high weight) of one coordinate."""
        def bind(value: Expr, suffix: str) -> Expr:
            var = tir.Var(f"{name}_{suffix}", value.dtype)
            lets.append((var, value))
            return var

        pos = bind(pos, "pos")
        inside = (pos >= f(-1.0)) & (pos <= f(float(extent)))
        clamped = te.max(pos, f(0.0))
        low = bind(te.min(clamped.astype("int32"), te.const(extent - 1)), "low")
        at_end = low >= extent - 1
        high = te.if_then_else(at_end, low, low + 1)
        frac = bind(te.if_then_else(at_end, f(0.0), clamped - low.astype(real)), "frac")
        return inside, low, high, f(1.0) - frac, frac

    def body(r: Expr, c: Expr, ph: Expr, pw: Expr) -> Expr:
        lets: list[tuple[tir.Var, Expr]] = []
        y0, x0, bh, bw = region(r)
        gy, gx = grid(bh, gy_max), grid(bw, gx_max)
        y = y0 + ph.astype(real) * bh + (iy.var.astype(real) + f(0.5)) * bh / gy.astype(real)
        xx = x0 + pw.astype(real) * bw + (ix.var.astype(real) + f(0.5)) * bw / gx.astype(real)
        in_y, ylo, yhi, wy0, wy1 = axis_taps(y, height, lets, "y")
        in_x, xlo, xhi, wx0, wx1 = axis_taps(xx, width, lets, "x")
        n = te.cast(idx[r], "int32")
        taps = [x[n, c, yi, xi].astype(real) * wy * wx
                for yi, wy in ((ylo, wy0), (yhi, wy1)) for xi, wx in ((xlo, wx0), (xhi, wx1))]
        inside = in_y & in_x
        used = (iy.var < gy) & (ix.var < gx)
        if use_max:
            value = te.max(te.max(taps[0], taps[1]), te.max(taps[2], taps[3]))
            value = te.if_then_else(inside, value, f(0.0))
            value = te.if_then_else(used, value, te.min_value(real))
        else:
            value = te.if_then_else(inside, taps[0] + taps[1] + taps[2] + taps[3], f(0.0))
            value = te.if_then_else(used, value, f(0.0))
        for var, bound in reversed(lets):
            value = tir.Let(var, bound, value)
        if use_max:
            return te.max(value, axis=[iy, ix])
        return te.sum(value, axis=[iy, ix])

    pooled = te.compute((count, shape[1], oh, ow), body, name="roi_pool")

    def finish(r: Expr, c: Expr, ph: Expr, pw: Expr) -> Expr:
        value = pooled[r, c, ph, pw]
        if use_max and ratio > 0:
            return value.astype(x.dtype)
        _, _, bh, bw = region(r)
        gy, gx = grid(bh, gy_max), grid(bw, gx_max)
        if use_max:  # a bin with no samples (an empty region) is 0
            return tir.Select((gy > 0) & (gx > 0), value, f(0.0)).astype(x.dtype)
        return (value / te.max(gy * gx, te.const(1)).astype(real)).astype(x.dtype)

    out = te.compute((count, shape[1], oh, ow), finish, name="roi_align", tag="RoiAlign")
    return [out]  # type: ignore[list-item]


OPS: dict[str, OpDef] = {
    "RoiAlign": OpDef("RoiAlign", ("X", "rois", "batch_indices"), _infer, _compute,
                      Pattern.REDUCTION,
                      attrs={"coordinate_transformation_mode": "half_pixel", "mode": "avg",
                             "output_height": 1, "output_width": 1, "sampling_ratio": 0,
                             "spatial_scale": 1.0}),
}
