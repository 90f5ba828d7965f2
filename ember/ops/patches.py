"""Patch ops (ONNX semantics): Col2Im.

Col2Im is the inverse of the im2col rearrangement: input (N, C * prod(block_shape), L)
holds, for every sliding-block position (L of them, row-major over the positions of each
spatial axis), the block's values; the output (N, C, *image_shape) sums, at every pixel,
the values all blocks put there. Gathered rather than scattered, pixel p along an axis
receives kernel offset k from block position q = (p + pad_begin - k * dilation) / stride
when that division is exact and 0 <= q < positions. It is one te reduction over the kernel
offsets (one reduce axis per spatial axis) with the reads guarded; the generic reduction
schedule makes it parallel.
"""

from __future__ import annotations

import math
from typing import Sequence

from ember import te
from ember.errors import ShapeError
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Expr
from ember.types import TensorType


def _ints(a: Attrs, key: str, count: int, default: int) -> list[int]:
    value = a.get(key)
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return [default] * count
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    if len(values) != count:
        raise ShapeError(f"Col2Im: {key} {tuple(values)} must have {count} entries")
    return values


def _plan(a: Attrs, shape: tuple[int, ...]) -> tuple[list[int], list[int], list[int],
                                                       list[int], list[int], list[int]]:
    """(image, block, dilations, strides, pads, block positions per axis), all checked."""
    given = a["image_shape"]
    image = _ints(a, "image_shape", len(given) if isinstance(given, (list, tuple)) else 1, 0)
    block = _ints(a, "block_shape", len(image), 0)
    rank = len(image)
    dil = _ints(a, "dilations", rank, 1)
    strides = _ints(a, "strides", rank, 1)
    pads = _ints(a, "pads", 2 * rank, 0)
    if min(image) < 1 or min(block) < 1 or min(dil) < 1 or min(strides) < 1 or min(pads) < 0:
        raise ShapeError(f"Col2Im: image_shape {tuple(image)}, block_shape {tuple(block)}, "
                         f"dilations and strides must be >= 1 and pads >= 0")
    if len(shape) != 3:
        raise ShapeError(f"Col2Im: input must be 3-D (N, C * prod(block_shape), L), got "
                         f"shape {shape}")
    kernel = math.prod(block)
    if shape[1] % kernel:
        raise ShapeError(f"Col2Im: input's axis 1 ({shape[1]}) must be a multiple of "
                         f"prod(block_shape) = {kernel}")
    positions = []
    for d in range(rank):
        span = image[d] + pads[d] + pads[d + rank] - dil[d] * (block[d] - 1) - 1
        if span < 0:
            raise ShapeError(f"Col2Im: block {block[d]} (dilation {dil[d]}) does not fit "
                             f"image axis {d} of {image[d]} with pads")
        positions.append(span // strides[d] + 1)
    if math.prod(positions) != shape[2]:
        raise ShapeError(f"Col2Im: input's axis 2 ({shape[2]}) must be the number of block "
                         f"positions, {' x '.join(map(str, positions))} = "
                         f"{math.prod(positions)}")
    return image, block, dil, strides, pads, positions


def _infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x = types[0] if types else None
    if x is None:
        raise ShapeError("Col2Im needs an input")
    image, block, *_ = _plan(a, x.shape)
    return [TensorType((x.shape[0], x.shape[1] // math.prod(block), *image), x.dtype)]


def _compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    assert x is not None
    shape = tuple(int(d.value) for d in x.shape)  # type: ignore[attr-defined]
    image, block, dil, strides, pads, positions = _plan(a, shape)
    rank = len(image)
    kernel = math.prod(block)
    ks = [te.reduce_axis((0, b), name=f"col2im_k{d}") for d, b in enumerate(block)]
    acc = "float64" if x.dtype.bits == 64 else "float32" if x.dtype.is_float else str(x.dtype)

    def body(n: Expr, c: Expr, *p: Expr) -> Expr:
        conds: list[Expr] = []
        qs: list[Expr] = []
        for d in range(rank):
            q = p[d] + pads[d] - ks[d].var * dil[d]
            conds.append(q >= 0)
            if strides[d] > 1:
                conds.append(q % strides[d] == 0)
                q = q // strides[d]
            conds.append(q < positions[d])
            qs.append(q)
        channel: Expr = c * kernel
        offset: Expr = te.const(0)
        for d in range(rank):
            offset = offset * block[d] + ks[d].var
        column: Expr = te.const(0)
        for d in range(rank):
            column = column * positions[d] + qs[d]
        value = te.if_then_else(te.all(*conds), x[n, channel + offset, column].astype(acc),
                                te.const(0, acc))
        return te.sum(value, axis=ks)

    out_shape = (shape[0], shape[1] // kernel, *image)
    total = te.compute(out_shape, body, name="col2im_sum")
    out = te.compute(out_shape, lambda *i: total[i].astype(x.dtype), name="col2im",
                     tag="Col2Im")
    return [out]  # type: ignore[list-item]


OPS: dict[str, OpDef] = {
    "Col2Im": OpDef("Col2Im", ("input", "image_shape", "block_shape"), _infer, _compute,
                    Pattern.REDUCTION,
                    attrs={"image_shape": REQUIRED, "block_shape": REQUIRED, "dilations": None,
                           "pads": None, "strides": None},
                    attr_inputs=("image_shape", "block_shape")),
}
