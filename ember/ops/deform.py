"""Deformable convolution (ONNX semantics): DeformConv over 2 spatial dims.

Each kernel tap (kh, kw) of output position (oh, ow) reads X at its regular place
(oh * stride - pad + kh * dilation, likewise for w) moved by a learned, fractional offset
(offset: (N, offset_group * 2 * kH * kW, oH, oW), the y then x shift of every tap, one set
per group of C / offset_group input channels), with bilinear interpolation (a tap of the
four outside X reads 0), times the optional mask (N, offset_group * kH * kW, oH, oW).

Two stages: the sampled columns (N, C, kH, kW, oH, oW), each sample computed once and
shared by every output channel, then a convolution over them, a te reduction over the
group's channels and the kernel taps, plus the bias. The columns are laid out with the
output positions innermost, so the reduction vectorizes over output columns.
"""

from __future__ import annotations

from typing import Sequence

from ember import te, tir
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.generic import ReductionKnobs, schedule_flat, schedule_reduction_stage
from ember.ops.knobs import Knobs, resolve_knobs
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import Expr
from ember.types import TensorType


class _Plan:
    """Checked shapes and attributes of one DeformConv node."""

    def __init__(self, a: Attrs, shapes: Sequence[tuple[int, ...] | None]) -> None:
        x, w, offset = shapes[0], shapes[1], shapes[2]
        assert x is not None and w is not None and offset is not None
        if len(x) != 4 or len(w) != 4:
            raise UnsupportedOpError(f"DeformConv: only 2 spatial dims are supported (X and "
                                     f"W 4-D), got X {x} and W {w}")
        self.n, self.c, self.h, self.w = x
        self.oc, cg, self.kh, self.kw = w
        kernel = a.get("kernel_shape")
        if kernel and tuple(kernel) != (self.kh, self.kw):
            raise ShapeError(f"DeformConv: kernel_shape {tuple(kernel)} differs from W's "
                             f"{(self.kh, self.kw)}")
        self.group, self.offset_group = int(a["group"]), int(a["offset_group"])
        if self.group < 1 or self.c % self.group or self.oc % self.group or \
                cg != self.c // self.group:
            raise ShapeError(f"DeformConv: W {w} must be (M, C / group, kH, kW) with C = "
                             f"{self.c} and M divisible by group {self.group}")
        if self.offset_group < 1 or self.c % self.offset_group:
            raise ShapeError(f"DeformConv: offset_group {self.offset_group} must divide the "
                             f"{self.c} input channels")
        self.strides = list(a.get("strides") or (1, 1))
        self.dil = list(a.get("dilations") or (1, 1))
        self.pads = list(a.get("pads") or (0, 0, 0, 0))
        if len(self.strides) != 2 or len(self.dil) != 2 or len(self.pads) != 4 or \
                min(self.strides + self.dil) < 1 or min(self.pads) < 0:
            raise ShapeError(f"DeformConv: strides {self.strides}, dilations {self.dil} (2 "
                             f"entries, >= 1) and pads {self.pads} (4, >= 0) are invalid")
        self.oh = (self.h + self.pads[0] + self.pads[2] - self.dil[0] * (self.kh - 1) - 1) \
            // self.strides[0] + 1
        self.ow = (self.w + self.pads[1] + self.pads[3] - self.dil[1] * (self.kw - 1) - 1) \
            // self.strides[1] + 1
        if self.oh < 1 or self.ow < 1:
            raise ShapeError(f"DeformConv: the kernel {(self.kh, self.kw)} does not fit X {x}")
        taps = self.kh * self.kw
        want = {2: (self.n, self.offset_group * 2 * taps, self.oh, self.ow), 3: (self.oc,),
                4: (self.n, self.offset_group * taps, self.oh, self.ow)}
        names = {2: "offset", 3: "B", 4: "mask"}
        for pos, shape in want.items():
            if pos < len(shapes) and shapes[pos] is not None and shapes[pos] != shape:
                raise ShapeError(f"DeformConv: {names[pos]} has shape {shapes[pos]}, expected "
                                 f"{shape}")


def _infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    if len(types) < 3 or any(t is None for t in types[:3]):
        raise ShapeError("DeformConv needs X, W and offset")
    x = types[0]
    assert x is not None
    if not x.dtype.is_float or any(t is not None and t.dtype != x.dtype for t in types):
        raise ShapeError("DeformConv: every input must be a float tensor of X's type")
    p = _Plan(a, [None if t is None else t.shape for t in types])
    return [TensorType((p.n, p.oc, p.oh, p.ow), x.dtype)]


def _compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x, w, offset = tensors[0], tensors[1], tensors[2]
    bias = tensors[3] if len(tensors) > 3 else None
    mask = tensors[4] if len(tensors) > 4 else None
    assert x is not None and w is not None and offset is not None

    def dims(t: Tensor | None) -> tuple[int, ...] | None:
        return None if t is None else tuple(int(d.value) for d in t.shape)  # type: ignore

    p = _Plan(a, [dims(t) for t in tensors])
    real = "float64" if x.dtype.bits == 64 else "float32"
    per_offset = p.c // p.offset_group
    taps = p.kh * p.kw

    def f(v: float) -> Expr:
        return te.const(v, real)

    def sample(n: Expr, c: Expr, i: Expr, j: Expr, oy: Expr, ox: Expr) -> Expr:
        g = c // per_offset
        tap = i * p.kw + j
        dy = offset[n, g * (2 * taps) + 2 * tap, oy, ox].astype(real)
        dx = offset[n, g * (2 * taps) + 2 * tap + 1, oy, ox].astype(real)
        y_var, x_var = tir.Var("dcn_y", real), tir.Var("dcn_x", real)
        y0_var, x0_var = tir.Var("dcn_y0", "int32"), tir.Var("dcn_x0", "int32")
        y = (oy * p.strides[0] - p.pads[0] + i * p.dil[0]).astype(real) + dy
        xx = (ox * p.strides[1] - p.pads[1] + j * p.dil[1]).astype(real) + dx
        ly, lx = y_var - y0_var.astype(real), x_var - x0_var.astype(real)
        total: Expr | None = None
        for ky, wy in ((0, f(1.0) - ly), (1, ly)):
            for kx, wx in ((0, f(1.0) - lx), (1, lx)):
                yi, xi = y0_var + ky, x0_var + kx
                inside = (yi >= 0) & (yi < p.h) & (xi >= 0) & (xi < p.w)
                read = te.if_then_else(inside, x[n, c, yi, xi].astype(real), f(0.0))
                term = read * wy * wx
                total = term if total is None else total + term
        assert total is not None
        if mask is not None:
            total = total * mask[n, g * taps + tap, oy, ox].astype(real)
        value = tir.Let(x0_var, te.floor(x_var).astype("int32"), total)
        value = tir.Let(y0_var, te.floor(y_var).astype("int32"), value)
        value = tir.Let(x_var, xx, value)
        return tir.Let(y_var, y, value)

    cols = te.compute((p.n, p.c, p.kh, p.kw, p.oh, p.ow), sample, name="dcn_cols",
                      tag="DeformConv.sample")
    cg, og = p.c // p.group, p.oc // p.group
    rc = te.reduce_axis((0, cg), name="dcn_c")
    ri = te.reduce_axis((0, p.kh), name="dcn_i")
    rj = te.reduce_axis((0, p.kw), name="dcn_j")

    def conv(n: Expr, m: Expr, oy: Expr, ox: Expr) -> Expr:
        c = (m // og) * cg + rc.var
        return te.sum(w[m, rc, ri, rj].astype(real) * cols[n, c, ri, rj, oy, ox],
                      axis=[rc, ri, rj])

    total = te.compute((p.n, p.oc, p.oh, p.ow), conv, name="dcn_sum", tag="DeformConv.sum")

    def finish(n: Expr, m: Expr, oy: Expr, ox: Expr) -> Expr:
        value = total[n, m, oy, ox]
        if bias is not None:
            value = value + bias[m].astype(real)
        return value.astype(x.dtype)

    out = te.compute((p.n, p.oc, p.oh, p.ow), finish, name="deform_conv", tag="DeformConv")
    return [out]  # type: ignore[list-item]


def schedule_deform_conv(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                         ) -> Schedule:
    """The sampled columns at root (parallel, vectorized over output columns), the
    convolution over them vectorized along the output columns, the bias and cast inlined
    (ReductionKnobs: the vector width and parallelism of every stage)."""
    k = resolve_knobs(ReductionKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and not stage.is_output and not op.reduce_axis \
                and op.tag != "DeformConv.sample":
            stage.compute_inline()
    for stage in s.stages:
        op = stage.op
        if not isinstance(op, ComputeOp):
            continue
        if op.tag == "DeformConv.sample":
            schedule_flat(stage, target, str(op.output(0).dtype), k)
        elif op.reduce_axis:
            schedule_reduction_stage(stage, target, str(op.output(0).dtype),
                                     parallel=k.parallel, bits=k.vector_bits)
    for t in outs:
        schedule_flat(s[t], target, str(t.dtype), k)
    return s


OPS: dict[str, OpDef] = {
    "DeformConv": OpDef("DeformConv", ("X", "W", "offset", "B", "mask"), _infer, _compute,
                        Pattern.OPAQUE, schedule_deform_conv,
                        attrs={"dilations": None, "group": 1, "kernel_shape": None,
                               "offset_group": 1, "pads": None, "strides": None},
                        knobs=ReductionKnobs),
}
