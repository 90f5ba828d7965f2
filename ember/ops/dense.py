"""Dense ops (ONNX semantics): MatMul (batched, broadcast, 1-D operands), Gemm and Einsum.

MatMul and Gemm share one compute: B is packed into panels of `nr` columns,

    packed[*batch, p, k, c] = B[*batch, k, p * nr + c]      (zero past N)
    mm[*batch, i, j] = sum_k A[*batch, i, k] * packed[*batch, j // nr, k, j % nr]
    out = mm (MatMul) or alpha * mm + beta * C (Gemm)

and one schedule: per (batch, panel) the panel is packed once (kept in L2), then an
`mr x nr` register tile of mm is accumulated over all of k (vectorized over c, unrolled over
rows) and the fused epilogue runs on the tile. Einsum is a plain reduction over the index
letters missing from the output, with the generic reduction schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ember import dtype as dt
from ember import te
from ember.errors import ScheduleError, ShapeError
from ember.types import TensorType
from ember.ops.budgets import accumulator_budget, prefetches, row_tile, vectors
from ember.ops.conv import find_stage, pick_tile, shape_of
from ember.ops.conv_common import extent
from ember.ops.elementwise import broadcast_shape
from ember.ops.generic import (
    ReductionKnobs,
    inline_injective,
    schedule_flat,
    schedule_reduction,
    vector_lanes,
)
from ember.ops.knobs import Knobs, Space, Task, in_range, only, resolve_knobs, up_to
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

DENSE_TAGS = ("MatMul", "Gemm")
SMALL_M = 16     # fewer rows than this: B is read in place, not packed (packing would cost
                 # as much memory traffic as the product itself)
DOT_LANES = 16   # lanes of the partial dot products when B is transposed and M is small


PANEL = 32       # columns of a packed B panel where the target is not known


def target_panel(lanes: int) -> int:
    """Columns of a packed B panel on a target with `lanes` float32 lanes a vector register:
    two vectors (the register tile is rows x 2 vectors), at least 16 columns. Zen 4 and
    Sapphire Rapids: 32 (2 zmm, 8 rows); AVX2: 16 (2 ymm, 4 rows; 32 columns, 4 ymm a row,
    leave room for only 2 rows: BERT's 128x3072x768 at 1 thread on Zen 3 8.1 -> 6.8 ms)."""
    return max(16, 2 * lanes)


def cpu_compute(opdef: OpDef, target: Target) -> Callable[[Attrs, Sequence[Tensor | None]],
                                                            list[Tensor]]:
    """The compute of a MatMul/Gemm on the CPU `target`: B packed in its panels."""
    panel = target_panel(vector_lanes(target, "float32"))
    return lambda attrs, inputs: opdef.compute(attrs, inputs, panel=panel)  # type: ignore


def panel_width(n: int, panel: int = PANEL) -> int:
    """Columns per packed panel of B for N output columns (0: do not pack, N is too narrow
    to vectorize): `panel`, or 16 where N is narrower."""
    return panel if n >= panel else 16 if n >= 16 else 0


def _bidx(shape: Sequence[int], batch: Sequence[Expr]) -> list[Expr]:
    """Indices into the batch dims `shape` of an operand for the output batch index."""
    offset = len(batch) - len(shape)
    return [te.const(0) if d == 1 else batch[offset + i] for i, d in enumerate(shape)]


def dense_compute(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool, tag: str,
                  epilogue: Callable[[Expr, Sequence[Expr]], Expr] | None = None,
                  panel: int = PANEL) -> Tensor:
    """A @ B over the last two dims with broadcast batch dims (A, B at least 2-D); the
    output stage applies `epilogue(value, index)` if given. B is packed in panels of
    `panel` columns (`target_panel`); `panel=0` reads B in place (GPU schedules stage their
    own tiles of it in shared memory)."""
    a_s, b_s = shape_of(a), shape_of(b)
    m, k_a = (a_s[-1], a_s[-2]) if trans_a else (a_s[-2], a_s[-1])
    k_b, n = (b_s[-1], b_s[-2]) if trans_b else (b_s[-2], b_s[-1])
    assert k_a == k_b, (a_s, b_s)
    batch_a, batch_b = a_s[:-2], b_s[:-2]
    batch = broadcast_shape(batch_a, batch_b)
    k = te.reduce_axis((0, k_a), name="k")
    nr = panel_width(n, panel) if m >= SMALL_M and panel else 0
    # float16 products are summed in float32, as numpy and onnxruntime do: a float16
    # accumulator drifts by several units in the last place over a few dozen terms
    wide = a.dtype == dt.float16

    def mul(x: Expr, y: Expr) -> Expr:
        return x.astype(dt.float32) * y.astype(dt.float32) if wide else x * y
    dot = trans_b and m < SMALL_M and k_a >= DOT_LANES

    def a_at(bi: Sequence[Expr], i: Expr, kk: Expr) -> Expr:
        ai = _bidx(batch_a, bi)
        return a[(*ai, kk, i)] if trans_a else a[(*ai, i, kk)]

    def b_at(bb: Sequence[Expr], kk: Expr, j: Expr) -> Expr:
        return b[(*bb, j, kk)] if trans_b else b[(*bb, kk, j)]

    if dot:
        # few rows of A against rows of B: lane-wise partial dot products over k
        lanes = DOT_LANES
        ko = te.reduce_axis((0, -(-k_a // lanes)), name="ko")
        zero = te.const(0, dt.float32 if wide else a.dtype)

        def fpart(*idx: Expr) -> Expr:
            *bi, i, j, lane = idx
            kk = ko.var * lanes + lane
            term = mul(a_at(bi, i, kk), b_at(_bidx(batch_b, bi), kk, j))
            return te.sum(term if k_a % lanes == 0 else te.if_then_else(kk < k_a, term, zero),
                          axis=ko)

        part = te.compute((*batch, m, n, lanes), fpart, name="part", tag=f"{tag}.dot")
        lane_axis = te.reduce_axis((0, lanes), name="lane")

        def fmm(*idx: Expr) -> Expr:
            return te.sum(part[(*idx, lane_axis)], axis=lane_axis)
    elif nr:
        panels = -(-n // nr)
        zero = te.const(0, b.dtype)

        def fpack(*idx: Expr) -> Expr:
            *bb, p, kk, c = idx
            j = p * nr + c
            return b_at(bb, kk, j) if n % nr == 0 else te.if_then_else(j < n, b_at(bb, kk, j),
                                                                      zero)

        packed = te.compute((*batch_b, panels, k_a, nr), fpack, name="packed",
                            tag=f"{tag}.pack")

        def fmm(*idx: Expr) -> Expr:
            *bi, i, j = idx
            bb = _bidx(batch_b, bi)
            return te.sum(mul(a_at(bi, i, k.var), packed[(*bb, j // nr, k, j % nr)]), axis=k)
    else:
        def fmm(*idx: Expr) -> Expr:
            *bi, i, j = idx
            return te.sum(mul(a_at(bi, i, k.var), b_at(_bidx(batch_b, bi), k.var, j)), axis=k)

    mm = te.compute((*batch, m, n), fmm, name="mm", tag=tag)

    def fout(*idx: Expr) -> Expr:
        value = mm[idx].astype(a.dtype) if wide else mm[idx]
        return epilogue(value, idx) if epilogue is not None else value

    return te.compute((*batch, m, n), fout, name="mm_out", tag=f"{tag}.out")  # type: ignore


# -- MatMul ---------------------------------------------------------------------------------
def _matmul_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(f"MatMul operands must have rank >= 1, got {tuple(a)} and {tuple(b)}")
    a2 = (1, a[0]) if len(a) == 1 else tuple(a)
    b2 = (b[0], 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ShapeError(f"inner dimensions differ: A {tuple(a)} has K={a2[-1]}, B {tuple(b)} "
                         f"has K={b2[-2]}")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    return (*batch, *([a2[-2]] if len(a) > 1 else []), *([b2[-1]] if len(b) > 1 else []))


def _infer_matmul(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    a, b = inputs
    assert a is not None and b is not None
    if a.dtype != b.dtype:
        raise ShapeError(f"A and B types differ: {a.dtype} and {b.dtype}")
    return [TensorType(_matmul_shapes(a.shape, b.shape), a.dtype)]


def _compute_matmul(attrs: Attrs, inputs: Sequence[Tensor | None],
                    panel: int = PANEL) -> list[Tensor]:
    a, b = inputs
    assert a is not None and b is not None
    a_s, b_s = shape_of(a), shape_of(b)
    a2 = a if len(a_s) > 1 else te.compute((1, a_s[0]), lambda _, kk: a[kk], name="a_row")
    b2 = b if len(b_s) > 1 else te.compute((b_s[0], 1), lambda kk, _: b[kk], name="b_col")
    out = dense_compute(a2, b2, False, False, "MatMul", panel=panel)  # type: ignore[arg-type]
    if len(a_s) > 1 and len(b_s) > 1:
        return [out]
    shape = _matmul_shapes(a_s, b_s)

    def fdrop(*idx: Expr) -> Expr:
        full = list(idx)
        if len(b_s) == 1:
            full.append(te.const(0))
        if len(a_s) == 1:
            full.insert(len(full) - 1, te.const(0))
        return out[tuple(full)]

    return [te.compute(shape, fdrop, name="matmul_1d")]  # type: ignore[list-item]


# -- Gemm -----------------------------------------------------------------------------------
def _gemm_dims(attrs: Attrs, a: Sequence[int], b: Sequence[int]) -> tuple[int, int]:
    if len(a) != 2 or len(b) != 2:
        raise ShapeError(f"Gemm operands must be 2-D, got A {tuple(a)} and B {tuple(b)}")
    m, ka = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
    kb, n = (b[1], b[0]) if attrs.get("transB", 0) else (b[0], b[1])
    if ka != kb:
        raise ShapeError(f"inner dimensions differ: op(A) is [{m}, {ka}], op(B) is [{kb}, {n}]")
    return m, n


def _infer_gemm(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    assert a is not None and b is not None
    if a.dtype != b.dtype:
        raise ShapeError(f"A and B types differ: {a.dtype} and {b.dtype}")
    m, n = _gemm_dims(attrs, a.shape, b.shape)
    if c is not None and (len(c.shape) > 2 or any(
            d not in (1, full) for d, full in zip(c.shape[::-1], (n, m)))):
        raise ShapeError(f"C {c.shape} does not broadcast to the output [{m}, {n}]")
    return [TensorType((m, n), a.dtype)]


def _compute_gemm(attrs: Attrs, inputs: Sequence[Tensor | None],
                  panel: int = PANEL) -> list[Tensor]:
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    assert a is not None and b is not None
    alpha, beta = float(attrs["alpha"]), float(attrs["beta"])
    c_s = shape_of(c) if c is not None else ()

    def epilogue(value: Expr, idx: Sequence[Expr]) -> Expr:
        if alpha != 1.0:
            value = value * te.const(alpha, value.dtype)
        if c is not None:
            # beta == 0 still reads C (times 0) so that C stays an argument of the kernel
            ci = [te.const(0) if d == 1 else idx[2 - len(c_s) + i] for i, d in enumerate(c_s)]
            term = c[tuple(ci)]
            value = value + (term if beta == 1.0 else term * te.const(beta, value.dtype))
        return value

    return [dense_compute(a, b, bool(attrs["transA"]), bool(attrs["transB"]), "Gemm",
                          epilogue, panel)]


# -- knobs ----------------------------------------------------------------------------------
MAX_ROWS = 16    # the most rows the space offers
K_UNROLLS = (1, 2, 4)  # k steps of the register tile unrolled, as the space offers them


@dataclass(frozen=True)
class DenseKnobs(Knobs):
    """Choices of the MatMul / Gemm schedule (batched too).

    rows: rows of the register tile (unrolled); cols: columns per tile (vectorized; with
    packed B it is the panel width, fixed by the compute; for few rows against a transposed
    B, output columns per parallel task); parallel_rows: the parallel loop also runs over
    the row tiles (B then packed once, before the loop, instead of per panel inside it);
    unroll_k: k steps of the register tile unrolled (a divisor of K; the loop's counter,
    compare and branch and the cache hints then come once per unroll_k steps).
    """

    rows: int = 1
    cols: int = 1
    parallel_rows: bool = False
    unroll_k: int = 1

    @classmethod
    def space(cls, task: Task) -> Space:
        kind, m, n, width, _ = _dense_task(task)
        if kind == "root":
            return Space({"rows": (1,), "cols": (1,), "parallel_rows": (False,)})
        if kind == "dot":
            # at least 4 columns a task (tail guards past N), as the default takes
            return Space({"rows": (1,), "cols": up_to(max(n, 4), MAX_ROWS),
                          "parallel_rows": (False,)})
        cols = (width,) if kind == "packed" else \
            tuple(sorted({min(n, 32), *(c for c in (4, 8, 16, 32) if c <= n)}))
        depth = _reduction(task)
        return Space({"rows": up_to(m, MAX_ROWS), "cols": cols,
                      "parallel_rows": (False, True),
                      "unroll_k": tuple(u for u in K_UNROLLS if depth % u == 0)})

    @classmethod
    def default(cls, task: Task) -> DenseKnobs:
        kind, m, n, width, batch = _dense_task(task)
        if kind == "root":
            return cls(1, 1, False)
        if kind == "dot":
            return cls(1, max(pick_tile(n, 8), 4), False)
        # Rows of the register tile from the registers and FMA pipes (budgets.row_tile):
        # each row is width / lanes vector accumulators (8 rows x 2 zmm on Zen 4, 6 x 2 ymm
        # on an AVX2 core, below); the widest divisor of M, else a tail tile of full depth.
        # Parallel granularity from the thread count: panels x batch >= threads.
        mm = task.find(*DENSE_TAGS)
        lanes = vector_lanes(task.target, str(mm.outputs[0].dtype))  # type: ignore[union-attr]
        facts = task.target.facts
        per_row = vectors(width, lanes)
        limit = min(row_tile(facts, per_row), MAX_ROWS)
        rows = pick_tile(m, limit)
        if rows < limit // 2 and m > limit:
            rows = limit
        # where a k step of that tile keeps the FMA pipes busy for less than three FMA
        # latencies (4 rows x 2 ymm on two AVX2 pipes: 4 cycles; 8 rows x 2 zmm on two
        # 512-bit pipes: 8 cycles), the step's loads, B's stream from L2 and its cache hints
        # are a visible share: the tile takes the accumulator budget (6 x 2 ymm, 12 x 2 zmm),
        # with a tail tile if need be; Zen 4's 8 x 2 zmm on one pipe (16 cycles) stays.
        # Each task's two tiles in turn in one worker, cold weights: AVX2, 1 thread, Zen 3:
        # bert-base's 768x768 1.06x, 3072->768 1.03-1.05x, 768->3072 1.01x, its attention
        # products 0.97-1.04x; lstm_lm's 256->10000 decoder 1.05-1.08x. Intel Xeon (two
        # 512-bit pipes), 1 thread: 768x768 1.06x, 3072->768 1.06x, 768->3072 1.05x, attention
        # 0.99-1.02x, the decoder 1.09x; 2 threads 1.16x, 1.07x, 1.02x, 0.92-1.02x, 1.01x
        deep = min(accumulator_budget(facts) // per_row, MAX_ROWS)
        step = limit * per_row / facts.vector_fmas_per_cycle
        if step < 3 * facts.fma_latency and m > deep > rows:
            rows = deep
        tasks = -(-n // width) * batch
        whole = kind == "packed" and (tasks >= task.threads or -(-m // rows) == 1)
        # with two full-width FMA pipes a k step of the tile is a few cycles (12 x 2 zmm:
        # 12), and the loop's counter, compare, branch and cache hints a visible share:
        # 4 steps a trip. Intel Xeon, 1 thread, each task's two kernels in turn, cold
        # weights: bert-base's 3072->768 4.88 -> 4.57 ms, 768->3072 4.59 -> 4.34, 768x768
        # 1.05 -> 1.09 (median 1.15 -> 1.13); the whole model compiled both ways, in turns,
        # 175.5 against 183.2 ms; lstm_lm 4.28 / 4.37 ms; one 512-bit pipe (Zen 4) keeps 1
        unroll = 4 if facts.vector_fmas_per_cycle >= 2 and _reduction(task) % 4 == 0 else 1
        return cls(rows, width, not whole, unroll)

    def check(self, task: Task) -> None:
        kind, m, n, width, _ = _dense_task(task)
        if kind == "root":
            only(self, "unroll_k", (1,), "for a product computed whole (several outputs)")
            return
        in_range(self, "cols", 1, max(n, 4) if kind == "dot" else n, "output columns")
        if kind == "dot":
            only(self, "rows", (1,), "for few rows against a transposed B")
            only(self, "unroll_k", (1,), "for few rows against a transposed B")
            return
        in_range(self, "rows", 1, m, "output rows")
        if kind == "packed":
            only(self, "cols", (width,), "(the panel width of packed B)")
        depth = _reduction(task)
        in_range(self, "unroll_k", 1, depth, "k steps")
        if depth % self.unroll_k:
            raise self.reject("unroll_k", f"does not divide the reduction's {depth} steps")


def _reduction(task: Task) -> int:
    """K, the reduction's extent, of a dense group."""
    mm = task.find(*DENSE_TAGS)
    assert mm is not None
    return extent(mm.reduce_axis[0])


def _dense_task(task: Task) -> tuple[str, int, int, int, int]:
    """(root | dot | packed | plain, M, N, columns per tile, batch size) of a dense group."""
    mm = task.find(*DENSE_TAGS)
    if mm is None:
        raise ScheduleError("DenseKnobs: no MatMul/Gemm stage in the task")
    shape = shape_of(mm.outputs[0])
    *batch, m, n = shape
    size = int(np.prod(batch)) if batch else 1
    if len(task.outs) != 1 or shape_of(task.outs[0]) != shape:
        return "root", m, n, 1, size
    if task.find(f"{mm.tag}.dot") is not None:
        return "dot", m, n, 1, size
    pack = task.find(f"{mm.tag}.pack")
    if pack is not None:
        return "packed", m, n, shape_of(pack.outputs[0])[-1], size
    return "plain", m, n, min(n, 32), size


# -- schedule -------------------------------------------------------------------------------
def schedule_dense(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                   ) -> Schedule:
    """Register-tiled schedule of a MatMul/Gemm group (any elementwise epilogue).

    Loop nest of the output: (batch, panel) parallel / row tile / `rows` rows (unrolled) /
    `cols` columns (vectorized); the mm tile is computed at the row tile, reduced over all k."""
    k = resolve_knobs(DenseKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    mm = find_stage(s, DENSE_TAGS)
    assert mm is not None, "schedule_dense: no MatMul/Gemm stage in the group"
    pack = find_stage(s, (f"{mm.op.tag}.pack",))  # type: ignore[attr-defined]
    mm_shape = shape_of(mm.op.outputs[0])
    if len(outs) != 1 or shape_of(outs[0]) != mm_shape:
        if pack is not None:
            pack.compute_root()
            pack.parallel(pack.op.axis[0])  # type: ignore[attr-defined]
        return _schedule_root(s, mm, outs, target)
    out = s[outs[0]]
    *batch, i, j = out.op.axis  # type: ignore[attr-defined]
    dot = find_stage(s, (f"{mm.op.tag}.dot",))  # type: ignore[attr-defined]
    if dot is not None:
        jo, ji = out.split(j, k.cols)
        outer = out.fuse(*batch, i, jo)
        out.parallel(outer)
        mm.compute_at(out, outer)
        dot.compute_at(out, outer)
        *_, dj, lane = dot.op.axis  # type: ignore[attr-defined]
        dot.reorder(*dot.op.reduce_axis, dj, lane)  # type: ignore[attr-defined]
        dot.unroll(dj)
        dot.vectorize(lane)
        return s
    jo, ji = out.split(j, k.cols)
    io, ii = out.split(i, k.rows)
    out.reorder(*batch, jo, io, ii, ji)
    outer = out.fuse(*batch, jo) if batch else jo
    if not k.parallel_rows:
        out.parallel(outer)
        if pack is not None:
            pack.compute_at(out, outer)
    else:
        outer = io = out.fuse(outer, io)
        out.parallel(outer)
        if pack is not None:
            pack.compute_root()
            pack.parallel(pack.op.axis[0])  # type: ignore[attr-defined]
    if pack is not None:
        pack.vectorize(pack.op.axis[-1])  # type: ignore[attr-defined]
    out.vectorize(ji)
    mm.compute_at(out, io)
    *_, mi, mj = mm.op.axis  # type: ignore[attr-defined]
    (kk,) = mm.op.reduce_axis  # type: ignore[attr-defined]
    if k.unroll_k > 1:
        kk, ki = mm.split(kk, k.unroll_k)
        mm.reorder(kk, ki, mi, mj)
        mm.unroll(ki)
    else:
        mm.reorder(kk, mi, mj)
    mm.unroll(mi)
    mm.vectorize(mj)
    if prefetches(target):
        # B's next panel (packed at compile time, or read in place) is hinted into the cache
        # while this one computes, so weights that come from memory stop stalling the
        # panel's first row tile. Models compiled twice and profiled in turns, 1 thread,
        # Intel Xeon: bert-base 169.4 -> 162.9 ms (its 3072->768 products 4.58 -> 4.46
        # ms; 2 threads 92.5 -> 88.8 ms); lstm_lm's decoder 2.49 -> 2.22 ms, each model
        # compiled first (the second model compiled in a process runs it 0.5 ms slower)
        tiles = -(-mm_shape[-2] // k.rows) if k.parallel_rows else 1
        mm.prefetch(kk, outer, tiles)
    return s


def _schedule_root(s: Schedule, mm: object, outs: Sequence[Tensor], target: Target) -> Schedule:
    from ember.ops.generic import schedule_reduction_stage

    schedule_reduction_stage(mm, target, str(outs[0].dtype))  # type: ignore[arg-type]
    for t in outs:
        if not s[t].op.reduce_axis:  # type: ignore[attr-defined]
            schedule_flat(s[t], target, str(t.dtype))
    return s


# -- Einsum ---------------------------------------------------------------------------------
def _parse_einsum(equation: str, ranks: Sequence[int]
                  ) -> tuple[list[list[str]], list[str]]:
    """Terms as lists of single-letter labels, '...' expanded to labels '0', '1', ..."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"equation '{equation}' has {len(terms)} operands, got {len(ranks)} "
                         "inputs")
    ell = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            ell = max(ell, rank - len(term.replace("...", "")))
    ell_labels = [str(d) for d in range(ell)]

    def expand(term: str, rank: int | None) -> list[str]:
        if term.count("...") > 1 or "." in term.replace("...", ""):
            raise ShapeError(f"equation '{equation}': malformed term '{term}'")
        for ch in term.replace("...", ""):
            if not ch.isalpha():
                raise ShapeError(f"equation '{equation}': bad label '{ch}'")
        if "..." not in term:
            return list(term)
        head, tail = term.split("...")
        count = ell if rank is None else rank - len(head) - len(tail)
        return list(head) + ell_labels[ell - count:] + list(tail)

    inputs = [expand(t, r) for t, r in zip(terms, ranks)]
    for labels, rank in zip(inputs, ranks):
        if len(labels) != rank:
            raise ShapeError(f"equation '{equation}': term {''.join(labels)} does not match an "
                             f"input of rank {rank}")
    if arrow:
        output = expand(rhs, None)
    else:
        counts: dict[str, int] = {}
        for labels in inputs:
            for lab in labels:
                counts[lab] = counts.get(lab, 0) + 1
        output = ell_labels + sorted(lab for lab, c in counts.items()
                                     if c == 1 and lab.isalpha())
    return inputs, output


def _einsum_sizes(equation: str, terms: Sequence[Sequence[str]],
                  shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for labels, shape in zip(terms, shapes):
        for lab, d in zip(labels, shape):
            old = sizes.get(lab)
            if old is None or old == 1:
                sizes[lab] = d
            elif d != 1 and d != old:
                raise ShapeError(f"equation '{equation}': label '{lab}' has sizes {old} and {d}")
    return sizes


def _infer_einsum(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    types = [t for t in inputs if t is not None]
    if not types:
        raise ShapeError("Einsum needs at least one input")
    eq = str(attrs["equation"])
    terms, output = _parse_einsum(eq, [t.ndim for t in types])
    sizes = _einsum_sizes(eq, terms, [t.shape for t in types])
    for lab in output:
        if lab not in sizes:
            raise ShapeError(f"equation '{eq}': output label '{lab}' is not in any input")
    if len(set(output)) != len(output):
        raise ShapeError(f"equation '{eq}': output repeats a label")
    if any(t.dtype != types[0].dtype for t in types):
        raise ShapeError(f"Einsum inputs must share a type, got {[str(t.dtype) for t in types]}")
    return [TensorType(tuple(sizes[lab] for lab in output), types[0].dtype)]


def _compute_einsum(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    tensors = [t for t in inputs if t is not None]
    eq = str(attrs["equation"])
    shapes = [shape_of(t) for t in tensors]
    terms, output = _parse_einsum(eq, [len(s) for s in shapes])
    sizes = _einsum_sizes(eq, terms, shapes)
    reduced = [lab for lab in sizes if lab not in output]
    raxes = {lab: te.reduce_axis((0, sizes[lab]), name=f"r_{lab}") for lab in reduced}

    def fbody(*idx: Expr) -> Expr:
        env: dict[str, Expr] = {lab: v for lab, v in zip(output, idx)}
        env.update({lab: iv.var for lab, iv in raxes.items()})
        product: Expr | None = None
        for t, labels, shape in zip(tensors, terms, shapes):
            load = t[tuple(te.const(0) if d == 1 and sizes[lab] != 1 else env[lab]
                           for lab, d in zip(labels, shape))]
            product = load if product is None else product * load
        assert product is not None
        return te.sum(product, axis=list(raxes.values())) if raxes else product

    shape = tuple(sizes[lab] for lab in output)
    return [te.compute(shape, fbody, name="einsum", tag="Einsum")]  # type: ignore[list-item]


def _schedule_einsum(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                     ) -> Schedule:
    return schedule_reduction(outs, target, knobs)


OPS: dict[str, OpDef] = {
    "MatMul": OpDef("MatMul", ("A", "B"), _infer_matmul, _compute_matmul, Pattern.OUT_FUSABLE,
                    schedule_dense, knobs=DenseKnobs),
    "Gemm": OpDef("Gemm", ("A", "B", "C"), _infer_gemm, _compute_gemm, Pattern.OUT_FUSABLE,
                  schedule_dense, attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
                  knobs=DenseKnobs),
    "Einsum": OpDef("Einsum", ("Inputs",), _infer_einsum, _compute_einsum, Pattern.OUT_FUSABLE,
                    _schedule_einsum, attrs={"equation": REQUIRED}, knobs=ReductionKnobs),
}
