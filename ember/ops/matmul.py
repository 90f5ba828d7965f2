"""Dense matrix multiply: the te compute with B packed in panels, and the x86 schedule.

The schedule keeps an `mr x nr` tile of C in vector registers (nr = a multiple of the
vector width) while streaming a panel of packed B and `mr` rows of A along k.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember import te
from ember.errors import ShapeError
from ember.te.schedule import Schedule


@dataclass(frozen=True)
class MatmulKnobs:
    """Tunable choices of the x86 matmul schedule, with defaults for AVX-512.

    Loop nest (BLIS order): jc (nc columns) / ko (kc of k) / ic (mc rows) / jr (nr) /
    ir (mr) / ki / ii (unrolled) / ji (vectorized). The B block kc x nc stays in L2,
    the B micro-panel kc x nr in L1, and the mr x nr tile of C in registers.
    """

    mr: int = 8          # rows of the register tile
    nr: int = 32         # columns of the register tile (2 zmm registers of float32)
    kc: int = 512        # k block
    mc: int = 128        # rows per L2 block of A
    nc: int = 512        # columns per L2 block of B
    parallel: bool = True


def matmul(M: int, N: int, K: int, dtype: str = "float32", nr: int = 32
           ) -> tuple[te.Tensor, te.Tensor, te.Tensor, te.Tensor]:
    """(A, B, B_packed, C) with C = A @ B and B packed as [N // nr, K, nr] panels."""
    if min(M, N, K) <= 0:
        raise ShapeError(f"matmul: dimensions must be positive, got M={M}, N={N}, K={K}")
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    panels = -(-N // nr)
    Bp = te.compute((panels, K, nr),
                    lambda p, k, c: te.if_then_else(p * nr + c < N, B[k, p * nr + c],
                                                    te.const(0, dtype)),
                    name="B_packed")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * Bp[j // nr, k, j % nr], axis=k),
                   name="C")
    return A, B, Bp, C  # type: ignore[return-value]


def schedule_matmul_x86(C: te.Tensor, Bp: te.Tensor, knobs: MatmulKnobs = MatmulKnobs(),
                        threads: int | None = None) -> Schedule:
    """Cache-blocked, register-tiled, vectorized and parallel schedule of `matmul`."""
    from ember.runtime.threadpool import num_threads

    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    M, N = (int(d.value) for d in C.shape)  # type: ignore[attr-defined]
    K = int(k.dom.extent.value)  # type: ignore[attr-defined]
    mc = max(knobs.mr, min(knobs.mc, -(-M // knobs.mr) * knobs.mr))
    nc = max(knobs.nr, min(knobs.nc, -(-N // knobs.nr) * knobs.nr))
    ic, i_rest = s[C].split(i, mc)
    ir, ii = s[C].split(i_rest, knobs.mr)
    jc, j_rest = s[C].split(j, nc)
    jr, ji = s[C].split(j_rest, knobs.nr)
    ko, ki = s[C].split(k, min(knobs.kc, K))
    s[C].reorder(jc, ko, ic, jr, ir, ki, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    if knobs.parallel:
        workers = threads or num_threads()
        s[C].parallel(ic if -(-M // mc) >= workers else jr)
    p, _, c = Bp.op.axis
    s[Bp].vectorize(c)
    if knobs.parallel:
        s[Bp].parallel(p)
    return s
