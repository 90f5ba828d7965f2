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
    """Tunable choices of the x86 matmul schedule, with defaults for AVX-512."""

    mr: int = 8          # rows of the register tile
    nr: int = 32         # columns of the register tile (2 zmm registers of float32)
    kc: int = 256        # k block kept in cache across the tile loops
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


def schedule_matmul_x86(C: te.Tensor, Bp: te.Tensor, knobs: MatmulKnobs = MatmulKnobs()
                        ) -> Schedule:
    """Cache-blocked, register-tiled, vectorized and parallel schedule of `matmul`."""
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, knobs.mr, knobs.nr)
    ko, ki = s[C].split(k, knobs.kc)
    s[C].reorder(ko, io, jo, ki, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    if knobs.parallel:
        s[C].parallel(io)
    p, _, c = Bp.op.axis
    s[Bp].vectorize(c)
    if knobs.parallel:
        s[Bp].parallel(p)
    return s
