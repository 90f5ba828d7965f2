"""Conv and ConvTranspose (ONNX semantics): shape rules, te computes, x86 schedules.

Conv computes in NCHW with the output channels blocked by `ob` (8 or 16) inside the kernel:

    pad[n, c, h, w]                  padded input (materialized once)
    pack[o, ic, kh, kw, oi]          weights, output-channel block innermost (per block)
    conv[n, o, oh, ow, oi] = sum_{ic, kh, kw} pad[n, g*IC + ic, ...] * pack[o, ic, kh, kw, oi]
    out[n, oc, oh, ow] = conv[n, oc // ob, oh, ow, oc % ob] (+ bias[oc])

The micro-kernel keeps an `ow_tile x ob` tile of `conv` in vector registers (vectorized over
oi, unrolled over ow) while streaming input channels and kernel taps; fused epilogues run on
the tile before it is stored. Depthwise and channel counts that are no multiple of 8 use a
plain NCHW compute vectorized over the output width instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember import dtype as dt
from ember import te
from ember.errors import ScheduleError, ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.conv_blocked import OPS as BLOCKED_OPS
from ember.ops.conv_common import (
    AUTO_PADS,
    conv_geometry,
    extent,
    find_stage,
    kernel_strides_dilations,
    pad_input,
    pick_tile,
    resolve_pads,
    shape_of,
    spatial_attr,
)
from ember.ops.budgets import column_budget, vectors
from ember.ops.generic import inline_injective, schedule_flat, vector_lanes
from ember.ops.knobs import Knobs, Space, Task, in_range, resolve_knobs, up_to
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

CONV_TAGS = ("Conv", "ConvTranspose")
__all__ = ["AUTO_PADS", "CONV_TAGS", "OPS", "ConvNCHWKnobs", "conv_core", "conv_geometry",
           "extent", "find_stage", "pad_input", "pick_tile", "resolve_pads", "schedule_conv",
           "shape_of", "spatial_attr"]


def _infer_conv(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    if x.dtype != w.dtype or not x.dtype.is_float:
        raise ShapeError(f"X and W must be the same float type, got {x.dtype} and {w.dtype}")
    *_, out = conv_geometry(attrs, x, w)
    if bias is not None and bias.shape != (w.shape[0],):
        raise ShapeError(f"bias B has shape {bias.shape}, expected ({w.shape[0]},)")
    return [TensorType((x.shape[0], w.shape[0], *out), x.dtype)]


def conv_block(out_per_group: int, in_per_group: int) -> int:
    """Output-channel block of the blocked compute (0: use the plain NCHW compute)."""
    if in_per_group == 1 and out_per_group < 16:
        return 0  # depthwise: one input channel per output, nothing to reuse across a block
    for ob in (16, 8):
        if out_per_group % ob == 0:
            return ob
    return 0


def conv_core(x: Tensor, w: Tensor, bias: Tensor | None, strides: Sequence[int],
              dilations: Sequence[int], group: int, out_sp: Sequence[int], tag: str,
              weight_index: object = None) -> Tensor:
    """Convolution of an already padded x with weights w [OC, IC/group, *kernel].

    `weight_index(oc, ic, *k)` (if given) maps a weight read to w's indices (used by
    ConvTranspose to flip and transpose its kernel without a copy)."""
    xs, ws = shape_of(x), shape_of(w)
    n_batch, nsp = xs[0], len(out_sp)
    oc_total = ws[0] if weight_index is None else _oc_total(w, group)
    icg = xs[1] // group
    ocg = oc_total // group
    kernel = list(ws[2:2 + nsp])
    wread = weight_index or (lambda o, c, *k: (o, c, *k))
    ic = te.reduce_axis((0, icg), name="ic")
    ks = [te.reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(kernel)]

    # float16 products are summed in float32 and rounded once, with the bias, at the end
    # (a float16 accumulator drifts by units in the last place over a window)
    wide = x.dtype == dt.float16

    def x_at(n: Expr, c: Expr, sp: Sequence[Expr]) -> Expr:
        v = x[(n, c, *[sp[d] * strides[d] + ks[d].var * dilations[d] for d in range(nsp)])]
        return v.astype(dt.float32) if wide else v

    def widen(v: Expr) -> Expr:
        return v.astype(dt.float32) if wide else v

    def finish(v: Expr, c: Expr) -> Expr:
        v = v + widen(bias[c]) if bias is not None else v
        return v.astype(x.dtype) if wide else v

    ob = conv_block(ocg, icg)
    if ob:
        blocks = oc_total // ob
        pack = te.compute((blocks, icg, *kernel, ob),
                          lambda o, c, *r: w[wread(o * ob + r[-1], c, *r[:-1])],
                          name="pack", tag=f"{tag}.pack")

        def fconv(n: Expr, o: Expr, *r: Expr) -> Expr:
            g = o // (ocg // ob) if group > 1 else te.const(0)
            return te.sum(x_at(n, g * icg + ic.var, r[:-1]) * widen(pack[(o, ic, *ks, r[-1])]),
                          axis=[ic, *ks])

        conv = te.compute((n_batch, blocks, *out_sp, ob), fconv, name="conv", tag=tag)

        def fout(n: Expr, c: Expr, *sp: Expr) -> Expr:
            return finish(conv[(n, c // ob, *sp, c % ob)], c)
    else:
        def fplain(n: Expr, c: Expr, *sp: Expr) -> Expr:
            g = c // ocg if group > 1 else te.const(0)
            weight = widen(w[wread(c, ic.var, *[k.var for k in ks])])
            return te.sum(x_at(n, g * icg + ic.var, sp) * weight, axis=[ic, *ks])

        conv = te.compute((n_batch, oc_total, *out_sp), fplain, name="conv", tag=tag)

        def fout(n: Expr, c: Expr, *sp: Expr) -> Expr:
            return finish(conv[(n, c, *sp)], c)

    return te.compute((n_batch, oc_total, *out_sp), fout, name="conv_out",
                      tag=f"{tag}.out")  # type: ignore[return-value]


def _oc_total(w: Tensor, group: int) -> int:
    return shape_of(w)[1] * group  # ConvTranspose W: [C_in, OC / group, *k]


def _compute_conv(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    _, strides, dilations, pads, out = conv_geometry(attrs, x, w)
    padded = pad_input(x, pads)
    return [conv_core(padded, w, bias, strides, dilations, int(attrs["group"]), out, "Conv")]


# -- knobs ----------------------------------------------------------------------------------
VECTOR_TILE = 28  # the widest output-column tile (blocked: 14 for blocks wider than 16)


@dataclass(frozen=True)
class ConvNCHWKnobs(Knobs):
    """Choices of the NCHW Conv / ConvTranspose schedule.

    ow_tile: output columns per tile (blocked compute: unrolled over vector registers of
    one channel block; plain compute: the vector); parallel_rows: the parallel loop also
    runs over the output rows (the weights are then packed once, before the loop, instead
    of per channel block inside it); blocked compute with 2+ spatial dimensions only.
    """

    ow_tile: int = 1
    parallel_rows: bool = False

    @classmethod
    def space(cls, task: Task) -> Space:
        blocked, shape, _ = _conv_task(task)
        rows = (False, True) if blocked and len(shape) > 4 else (False,)
        return Space({"ow_tile": up_to(shape[-2] if blocked else shape[-1], VECTOR_TILE),
                      "parallel_rows": rows})

    @classmethod
    def default(cls, task: Task) -> ConvNCHWKnobs:
        blocked, shape, _ = _conv_task(task)
        # blocked: each output column of the tile is ob / lanes vector accumulators, so the
        # columns are budgets.column_budget (28 of one zmm on Zen 4, 12 of one ymm on AVX2);
        # plain: the columns are the vector, a full register (lanes) past an awkward width.
        # Parallel granularity: also over rows when (batch x channel blocks) < threads.
        facts = task.target.facts
        lanes = vector_lanes(task.target, "float32")
        if blocked:
            width, ob = shape[-2], shape[-1]
            limit = min(column_budget(facts, vectors(ob, lanes)), VECTOR_TILE)
            tile = pick_tile(width, limit)
            rows = len(shape) > 4 and shape[0] * shape[1] < task.threads
            return cls(tile, rows)
        width = shape[-1]
        tile = pick_tile(width, VECTOR_TILE)
        if tile < 4 and width > VECTOR_TILE:
            tile = min(lanes, width)
        return cls(tile, False)

    def check(self, task: Task) -> None:
        blocked, shape, _ = _conv_task(task)
        in_range(self, "ow_tile", 1, shape[-2] if blocked else shape[-1], "output columns")
        if self.parallel_rows and not (blocked and len(shape) > 4):
            raise self.reject("parallel_rows", "needs the blocked compute and 2+ spatial "
                              "dimensions")


def _conv_task(task: Task) -> tuple[bool, tuple[int, ...], str]:
    """(blocked compute?, the conv stage's shape, its tag) of a Conv/ConvTranspose group."""
    for tag in CONV_TAGS:
        conv = task.find(tag)
        if conv is not None:
            return task.find(f"{tag}.pack") is not None, shape_of(conv.outputs[0]), tag
    raise ScheduleError("ConvNCHWKnobs: no Conv stage in the task")


# -- schedule -------------------------------------------------------------------------------
def schedule_conv(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                  ) -> Schedule:
    """Schedule a group whose anchor is Conv/ConvTranspose (with any elementwise epilogue);
    see ConvNCHWKnobs for its choices."""
    k = resolve_knobs(ConvNCHWKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    conv = find_stage(s, CONV_TAGS)
    assert conv is not None, "schedule_conv: no Conv stage in the group"
    tag = conv.op.tag  # type: ignore[attr-defined]
    pad = find_stage(s, (f"{tag}.pad",))
    pack = find_stage(s, (f"{tag}.pack",))
    if pad is not None:
        pad.compute_root()
    out = s[outs[0]]
    conv_shape = shape_of(conv.op.outputs[0])
    blocked = pack is not None
    out_shape = conv_shape[:1] + (conv_shape[1] * conv_shape[-1],) + conv_shape[2:-1] \
        if blocked else conv_shape
    if len(outs) != 1 or shape_of(outs[0]) != out_shape:
        # unusual group: compute the convolution whole, then the outputs
        _schedule_pad_root(pad, target)
        _schedule_conv_root(conv, pack, blocked, target)
        for t in outs:
            schedule_flat(s[t], target, str(t.dtype))
        return s
    n, c, *sp = out.op.axis  # type: ignore[attr-defined]
    ow = sp[-1]
    if blocked:
        _schedule_pad_root(pad, target)
        ob = conv_shape[-1]
        co, ci = out.split(c, ob)
        wo, wi = out.split(ow, k.ow_tile)
        out.reorder(n, co, *sp[:-1], wo, ci, wi)
        outer = out.fuse(n, co)
        if not k.parallel_rows:
            out.parallel(outer)
            assert pack is not None
            pack.compute_at(out, outer)
        else:
            outer = out.fuse(outer, *sp[:-1])
            out.parallel(outer)
            assert pack is not None
            pack.compute_root()
            pack.parallel(pack.op.axis[0])  # type: ignore[attr-defined]
        pack.vectorize(pack.op.axis[-1])  # type: ignore[attr-defined]
        out.vectorize(wi)
        conv.compute_at(out, wo)
        *_, cw, coi = conv.op.axis  # type: ignore[attr-defined]
        conv.reorder(*conv.op.reduce_axis, cw, coi)  # type: ignore[attr-defined]
        conv.unroll(cw)
        conv.vectorize(coi)
        return s
    wo, wi = out.split(ow, k.ow_tile)
    single_channel = extent(conv.op.reduce_axis[0]) == 1  # type: ignore[attr-defined]
    if pad is not None and single_channel:
        # depthwise: pad each channel's plane right before its rows are computed (in cache)
        outer = out.fuse(n, c)
        pad.compute_at(out, outer)
        pad.vectorize(pad.split(pad.op.axis[-1], 16)[1])  # type: ignore[attr-defined]
    else:
        outer = out.fuse(n, c, *sp[:-1])
        _schedule_pad_root(pad, target)
    out.parallel(outer)
    out.vectorize(wi)
    conv.compute_at(out, wo)
    cw = conv.op.axis[-1]  # type: ignore[attr-defined]
    conv.reorder(*conv.op.reduce_axis, cw)  # type: ignore[attr-defined]
    conv.vectorize(cw)
    return s


def _schedule_pad_root(pad: Stage | None, target: Target) -> None:
    if pad is not None:
        schedule_flat(pad, target, str(pad.op.outputs[0].dtype))


def _schedule_conv_root(conv: Stage, pack: Stage | None, blocked: bool, target: Target) -> None:
    axes = list(conv.op.axis)  # type: ignore[attr-defined]
    reduce_axes = list(conv.op.reduce_axis)  # type: ignore[attr-defined]
    if pack is not None:
        pack.compute_root()
        pack.parallel(pack.op.axis[0])  # type: ignore[attr-defined]
    if blocked:
        *outer_axes, cw, coi = axes
        wo, wi = conv.split(cw, pick_tile(extent(cw), 14))
        conv.reorder(*outer_axes, wo, *reduce_axes, wi, coi)
        conv.unroll(wi)
        conv.vectorize(coi)
        conv.parallel(conv.fuse(*outer_axes[:2]))
    else:
        *outer_axes, cw = axes
        wo, wi = conv.split(cw, pick_tile(extent(cw), 16))
        conv.reorder(*outer_axes, wo, *reduce_axes, wi)
        conv.vectorize(wi)
        conv.parallel(conv.fuse(*outer_axes[:2]))


# -- ConvTranspose --------------------------------------------------------------------------
def _transpose_geometry(attrs: Attrs, xs: Sequence[int], ws: Sequence[int]
                        ) -> tuple[list[int], list[int], list[int], list[tuple[int, int]],
                                   list[int]]:
    """(kernel, strides, dilations, pads, output sizes) of a ConvTranspose."""
    if len(xs) < 3 or len(xs) > 5 or len(ws) != len(xs):
        raise ShapeError(f"X {tuple(xs)} and W {tuple(ws)} must be [N, C, spatial...] and "
                         f"[C, OC/group, kernel...] of the same rank (3 to 5)")
    nsp = len(xs) - 2
    group = int(attrs.get("group", 1))
    if group < 1 or xs[1] % group:
        raise ShapeError(f"group={group} must divide the input channels ({xs[1]})")
    if ws[0] != xs[1]:
        raise ShapeError(f"input has {xs[1]} channels but W {tuple(ws)} expects {ws[0]}")
    kernel, strides, dilations = kernel_strides_dilations(attrs, ws)
    out_pad = spatial_attr(attrs, "output_padding", nsp, 0)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto not in AUTO_PADS:
        raise UnsupportedOpError(f"auto_pad={auto!r} is not supported (expected one of "
                                 f"{AUTO_PADS})")
    full = [strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
            for i in range(nsp)]
    output_shape = attrs.get("output_shape")
    if output_shape:
        target_sp = [int(v) for v in output_shape][-nsp:]
        pads = []
        for i in range(nsp):
            total = full[i] - target_sp[i]
            if total < 0:
                # a larger output than the full transposed convolution grows at the end,
                # as output_padding would (the extra positions receive no taps)
                pads.append((0, total))
                continue
            # SAME_UPPER puts the odd unit of padding at the end, otherwise at the beginning
            big, small = total - total // 2, total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i in range(nsp):
            total = max(0, full[i] - xs[2 + i] * strides[i])
            big, small = total - total // 2, total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    elif auto == "VALID":
        pads = [(0, 0)] * nsp
    else:
        pads = resolve_pads({"pads": attrs.get("pads")}, xs[2:], kernel, strides, dilations)
    out = [full[i] - pads[i][0] - pads[i][1] for i in range(nsp)]
    if min(out) <= 0:
        raise ShapeError(f"ConvTranspose output would be empty: {tuple(out)}")
    return kernel, strides, dilations, pads, out


def _infer_conv_transpose(attrs: Attrs, inputs: Sequence[TensorType | None]
                          ) -> list[TensorType]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    if x.dtype != w.dtype or not x.dtype.is_float:
        raise ShapeError(f"X and W must be the same float type, got {x.dtype} and {w.dtype}")
    *_, out = _transpose_geometry(attrs, x.shape, w.shape)
    oc = w.shape[1] * int(attrs.get("group", 1))
    if bias is not None and bias.shape != (oc,):
        raise ShapeError(f"bias B has shape {bias.shape}, expected ({oc},)")
    return [TensorType((x.shape[0], oc, *out), x.dtype)]


def _compute_conv_transpose(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    """A stride-1 convolution over the input spread out by `strides` and padded by
    `dilation * (k - 1) - pad`, with the kernel flipped and its channel axes swapped."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    xs, ws = shape_of(x), shape_of(w)
    kernel, strides, dilations, pads, out = _transpose_geometry(attrs, xs, ws)
    nsp = len(kernel)
    group = int(attrs["group"])
    before = [(kernel[i] - 1) * dilations[i] - pads[i][0] for i in range(nsp)]
    spread = [out[i] + (kernel[i] - 1) * dilations[i] for i in range(nsp)]
    zero = te.const(0, x.dtype)

    def fspread(n: Expr, c: Expr, *p: Expr) -> Expr:
        conds, src = [], []
        for d in range(nsp):
            q = p[d] - before[d]
            conds += [q >= 0, q < (xs[2 + d] - 1) * strides[d] + 1]
            if strides[d] > 1:
                conds.append(q % strides[d] == 0)
                q = q // strides[d]
            src.append(q)
        return te.if_then_else(te.all(*conds), x[(n, c, *src)], zero)

    xd = te.compute((xs[0], xs[1], *spread), fspread, name="spread",
                    tag="ConvTranspose.pad")
    icg, ocg = xs[1] // group, ws[1]

    def flipped(o: Expr, c: Expr, *k: Expr) -> tuple[Expr, ...]:
        g = o // ocg if group > 1 else te.const(0)
        oo = o % ocg if group > 1 else o
        return (g * icg + c, oo, *[kernel[d] - 1 - k[d] for d in range(nsp)])

    return [conv_core(xd, w, bias, [1] * nsp, dilations, group, out,  # type: ignore[arg-type]
                      "ConvTranspose", weight_index=flipped)]


_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
               "pads": None, "strides": None}

OPS: dict[str, OpDef] = {
    "Conv": OpDef("Conv", ("X", "W", "B"), _infer_conv, _compute_conv, Pattern.OUT_FUSABLE,
                  schedule_conv, attrs=_CONV_ATTRS, knobs=ConvNCHWKnobs),
    "ConvTranspose": OpDef("ConvTranspose", ("X", "W", "B"), _infer_conv_transpose,
                           _compute_conv_transpose, Pattern.OUT_FUSABLE, schedule_conv,
                           knobs=ConvNCHWKnobs,
                           attrs={**_CONV_ATTRS, "output_padding": None,
                                  "output_shape": None}),
    **BLOCKED_OPS,
}
