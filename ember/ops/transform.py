"""Shape and data-movement ops (ONNX semantics): reshape, transpose, slice, gather, pad, ...

Conventions shared by every op here:
- Attr-inputs (Reshape.shape, Slice.starts, ...) arrive in `attrs`; an op reads its data
  tensors from the first entries of its inputs that are not None, so it works whether the
  frontend drops attr-inputs from the node or leaves them as None / constant Values.
- Variadic outputs: Split's `infer` returns len(attrs["split"]) outputs when `split` is given,
  else attrs["num_outputs"]; a frontend importing Split without `split` (opset < 18) must set
  `num_outputs` to the node's number of outputs.
- Dtypes of scalar attr-inputs: Range takes its dtype from its first input Value when the node
  has one, else from a numpy `start` attribute, else int64 for Python ints / float32 for
  floats. ConstantOfShape.value and OneHot.values keep their dtype when given as numpy arrays
  (OneHot.values is an ordinary tensor input, so it keeps its dtype anyway).
- Indices read at run time (Gather, GatherElements, GatherND, OneHot, Scatter*) wrap once when
  negative. An index still outside [0, dim) never touches memory out of bounds (the load is
  clamped) and never yields a plausible element: Gather* give nan for floating data, the
  dtype's minimum for signed integers (maximum for unsigned) and False for bools
  (`out_of_range_value`); Scatter* drop that update. ONNX leaves the result undefined;
  onnxruntime raises an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtype as dt
from ember import te, tir
from ember.dtype import DType
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.elementwise import broadcast_index, broadcast_shape
from ember.ops.generic import InjectiveKnobs, inline_injective, schedule_flat
from ember.ops.knobs import Knobs, resolve_knobs
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import Expr

Shape = tuple[int, ...]
# plan(attrs, input shapes, input dtypes) -> (output shape, output dtype)
PlanFn = Callable[[Attrs, list[Shape], list[DType]], tuple[Shape, DType]]
# body(attrs, input tensors, output index) -> the output element
BodyFn = Callable[[Attrs, list[Tensor], tuple[Expr, ...]], Expr]


# ------------------------------------------------------------------------------------------
# helpers shared with image.py
def shape_of(t: Tensor) -> Shape:
    return tuple(int(d.value) for d in t.shape)  # type: ignore[attr-defined]


def present(items: Sequence[Any], count: int, op: str) -> list[Any]:
    """The inputs that are not None; at least `count` of them."""
    got = [x for x in items if x is not None]
    if len(got) < count:
        raise ShapeError(f"{op}: expected {count} data input(s), got {len(got)}")
    return got


def normalize_axis(axis: int, rank: int, op: str, what: str = "axis") -> int:
    """`axis` in [-rank, rank) as a non-negative axis; ShapeError otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: {what} {axis} is out of range for a tensor of rank {rank} "
                         f"(expected {-rank}..{rank - 1})")
    return axis % rank


def as_ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def scalar(value: Any) -> Any:
    """A Python number from a number, a 1-element tuple or a numpy array."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise ShapeError(f"expected a single number, got {value!r}")
    return arr.reshape(-1)[0].item()


def wrap_index(idx: Expr, dim: int) -> Expr:
    """A run-time index: negative counts from the end; clamped into [0, dim - 1]."""
    idx = tir.Select(idx < 0, idx + dim, idx)
    return te.max(te.min(idx, max(dim - 1, 0)), 0)


def index_in_range(idx: Expr, dim: int) -> Expr:
    """True where a run-time index is valid for a dim of `dim`: -dim <= idx < dim."""
    return te.all(idx >= -dim, idx < dim)


def out_of_range_value(dtype: DType) -> Expr:
    """What a gather returns for an out-of-range index: nan, INT_MIN (UINT_MAX), False."""
    if dtype.is_float:
        return te.const(math.nan, dtype)
    if dtype.is_bool:
        return te.const(False, dtype)
    info = np.iinfo(np.dtype(str(dtype)))
    return te.const(int(info.max if dtype.kind == "uint" else info.min), dtype)


def checked_gather(value: Expr, valid: list[Expr]) -> Expr:
    """`value` (a load at clamped indices) where every index is valid, else the sentinel."""
    return te.if_then_else(te.all(*valid), value, out_of_range_value(value.dtype))


def keep_inputs(value: Expr, tensors: Sequence[Tensor]) -> Expr:
    """`value`, with a never-taken read of each of `tensors`: inputs an op does not read
    (Shape's, an empty Concat input) must still be in the schedule to be kernel arguments."""
    for t in tensors:
        dummy = t[tuple(te.const(0) for _ in t.shape)].astype(value.dtype)
        value = te.if_then_else(te.const(False), dummy, value)
    return value


def injective(name: str, inputs: tuple[str, ...], plan: PlanFn, body: BodyFn,
              attrs: dict[str, Any] | None = None, attr_inputs: tuple[str, ...] = (),
              n_data: int = 1, pattern: Pattern = Pattern.INJECTIVE) -> OpDef:
    """An op with one output computed element by element by `body`."""
    def infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        ts = present(types, n_data, name)
        shape, dtype = plan(a, [t.shape for t in ts], [t.dtype for t in ts])
        return [TensorType(shape, dtype)]

    def compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        ts = present(tensors, n_data, name)
        shape, _ = plan(a, [shape_of(t) for t in ts], [t.dtype for t in ts])
        out = te.compute(shape, lambda *i: body(a, ts, i), name=name.lower(), tag=name)
        return [out]  # type: ignore[list-item]

    return OpDef(name, inputs, infer, compute, pattern, attrs=attrs or {},
                 attr_inputs=attr_inputs)


def flat_index(index: Sequence[Expr], shape: Shape) -> Expr:
    flat: Expr = te.const(0)
    for i, d in zip(index, shape):
        flat = flat * d + i
    return flat


def unflat_index(flat: Expr, shape: Shape) -> list[Expr]:
    """Row-major index of element `flat` (0 <= flat < size) in `shape`.

    Dimension k is written (flat // s_k) - (flat // s_{k-1}) * d_k rather than
    flat // s_k % d_k: the same value, but the flattened address sum telescopes back to
    `flat`, so the simplifier turns a reshape's read into a contiguous one.
    """
    out: list[Expr] = []
    stride = math.prod(shape)
    for d in shape:
        outer = stride
        stride //= d if d else 1
        if d == 1:
            out.append(te.const(0))
        elif outer == math.prod(shape):
            out.append(flat // stride if stride > 1 else flat)
        else:
            quotient = flat // stride if stride > 1 else flat
            out.append(quotient - flat // outer * d)
    return out


def reshape_index(index: Sequence[Expr], out_shape: Shape, in_shape: Shape) -> list[Expr]:
    """The input index of a row-major reshape; equal leading/trailing dims pass through."""
    p = 0
    while p < min(len(out_shape), len(in_shape)) and out_shape[p] == in_shape[p]:
        p += 1
    q = 0
    while (q < min(len(out_shape), len(in_shape)) - p
           and out_shape[-1 - q] == in_shape[-1 - q]):
        q += 1
    out_mid = out_shape[p:len(out_shape) - q]
    in_mid = in_shape[p:len(in_shape) - q]
    mid = unflat_index(flat_index(index[p:len(index) - q], out_mid), in_mid)
    return [*index[:p], *mid, *index[len(index) - q:]]


# ------------------------------------------------------------------------------------------
# Reshape, Flatten, Squeeze, Unsqueeze, Transpose
def _reshape_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    src = shapes[0]
    want = list(as_ints(a["shape"]))
    allowzero = bool(a["allowzero"])
    if allowzero and 0 in want and -1 in want:
        raise ShapeError(f"Reshape: shape {tuple(want)} has both 0 and -1 with allowzero=1")
    if want.count(-1) > 1:
        raise ShapeError(f"Reshape: shape {tuple(want)} has more than one -1")
    for k, d in enumerate(want):
        if d == 0 and not allowzero:
            if k >= len(src):
                raise ShapeError(f"Reshape: shape {tuple(want)} copies dimension {k} (0) but "
                                 f"the input {src} has rank {len(src)}")
            want[k] = src[k]
        elif d < -1:
            raise ShapeError(f"Reshape: shape {tuple(want)} has a negative dimension {d}")
    total = math.prod(src)
    if -1 in want:
        known = math.prod(d for d in want if d != -1)
        if known == 0 or total % known:
            raise ShapeError(f"Reshape: cannot infer the -1 in {tuple(a['shape'])} for an "
                             f"input of shape {src} ({total} elements)")
        want[want.index(-1)] = total // known
    if math.prod(want) != total:
        raise ShapeError(f"Reshape: cannot reshape {src} ({total} elements) to "
                         f"{tuple(a['shape'])} ({math.prod(want)} elements)")
    return tuple(want), dtypes[0]


def _reshape_body(plan: PlanFn) -> BodyFn:
    def body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
        src = shape_of(ts[0])
        out, _ = plan(a, [src], [ts[0].dtype])
        return ts[0][tuple(reshape_index(i, out, src))]
    return body


def _flatten_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    src = shapes[0]
    axis = int(a["axis"])
    if not -len(src) <= axis <= len(src):
        raise ShapeError(f"Flatten: axis {axis} is out of range for a tensor of rank "
                         f"{len(src)} (expected {-len(src)}..{len(src)})")
    axis = axis + len(src) if axis < 0 else axis
    return (math.prod(src[:axis]), math.prod(src[axis:])), dtypes[0]


def _squeeze_axes(a: Attrs, src: Shape) -> list[int]:
    if a.get("axes") is None:
        return [k for k, d in enumerate(src) if d == 1]
    axes = sorted({normalize_axis(x, len(src), "Squeeze", "axes entry")
                   for x in as_ints(a["axes"])})
    for k in axes:
        if src[k] != 1:
            raise ShapeError(f"Squeeze: dimension {k} of {src} has size {src[k]}, not 1")
    return axes


def _squeeze_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    axes = _squeeze_axes(a, shapes[0])
    return tuple(d for k, d in enumerate(shapes[0]) if k not in axes), dtypes[0]


def _squeeze_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    src = shape_of(ts[0])
    axes = _squeeze_axes(a, src)
    it = iter(i)
    return ts[0][tuple(te.const(0) if k in axes else next(it) for k in range(len(src)))]


def _unsqueeze_axes(a: Attrs, src: Shape) -> list[int]:
    axes = as_ints(a["axes"])
    rank = len(src) + len(axes)
    norm = sorted(normalize_axis(x, rank, "Unsqueeze", "axes entry") for x in axes)
    if len(set(norm)) != len(norm):
        raise ShapeError(f"Unsqueeze: axes {axes} repeat an axis")
    return norm


def _unsqueeze_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    axes = _unsqueeze_axes(a, shapes[0])
    it = iter(shapes[0])
    rank = len(shapes[0]) + len(axes)
    return tuple(1 if k in axes else next(it) for k in range(rank)), dtypes[0]


def _unsqueeze_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    axes = _unsqueeze_axes(a, shape_of(ts[0]))
    return ts[0][tuple(x for k, x in enumerate(i) if k not in axes)]


def _perm(a: Attrs, rank: int) -> tuple[int, ...]:
    if a.get("perm") is None:
        return tuple(reversed(range(rank)))
    perm = as_ints(a["perm"])
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"Transpose: perm {perm} is not a permutation of 0..{rank - 1}")
    return perm


def _transpose_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    perm = _perm(a, len(shapes[0]))
    return tuple(shapes[0][p] for p in perm), dtypes[0]


def _transpose_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    perm = _perm(a, len(ts[0].shape))
    src: list[Expr] = [te.const(0)] * len(perm)
    for k, p in enumerate(perm):
        src[p] = i[k]
    return ts[0][tuple(src)]


# ------------------------------------------------------------------------------------------
# Concat, Split, Slice
def _concat_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    first = shapes[0]
    axis = normalize_axis(a["axis"], len(first), "Concat")
    for k, (s, d) in enumerate(zip(shapes, dtypes)):
        if len(s) != len(first) or any(x != y for j, (x, y) in enumerate(zip(s, first))
                                         if j != axis):
            raise ShapeError(f"Concat: input {k} has shape {s}, which does not match input 0 "
                             f"{first} outside axis {axis}")
        if d != dtypes[0]:
            raise ShapeError(f"Concat: input {k} has dtype {d}, input 0 has {dtypes[0]}")
    out = list(first)
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out), dtypes[0]


def _concat_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    axis = normalize_axis(a["axis"], len(ts[0].shape), "Concat")
    parts = []
    offset = 0
    for t in ts:
        size = shape_of(t)[axis]
        if size:
            parts.append((t, offset, size))
        offset += size

    # Along an outer axis a few inputs are cheapest read unconditionally at a clamped
    # position and selected (plain vector loads); otherwise read only the chosen input.
    clamp = axis < len(i) - 1 and len(parts) <= 4

    def load(t: Tensor, off: int, size: int) -> Expr:
        pos = te.max(te.min(i[axis] - off, size - 1), 0) if clamp else i[axis] - off
        return t[tuple(pos if k == axis else x for k, x in enumerate(i))]

    t, off, size = parts[-1]
    value = load(t, off, size)
    for t, off, size in reversed(parts[:-1]):
        take = i[axis] < off + size
        first = load(t, off, size)
        value = tir.Select(take, first, value) if clamp else te.if_then_else(take, first, value)
    return keep_inputs(value, [t for t in ts if shape_of(t)[axis] == 0])


def _split_sizes(a: Attrs, shape: Shape) -> tuple[int, list[int]]:
    axis = normalize_axis(a["axis"], len(shape), "Split")
    dim = shape[axis]
    if a.get("split") is not None and len(as_ints(a["split"])) > 0:
        sizes = list(as_ints(a["split"]))
        if sum(sizes) != dim or min(sizes) < 0:
            raise ShapeError(f"Split: split sizes {tuple(sizes)} do not add up to dimension "
                             f"{axis} of {shape} ({dim})")
        return axis, sizes
    if a.get("num_outputs") is None:
        raise ShapeError("Split: give `split` or `num_outputs` (the number of outputs)")
    n = int(a["num_outputs"])
    if n < 1 or n > max(dim, 1):
        raise ShapeError(f"Split: cannot split dimension {axis} of {shape} into {n} outputs")
    chunk = -(-dim // n)
    sizes = [min(chunk, dim - k * chunk) for k in range(n)]
    if sizes[-1] <= 0:
        raise ShapeError(f"Split: cannot split dimension {axis} of size {dim} into {n} chunks "
                         f"of {chunk}")
    return axis, sizes


def _split_infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    (x,) = present(types, 1, "Split")[:1]
    axis, sizes = _split_sizes(a, x.shape)
    return [TensorType(tuple(s if k == axis else d for k, d in enumerate(x.shape)), x.dtype)
            for s in sizes]


def _split_compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    (x,) = present(tensors, 1, "Split")[:1]
    shape = shape_of(x)
    axis, sizes = _split_sizes(a, shape)
    outs = []
    offset = 0
    for n, size in enumerate(sizes):
        out_shape = tuple(size if k == axis else d for k, d in enumerate(shape))

        def body(*i: Expr, off: int = offset) -> Expr:
            return x[tuple(v + off if k == axis else v for k, v in enumerate(i))]

        outs.append(te.compute(out_shape, body, name=f"split{n}", tag="Split"))
        offset += size
    return outs  # type: ignore[return-value]


def slice_params(a: Attrs, shape: Shape) -> list[tuple[int, int, int]]:
    """(start, step, length) per axis after ONNX clamping of starts and ends."""
    starts, ends = as_ints(a["starts"]), as_ints(a["ends"])
    if len(starts) != len(ends):
        raise ShapeError(f"Slice: starts {starts} and ends {ends} differ in length")
    axes = as_ints(a["axes"]) if a.get("axes") is not None else tuple(range(len(starts)))
    steps = as_ints(a["steps"]) if a.get("steps") is not None else (1,) * len(starts)
    if len(axes) != len(starts) or len(steps) != len(starts):
        raise ShapeError(f"Slice: starts, ends, axes {axes} and steps {steps} differ in length")
    params = [(0, 1, d) for d in shape]
    seen: set[int] = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        k = normalize_axis(axis, len(shape), "Slice", "axes entry")
        if k in seen:
            raise ShapeError(f"Slice: axis {k} appears twice in axes {axes}")
        seen.add(k)
        if step == 0:
            raise ShapeError(f"Slice: step for axis {k} is 0")
        d = shape[k]
        start = start + d if start < 0 else start
        end = end + d if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), d), min(max(end, 0), d)
        else:
            start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
        params[k] = (start, step, max(0, -(-(end - start) // step)))
    return params


def _slice_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    return tuple(n for _, _, n in slice_params(a, shapes[0])), dtypes[0]


def _slice_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    params = slice_params(a, shape_of(ts[0]))
    return ts[0][tuple(x * step + start if (start, step) != (0, 1) else x
                       for x, (start, step, _) in zip(i, params))]


# ------------------------------------------------------------------------------------------
# Gather, GatherElements, GatherND
def _gather_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    data, ind = shapes[0], shapes[1]
    if not data:
        raise ShapeError("Gather: data must have rank >= 1")
    _check_index_dtype("Gather", dtypes[1])
    axis = normalize_axis(a["axis"], len(data), "Gather")
    return data[:axis] + ind + data[axis + 1:], dtypes[0]


def _gather_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    data, ind = ts[0], ts[1]
    axis = normalize_axis(a["axis"], len(data.shape), "Gather")
    q = len(ind.shape)
    raw, dim = ind[tuple(i[axis:axis + q])], shape_of(data)[axis]
    value = data[(*i[:axis], wrap_index(raw, dim), *i[axis + q:])]
    return checked_gather(value, [index_in_range(raw, dim)])


def _check_index_dtype(op: str, d: DType) -> None:
    if d not in (dt.int32, dt.int64):
        raise ShapeError(f"{op}: indices must be int32 or int64, got {d}")


def _gather_elements_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]
                          ) -> tuple[Shape, DType]:
    data, ind = shapes[0], shapes[1]
    _check_index_dtype("GatherElements", dtypes[1])
    normalize_axis(a["axis"], len(data), "GatherElements")
    if len(ind) != len(data):
        raise ShapeError(f"GatherElements: indices {ind} and data {data} differ in rank")
    return ind, dtypes[0]


def _gather_elements_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    data, ind = ts[0], ts[1]
    axis = normalize_axis(a["axis"], len(data.shape), "GatherElements")
    raw, dim = ind[i], shape_of(data)[axis]
    idx = wrap_index(raw, dim)
    value = data[tuple(idx if k == axis else x for k, x in enumerate(i))]
    return checked_gather(value, [index_in_range(raw, dim)])


def _gather_nd_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    data, ind = shapes[0], shapes[1]
    if dtypes[1] != dt.int64:
        raise ShapeError(f"GatherND: indices must be int64, got {dtypes[1]}")
    b = int(a["batch_dims"])
    if not ind or not 0 <= b < min(len(data), len(ind)):
        raise ShapeError(f"GatherND: batch_dims {b} does not fit data {data} and indices {ind}")
    if data[:b] != ind[:b]:
        raise ShapeError(f"GatherND: the first {b} dims of data {data} and indices {ind} "
                         "differ")
    k = ind[-1]
    if not 1 <= k <= len(data) - b:
        raise ShapeError(f"GatherND: the last dim of indices {ind} must be in 1..{len(data) - b}")
    return ind[:-1] + data[b + k:], dtypes[0]


def _gather_nd_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    data, ind = ts[0], ts[1]
    dshape, ishape = shape_of(data), shape_of(ind)
    b, k, q = int(a["batch_dims"]), ishape[-1], len(ishape)
    lead = i[:q - 1]
    raws = [ind[(*lead, te.const(j))] for j in range(k)]
    picked = [wrap_index(r, dshape[b + j]) for j, r in enumerate(raws)]
    value = data[(*i[:b], *picked, *i[q - 1:])]
    return checked_gather(value, [index_in_range(r, dshape[b + j]) for j, r in enumerate(raws)])


# ------------------------------------------------------------------------------------------
# ScatterElements, ScatterND (a copy of the data, then serial update loops)
_REDUCTIONS: dict[str, Callable[[Expr, Expr], Expr]] = {
    "none": lambda old, new: new,
    "add": lambda old, new: old + new,
    "mul": lambda old, new: old * new,
    "max": lambda old, new: te.max(old, new),
    "min": lambda old, new: te.min(old, new),
}


def _loop_nest(shape: Shape, prefix: str, make: Callable[[list[Expr]], tir.Stmt]) -> tir.Stmt:
    loop_vars = [tir.Var(f"{prefix}{k}") for k in range(len(shape))]
    body = make(list(loop_vars))
    for v, n in reversed(list(zip(loop_vars, shape))):
        body = tir.For(v, te.const(0), te.const(n), tir.ForKind.SERIAL, body)
    return body


def _scatter_infer(op: str) -> Callable[[Attrs, Sequence[TensorType | None]],
                                         list[TensorType]]:
    def infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        data, ind, upd = present(types, 3, op)[:3]
        _check_scatter(op, a, data.shape, ind.shape, upd.shape, ind.dtype)
        if upd.dtype != data.dtype:
            raise ShapeError(f"{op}: updates dtype {upd.dtype} differs from data {data.dtype}")
        return [data]
    return infer


def _check_scatter(op: str, a: Attrs, data: Shape, ind: Shape, upd: Shape, idt: DType) -> None:
    if a["reduction"] not in _REDUCTIONS:
        raise UnsupportedOpError(f"{op}: reduction '{a['reduction']}' is not supported "
                                 f"(expected one of {sorted(_REDUCTIONS)})")
    _check_index_dtype(op, idt)
    if op == "ScatterElements":
        normalize_axis(a["axis"], len(data), op)
        if ind != upd or len(ind) != len(data):
            raise ShapeError(f"{op}: indices {ind} and updates {upd} must have one shape and "
                             f"the rank of data {data}")
    else:
        k = ind[-1] if ind else 0
        if not 1 <= k <= len(data) or upd != ind[:-1] + data[k:]:
            raise ShapeError(f"{op}: indices {ind} and updates {upd} do not fit data {data} "
                             f"(updates must have shape indices[:-1] + data[indices[-1]:])")


def _scatter_compute(op: str) -> Callable[[Attrs, Sequence[Tensor | None]], list[Tensor]]:
    def compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        data, ind, upd = present(tensors, 3, op)[:3]
        dshape, ishape, ushape = shape_of(data), shape_of(ind), shape_of(upd)
        combine = _REDUCTIONS[a["reduction"]]

        def fbody(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
            src, index, update = ins
            (out,) = outs
            copy = _loop_nest(dshape, "c", lambda v: tir.Store(out, src.load(*v), tuple(v)))
            if op == "ScatterElements":
                axis = normalize_axis(a["axis"], len(dshape), op)

                def target(v: list[Expr]) -> list[Expr]:
                    idx = wrap_index(index.load(*v), dshape[axis])
                    return [idx if k == axis else x for k, x in enumerate(v)]

                def valid(v: list[Expr]) -> Expr:
                    return index_in_range(index.load(*v), dshape[axis])
                shape = ishape
            else:
                k = ishape[-1]

                def target(v: list[Expr]) -> list[Expr]:
                    lead = v[:len(ishape) - 1]
                    picked = [wrap_index(index.load(*lead, te.const(j)), dshape[j])
                              for j in range(k)]
                    return [*picked, *v[len(ishape) - 1:]]

                def valid(v: list[Expr]) -> Expr:
                    lead = v[:len(ishape) - 1]
                    return te.all(*[index_in_range(index.load(*lead, te.const(j)), dshape[j])
                                    for j in range(k)])
                shape = ushape

            def store(v: list[Expr]) -> tir.Stmt:
                dst = tuple(target(v))
                # an update whose index is out of range is dropped, not clamped onto a row
                return tir.IfThenElse(valid(v), tir.Store(
                    out, combine(out.load(*dst), update.load(*v)), dst))
            return tir.seq(copy, _loop_nest(shape, "u", store))

        out = te.extern(dshape, [data, ind, upd], fbody, name=op.lower(), dtype=data.dtype)
        return [out]  # type: ignore[list-item]
    return compute


def schedule_opaque(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                    ) -> Schedule:
    """Schedule for extern-based ops: the loop program runs as written (its compute
    outputs flat, with InjectiveKnobs)."""
    k = resolve_knobs(InjectiveKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    for t in outs:
        if isinstance(t.op, ComputeOp):
            schedule_flat(s[t], target, str(t.dtype), k)
    return s


def _scatter(op: str, attrs: dict[str, Any]) -> OpDef:
    return OpDef(op, ("data", "indices", "updates"), _scatter_infer(op), _scatter_compute(op),
                 Pattern.OPAQUE, schedule_opaque, attrs=attrs, knobs=InjectiveKnobs)


# ------------------------------------------------------------------------------------------
# Expand, Tile, Pad
def _expand_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    try:
        return broadcast_shape(shapes[0], as_ints(a["shape"])), dtypes[0]
    except ShapeError:
        raise ShapeError(f"Expand: input {shapes[0]} cannot expand to shape "
                         f"{as_ints(a['shape'])}") from None


def _expand_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    return ts[0][tuple(broadcast_index(ts[0], i))]


def _tile_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    reps = as_ints(a["repeats"])
    if len(reps) != len(shapes[0]) or min(reps, default=0) < 0:
        raise ShapeError(f"Tile: repeats {reps} must be {len(shapes[0])} non-negative numbers "
                         f"for an input of shape {shapes[0]}")
    return tuple(d * r for d, r in zip(shapes[0], reps)), dtypes[0]


def _tile_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    reps = as_ints(a["repeats"])
    return ts[0][tuple(x if r == 1 else x % d
                       for x, d, r in zip(i, shape_of(ts[0]), reps))]


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad_amounts(a: Attrs, shape: Shape) -> list[tuple[int, int]]:
    """(before, after) per axis."""
    if a["mode"] not in _PAD_MODES:
        raise UnsupportedOpError(f"Pad: mode '{a['mode']}' is not supported "
                                 f"(expected one of {_PAD_MODES})")
    pads = as_ints(a["pads"])
    axes = (as_ints(a["axes"]) if a.get("axes") is not None and len(as_ints(a["axes"]))
            else tuple(range(len(shape))))
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"Pad: pads {pads} must have 2 x {len(axes)} entries")
    amounts = [(0, 0)] * len(shape)
    for k, axis in enumerate(axes):
        n = normalize_axis(axis, len(shape), "Pad", "axes entry")
        amounts[n] = (pads[k], pads[k + len(axes)])
        if shape[n] + pads[k] + pads[k + len(axes)] < 0:
            raise ShapeError(f"Pad: pads {pads} remove more than dimension {n} of {shape}")
        if a["mode"] != "constant" and shape[n] == 0 and amounts[n] != (0, 0):
            raise ShapeError(f"Pad: mode '{a['mode']}' cannot pad the empty axis {n}")
    return amounts


def _pad_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    amounts = pad_amounts(a, shapes[0])
    return tuple(d + b + e for d, (b, e) in zip(shapes[0], amounts)), dtypes[0]


def _pad_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x = ts[0]
    shape = shape_of(x)
    mode = a["mode"]
    src: list[Expr] = []
    inside: list[Expr] = []
    for o, d, (before, after) in zip(i, shape, pad_amounts(a, shape)):
        s = o - before if before else o
        if before <= 0 and after <= 0:
            src.append(s)
        elif mode == "constant":
            src.append(s)
            inside += [s >= 0] if before > 0 else []
            inside += [s < d] if after > 0 else []
        elif mode == "edge":
            src.append(te.max(te.min(s, d - 1), 0))
        elif mode == "wrap":
            src.append(s % d)
        elif d == 1:  # reflect on a single element repeats it
            src.append(te.const(0))
        else:
            m = s % (2 * d - 2)
            src.append(tir.Select(m < d, m, 2 * d - 2 - m))
    value = x[tuple(src)]
    if not inside:
        return value
    return te.if_then_else(te.all(*inside), value, number(a.get("constant_value"), x.dtype))


def number(value: Any, dtype: DType) -> Expr:
    """A constant of `dtype` from an attribute (None: zero)."""
    v = 0 if value is None else scalar(value)
    if dtype.is_bool:
        return te.const(bool(v))
    return te.const(float(v) if dtype.is_float else int(v), dtype)


# ------------------------------------------------------------------------------------------
# Shape, Size, ConstantOfShape, Range, Trilu, OneHot, EyeLike
def _shape_values(a: Attrs, shape: Shape) -> tuple[int, ...]:
    rank = len(shape)
    start = int(a["start"])
    end = rank if a.get("end") is None else int(a["end"])
    start, end = (min(max(x + rank if x < 0 else x, 0), rank) for x in (start, end))
    return shape[start:end]


def _shape_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    return (len(_shape_values(a, shapes[0])),), dt.int64


def constant_body(values: Sequence[int | float | bool], index: Expr, dtype: DType) -> Expr:
    """values[index] for a small constant table (a chain of selects)."""
    value = te.const(values[-1], dtype)
    for k in range(len(values) - 2, -1, -1):
        value = tir.Select(index == k, te.const(values[k], dtype), value)
    return value


def _shape_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    value = constant_body(_shape_values(a, shape_of(ts[0])), i[0], dt.int64)
    return keep_inputs(value, ts[:1])


def _size_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    return (), dt.int64


def _size_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    return keep_inputs(te.const(math.prod(shape_of(ts[0])), dt.int64), ts[:1])


def _value_dtype(value: Any, default: DType) -> DType:
    if isinstance(value, (np.ndarray, np.generic)):
        return dt.parse(value.dtype)
    if value is None:
        return default
    v = scalar(value)
    return dt.bool_ if isinstance(v, bool) else dt.int64 if isinstance(v, int) else dt.float32


def _cos_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    shape = as_ints(a["input"])
    if min(shape, default=0) < 0:
        raise ShapeError(f"ConstantOfShape: shape {shape} has a negative dimension")
    return shape, _value_dtype(a.get("value"), dt.float32)


def _cos_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    return number(a.get("value"), _value_dtype(a.get("value"), dt.float32))


def _range_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    # `dtype` names the element type when start/limit/delta came as plain Python numbers
    dtype = dtypes[0] if dtypes else dt.parse(a["dtype"]) if a.get("dtype") else \
        _value_dtype(a["start"], dt.int64)
    start, limit, delta = (scalar(a[k]) for k in ("start", "limit", "delta"))
    if delta == 0:
        raise ShapeError("Range: delta is 0")
    if dtype.is_float:
        count = math.ceil((limit - start) / delta)
    else:
        count = -((start - limit) // delta)  # ceil((limit - start) / delta) in integers
    return (max(int(count), 0),), dtype


def _range_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    _, dtype = _range_plan(a, [], [t.dtype for t in ts])
    work = dt.float32 if dtype == dt.float16 else dtype  # stash_type: float16 runs in float
    start, delta = number(a["start"], work), number(a["delta"], work)
    return (i[0].astype(work) * delta + start).astype(dtype)


def _trilu_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    if len(shapes[0]) < 2:
        raise ShapeError(f"Trilu: input must have rank >= 2, got shape {shapes[0]}")
    return shapes[0], dtypes[0]


def _trilu_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    k = int(scalar(a["k"]))
    diff = i[-1] - i[-2]
    keep = diff >= k if int(a["upper"]) else diff <= k
    return te.if_then_else(keep, ts[0][i], number(0, ts[0].dtype))


def _onehot_parts(a: Attrs, rank: int) -> tuple[int, int]:
    depth = int(scalar(a["depth"]))
    if depth < 1:
        raise ShapeError(f"OneHot: depth must be positive, got {depth}")
    axis = int(a["axis"])
    if not -rank - 1 <= axis <= rank:
        raise ShapeError(f"OneHot: axis {axis} is out of range for output rank {rank + 1}")
    return depth, axis % (rank + 1)


def _onehot_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    depth, axis = _onehot_parts(a, len(shapes[0]))
    if a.get("values") is not None:
        dtype = _value_dtype(a["values"], dt.float32)
    elif len(shapes) >= 2:
        if shapes[-1] != (2,):
            raise ShapeError(f"OneHot: values must have shape (2,), got {shapes[-1]}")
        dtype = dtypes[-1]
    else:
        raise ShapeError("OneHot: the values input (off, on) is missing")
    return shapes[0][:axis] + (depth,) + shapes[0][axis:], dtype


def _onehot_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    ind = ts[0]
    depth, axis = _onehot_parts(a, len(ind.shape))
    raw = ind[tuple(x for k, x in enumerate(i) if k != axis)]
    idx = (te.trunc(raw) if raw.dtype.is_float else raw).astype("int64")
    idx = tir.Select(idx < 0, idx + depth, idx)
    hit = idx == i[axis].astype("int64")
    if a.get("values") is not None:
        dtype = _value_dtype(a["values"], dt.float32)
        off, on = (number(v, dtype) for v in np.asarray(a["values"]).reshape(-1)[:2])
    else:
        vals = ts[-1]
        off, on = vals[te.const(0)], vals[te.const(1)]
    return tir.Select(hit, on, off)


# ONNX TensorProto.DataType codes of EyeLike's `dtype` attribute
_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def _eyelike_plan(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    if len(shapes[0]) != 2:
        raise ShapeError(f"EyeLike: input must be 2-D, got shape {shapes[0]}")
    code = a.get("dtype")
    if code is None:
        return shapes[0], dtypes[0]
    if isinstance(code, int) and code not in _ONNX_DTYPES:
        raise UnsupportedOpError(f"EyeLike: dtype code {code} is not supported")
    return shapes[0], dt.parse(_ONNX_DTYPES[code] if isinstance(code, int) else code)


def _eyelike_body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    _, dtype = _eyelike_plan(a, [shape_of(ts[0])], [ts[0].dtype])
    on = i[1] - i[0] == int(a["k"])
    return keep_inputs(tir.Select(on, number(1, dtype), number(0, dtype)), ts[:1])


OPS: dict[str, OpDef] = {
    "Reshape": injective("Reshape", ("data", "shape"), _reshape_plan, _reshape_body(_reshape_plan),
                         {"allowzero": 0, "shape": REQUIRED}, ("shape",)),
    "Flatten": injective("Flatten", ("input",), _flatten_plan, _reshape_body(_flatten_plan),
                         {"axis": 1}),
    "Squeeze": injective("Squeeze", ("data", "axes"), _squeeze_plan, _squeeze_body,
                         {"axes": None}, ("axes",)),
    "Unsqueeze": injective("Unsqueeze", ("data", "axes"), _unsqueeze_plan, _unsqueeze_body,
                           {"axes": REQUIRED}, ("axes",)),
    "Transpose": injective("Transpose", ("data",), _transpose_plan, _transpose_body,
                           {"perm": None}),
    "Concat": injective("Concat", ("inputs",), _concat_plan, _concat_body,
                        {"axis": REQUIRED}),
    "Split": OpDef("Split", ("input", "split"), _split_infer, _split_compute, Pattern.INJECTIVE,
                   attrs={"axis": 0, "num_outputs": None, "split": None},
                   attr_inputs=("split",)),
    "Slice": injective("Slice", ("data", "starts", "ends", "axes", "steps"), _slice_plan,
                       _slice_body,
                       {"starts": REQUIRED, "ends": REQUIRED, "axes": None, "steps": None},
                       ("starts", "ends", "axes", "steps")),
    "Gather": injective("Gather", ("data", "indices"), _gather_plan, _gather_body, {"axis": 0},
                        n_data=2),
    "GatherElements": injective("GatherElements", ("data", "indices"), _gather_elements_plan,
                                _gather_elements_body, {"axis": 0}, n_data=2),
    "GatherND": injective("GatherND", ("data", "indices"), _gather_nd_plan, _gather_nd_body,
                          {"batch_dims": 0}, n_data=2),
    "ScatterElements": _scatter("ScatterElements", {"axis": 0, "reduction": "none"}),
    "ScatterND": _scatter("ScatterND", {"reduction": "none"}),
    "Expand": injective("Expand", ("input", "shape"), _expand_plan, _expand_body,
                        {"shape": REQUIRED}, ("shape",), pattern=Pattern.BROADCAST),
    "Tile": injective("Tile", ("input", "repeats"), _tile_plan, _tile_body,
                      {"repeats": REQUIRED}, ("repeats",)),
    "Pad": injective("Pad", ("data", "pads", "constant_value", "axes"), _pad_plan, _pad_body,
                     {"mode": "constant", "pads": REQUIRED, "constant_value": None,
                      "axes": None}, ("pads", "constant_value", "axes")),
    "Shape": injective("Shape", ("data",), _shape_plan, _shape_body, {"start": 0, "end": None}),
    "Size": injective("Size", ("data",), _size_plan, _size_body),
    "ConstantOfShape": injective("ConstantOfShape", ("input",), _cos_plan, _cos_body,
                                 {"input": REQUIRED, "value": None}, ("input",), n_data=0),
    "Range": injective("Range", ("start", "limit", "delta"), _range_plan, _range_body,
                       {"start": REQUIRED, "limit": REQUIRED, "delta": REQUIRED,
                        "stash_type": 1, "dtype": None},
                       ("start", "limit", "delta"), n_data=0),
    "Trilu": injective("Trilu", ("input", "k"), _trilu_plan, _trilu_body,
                       {"upper": 1, "k": 0}, ("k",)),
    "OneHot": injective("OneHot", ("indices", "depth", "values"), _onehot_plan, _onehot_body,
                        {"axis": -1, "depth": REQUIRED, "values": None}, ("depth",)),
    "EyeLike": injective("EyeLike", ("input",), _eyelike_plan, _eyelike_body,
                         {"dtype": None, "k": 0}),
}
