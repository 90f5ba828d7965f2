"""Winograd F(2x2, 3x3) for ConvNCHWc: 3x3 stride-1 convolutions with 2.25x fewer multiplies.

Each 2x2 output tile t comes from a 4x4 input tile d:  Y = A^T [ (G g G^T) . (B^T d B) ] A,
with the weights transformed at compile time (pack_winograd), so the kernel runs

    V[n, icb, e, t, ii] = (B^T d B)[e]                       input transform (16 values e)
    M[n, ocb, e, t, oi] = sum_{icb, ii} V[n, icb, e, t, ii] * U[e, ocb, icb, ii, oi]
    Y[n, ocb, h, w, oi] = (A^T M A)[h % 2, w % 2] of tile (h // 2, w // 2)

M is 16 independent GEMMs with the same register-tiled micro-kernel as the direct convolution
(tiles x output-channel lanes); Y is computed inside the fused epilogue's loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ember import te
from ember.ops.conv_common import find_stage, pad_input, shape_of
from ember.ops.generic import schedule_flat
from ember.ops.registry import Attrs
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

if TYPE_CHECKING:
    from ember.ops.conv_blocked import ConvKnobs

TAG = "ConvNCHWc"
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def _bt(k: int, d: Sequence[Expr]) -> Expr:
    """Row k of B^T applied to four values: [d0 - d2, d1 + d2, d2 - d1, d1 - d3]."""
    return (d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3])[k]


def _at(k: int, m: Sequence[Expr]) -> Expr:
    """Row k of A^T applied to four values: [m0 + m1 + m2, m1 - m2 - m3]."""
    return (m[0] + m[1] + m[2], m[1] - m[2] - m[3])[k]


def _select(index: Expr, cases: Sequence[Expr]) -> Expr:
    """cases[index] for a small integer index (folds away once the index is a constant)."""
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = te.if_then_else(index == k, cases[k], out)
    return out


def pack_winograd(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """OIHW 3x3 weights -> U = G w G^T as [16, OC/ob, IC/ib, ib, ob] (float64 math)."""
    oc, ic = w.shape[:2]
    u = np.einsum("ak,oikl,bl->abio", G, w.astype(np.float64), G)  # [4, 4, IC, OC]
    u = u.reshape(16, ic // ib, ib, oc // ob, ob).transpose(0, 3, 1, 2, 4)
    return np.ascontiguousarray(u.astype(w.dtype))


def winograd_compute(x: Tensor, u: Tensor, attrs: Attrs, out_sp: Sequence[int]) -> Tensor:
    """Y (before bias) of a 3x3 stride-1 ConvNCHWc with Winograd-transformed weights u."""
    n_batch, icb, height, width, ib = shape_of(x)
    _, ocb, _, _, ob = shape_of(u)
    oh, ow = out_sp
    th, tw = -(-oh // 2), -(-ow // 2)
    pt, pl = (int(p) for p in attrs["pads"][:2])
    padded = pad_input(x, [(pt, 2 * th + 2 - height - pt), (pl, 2 * tw + 2 - width - pl),
                           (0, 0)], name=f"{TAG}.pad")

    def fin(n: Expr, c: Expr, e: Expr, t: Expr, i: Expr) -> Expr:
        r0, c0 = (t // tw) * 2, (t % tw) * 2

        def d(r: int, col: int) -> Expr:
            return padded[n, c, r0 + r, c0 + col, i]

        cases = [_bt(a, [_bt(b, [d(r, col) for col in range(4)]) for r in range(4)])
                 for a in range(4) for b in range(4)]
        return _select(e, cases)

    v = te.compute((n_batch, icb, 16, th * tw, ib), fin, name="wino_in",
                   tag=f"{TAG}.winograd_in")
    rc = te.reduce_axis((0, icb), name="icb")
    ri = te.reduce_axis((0, ib), name="ii")
    m = te.compute((n_batch, ocb, 16, th * tw, ob),
                   lambda n, o, e, t, i: te.sum(v[n, rc.var, e, t, ri.var]
                                                * u[e, o, rc.var, ri.var, i], axis=[rc, ri]),
                   name="wino_gemm", tag=f"{TAG}.winograd")

    def fout(n: Expr, o: Expr, h: Expr, w: Expr, i: Expr) -> Expr:
        t = (h // 2) * tw + w // 2

        def mm(a: int, b: int) -> Expr:
            return m[n, o, a * 4 + b, t, i]

        cases = [_at(p, [_at(q, [mm(a, b) for b in range(4)]) for a in range(4)])
                 for p in range(2) for q in range(2)]
        return _select((h % 2) * 2 + w % 2, cases)

    return te.compute((n_batch, ocb, oh, ow, ob), fout, name="conv", tag=TAG)  # type: ignore


def schedule_winograd(s: Schedule, outs: Sequence[Tensor], conv: Stage, target: Target,
                      k: ConvKnobs) -> Schedule:
    """Input transform and GEMMs at root (parallel), the output transform in the epilogue;
    `k.ow_tile` tiles per GEMM register tile, `k.parallel_columns`: the input transform is
    split over its tiles too."""
    pad = find_stage(s, (f"{TAG}.pad",))
    v = find_stage(s, (f"{TAG}.winograd_in",))
    m = find_stage(s, (f"{TAG}.winograd",))
    assert v is not None and m is not None
    if pad is not None:
        pad.compute_root()
        schedule_flat(pad, target)
    _schedule_input(v, 2 * target.num_cores if k.parallel_columns else 0)
    _schedule_gemm(m, k.ow_tile)
    conv_shape = shape_of(conv.op.outputs[0])
    if len(outs) != 1 or shape_of(outs[0]) != conv_shape:
        conv.compute_root()
        _schedule_output(conv)
        for t in outs:
            schedule_flat(s[t], target, str(t.dtype))
        return s
    _schedule_output(s[outs[0]])
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


def _schedule_gemm(m: Stage, tile: int) -> None:
    m.compute_root()
    n, o, e, t, i = m.op.axis  # type: ignore[attr-defined]
    rc, ri = m.op.reduce_axis  # type: ignore[attr-defined]
    to, ti = m.split(t, tile)
    m.reorder(n, o, e, to, rc, ri, ti, i)
    outer = m.fuse(n, o, e)
    m.parallel(outer)
    m.unroll(ti)
    m.vectorize(i)


def _schedule_output(out: Stage) -> None:
    n, o, h, w, i = out.op.axis  # type: ignore[attr-defined]
    ho, hi = out.split(h, 2)
    wo, wi = out.split(w, 2)
    out.reorder(n, o, ho, wo, hi, wi, i)
    out.parallel(out.fuse(n, o, ho))
    out.unroll(hi)
    out.unroll(wi)
    out.vectorize(i)


__all__: Sequence[str] = ("pack_winograd", "schedule_winograd", "winograd_compute")
