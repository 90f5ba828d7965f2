"""Operators whose output shapes depend on their input values: NonZero, NonMaxSuppression,
Unique, Compress, MelWeightMatrix.

Their results are computed on the host by the numpy functions in HOST_OPS (ember's own
implementations of ONNX's definitions): at import when the inputs are constants, else at run
time by ember.specialize, between compiled programs, with the result bound as a constant
of what follows (compiled once per distinct result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import Value

if TYPE_CHECKING:
    from ember.frontend.onnx import NodeContext, _Importer

HostOp = Callable[[Mapping[str, Any], Sequence[np.ndarray | None]], list[np.ndarray]]


def nonzero(attrs: Mapping[str, Any], arrays: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The indices of the non-zero elements, one row per dimension (row-major order)."""
    x = arrays[0]
    assert x is not None
    x = np.asarray(x)
    if x.ndim == 0:
        return [np.zeros((0, int(x != 0)), np.int64)]
    return [np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1)]


def non_max_suppression(attrs: Mapping[str, Any], arrays: Sequence[np.ndarray | None]
                        ) -> list[np.ndarray]:
    """Greedy per batch and class: boxes by descending score (scores above
    score_threshold), each kept unless its IoU with a kept box exceeds iou_threshold, at
    most max_output_boxes_per_class; rows (batch, class, box)."""
    boxes, scores = np.asarray(arrays[0], np.float32), np.asarray(arrays[1], np.float32)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or \
            scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ShapeError(f"NonMaxSuppression: boxes {boxes.shape} must be (B, N, 4) and "
                         f"scores {scores.shape} (B, C, N)")

    def scalar(index: int, default: float) -> float:
        a = arrays[index] if index < len(arrays) else None
        return default if a is None or np.asarray(a).size == 0 else \
            float(np.asarray(a).reshape(-1)[0])

    limit, iou_limit = int(scalar(2, 0)), scalar(3, 0.0)
    threshold = scalar(4, -np.inf) if len(arrays) > 4 and arrays[4] is not None else None
    corners: list[np.ndarray] = [boxes[..., i] for i in range(4)]
    if int(attrs.get("center_point_box", 0)):       # (x centre, y centre, width, height)
        xc, yc, w, h = corners
        corners = [yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2]
    y1, x1, y2, x2 = corners
    top, bottom = np.minimum(y1, y2), np.maximum(y1, y2)
    left, right = np.minimum(x1, x2), np.maximum(x1, x2)
    area = (bottom - top) * (right - left)
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [int(i) for i in np.argsort(-s, kind="stable")
                     if threshold is None or s[i] > threshold]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if all(_iou(b, i, j, top, bottom, left, right, area) <= iou_limit for j in kept):
                    kept.append(i)
            selected += [(b, c, i) for i in kept]
    return [np.array(selected, np.int64).reshape(-1, 3)]


def _iou(b: int, i: int, j: int, top: np.ndarray, bottom: np.ndarray, left: np.ndarray,
         right: np.ndarray, area: np.ndarray) -> float:
    h = min(bottom[b, i], bottom[b, j]) - max(top[b, i], top[b, j])
    w = min(right[b, i], right[b, j]) - max(left[b, i], left[b, j])
    if h <= 0 or w <= 0:
        return 0.0
    inter = float(h) * float(w)
    union = float(area[b, i]) + float(area[b, j]) - inter
    return inter / union if union > 0 else 0.0


def _axis(attrs: Mapping[str, Any], rank: int, op: str) -> int | None:
    """The op's `axis` attribute made non-negative (None when absent); checked."""
    axis = attrs.get("axis")
    if axis is None:
        return None
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis!r} is out of range for rank {rank}")
    return axis % rank


def unique(attrs: Mapping[str, Any], arrays: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The distinct elements (or slices along `axis`), sorted or in order of first
    occurrence; with the index of each one's first occurrence, the index of each input
    element (or slice) in the output, and how often each occurs."""
    x = np.asarray(arrays[0])
    if attrs.get("sorted", 1) not in (0, 1):
        raise UnsupportedOpError(f"Unique: sorted must be 0 or 1, got {attrs['sorted']!r}")
    axis = _axis(attrs, x.ndim, "Unique")
    if axis is not None and x.ndim == 0:
        raise ShapeError("Unique: axis is given but the input is a scalar")
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not attrs.get("sorted", 1):  # reorder by first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return [values, *(np.asarray(a, np.int64) for a in (first, inverse, counts))]


def compress(attrs: Mapping[str, Any], arrays: Sequence[np.ndarray | None]
             ) -> list[np.ndarray]:
    """The slices of the input along `axis` (of the flattened input without one) whose
    condition is true; a condition shorter than the axis drops the slices past its end."""
    x, condition = np.asarray(arrays[0]), arrays[1]
    return [np.take(x if "axis" in attrs else x.reshape(-1),
                    compress_indices(attrs, x.shape, condition),
                    axis=_axis(attrs, x.ndim, "Compress") or 0)]


def compress_indices(attrs: Mapping[str, Any], shape: Sequence[int],
                     condition: np.ndarray | None) -> np.ndarray:
    """The indices Compress keeps along its axis (int64)."""
    assert condition is not None
    cond = np.asarray(condition)
    if cond.ndim != 1:
        raise ShapeError(f"Compress: condition must be 1-D, got shape {cond.shape}")
    axis = _axis(attrs, len(shape), "Compress")
    length = int(np.prod(shape)) if axis is None else int(shape[axis])
    if cond.size > length:
        raise ShapeError(f"Compress: condition has {cond.size} elements, more than the "
                         f"{length} along the axis")
    return np.nonzero(cond.astype(bool))[0].astype(np.int64)


def mel_weight_matrix(attrs: Mapping[str, Any], arrays: Sequence[np.ndarray | None]
                      ) -> list[np.ndarray]:
    """ONNX's triangular mel filter bank, (dft_length // 2 + 1, num_mel_bins): num_mel_bins
    + 2 points evenly spaced on the mel scale (2595 log10(1 + f / 700)) between the edges,
    mapped to DFT bins floor((dft_length + 1) f / sample_rate); filter i rises from point i
    to point i + 1 and falls to point i + 2."""
    from ember.ops.elementwise import onnx_dtype

    def scalar(index: int, name: str) -> float:
        a = arrays[index] if index < len(arrays) else None
        if a is None or np.asarray(a).size != 1:
            raise ShapeError(f"MelWeightMatrix: {name} must be a scalar")
        return float(np.asarray(a).reshape(-1)[0])

    bins, length = int(scalar(0, "num_mel_bins")), int(scalar(1, "dft_length"))
    rate, low, high = scalar(2, "sample_rate"), scalar(3, "lower_edge_hertz"), \
        scalar(4, "upper_edge_hertz")
    if bins < 1 or length < 1 or rate <= 0 or not 0 <= low < high:
        raise ShapeError(f"MelWeightMatrix: needs num_mel_bins >= 1, dft_length >= 1, "
                         f"sample_rate > 0 and 0 <= lower_edge_hertz < upper_edge_hertz, got "
                         f"{bins}, {length}, {rate}, {low}, {high}")
    dtype = onnx_dtype(int(attrs.get("output_datatype", 1)))
    mel_low, mel_high = (2595 * np.log10(1 + f / 700) for f in (low, high))
    points = np.arange(bins + 2) * ((mel_high - mel_low) / (bins + 2)) + mel_low
    hertz = 700 * (np.power(10, points / 2595) - 1)
    edges = ((length + 1) * hertz // rate).astype(np.int64)
    spectrum = length // 2 + 1
    if edges[-1] >= spectrum:
        raise ShapeError(f"MelWeightMatrix: upper_edge_hertz {high} lies past the DFT's "
                         f"highest bin (sample_rate / 2 = {rate / 2})")
    out = np.zeros((spectrum, bins), np.float64)
    for i in range(bins):
        left, centre, right = (int(e) for e in edges[i:i + 3])
        if centre == left:
            out[centre, i] = 1.0
        else:
            rise = np.arange(left, centre + 1)
            out[rise, i] = (rise - left) / (centre - left)
        if right > centre:
            fall = np.arange(centre, right)
            out[fall, i] = (right - fall) / (right - centre)
    return [out.astype(dtype.numpy)]


HOST_OPS: dict[str, HostOp] = {"NonZero": nonzero, "NonMaxSuppression": non_max_suppression,
                               "Unique": unique, "Compress": compress,
                               "MelWeightMatrix": mel_weight_matrix}


def convert_host_op(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """Constant inputs: computed now. Else its outputs are values to bind at run time."""
    arrays = [None if v is None else imp.constant_value(v) for v in ctx.values]
    if all(a is not None for v, a in zip(ctx.values, arrays) if v is not None):
        results = HOST_OPS[ctx.op](ctx.attrs, arrays)
        return [imp.constant(ctx, r, i) for i, r in enumerate(results)]
    imp.need_output_values(ctx, next(v for v, a in zip(ctx.values, arrays)
                                     if v is not None and a is None))


def convert_compress(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """A constant condition makes Compress a Gather of known indices (any input data);
    a condition computed at run time decides the output shape, so it runs on the host."""
    data, condition = ctx.values[0], ctx.values[1] if len(ctx.values) > 1 else None
    if data is None or condition is None:
        raise ShapeError("Compress needs an input and a condition")
    cond = imp.constant_value(condition)
    if cond is None or imp.constant_value(data) is not None:
        return convert_host_op(imp, ctx)
    indices = compress_indices(ctx.attrs, data.type.shape, cond)
    source = data
    if "axis" not in ctx.attrs:
        (source,) = imp.builder.add("Reshape", [data], {"shape": (-1,)},
                                    name=f"{ctx.label}/flatten")
    index = imp.constant(ctx, indices)
    axis = _axis(ctx.attrs, len(data.type.shape), "Compress") or 0
    return list(imp.add(ctx, "Gather", [source, index], {"axis": axis}))


CONVERTERS = {op: convert_host_op for op in HOST_OPS}
CONVERTERS["Compress"] = convert_compress
