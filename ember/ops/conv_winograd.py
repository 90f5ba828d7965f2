"""Winograd F(m x m, 3x3) for ConvNCHWc, m = 2 or 4: 3x3 stride-1 convolutions with 2.25x
(F(2,3)) or 4x (F(4,3)) fewer multiplies.

Each m x m output tile t comes from an (m + 2)^2 input tile d:
Y = A^T [ (G g G^T) . (B^T d B) ] A, with the weights transformed at compile time
(pack_winograd; the layout pass picks m from the number of output tiles), so the kernel runs

    V[n, icb, e, t, ii] = (B^T d B)[e]                  input transform ((m + 2)^2 values e)
    M[n, ocb, e, t, oi] = sum_{icb, ii} V[n, icb, e, t, ii] * U[e, ocb, icb, ii, oi]
    Y[n, ocb, h, w, oi] = (A^T M A)[h % m, w % m] of tile (h // m, w // m)

M is (m + 2)^2 independent GEMMs with the same register-tiled micro-kernel as the direct
convolution (tiles x output-channel lanes); Y is computed inside the fused epilogue's loops.
F(4,3)'s interpolation points (0, +-1, +-2) scale its rounding error by about 10 against
F(2,3)'s (relative 1e-5 against 1e-6 in float32 on ResNet layers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ember import te
from ember.errors import ShapeError
from ember.ops.conv_common import find_stage, pad_input, shape_of
from ember.ops.generic import schedule_flat
from ember.ops.registry import Attrs
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import Tensor
from ember.tir.expr import Expr, Select

if TYPE_CHECKING:
    from ember.ops.conv_blocked import ConvKnobs

TAG = "ConvNCHWc"

# (B^T, G, A^T) of F(m x m, 3x3) per output tile m (interpolation points 0, +-1, +-2, inf
# for m = 4): an (m + 2)^2 input tile d gives the m x m output tile A^T [(G g G^T) . (B^T d B)] A
TRANSFORMS = {
    2: (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
        np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]])),
    4: (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]])),
}


def output_tile(elements: int) -> int:
    """The output tile m of transformed weights with `elements` = (m + 2)^2 rows."""
    for m in TRANSFORMS:
        if (m + 2) ** 2 == elements:
            return m
    raise ShapeError(f"Winograd weights: {elements} transformed rows, expected one of "
                     f"{sorted((k + 2) ** 2 for k in TRANSFORMS)}")


def _combine(coefficients: Sequence[float], values: Sequence[Expr], dtype: str) -> Expr:
    """sum_k coefficients[k] * values[k] over the nonzero coefficients, +-1 without a
    multiply, a positive term first."""
    terms = sorted(((float(c), v) for c, v in zip(coefficients, values) if c != 0),
                   key=lambda t: t[0] < 0)
    out: Expr | None = None
    for c, v in terms:
        scaled = v if abs(c) == 1 else v * te.const(abs(c), dtype)
        if out is None:
            out = scaled if c > 0 else te.const(0, dtype) - scaled
        else:
            out = out + scaled if c > 0 else out - scaled
    assert out is not None
    return out


def _transform(rows: np.ndarray, block: Sequence[Sequence[Expr]], dtype: str) -> list[Expr]:
    """rows . block . rows^T, flattened row-major, as expressions; the inner products of
    each block row are shared by every output row (LLVM keeps one copy of each)."""
    inner = [[_combine(r, line, dtype) for r in rows] for line in block]
    cols = len(inner[0])
    return [_combine(a, [inner[k][b] for k in range(len(inner))], dtype)
            for a in rows for b in range(cols)]


def _select(index: Expr, cases: Sequence[Expr]) -> Expr:
    """cases[index] for a small integer index (folds away once the index is a constant). A
    plain Select, not if_then_else: every case reads in bounds, and guarding each case's
    loads with the chain of conditions above it grows quadratically with the cases (F(4,3)'s
    36 took 95 s to build instead of 3)."""
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = Select(index == k, cases[k], out)
    return out


def pack_winograd(w: np.ndarray, ib: int, ob: int, tile: int = 2) -> np.ndarray:
    """OIHW 3x3 weights -> U = G w G^T of F(tile, 3) as [(tile + 2)^2, OC/ob, IC/ib, ib, ob]
    (float64 math)."""
    g = TRANSFORMS[tile][1]
    oc, ic = w.shape[:2]
    alpha = tile + 2
    u = np.einsum("ak,oikl,bl->abio", g, w.astype(np.float64), g)  # [a, a, IC, OC]
    u = u.reshape(alpha * alpha, ic // ib, ib, oc // ob, ob).transpose(0, 3, 1, 2, 4)
    return np.ascontiguousarray(u.astype(w.dtype))


def winograd_compute(x: Tensor, u: Tensor, attrs: Attrs, out_sp: Sequence[int]) -> Tensor:
    """Y (before bias) of a 3x3 stride-1 ConvNCHWc with Winograd-transformed weights u
    (F(2,3) or F(4,3), read from u's first dimension)."""
    n_batch, icb, height, width, ib = shape_of(x)
    elements, ocb, _, _, ob = shape_of(u)
    m = output_tile(elements)
    bt, _, at = TRANSFORMS[m]
    alpha = m + 2
    dtype = str(x.dtype)
    oh, ow = out_sp
    th, tw = -(-oh // m), -(-ow // m)
    pt, pl = (int(p) for p in attrs["pads"][:2])
    padded = pad_input(x, [(pt, m * th + 2 - height - pt), (pl, m * tw + 2 - width - pl),
                           (0, 0)], name=f"{TAG}.pad")

    def fin(n: Expr, c: Expr, e: Expr, t: Expr, i: Expr) -> Expr:
        r0, c0 = (t // tw) * m, (t % tw) * m
        block = [[padded[n, c, r0 + r, c0 + col, i] for col in range(alpha)]
                 for r in range(alpha)]
        return _select(e, _transform(bt, block, dtype))

    v = te.compute((n_batch, icb, elements, th * tw, ib), fin, name="wino_in",
                   tag=f"{TAG}.winograd_in")
    rc = te.reduce_axis((0, icb), name="icb")
    ri = te.reduce_axis((0, ib), name="ii")
    mm = te.compute((n_batch, ocb, elements, th * tw, ob),
                    lambda n, o, e, t, i: te.sum(v[n, rc.var, e, t, ri.var]
                                                 * u[e, o, rc.var, ri.var, i], axis=[rc, ri]),
                    name="wino_gemm", tag=f"{TAG}.winograd")

    def fout(n: Expr, o: Expr, h: Expr, w: Expr, i: Expr) -> Expr:
        t = (h // m) * tw + w // m
        block = [[mm[n, o, a * alpha + b, t, i] for b in range(alpha)] for a in range(alpha)]
        return _select((h % m) * m + w % m, _transform(at, block, dtype))

    return te.compute((n_batch, ocb, oh, ow, ob), fout, name="conv", tag=TAG)  # type: ignore


def schedule_winograd(s: Schedule, outs: Sequence[Tensor], conv: Stage, target: Target,
                      k: ConvKnobs) -> Schedule:
    """Input transform and GEMMs at root (parallel), the output transform in the epilogue;
    the GEMM register tile `k.ow_tile` output tiles x `k.oc_tile` channel blocks,
    `k.parallel_columns`: the input transform is split over its tiles too."""
    pad = find_stage(s, (f"{TAG}.pad",))
    v = find_stage(s, (f"{TAG}.winograd_in",))
    gemm = find_stage(s, (f"{TAG}.winograd",))
    assert v is not None and gemm is not None
    m = output_tile(shape_of(v.op.outputs[0])[2])  # type: ignore[attr-defined]
    if pad is not None:
        pad.compute_root()
        schedule_flat(pad, target)
    _schedule_input(v, 2 * target.num_cores if k.parallel_columns else 0)
    _schedule_gemm(gemm, k)
    conv_shape = shape_of(conv.op.outputs[0])
    if len(outs) != 1 or shape_of(outs[0]) != conv_shape:
        conv.compute_root()
        _schedule_output(conv, m)
        for t in outs:
            schedule_flat(s[t], target, str(t.dtype))
        return s
    _schedule_output(s[outs[0]], m)
    return s


def _schedule_input(v: Stage, parts: int) -> None:
    """Parallel over (batch, input block), and over `parts` shares of the tiles if > 0."""
    v.compute_root()
    n, c, e, t, i = v.op.axis  # type: ignore[attr-defined]
    v.reorder(n, c, t, e, i)
    outer = v.fuse(n, c)
    if parts:
        to, _ = v.split(t, nparts=parts)
        outer = v.fuse(outer, to)
    v.parallel(outer)
    v.unroll(e)
    v.vectorize(i)


def _schedule_gemm(m: Stage, k: ConvKnobs) -> None:
    """Parallel over (batch, channel tile, element); the register tile is `k.ow_tile` output
    tiles x `k.oc_tile` channel blocks, as the direct convolution's (each tile's value
    broadcast, the weights a vector per block), over the input channels (`k.unroll_ii`:
    those of a block unrolled), in chunks of `k.k_chunk` input blocks if > 0."""
    m.compute_root()
    n, o, e, t, i = m.op.axis  # type: ignore[attr-defined]
    rc, ri = m.op.reduce_axis  # type: ignore[attr-defined]
    oo, oi = m.split(o, k.oc_tile)
    to, ti = m.split(t, k.ow_tile)
    if k.k_chunk:  # the weights streamed once: each chunk of input blocks over every tile
        rco, rci = m.split(rc, k.k_chunk)
        m.reorder(n, oo, e, rco, to, rci, ri, oi, ti, i)
    else:
        m.reorder(n, oo, e, to, rc, ri, oi, ti, i)
    outer = m.fuse(n, oo, e)
    m.parallel(outer)
    if k.unroll_ii:
        m.unroll(ri)
    m.unroll(oi)
    m.unroll(ti)
    m.vectorize(i)


def _schedule_output(out: Stage, m: int) -> None:
    n, o, h, w, i = out.op.axis  # type: ignore[attr-defined]
    ho, hi = out.split(h, m)
    wo, wi = out.split(w, m)
    out.reorder(n, o, ho, wo, hi, wi, i)
    out.parallel(out.fuse(n, o, ho))
    out.unroll(hi)
    out.unroll(wi)
    out.vectorize(i)


__all__: Sequence[str] = ("pack_winograd", "schedule_winograd", "winograd_compute")
