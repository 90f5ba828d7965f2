"""Shared pieces of the convolution and pooling ops: attribute parsing, output geometry,
zero padding as a te stage, and small schedule helpers."""

from __future__ import annotations

from collections.abc import Sequence

from ember import te
from ember.errors import ScheduleError, ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.registry import Attrs
from ember.te.relations import loop_structure
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import Expr, IntImm

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def shape_of(t: Tensor) -> tuple[int, ...]:
    return tuple(int(d.value) for d in t.shape)  # type: ignore[attr-defined]


def extent(iv: object, stage: Stage | None = None) -> int:
    """The trip count of `iv`: an op's own axis, or (given its `stage`) a loop that split or
    fuse made, whose extent follows from the axes it came from."""
    if stage is not None:
        roots = [*stage.op.axis, *getattr(stage.op, "reduce_axis", ())]  # type: ignore
        return loop_structure(stage, {r: extent(r) for r in roots}).extents[iv]  # type: ignore
    dom = iv.dom  # type: ignore[attr-defined]
    if not isinstance(dom.extent, IntImm) or dom.extent.value <= 0:
        raise ScheduleError(f"loop '{iv.name}' was made by split or fuse: "  # type: ignore
                            "pass its stage to extent()")
    return dom.extent.value


def pick_tile(n: int, limit: int) -> int:
    """The largest divisor of n that is at most limit (tiles without tails); 1 for an empty
    extent (a zero-size tensor has no tiles to fit)."""
    if n < 1 or limit < 1:
        return 1
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def spatial_attr(attrs: Attrs, key: str, nsp: int, default: int, node: str = "") -> list[int]:
    value = attrs.get(key)
    if value is None or len(value) == 0:
        return [default] * nsp
    if len(value) != nsp:
        raise ShapeError(f"{node}attribute '{key}' has {len(value)} values, expected {nsp} "
                         f"(one per spatial dimension)")
    return [int(v) for v in value]


def resolve_pads(attrs: Attrs, in_sp: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int]) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial dimension from `pads` or `auto_pad`."""
    nsp = len(in_sp)
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto not in AUTO_PADS:
        raise UnsupportedOpError(f"auto_pad={auto!r} is not supported (expected one of "
                                 f"{AUTO_PADS})")
    if auto == "VALID":
        return [(0, 0)] * nsp
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for i in range(nsp):
            size = -(-in_sp[i] // strides[i])
            total = max(0, (size - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                        - in_sp[i])
            small, large = total // 2, total - total // 2
            out.append((small, large) if auto == "SAME_UPPER" else (large, small))
        return out
    pads = attrs.get("pads")
    if pads is None or len(pads) == 0:
        return [(0, 0)] * nsp
    if len(pads) != 2 * nsp:
        raise ShapeError(f"attribute 'pads' has {len(pads)} values, expected {2 * nsp}")
    if any(int(p) < 0 for p in pads):
        raise ShapeError(f"attribute 'pads' must be non-negative, got {tuple(pads)}")
    return [(int(pads[i]), int(pads[i + nsp])) for i in range(nsp)]


def kernel_strides_dilations(attrs: Attrs, ws: Sequence[int]
                             ) -> tuple[list[int], list[int], list[int]]:
    """The kernel's spatial sizes (checked against `kernel_shape`), strides and dilations of a
    Conv or ConvTranspose whose weight has shape `ws`."""
    nsp = len(ws) - 2
    kernel = list(ws[2:])
    ks = attrs.get("kernel_shape")
    if ks and tuple(int(k) for k in ks) != tuple(kernel):
        raise ShapeError(f"kernel_shape {tuple(ks)} does not match W's spatial shape "
                         f"{tuple(kernel)}")
    return (kernel, spatial_attr(attrs, "strides", nsp, 1),
            spatial_attr(attrs, "dilations", nsp, 1))


# -- Conv -----------------------------------------------------------------------------------
def conv_geometry(attrs: Attrs, x: TensorType | Tensor, w: TensorType | Tensor
                   ) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[int]]:
    """(kernel, strides, dilations, pads, output spatial sizes); checks the shapes."""
    xs = x.shape if isinstance(x, TensorType) else shape_of(x)
    ws = w.shape if isinstance(w, TensorType) else shape_of(w)
    if len(xs) < 3 or len(xs) > 5:
        raise ShapeError(f"input X must be [N, C, spatial...] with 1-3 spatial dimensions, "
                         f"got shape {tuple(xs)}")
    if len(ws) != len(xs):
        raise ShapeError(f"weight W has shape {tuple(ws)}, expected rank {len(xs)} like X "
                         f"{tuple(xs)}")
    nsp = len(xs) - 2
    group = int(attrs.get("group", 1))
    if group < 1 or xs[1] % group or ws[0] % group:
        raise ShapeError(f"group={group} must divide the input channels ({xs[1]}) and the "
                         f"output channels ({ws[0]})")
    if ws[1] * group != xs[1]:
        raise ShapeError(f"input has {xs[1]} channels but W {tuple(ws)} with group={group} "
                         f"expects {ws[1] * group}")
    kernel, strides, dilations = kernel_strides_dilations(attrs, ws)
    if min(strides + dilations) < 1:
        raise ShapeError(f"strides {strides} and dilations {dilations} must be positive")
    pads = resolve_pads(attrs, xs[2:], kernel, strides, dilations)
    out = []
    for i in range(nsp):
        span = (kernel[i] - 1) * dilations[i] + 1
        size = (xs[2 + i] + pads[i][0] + pads[i][1] - span) // strides[i] + 1
        if size <= 0:
            raise ShapeError(f"spatial dimension {i}: input {xs[2 + i]} with pads {pads[i]} is "
                             f"smaller than the dilated kernel {span}")
        out.append(size)
    return kernel, strides, dilations, pads, out


def pad_input(x: Tensor, pads: Sequence[tuple[int, int]], name: str = "Conv.pad") -> Tensor:
    """x with zero padding on its spatial (trailing) dimensions; x itself if none."""
    if all(p == (0, 0) for p in pads):
        return x
    xs = shape_of(x)
    lead = len(xs) - len(pads)
    shape = xs[:lead] + tuple(s + b + e for s, (b, e) in zip(xs[lead:], pads))
    zero = te.const(0, x.dtype)

    def fpad(*i: Expr) -> Expr:
        conds = []
        src = list(i[:lead])
        for d, (b, _) in enumerate(pads):
            v = i[lead + d]
            if b:
                conds.append(v >= b)
            if b or pads[d][1]:
                conds.append(v < b + xs[lead + d])
            src.append(v - b if b else v)
        return te.if_then_else(te.all(*conds), x[tuple(src)], zero) if conds else x[tuple(src)]

    return te.compute(shape, fpad, name="pad", tag=name)  # type: ignore[return-value]


def find_stage(s: Schedule, tags: Sequence[str]) -> Stage | None:
    for stage in s.stages:
        if isinstance(stage.op, ComputeOp) and stage.op.tag in tags:
            return stage
    return None
