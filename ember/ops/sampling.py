"""Sampling ops (ONNX semantics): GridSample over 1-3 spatial dims.

GridSample reads X (N, C, D1..Dr) at the points of Grid (N, O1..Or, r), whose last axis holds
normalized coordinates in [-1, 1] with the *last* spatial dim first (x, y, z). Each output
element is one te expression: the coordinate of every spatial dim is denormalized, moved
inside by the padding rule (border: clamped, for cubic each tap; reflection: mirrored at
the edges), then read with nearest (halves round to even), linear (2^r taps) or cubic
(4^r taps, Keys with a = -0.75) interpolation; taps outside X read 0 (zeros), the edge
(border) or their mirror image (reflection). The generic injective schedule makes it
parallel and vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember import te, tir
from ember.dtype import DType
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.registry import Attrs, OpDef
from ember.ops.transform import Shape, injective, shape_of
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

# opset 16 spells the modes bilinear / bicubic, opset 20 linear / cubic
_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "cubic": "cubic",
          "bicubic": "cubic"}
_PADDING = ("zeros", "border", "reflection")
_CUBIC_A = -0.75


def _check(a: Attrs) -> tuple[str, str, bool]:
    mode, padding = a["mode"], a["padding_mode"]
    if mode not in _MODES:
        raise UnsupportedOpError(f"GridSample: mode='{mode}' is not supported (expected one "
                                 f"of {sorted(_MODES)})")
    if padding not in _PADDING:
        raise UnsupportedOpError(f"GridSample: padding_mode='{padding}' is not supported "
                                 f"(expected one of {_PADDING})")
    if a["align_corners"] not in (0, 1):
        raise UnsupportedOpError(f"GridSample: align_corners must be 0 or 1, got "
                                 f"{a['align_corners']!r}")
    return _MODES[mode], padding, bool(a["align_corners"])


def _shape(a: Attrs, shapes: list[Shape], dtypes: list[DType]) -> tuple[Shape, DType]:
    mode, _, _ = _check(a)
    x, grid = shapes[0], shapes[1]
    rank = len(x) - 2
    if not 1 <= rank <= 3:
        raise ShapeError(f"GridSample: X must have 1 to 3 spatial dims (rank 3-5), got shape "
                         f"{x}")
    if len(grid) != rank + 2 or grid[0] != x[0] or grid[-1] != rank:
        raise ShapeError(f"GridSample: Grid of shape {grid} must be (N={x[0]}, "
                         f"{', '.join(f'O{k + 1}' for k in range(rank))}, {rank}) for X of "
                         f"shape {x}")
    if not (dtypes[0].is_float and dtypes[1].is_float):
        raise ShapeError(f"GridSample: X and Grid must be floats, got {dtypes[0]} and "
                         f"{dtypes[1]}")
    if mode == "cubic" and rank != 2:
        raise UnsupportedOpError(f"GridSample: cubic mode needs 2 spatial dims (4-D X), got "
                                 f"{rank}")
    return (x[0], x[1], *grid[1:-1]), dtypes[0]


@dataclass(frozen=True)
class _Tap:
    """One input index read along an axis: the index (kept inside the axis), whether the
    unclamped one was inside (None: always), and its weight (None: the only tap)."""

    index: Expr
    inside: Expr | None
    weight: Expr | None


def _reflect(x: Expr, low: float, high: float) -> Expr:
    """x mirrored into [low, high] (repeatedly, as a ball between two walls)."""
    span = high - low
    if span <= 0:
        return te.const(low, x.dtype.element)
    below, above = low - x, x - high
    out = x
    for distance, near, far, outside in ((below, low, high, x < low),
                                         (above, high, low, x > high)):
        times = te.floor(distance / span)
        rest = distance - times * span
        even = times - te.floor(times * 0.5) * 2.0 == 0.0
        step = rest if near == low else -rest
        mirrored = tir.Select(even, near + step, far - step)
        out = tir.Select(outside, mirrored, out)
    return out


class _Sampler:
    """The taps of each spatial axis for one output point, with its Let bindings."""

    def __init__(self, a: Attrs, dims: Shape, real: str) -> None:
        self.mode, self.padding, self.align = _check(a)
        self.dims = dims
        self.real = real
        self.lets: list[tuple[tir.Var, Expr]] = []

    def bind(self, value: Expr, name: str) -> Expr:
        var = tir.Var(name, value.dtype)
        self.lets.append((var, value))
        return var

    def borders(self, d: int) -> tuple[float, float]:
        return (0.0, d - 1.0) if self.align else (-0.5, d - 0.5)

    def coordinate(self, g: Expr, axis: int) -> Expr:
        """The input coordinate of normalized g along `axis`, after the padding rule."""
        d = self.dims[axis]
        g = g.astype(self.real)
        if self.align:
            x = (g + 1.0) * 0.5 * float(d - 1)
        else:
            x = ((g + 1.0) * float(d) - 1.0) * 0.5
        if self.mode == "nearest":  # halves to even, as onnxruntime's nearbyint
            x = te.round(x)
        if self.padding == "border" and self.mode != "cubic":
            # cubic keeps the point and clamps each tap (onnxruntime's rule); for nearest and
            # linear, clamping the point reads the same pixels
            x = te.max(te.min(x, float(d - 1)), 0.0)
        elif self.padding == "reflection":
            x = _reflect(x, *self.borders(d))
        return self.bind(x, f"x{axis}")

    def tap(self, raw: Expr, axis: int, weight: Expr | None) -> _Tap:
        """Input index `raw` (int32) along `axis` read by the padding rule."""
        last = self.dims[axis] - 1
        inside = None
        if self.padding == "reflection":
            low, high = self.borders(self.dims[axis])
            raw = _reflect(raw.astype(self.real), low, high).astype("int32")
        elif self.padding == "zeros":
            inside = (raw >= 0) & (raw <= last)
        return _Tap(te.max(te.min(raw, last), 0), inside, weight)

    def taps(self, x: Expr, axis: int) -> list[_Tap]:
        if self.mode == "nearest":
            return [self.tap(x.astype("int32"), axis, None)]
        base = te.floor(x)
        i0 = self.bind(base.astype("int32"), f"i{axis}")
        t = self.bind(x - base, f"t{axis}")
        if self.mode == "linear":
            return [self.tap(i0, axis, 1.0 - t), self.tap(i0 + 1, axis, t)]
        a = _CUBIC_A
        d = [t + 1.0, t, 1.0 - t, 2.0 - t]  # the taps' distances from x
        far = [((s * a - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a for s in (d[0], d[3])]
        near = [((a + 2.0) * s - (a + 3.0)) * s * s + 1.0 for s in (d[1], d[2])]
        weights = [far[0], near[0], near[1], far[1]]
        return [self.tap(i0 + (k - 1), axis, self.bind(w, f"w{axis}_{k}"))
                for k, w in enumerate(weights)]


def _gather(x: Tensor, prefix: tuple[Expr, ...], per_axis: list[list[_Tap]], real: str,
            chosen: tuple[_Tap, ...] = ()) -> Expr:
    """Separable sum over the taps of each axis (each axis's weights appear once per tap of
    the axes before it); a tap outside X reads 0 under zeros padding."""
    axis = len(chosen)
    if axis == len(per_axis):
        value = x[(*prefix, *(t.index for t in chosen))].astype(real)
        inside = [t.inside for t in chosen if t.inside is not None]
        if inside:
            value = te.if_then_else(te.all(*inside), value, te.const(0.0, real))
        return value
    total: Expr | None = None
    for tap in per_axis[axis]:
        term = _gather(x, prefix, per_axis, real, (*chosen, tap))
        if tap.weight is not None:
            term = term * tap.weight
        total = term if total is None else total + term
    assert total is not None
    return total


def _body(a: Attrs, ts: list[Tensor], i: tuple[Expr, ...]) -> Expr:
    x, grid = ts[0], ts[1]
    dims = shape_of(x)[2:]
    rank = len(dims)
    real = "float64" if 64 in (x.dtype.bits, grid.dtype.bits) else "float32"
    sampler = _Sampler(a, dims, real)
    n, points = i[0], i[2:]
    per_axis = []
    for axis in range(rank):
        g = grid[(n, *points, te.const(rank - 1 - axis))]  # the grid lists x (last dim) first
        per_axis.append(sampler.taps(sampler.coordinate(g, axis), axis))
    value = _gather(x, (n, i[1]), per_axis, real).astype(x.dtype)
    for var, bound in reversed(sampler.lets):
        value = tir.Let(var, bound, value)
    return value


OPS: dict[str, OpDef] = {
    "GridSample": injective("GridSample", ("X", "grid"), _shape, _body,
                            {"align_corners": 0, "mode": "linear", "padding_mode": "zeros"},
                            n_data=2),
}
