"""ONNX ops that ember builds from its own ops: MaxUnpool.

MaxUnpool(X, I) writes each X value at its index I into zeros of the unpooled shape; the
indices count over the whole flattened output (as MaxPool's Indices output does). It
becomes Expand (the zeros) -> ScatterElements along the flattened output (a later index
wins, as in onnxruntime; an index out of range is dropped) -> Reshape, and, when the
`output_shape` input asks for a larger shape, Pad at the end of each spatial axis (the
indices keep referring to the default shape, as ONNX's definition does).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import Value

if TYPE_CHECKING:
    from ember.frontend.onnx import NodeContext, _Importer


def unpooled_shape(attrs: dict, shape: Sequence[int]) -> tuple[int, ...]:
    """The default output shape: (in - 1) * stride - pads + kernel per spatial axis."""
    rank = len(shape) - 2
    kernel = list(attrs.get("kernel_shape") or ())
    if rank < 1 or len(kernel) != rank:
        raise ShapeError(f"MaxUnpool: kernel_shape {tuple(kernel)} must give one size per "
                         f"spatial axis of X {tuple(shape)}")
    strides = list(attrs.get("strides") or [1] * rank)
    pads = list(attrs.get("pads") or [0] * (2 * rank))
    if len(strides) != rank or len(pads) != 2 * rank:
        raise ShapeError(f"MaxUnpool: strides {tuple(strides)} and pads {tuple(pads)} must "
                         f"have {rank} and {2 * rank} entries")
    if min(kernel) < 1 or min(strides) < 1 or min(pads) < 0:
        raise ShapeError(f"MaxUnpool: kernel_shape and strides must be >= 1 and pads >= 0, "
                         f"got {tuple(kernel)}, {tuple(strides)}, {tuple(pads)}")
    spatial = [(d - 1) * s - pads[k] - pads[k + rank] + kernel[k]
               for k, (d, s) in enumerate(zip(shape[2:], strides))]
    return (shape[0], shape[1], *spatial)


def convert_max_unpool(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    values = list(ctx.values) + [None] * 3
    x, indices, wanted = values[0], values[1], values[2]
    if x is None or indices is None:
        raise ShapeError("MaxUnpool needs X and I")
    if indices.type.shape != x.type.shape:
        raise ShapeError(f"MaxUnpool: I of shape {indices.type.shape} must have X's shape "
                         f"{x.type.shape}")
    if "storage_order" in ctx.attrs and ctx.attrs["storage_order"] != 0:
        raise UnsupportedOpError("MaxUnpool: storage_order=1 is not supported")
    default = unpooled_shape(ctx.attrs, x.type.shape)
    out_shape = default
    if wanted is not None:
        out_shape = tuple(int(v) for v in imp._need_constant(ctx, "output_shape", wanted))
        if len(out_shape) != len(default) or out_shape[:2] != default[:2] or any(
                o < d for o, d in zip(out_shape, default)):
            raise ShapeError(f"node '{ctx.label}' (MaxUnpool): output_shape {out_shape} must "
                             f"keep N and C and be at least the unpooled shape {default}")
    b, label = imp.builder, ctx.label
    size = math.prod(default)
    zero = imp.constant(ctx, np.zeros((), x.type.dtype.numpy), 0)
    (zeros,) = b.add("Expand", [zero], {"shape": (size,)}, name=f"{label}/zeros")
    (flat_x,) = b.add("Reshape", [x], {"shape": (-1,)}, name=f"{label}/values")
    (flat_i,) = b.add("Reshape", [indices], {"shape": (-1,)}, name=f"{label}/indices")
    (scattered,) = b.add("ScatterElements", [zeros, flat_i, flat_x], {"axis": 0},
                         name=f"{label}/scatter")
    if out_shape == default:
        return list(imp.add(ctx, "Reshape", [scattered], {"shape": default}))
    (unpooled,) = b.add("Reshape", [scattered], {"shape": default}, name=f"{label}/reshape")
    pads = [0] * len(default) + [o - d for o, d in zip(out_shape, default)]
    return list(imp.add(ctx, "Pad", [unpooled], {"pads": tuple(pads)}))


CONVERTERS = {"MaxUnpool": convert_max_unpool}
