"""Pooling (ONNX semantics): MaxPool (with Indices), AveragePool, LpPool and the global pools.

A window pool is a reduction stage over the kernel taps (tagged with the op name) followed by
an elementwise `out` stage (identity, the average's division, Lp's root); the schedule
computes the window reduction per output-row tile, vectorized over the output width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember import dtype as dt
from ember import te
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.conv import find_stage, resolve_pads, shape_of, spatial_attr
from ember.ops.generic import inline_injective, schedule_reduction, vector_lanes
from ember.ops.knobs import Knobs, Space, Task, in_range, resolve_knobs, up_to
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import Expr

POOL_TAGS = ("MaxPool", "AveragePool", "LpPool")


def _geometry(attrs: Attrs, xs: Sequence[int]
              ) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[int]]:
    """(kernel, strides, dilations, pads, output sizes) of a window pool over shape xs."""
    if len(xs) < 3:
        raise ShapeError(f"input X must be [N, C, spatial...], got shape {tuple(xs)}")
    nsp = len(xs) - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    if len(kernel) != nsp or min(kernel) < 1:
        raise ShapeError(f"kernel_shape {tuple(kernel)} must have {nsp} positive values")
    strides = spatial_attr(attrs, "strides", nsp, 1)
    dilations = spatial_attr(attrs, "dilations", nsp, 1)
    if min(strides + dilations) < 1:
        raise ShapeError(f"strides {strides} and dilations {dilations} must be positive")
    if int(attrs.get("storage_order", 0)) not in (0, 1):
        raise UnsupportedOpError(f"storage_order={attrs['storage_order']} (expected 0 or 1)")
    pads = resolve_pads(attrs, xs[2:], kernel, strides, dilations)
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    auto = attrs.get("auto_pad", "NOTSET")
    out = []
    for i in range(nsp):
        span = (kernel[i] - 1) * dilations[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            size = -(-xs[2 + i] // strides[i])
        else:
            room = xs[2 + i] + pads[i][0] + pads[i][1] - span
            size = (-(-room // strides[i]) if ceil_mode else room // strides[i]) + 1
            if ceil_mode and (size - 1) * strides[i] >= xs[2 + i] + pads[i][0]:
                size -= 1  # the last window would start inside the end padding
        if size <= 0 or span > xs[2 + i] + pads[i][0] + pads[i][1]:
            raise ShapeError(f"spatial dimension {i}: input {xs[2 + i]} with pads {pads[i]} is "
                             f"smaller than the dilated kernel {span}")
        out.append(size)
    return kernel, strides, dilations, pads, out


def _infer_pool(attrs: Attrs, inputs: Sequence[TensorType | None],
                integers: bool = True) -> list[TensorType]:
    """Y (and MaxPool's Indices); MaxPool takes 8-bit integers too, the others floats."""
    x = inputs[0]
    assert x is not None
    if not (x.dtype.is_float or integers and x.dtype.is_int and x.dtype.bits == 8):
        kinds = "a float or 8-bit integer tensor" if integers else "a float tensor"
        raise ShapeError(f"input X must be {kinds}, got {x.dtype}")
    *_, out = _geometry(attrs, x.shape)
    y = TensorType((x.shape[0], x.shape[1], *out), x.dtype)
    return [y, TensorType(y.shape, dt.parse("int64"))]


def _infer_one(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    return _infer_pool(attrs, inputs, integers=False)[:1]


class _Window:
    """Index arithmetic of one pool: the input position of a tap and its validity."""

    def __init__(self, attrs: Attrs, x: Tensor) -> None:
        self.x = x
        self.xs = shape_of(x)
        (self.kernel, self.strides, self.dilations, self.pads,
         self.out) = _geometry(attrs, self.xs)
        self.nsp = len(self.kernel)
        self.ks = [te.reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(self.kernel)]

    def position(self, d: int, o: Expr, k: Expr) -> Expr:
        return o * self.strides[d] + k * self.dilations[d] - self.pads[d][0]

    def clipped(self, d: int) -> tuple[bool, bool]:
        """Whether taps of dimension d can fall before / after the input."""
        span = (self.kernel[d] - 1) * self.dilations[d] + 1
        last = (self.out[d] - 1) * self.strides[d] - self.pads[d][0] + span
        return self.pads[d][0] > 0, last > self.xs[2 + d]

    def inside(self, d: int, p: Expr) -> list[Expr]:
        """The conditions for input position `p` of spatial dimension d to be in the input
        (none on a side the window never leaves)."""
        low, high = self.clipped(d)
        return ([p >= 0] if low else []) + ([p < self.xs[2 + d]] if high else [])

    def read(self, n: Expr, c: Expr, sp: Sequence[Expr], fill: Expr) -> Expr:
        conds, idx = [], []
        for d in range(self.nsp):
            p = self.position(d, sp[d], self.ks[d].var)
            conds += self.inside(d, p)
            idx.append(p)
        value = self.x[(n, c, *idx)]
        return te.if_then_else(te.all(*conds), value, fill) if conds else value

    def count(self, sp: Sequence[Expr], include_pad: bool) -> Expr | int:
        """Number of taps of the window at `sp` inside the input (or the padded input)."""
        total: Expr | int = 1
        for d in range(self.nsp):
            size, k, dil = self.xs[2 + d], self.kernel[d], self.dilations[d]
            lo, hi = (-self.pads[d][0], size + self.pads[d][1]) if include_pad else (0, size)
            start = sp[d] * self.strides[d] - self.pads[d][0]
            span = (k - 1) * dil + 1
            last = (self.out[d] - 1) * self.strides[d] - self.pads[d][0] + span
            if -self.pads[d][0] >= lo and last <= hi:
                total = total * k
                continue
            first = te.max(te.const(0), -((start - lo) // dil))  # ceil((lo - start) / dil)
            final = te.min(te.const(k - 1), (hi - 1 - start) // dil)
            total = total * te.max(final - first + 1, te.const(0))
        return total


def _separable(win: _Window, fill: Expr, reduce: Callable[..., Expr], name: str, tag: str,
               pre: Callable[[Expr], Expr] | None = None) -> Tensor:
    """The window reduction in two stages: `rows` reduces the taps of the leading spatial
    dimensions for every (padded) position of the last one, `fill` outside the input; the
    pool stage reduces the last dimension's taps over `rows`, without a bounds test."""
    last = win.nsp - 1
    before = win.pads[last][0]
    stride, dil = win.strides[last], win.dilations[last]
    width = (win.out[last] - 1) * stride + (win.kernel[last] - 1) * dil + 1
    size = win.xs[-1]
    lead = win.ks[:last]

    def frow(n: Expr, c: Expr, *sp: Expr) -> Expr:
        conds, idx = [], []
        for d in range(last):
            p = win.position(d, sp[d], lead[d].var)
            conds += win.inside(d, p)
            idx.append(p)
        q = sp[last] - before if before else sp[last]
        if before:
            conds.append(q >= 0)
        if width - before > size:
            conds.append(q < size)
        value = win.x[(n, c, *idx, q)]
        if pre is not None:
            value = pre(value)
        if conds:
            value = te.if_then_else(te.all(*conds), value, fill)
        return reduce(value, axis=lead)

    rows = te.compute((win.xs[0], win.xs[1], *win.out[:last], width), frow,
                      name=f"{name}_rows", tag=f"{tag}.rows")
    k = win.ks[last]
    return te.compute((win.xs[0], win.xs[1], *win.out),
                      lambda n, c, *sp: reduce(rows[(n, c, *sp[:last], sp[last] * stride
                                                     + k.var * dil)], axis=[k]),
                      name=name, tag=tag)


def _compute_maxpool(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x = inputs[0]
    assert x is not None
    win = _Window(attrs, x)
    low = te.min_value(x.dtype)
    n_, c_ = win.xs[0], win.xs[1]
    if win.nsp > 1:
        pooled = _separable(win, low, te.max, "maxpool", "MaxPool")
    else:
        pooled = te.compute((n_, c_, *win.out),
                            lambda n, c, *sp: te.max(win.read(n, c, sp, low), axis=win.ks),
                            name="maxpool", tag="MaxPool")
    y = te.compute((n_, c_, *win.out), lambda *i: pooled[i], name="maxpool_out",
                   tag="MaxPool.out")
    column_major = int(attrs.get("storage_order", 0)) == 1
    argmax = te.comm_reducer(
        lambda a, b: (te.if_then_else(b[1] > a[1], b[0], a[0]), te.max(a[1], b[1])),
        lambda it, vt: (te.const(-1, it), te.min_value(vt)), name="argmax")

    def flat(n: Expr, c: Expr, sp: Sequence[Expr]) -> Expr:
        dims = win.xs[2:]
        pos = [te.cast(win.position(d, sp[d], win.ks[d].var), "int64") for d in range(win.nsp)]
        inner: Expr = pos[0] if not column_major else pos[-1]
        order = range(1, win.nsp) if not column_major else range(win.nsp - 2, -1, -1)
        for d in order:
            inner = inner * dims[d] + pos[d]
        plane = 1
        for s in dims:
            plane *= s
        return (te.cast(n, "int64") * c_ + te.cast(c, "int64")) * plane + inner

    idx, _ = te.compute((n_, c_, *win.out),
                        lambda n, c, *sp: argmax((flat(n, c, sp), win.read(n, c, sp, low)),
                                                 axis=win.ks),
                        name="maxpool_argmax", tag="MaxPool.argmax")
    indices = te.compute((n_, c_, *win.out), lambda *i: idx[i], name="maxpool_indices",
                         tag="MaxPool.indices")
    return [y, indices]  # type: ignore[list-item]


def _compute_avgpool(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x = inputs[0]
    assert x is not None
    win = _Window(attrs, x)
    zero = te.const(0, x.dtype)
    shape = (win.xs[0], win.xs[1], *win.out)
    if win.nsp > 1:
        total = _separable(win, zero, te.sum, "avgpool", "AveragePool")
    else:
        total = te.compute(shape,
                           lambda n, c, *sp: te.sum(win.read(n, c, sp, zero), axis=win.ks),
                           name="avgpool", tag="AveragePool")
    include = bool(attrs.get("count_include_pad", 0))

    def fout(n: Expr, c: Expr, *sp: Expr) -> Expr:
        count = win.count(sp, include)
        if isinstance(count, int):
            return total[(n, c, *sp)] * te.const(1.0 / count, x.dtype)
        return total[(n, c, *sp)] / te.cast(count, x.dtype)

    return [te.compute(shape, fout, name="avgpool_out", tag="AveragePool.out")]  # type: ignore


def _compute_lppool(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x = inputs[0]
    assert x is not None
    win = _Window(attrs, x)
    p = float(attrs.get("p", 2))
    zero = te.const(0, x.dtype)
    shape = (win.xs[0], win.xs[1], *win.out)

    def power(v: Expr) -> Expr:
        if p == 2.0:
            return v * v
        if p == 1.0:
            return te.abs(v)
        return te.pow(te.abs(v), te.const(p, x.dtype))

    if win.nsp > 1:
        total = _separable(win, zero, te.sum, "lppool", "LpPool", pre=power)
    else:
        total = te.compute(shape, lambda n, c, *sp: te.sum(power(win.read(n, c, sp, zero)),
                                                           axis=win.ks),
                           name="lppool", tag="LpPool")

    def root(v: Expr) -> Expr:
        if p == 2.0:
            return te.sqrt(v)
        if p == 1.0:
            return v
        return te.pow(v, te.const(1.0 / p, x.dtype))

    return [te.compute(shape, lambda *i: root(total[i]), name="lppool_out",  # type: ignore
                       tag="LpPool.out")]


@dataclass(frozen=True)
class PoolKnobs(Knobs):
    """ow_tile: outputs of the last dimension per vector step of a pool (default: the vector
    width); the `rows` stage of a separable pool is vectorized by row_tile the same way."""

    ow_tile: int = 1
    row_tile: int = 1

    @classmethod
    def space(cls, task: Task) -> Space:
        width, rows, lanes = _pool_task(task)
        return Space({"ow_tile": up_to(width, 2 * lanes),
                      "row_tile": up_to(rows, 2 * lanes) if rows else (1,)})

    @classmethod
    def default(cls, task: Task) -> PoolKnobs:
        width, rows, lanes = _pool_task(task)
        return cls(min(lanes, width), min(lanes, rows) if rows else 1)

    def check(self, task: Task) -> None:
        width, rows, _ = _pool_task(task)
        in_range(self, "ow_tile", 1, width, "output columns")
        in_range(self, "row_tile", 1, max(rows, 1), "columns of the separable rows stage")


def _pool_task(task: Task) -> tuple[int, int, int]:
    """(output width, width of the separable rows stage (0: none), vector lanes)."""
    pool = task.find(*POOL_TAGS)
    if (pool is None or len(task.outs) != 1
            or shape_of(task.outs[0]) != shape_of(pool.outputs[0])):
        return 1, 0, 1  # the generic reduction schedule runs instead: no choice here
    rows = task.find(*(f"{t}.rows" for t in POOL_TAGS))
    lanes = vector_lanes(task.target, str(pool.outputs[0].dtype))
    return (shape_of(pool.outputs[0])[-1], shape_of(rows.outputs[0])[-1] if rows else 0,
            lanes)


def schedule_pool(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                  ) -> Schedule:
    """Parallel over output rows (N * C * leading output dims); per row, the `rows` stage of
    a separable pool vectorized over the padded width, then per tile of `ow_tile` outputs
    the last dimension's taps, vectorized over the outputs (see PoolKnobs)."""
    k = resolve_knobs(PoolKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    pool = find_stage(s, POOL_TAGS)
    rows = find_stage(s, tuple(f"{t}.rows" for t in POOL_TAGS))
    reductions = [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis
                  and not st.is_output]
    if (pool is None or len(outs) != 1 or len(reductions) != 1 + (rows is not None)
            or shape_of(outs[0]) != shape_of(pool.op.outputs[0])):
        return schedule_reduction(outs, target)
    out = s[outs[0]]
    n, c, *sp = out.op.axis  # type: ignore[attr-defined]
    wo, wi = out.split(sp[-1], k.ow_tile)
    plane = out.fuse(n, c)
    out.parallel(plane)
    out.vectorize(wi)
    pool.compute_at(out, wo)
    pw = pool.op.axis[-1]  # type: ignore[attr-defined]
    pool.reorder(*pool.op.reduce_axis, pw)  # type: ignore[attr-defined]
    pool.vectorize(pw)
    if rows is not None:
        rows.compute_at(out, plane)
        rw = rows.op.axis[-1]  # type: ignore[attr-defined]
        rwo, rwi = rows.split(rw, k.row_tile)
        rows.reorder(rwo, *rows.op.reduce_axis, rwi)  # type: ignore[attr-defined]
        rows.vectorize(rwi)
    return s


# -- global pools ---------------------------------------------------------------------------
def _infer_global(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    x = inputs[0]
    assert x is not None
    if x.ndim < 3:
        raise ShapeError(f"input X must be [N, C, spatial...], got shape {x.shape}")
    return [TensorType((x.shape[0], x.shape[1]) + (1,) * (x.ndim - 2), x.dtype)]


def _global(kind: str) -> OpDef:
    def compute(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
        x = inputs[0]
        assert x is not None
        xs = shape_of(x)
        plane = 1
        for size in xs[2:]:
            plane *= size
        # one reduction axis over the contiguous plane (vectorizes like a row reduction)
        k = te.reduce_axis((0, plane), name="k")
        shape = (xs[0], xs[1]) + (1,) * (len(xs) - 2)
        reducer = te.sum if kind == "GlobalAveragePool" else te.max

        def position(flat: Expr) -> list[Expr]:
            idx = []
            for size in reversed(xs[3:]):
                idx.append(flat % size)
                flat = flat // size
            return [flat, *reversed(idx)]

        red = te.compute(shape, lambda n, c, *_: reducer(x[(n, c, *position(k.var))], axis=[k]),
                         name=kind.lower(), tag=kind)
        if kind == "GlobalMaxPool":
            return [red]  # type: ignore[list-item]
        count = 1
        for k in xs[2:]:
            count *= k
        scale = te.const(1.0 / count, x.dtype)
        return [te.compute(shape, lambda *i: red[i] * scale, name=f"{kind.lower()}_out",  # type: ignore
                           tag=f"{kind}.out")]

    return OpDef(kind, ("X",), _infer_global, compute, Pattern.REDUCTION)


_WINDOW = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": REQUIRED,
           "pads": None, "strides": None}

OPS: dict[str, OpDef] = {
    "MaxPool": OpDef("MaxPool", ("X",), _infer_pool, _compute_maxpool, Pattern.OUT_FUSABLE,
                     schedule_pool, attrs={**_WINDOW, "storage_order": 0}, num_outputs=2,
                     knobs=PoolKnobs),
    "AveragePool": OpDef("AveragePool", ("X",), _infer_one, _compute_avgpool,
                         Pattern.OUT_FUSABLE, schedule_pool,
                         attrs={**_WINDOW, "count_include_pad": 0}, knobs=PoolKnobs),
    "LpPool": OpDef("LpPool", ("X",), _infer_one, _compute_lppool, Pattern.OUT_FUSABLE,
                    schedule_pool, attrs={**_WINDOW, "p": 2}, knobs=PoolKnobs),
    "GlobalAveragePool": _global("GlobalAveragePool"),
    "GlobalMaxPool": _global("GlobalMaxPool"),
}
