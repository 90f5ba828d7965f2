"""Dense matrix multiply: the te compute with B packed in panels, and the x86 schedule.

The schedule keeps an `mr x nr` tile of C in vector registers (nr = a multiple of the
vector width) while streaming a panel of packed B and `mr` rows of A along k.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember import te
from ember.errors import ShapeError
from ember.ops.budgets import power_of_two_below, row_tile, snap, vectors
from ember.ops.knobs import Knobs, Space, Task, in_range, only, resolve_knobs
from ember.target import Target
from ember.te.schedule import Schedule


MR_CHOICES = (1, 2, 4, 6, 8, 12, 16)  # 1: a 32-column panel fills 8 of 16 xmm
KC_CHOICES = (64, 128, 256, 512, 1024)
MC_CHOICES = (32, 64, 128, 256)
NC_CHOICES = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class MatmulKnobs(Knobs):
    """Choices of the x86 matmul schedule.

    Loop nest (BLIS order): jc (nc columns) / ko (kc of k) / ic (mc rows) / jr (nr) /
    ir (mr) / ki / ii (unrolled) / ji (vectorized). The B block kc x nc stays in L2,
    the B micro-panel kc x nr in L1, and the mr x nr tile of C in registers; nr is the
    panel width of the packed B (fixed by `matmul`).
    """

    mr: int = 8          # rows of the register tile
    nr: int = 32         # columns of the register tile (2 zmm registers of float32)
    kc: int = 512        # k block
    mc: int = 128        # rows per L2 block of A
    nc: int = 512        # columns per L2 block of B
    parallel: bool = True

    @classmethod
    def space(cls, task: Task) -> Space:
        nr = _panel(task)
        return Space({"mr": MR_CHOICES, "nr": (nr,), "kc": KC_CHOICES, "mc": MC_CHOICES,
                      "nc": NC_CHOICES, "parallel": (False, True)})

    @classmethod
    def default(cls, task: Task) -> MatmulKnobs:
        """From the target's registers, FMA pipes and caches (Zen 4: 8 / 512 / 128 / 512):

        mr: budgets.row_tile for nr / lanes vectors a row (latency x throughput, within
            half the registers);
        kc: the mr x kc sliver of A a micro-kernel streams takes half of L1d (the B
            micro-panel streams beside it), and a long k block amortizes the C tile's
            load and store, done once per kc; the kc x nr B micro-panel, reused across
            the row tiles, stays within a quarter of L2;
        mc: the mc x kc block of A, reused across the jr panels, takes a quarter of L2;
        nc: the kc x nc block of B, reused across the ic row blocks, is the size of L2;
        parallel: when the target has more than one thread.
        Each is snapped to a point of the space."""
        nr = _panel(task)
        facts = task.target.facts
        mr = snap(row_tile(facts, vectors(nr, task.target.vector_lanes("float32"))),
                  MR_CHOICES)
        kc = snap(power_of_two_below(min(facts.l1d_bytes // 2 // (mr * 4),
                                         facts.l2_bytes // 4 // (nr * 4))), KC_CHOICES)
        mc = snap(facts.l2_bytes // 4 // (kc * 4), MC_CHOICES)
        nc = snap(facts.l2_bytes // (kc * 4), NC_CHOICES)
        return cls(mr, nr, kc, mc, nc, parallel=task.threads > 1)

    def check(self, task: Task) -> None:
        only(self, "nr", (_panel(task),), "(the panel width of the packed B)")
        for name in ("mr", "kc", "mc", "nc"):
            in_range(self, name, 1, 1 << 20, "a positive block size")


def _panel(task: Task) -> int:
    """The panel width of the packed B that the task's C reads (see `matmul`)."""
    for t in task.outs[0].op.input_tensors():  # type: ignore[attr-defined]
        if len(t.shape) == 3:
            return int(t.shape[-1].value)  # type: ignore[attr-defined]
    raise ShapeError("MatmulKnobs: the task's C reads no packed B (see matmul())")


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


def schedule_matmul_x86(C: te.Tensor, Bp: te.Tensor, target: Target | str = "llvm",
                        knobs: Knobs | None = None) -> Schedule:
    """Cache-blocked, register-tiled, vectorized and parallel schedule of `matmul`; the
    threads are the target's (`-num-cores`)."""
    tgt = Target(target)
    knobs = resolve_knobs(MatmulKnobs, knobs, [C], tgt)
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
        workers = tgt.num_cores
        s[C].parallel(ic if -(-M // mc) >= workers else jr)
    p, _, c = Bp.op.axis
    s[Bp].vectorize(c)
    if knobs.parallel:
        s[Bp].parallel(p)
    return s
