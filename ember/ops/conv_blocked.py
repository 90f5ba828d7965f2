"""Convolution in the blocked layout NCHW[x]c: the ConvNCHWc and LayoutTransform ops.

A blocked tensor [N, C / x, H, W, x] keeps x channels (the vector width) contiguous, so a
vector of x output channels is one load or store whatever the stride. ConvNCHWc reads a
blocked input (or an NCHW one as a single block of all its channels, e.g. an RGB image) and
weights packed at compile time (ember.graph.passes.layout):

    direct     W[ocb, icb, kh, kw, ii, oi]    (one [ib x ob] panel per tap)
      conv[n, ocb, oh, ow, oi] = sum_{icb, kh, kw, ii} x[n, icb, oh*s+kh*d, ow*s+kw*d, ii]
                                                      * W[ocb, icb, kh, kw, ii, oi]
    depthwise  W[cb, kh, kw, ci]              (group == channels)
      conv[n, cb, oh, ow, ci] = sum_{kh, kw} x[n, cb, oh*s+kh*d, ow*s+kw*d, ci] * W[cb, kh, kw, ci]
    winograd   see conv_winograd.py

The direct micro-kernel keeps `oc_tile` channel blocks x `ow_tile` output columns of `conv` in
vector registers (vectorized over oi, which is contiguous in W and in the output, unrolled
over the columns, each input value broadcast), streaming the input channels and taps. A 1x1
convolution is that kernel with one tap: a GEMM over the packed [ib x ob] weight panels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember import te
from ember.errors import ScheduleError, ShapeError
from ember.types import TensorType
from ember.ops.budgets import (
    FMA_SLACK,
    LOADS_PER_CYCLE,
    MEMORY_BYTES_PER_CYCLE,
    accumulator_budget,
    depthwise_budget,
    fma_slack,
    narrow_budget,
    tile_efficiency,
    vectors,
)
from ember.ops.conv_common import extent, find_stage, pad_input, pick_tile, shape_of
from ember.ops.generic import inline_injective, schedule_flat, vector_lanes
from ember.ops.knobs import (
    Knobs,
    Space,
    Task,
    divisors,
    in_range,
    only,
    resolve_knobs,
    up_to,
)
from ember.ops.registry import REQUIRED, Attrs, OpDef, Pattern
from ember.target import Target
from ember.target_facts import TargetFacts
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

TAG = "ConvNCHWc"
ALGORITHMS = ("direct", "depthwise", "winograd")


# -- knobs ----------------------------------------------------------------------------------
MAX_OW_TILE = 28    # the widest column tile the space offers
K_CHUNKS = (1, 2, 4, 8)  # input-channel blocks per chunk the space offers (k_chunk)
CHUNK_STALL = 0.1  # the first tile's stall (first_tile_stall) above which weights stream once


@dataclass(frozen=True)
class ConvKnobs(Knobs):
    """Choices of the blocked convolution schedules (direct, 1x1, depthwise, Winograd).

    ow_tile: output columns per register tile (Winograd: output tiles per GEMM tile);
    oc_tile: output-channel blocks per register tile (direct only); unroll_kw: unroll the
    kernel-width taps too; unroll_ii: unroll the input channels of a block (direct);
    parallel_columns: the parallel loop also runs over the column tiles (Winograd: the input
    transform is split over its tiles), for outputs with too few rows for the threads;
    rows_outer: output rows outside the output-channel tiles (direct, not depthwise), so
    the input is read once and the weights once per row, instead of the input once per
    channel tile; k_chunk (direct and Winograd, 0: off): the weights streamed once, each used
    at once by every position of its channel tile: per output-channel tile the reduction
    runs in chunks of k_chunk input-channel blocks, each chunk over all the tile's rows and
    column tiles (Winograd: all its output tiles), the partial sums kept in a buffer of the
    tile's output (direct: rows_outer and parallel_columns do not apply, the parallel loop
    is over the channel tiles).
    """

    ow_tile: int = 1
    oc_tile: int = 1
    unroll_kw: bool = False
    unroll_ii: bool = False
    parallel_columns: bool = False
    rows_outer: bool = False
    k_chunk: int = 0

    @classmethod
    def space(cls, task: Task) -> Space:
        kind, (_, ocb, _, ow, ob), tiles, lanes = _conv_task(task)
        # a register tile of more accumulators than the register file spills at every step
        # (and takes LLVM minutes to allocate): left out
        registers = task.target.facts.vector_registers
        per_block = vectors(ob, lanes) if lanes else 1

        def fits(p: Mapping[str, Any]) -> bool:
            return bool(p["ow_tile"] * p["oc_tile"] * per_block <= registers)

        if kind == "winograd":
            return Space({"ow_tile": up_to(tiles, MAX_OW_TILE), "oc_tile": divisors(ocb, 8),
                          "unroll_kw": (False,), "unroll_ii": (False, True),
                          "parallel_columns": (False, True), "rows_outer": (False,),
                          "k_chunk": _chunks(task)}, fits)
        direct = kind == "direct"
        return Space({"ow_tile": up_to(ow, MAX_OW_TILE),
                      "oc_tile": divisors(ocb, 8) if direct else (1,),
                      "unroll_kw": (False, True),
                      "unroll_ii": (False, True) if direct else (False,),
                      "parallel_columns": (False, True),
                      "rows_outer": (False, True) if direct else (False,),
                      "k_chunk": _chunks(task) if direct else (0,)}, fits)

    @classmethod
    def default(cls, task: Task) -> ConvKnobs:
        # Register tile from the target's registers and FMA pipes (ember.ops.budgets): the
        # accumulators fit the register budget (24 of 32 zmm, 12 of 16 ymm) and, where the
        # width allows, are at least the FMA latency x throughput (4 on Zen 4, 8 on Sapphire
        # Rapids and AVX2 cores) so that the pipes never wait on a dependent FMA.
        # Parallel granularity from the thread count: rows (or columns) >= 2 per thread.
        kind, shape, tiles, lanes = _conv_task(task)
        n, ocb, oh, ow, _ = shape
        facts = task.target.facts
        if kind == "winograd":
            # each transformed element's GEMM is a 1x1 convolution over the output tiles:
            # the direct register tile of output tiles x channel blocks (6 x 4 on two
            # 512-bit pipes, where one block of 7 tiles was 1.11-1.20x slower: ResNet-50's
            # three Winograd convs, 1 thread, Intel Xeon)
            g = _gemm_view(task)  # one block's weights of one element: icb x block_bytes
            tile, oc_tile = conv_tile((n, ocb, 1, tiles, shape[4]), False, lanes, facts,
                                      g.icb * g.block_bytes)
            return cls(tile, oc_tile, unroll_ii=facts.vector_fmas_per_cycle >= 2,
                       parallel_columns=n * g.icb < 2 * task.threads,
                       k_chunk=_k_chunk(task, facts, tile, oc_tile, g))
        weights = task.find(TAG).input_tensors()[1]  # type: ignore[union-attr]
        block_bytes = int(np.prod(shape_of(weights))) * weights.dtype.bits // 8 // shape[1]
        ow_tile, oc_tile = conv_tile(shape, kind == "depthwise", lanes, facts, block_bytes)
        rows = n * -(-ocb // oc_tile) * oh
        columns = -(-ow // ow_tile)
        # with two full-width FMAs a cycle a block's step of the tile takes half the cycles,
        # and the input-channel loop's own instructions (counter, compare, branch, address
        # steps) become a visible share: unroll it (1x1 and strided 3x3 convs 2-8% faster
        # on Sapphire Rapids; one FMA a cycle, as on Zen 4, keeps the loop)
        unroll_ii = kind == "direct" and facts.vector_fmas_per_cycle >= 2
        k_chunk = _k_chunk(task, facts, ow_tile, oc_tile) if kind == "direct" else 0
        return cls(ow_tile, oc_tile, unroll_ii=unroll_ii,
                   parallel_columns=rows < 2 * task.threads and columns > 1 and not k_chunk,
                   rows_outer=kind == "direct" and _rows_outer(task, facts) and not k_chunk,
                   k_chunk=k_chunk)

    def check(self, task: Task) -> None:
        kind, (_, ocb, _, ow, _), tiles, _ = _conv_task(task)
        in_range(self, "ow_tile", 1, tiles if kind == "winograd" else ow,
                 "output tiles" if kind == "winograd" else "output columns")
        if kind == "depthwise":
            only(self, "oc_tile", (1,), f"for a {kind} convolution")
        else:
            in_range(self, "oc_tile", 1, ocb, "output-channel blocks")
        if kind == "winograd":
            only(self, "unroll_kw", (False,), "for a Winograd convolution (no taps)")
        if kind != "direct":
            only(self, "rows_outer", (False,), f"for a {kind} convolution")
        if kind == "depthwise":
            only(self, "unroll_ii", (False,), f"for a {kind} convolution")
            only(self, "k_chunk", (0,), f"for a {kind} convolution")
            return
        icb = _gemm_view(task).icb
        in_range(self, "k_chunk", 0, icb, "input-channel blocks a chunk, 0: no chunks")
        if self.k_chunk and icb % self.k_chunk:
            raise self.reject("k_chunk", f"does not divide the {icb} input-channel blocks")


def _rows_outer(task: Task, facts: TargetFacts) -> bool:
    """Output rows outside the channel tiles where the input does not fit half of a core's L2
    but the weights do: the input is then read once from memory instead of once per channel
    tile, the weights once per row from L2 (256->512 1x1 stride 2 at 56x56, 1 thread,
    Sapphire Rapids class, 2 MB L2: 1.55 -> 1.35 ms; 1024->2048 stride 2 at 14x14, 8 MB of
    weights: 1.50 -> 2.13 ms, so it stays channel tiles outside)."""
    conv = task.find(TAG)
    assert conv is not None
    x, w = conv.input_tensors()[:2]
    size = {t: int(np.prod(shape_of(t))) * t.dtype.bits // 8 for t in (x, w)}
    half = facts.l2_bytes // 2
    return bool(half) and size[x] > half >= size[w]


def first_tile_stall(facts: TargetFacts, columns: int, positions: int) -> float:
    """The share of a convolution's time its pipes wait for weights when each register tile
    runs the whole reduction: a channel tile's first register tile brings in the channel
    tile's weights, each weight vector feeding `columns` FMAs, so it asks vector bytes x
    FMAs a cycle / `columns` bytes a cycle from beyond L2; past MEMORY_BYTES_PER_CYCLE it
    waits, and the wait spreads over the channel tile's `positions` register tiles (the
    later ones read the weights from L2). Intel Xeon: 7x7 outputs in 7-column tiles 18%,
    14x14 in 5-column tiles 5%, a Winograd GEMM of 49 tiles in 6-tile register tiles 18%,
    of 196 tiles 5%; 7x7 on one 512-bit pipe or two 256-bit ones 2%."""
    rate = facts.vector_bits / 8 * facts.vector_fmas_per_cycle / max(1, columns)
    return max(0.0, rate / MEMORY_BYTES_PER_CYCLE - 1.0) / max(1, positions)


@dataclass(frozen=True)
class _Gemm:
    """A direct convolution, or one element of a Winograd convolution, as the GEMM its
    register tile runs per output-channel tile: `rows` x `columns` output positions (Winograd:
    1 x its tiles) over `icb` input-channel blocks; one output block's weights of one input
    block and one output block's partial sums, in bytes."""

    icb: int
    ocb: int
    rows: int
    columns: int
    block_bytes: int
    out_bytes: int
    gemms: int = 1  # the GEMMs of one channel tile (Winograd: the transformed elements)


def _gemm_view(task: Task) -> _Gemm:
    kind, (_, ocb, oh, ow, ob), tiles, _ = _conv_task(task)
    conv = task.find(TAG)
    assert conv is not None
    size = conv.outputs[0].dtype.bits // 8
    if kind == "winograd":
        v = task.find(f"{TAG}.winograd_in")
        assert v is not None
        _, icb, elements, _, ib = shape_of(v.outputs[0])
        return _Gemm(icb, ocb, 1, tiles, ib * ob * size, tiles * ob * size, elements)
    per_block = int(np.prod(shape_of(conv.input_tensors()[1])[2:])) * size  # taps x ib x ob
    return _Gemm(extent(conv.reduce_axis[0]), ocb, oh, ow, per_block, oh * ow * ob * size)


def _chunks(task: Task, g: _Gemm | None = None) -> tuple[int, ...]:
    """k_chunk's choices: 0 and the K_CHUNKS that divide the input-channel blocks (fewer than
    all of them), where the partial sums of the widest channel tile the space offers fit half
    of L2 (the buffer a chunk accumulates in). `g`: the task's _gemm_view, if known."""
    g = g or _gemm_view(task)
    if max(divisors(g.ocb, 8)) * g.out_bytes > task.target.facts.l2_bytes // 2:
        return (0,)
    return (0, *(c for c in K_CHUNKS if c < g.icb and g.icb % c == 0))


def _k_chunk(task: Task, facts: TargetFacts, ow_tile: int, oc_tile: int,
             g: _Gemm | None = None) -> int:
    """The default k_chunk: where the first register tile would wait for weights more than
    CHUNK_STALL of the time (first_tile_stall) and the channel tiles (the parallel loop)
    keep every thread busy (at least 2 a thread, the busiest at most 10% above the mean),
    chunks whose weights fill at most a quarter of L1d (every position of the channel tile
    then reads them from there). ResNet-50 on the Intel Xeon, in model order, 1 thread: its
    7x7 convs 2048->512 0.85x, 512->2048 0.88-0.96x, 3x3 512->512 0.92-0.95x, 1024->2048
    stride 2 0.89x (2 threads: 0.84-0.96x); its Winograd convs at 14x14 (49 tiles) 0.85x
    and at 28x28 0.95-0.98x, and at 56x56 (196 tiles) 1.08-1.11x, so they keep 0. Else 0.
    `g`: the task's _gemm_view, if known."""
    g = g or _gemm_view(task)
    choices = [c for c in _chunks(task, g) if c]
    tiles = shape_of(task.outs[0])[0] * -(-g.ocb // oc_tile) * g.gemms  # parallel tasks
    positions = g.rows * -(-g.columns // ow_tile)
    busiest = -(-tiles // task.threads) * task.threads / tiles  # over the mean thread
    if not choices or first_tile_stall(facts, ow_tile, positions) <= CHUNK_STALL or \
            tiles < 2 * task.threads or busiest > 1.1:
        return 0
    fits = [c for c in choices if oc_tile * c * g.block_bytes <= facts.l1d_bytes // 4]
    return max(fits) if fits else min(choices)


def _conv_task(task: Task) -> tuple[str, tuple[int, ...], int, int]:
    """(direct | depthwise | winograd, the output shape [N, OCB, OH, OW, ob], the number of
    output tiles (Winograd), vector lanes) of a ConvNCHWc group."""
    conv = task.find(TAG)
    if conv is None:
        raise ScheduleError(f"ConvKnobs: no {TAG} stage in the task")
    shape = shape_of(conv.outputs[0])
    lanes = vector_lanes(task.target, str(conv.outputs[0].dtype))
    gemm = task.find(f"{TAG}.winograd")
    if gemm is not None:
        return "winograd", shape, shape_of(gemm.outputs[0])[3], lanes
    return ("depthwise" if len(conv.reduce_axis) == 2 else "direct"), shape, 0, lanes


def conv_tile(out_shape: Sequence[int], depthwise: bool = False, lanes: int = 0,
              facts: TargetFacts | None = None, block_weight_bytes: int = 0
              ) -> tuple[int, int]:
    """(ow_tile, oc_tile) for an output [N, OCB, OH, OW, ob] on a target with `facts` (default:
    32 vector registers, one vector FMA a cycle of latency 4, as on Zen 4).

    Direct: the tile with the highest `tile_efficiency` (FMA pipes, load ports, FMA latency)
    times the useful fraction of its column tiles (a tail tile wastes columns), among tiles
    of up to 8 channel blocks (4 with two 512-bit FMA pipes; a divisor of OCB) whose
    accumulators fit the register budget
    (125 blocks of 8 on AVX2: 2 columns x 5 blocks, not 7 x 1: 512->1000 @13, 1 thread,
    Zen 3, 2.6 -> 2.2 ms). `block_weight_bytes` (the weights of one output-channel block over
    the whole reduction): where a tile's blocks hold more than half of L1, the next column
    tile reads their weights from L2 again, so each weight load counts against L2's rate
    (AVX2: ResNet-50's convs at 7x7 take 4 x 2 instead of 1 x 8, 1 thread, Zen 3: 2048->512
    1x1 2.8 -> 1.4 ms, 512->512 3x3 stride 2 7.1 -> 3.6 ms; its 14x14 1x1 convs 5 x 2
    instead of 2 x 4: 256->1024 1.31 -> 1.16 ms; with two cycles of FMA slack, budgets.FMA_SLACK,
    both now take 3 x 4, 12 accumulators); tiles whose accumulators, broadcast columns and a
    weight vector overflow the registers are out (6 x 2 on AVX2 spills);
    ties go to tiles that leave the load ports a
    spare slot, then to column tiles that divide OW, then to the widest, then to the most
    channel blocks. A block narrower than the vector (ob < lanes, e.g. 1000 = 125 blocks of 8
    channels) does half the work per FMA, so loads become the limit: there the tile maximizes
    FMAs per load over all divisors of OCB up to 8 (`_narrow_tile`). Depthwise: the widest
    column tile that divides OW."""
    facts = facts or _register_facts(32, 4)
    _, ocb, _, ow, ob = out_shape
    if not depthwise and 0 < ob < lanes:
        return _narrow_tile(ocb, ow, narrow_budget(facts))
    # a block wider than the vector (8 channels on 128-bit NEON) is several registers each
    per_block = vectors(ob, lanes) if lanes else 1
    if depthwise:
        limit = max(1, depthwise_budget(facts) // per_block)
        ow_tile = pick_tile(ow, limit)
        if ow_tile < facts.latency_accumulators < ow:
            # an awkward width (a prime): tail tiles twice the latency depth beat 1-column tiles
            ow_tile = min(ow, 2 * facts.latency_accumulators, limit)
        return ow_tile, 1
    return max(_direct_tiles(ocb, ow, per_block, facts, block_weight_bytes))[1]


def direct_tile_score(out_shape: Sequence[int], lanes: int, facts: TargetFacts,
                      block_weight_bytes: int = 0) -> float:
    """The share of the FMA pipes' peak `conv_tile`'s direct tile reaches on an output
    [N, OCB, OH, OW, ob] (pipe efficiency x the useful share of its column tiles)."""
    _, ocb, _, ow, ob = out_shape
    per_block = vectors(ob, lanes) if lanes else 1
    return max(_direct_tiles(ocb, ow, per_block, facts, block_weight_bytes))[0][0]


def _direct_tiles(ocb: int, ow: int, per_block: int, facts: TargetFacts,
                  block_weight_bytes: int) -> list[tuple[tuple[float, bool, bool, int, int],
                                                         tuple[int, int]]]:
    """(key, (ow_tile, oc_tile)) of each direct tile `conv_tile` chooses among."""
    registers = max(1, accumulator_budget(facts) // per_block)

    def key(w: int, oc: int) -> tuple[float, bool, bool, int, int]:
        useful = ow / (-(-ow // w) * w)
        fmas, loads = w * oc * per_block, w + oc * per_block
        from_l2 = oc * block_weight_bytes > facts.l1d_bytes // 2
        efficiency = tile_efficiency(facts, fmas, loads, oc * per_block if from_l2 else 0)
        # between equals, a tile with spare load slots: one whose loads fill both ports
        # leaves none for the loop's own (13x1 of 512->1000 @13: 1.28 ms, 7x3 1.07 ms)
        spare = loads / LOADS_PER_CYCLE < fmas / facts.vector_fmas_per_cycle
        return round(efficiency * useful, 3), spare, ow % w == 0, w, oc

    # and the live registers fit: the accumulators, the step's broadcast columns (LLVM keeps
    # them live across the blocks' FMAs) and a weight vector (6 x 2 on AVX2, 12 + 6 + 1, spills
    # 50 values a step and runs 1.25-1.3x slower than 3 x 4, 12 + 3 + 1)
    # with two 512-bit pipes, at most 4 channel blocks a tile: the deep tiles the wide slack
    # asks for then come as more columns (6 x 4, 5 x 4), not as 5-6 blocks of 4 columns
    # (MobileNetV2's 16->96 1x1 at 112x112: 4 x 6 0.85x the 8 x 2 it replaced; Intel Xeon)
    blocks = 4 if fma_slack(facts) > FMA_SLACK else 8
    return [(key(w, oc), (w, oc)) for oc in range(1, blocks + 1) if ocb % oc == 0
            for w in range(1, min(ow, registers // oc) + 1)
            if w * oc * per_block + w + 1 <= facts.vector_registers]


def _register_facts(vector_registers: int, latency_accumulators: int) -> TargetFacts:
    """Facts with only the register file and FMA depth set (one vector FMA pipe)."""
    return TargetFacts("", "other", 128, 1, 128, 0, 0, 0, 64, 1, frozenset(), "given",
                       vector_registers, latency_accumulators)


def _narrow_tile(ocb: int, ow: int, budget: int) -> tuple[int, int]:
    """(ow_tile, oc_tile) with the most FMAs per load (oc * w / (oc + w)) times the useful
    fraction of the column tiles (tails waste a part of the last one)."""
    def score(t: tuple[int, int]) -> float:
        w, oc = t
        return oc * w / (oc + w) * ow / (-(-ow // w) * w)

    tiles = [(w, oc) for oc in range(1, 9) if ocb % oc == 0
             for w in range(1, min(ow, budget // oc) + 1)]
    return max(tiles, key=score)


# -- shapes ---------------------------------------------------------------------------------
def _pads(attrs: Attrs) -> list[tuple[int, int]]:
    p = [int(v) for v in attrs["pads"]]
    return [(p[0], p[2]), (p[1], p[3])]


def blocked_geometry(attrs: Attrs, xs: Sequence[int], ws: Sequence[int]
                     ) -> tuple[int, int, list[int]]:
    """(output blocks, output block, [OH, OW]) of a ConvNCHWc; checks the shapes."""
    if len(xs) == 4:
        xs = (xs[0], 1, xs[2], xs[3], xs[1])  # NCHW read as one block of all C channels
    if len(xs) != 5:
        raise ShapeError(f"ConvNCHWc: input must be blocked [N, C/x, H, W, x] or NCHW, got "
                         f"{tuple(xs)}")
    algorithm = attrs["algorithm"]
    if algorithm not in ALGORITHMS:
        raise ShapeError(f"ConvNCHWc: algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    kh, kw = (int(k) for k in attrs["kernel_shape"])
    if algorithm == "depthwise":
        if len(ws) != 4 or ws[0] != xs[1] or ws[3] != xs[4] or tuple(ws[1:3]) != (kh, kw):
            raise ShapeError(f"ConvNCHWc depthwise: weight {tuple(ws)} must be packed "
                             f"[{xs[1]}, {kh}, {kw}, {xs[4]}] for input {tuple(xs)}")
        ocb, ob = xs[1], xs[4]
    elif algorithm == "winograd":
        if len(ws) != 5 or ws[0] not in (16, 36) or ws[2] != xs[1] or ws[3] != xs[4] or \
                (kh, kw) != (3, 3) or tuple(attrs["strides"]) != (1, 1) or \
                tuple(attrs["dilations"]) != (1, 1):
            raise ShapeError(f"ConvNCHWc winograd: needs a 3x3 stride-1 kernel packed "
                             f"[16 or 36, OC/ob, {xs[1]}, {xs[4]}, ob], got {tuple(ws)} with "
                             f"strides {tuple(attrs['strides'])}")
        ocb, ob = ws[1], ws[4]
    else:
        if len(ws) != 6 or ws[1] != xs[1] or ws[4] != xs[4] or tuple(ws[2:4]) != (kh, kw):
            raise ShapeError(f"ConvNCHWc: weight {tuple(ws)} must be packed [OC/ob, {xs[1]}, "
                             f"{kh}, {kw}, {xs[4]}, ob] for input {tuple(xs)}")
        ocb, ob = ws[0], ws[5]
    sh, sw = (int(s) for s in attrs["strides"])
    dh, dw = (int(d) for d in attrs["dilations"])
    (pt, pb), (pl, pr) = _pads(attrs)
    oh = (xs[2] + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (xs[3] + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"ConvNCHWc: input {tuple(xs)} is smaller than the kernel {(kh, kw)}")
    return ocb, ob, [oh, ow]


def _infer_conv_nchwc(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    ocb, ob, (oh, ow) = blocked_geometry(attrs, x.shape, w.shape)
    if bias is not None and bias.shape != (ocb * ob,):
        raise ShapeError(f"ConvNCHWc: bias B has shape {bias.shape}, expected ({ocb * ob},)")
    return [TensorType((x.shape[0], ocb, oh, ow, ob), x.dtype)]


# -- computes -------------------------------------------------------------------------------
def _compute_conv_nchwc(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    xs, ws = shape_of(x), shape_of(w)
    ocb, ob, out_sp = blocked_geometry(attrs, xs, ws)
    if attrs["algorithm"] == "winograd":
        from ember.ops.conv_winograd import winograd_compute

        conv = winograd_compute(x, w, attrs, out_sp)
    else:
        spatial = _pads(attrs) if len(xs) == 4 else [*_pads(attrs), (0, 0)]
        padded = pad_input(x, spatial, name=f"{TAG}.pad")
        conv = direct_compute(padded, w, attrs, ocb, ob, out_sp)

    def fout(n: Expr, o: Expr, h: Expr, v: Expr, i: Expr) -> Expr:
        value = conv[n, o, h, v, i]
        return value + bias[o * ob + i] if bias is not None else value

    return [te.compute(shape_of(conv), fout, name="conv_out", tag=f"{TAG}.out")]  # type: ignore


def direct_compute(x: Tensor, w: Tensor, attrs: Attrs, ocb: int, ob: int,
                   out_sp: Sequence[int]) -> Tensor:
    """The direct (or depthwise) blocked convolution of an already padded x."""
    xs = shape_of(x)
    kh, kw = (int(k) for k in attrs["kernel_shape"])
    sh, sw = (int(s) for s in attrs["strides"])
    dh, dw = (int(d) for d in attrs["dilations"])
    rh = te.reduce_axis((0, kh), name="kh")
    rw = te.reduce_axis((0, kw), name="kw")
    if attrs["algorithm"] == "depthwise":
        def fdepth(n: Expr, c: Expr, h: Expr, v: Expr, i: Expr) -> Expr:
            return te.sum(x[n, c, h * sh + rh.var * dh, v * sw + rw.var * dw, i]
                          * w[c, rh.var, rw.var, i], axis=[rh, rw])

        return te.compute((xs[0], ocb, *out_sp, ob), fdepth, name="conv",  # type: ignore
                          tag=TAG)
    plain = len(xs) == 4  # NCHW input: one block of all channels
    rc = te.reduce_axis((0, 1 if plain else xs[1]), name="icb")
    ri = te.reduce_axis((0, xs[1] if plain else xs[4]), name="ii")

    def fdirect(n: Expr, o: Expr, h: Expr, v: Expr, i: Expr) -> Expr:
        hh, vv = h * sh + rh.var * dh, v * sw + rw.var * dw
        xv = x[n, ri.var, hh, vv] if plain else x[n, rc.var, hh, vv, ri.var]
        return te.sum(xv * w[o, rc.var, rh.var, rw.var, ri.var, i], axis=[rc, rh, rw, ri])

    return te.compute((xs[0], ocb, *out_sp, ob), fdirect, name="conv", tag=TAG)  # type: ignore


# -- schedule -------------------------------------------------------------------------------
def schedule_conv_nchwc(outs: Sequence[Tensor], target: Target,
                        knobs: Knobs | None = None) -> Schedule:
    """Schedule a group whose anchor is ConvNCHWc, with any elementwise epilogue."""
    k = resolve_knobs(ConvKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    conv = find_stage(s, (TAG,))
    assert conv is not None, "schedule_conv_nchwc: no ConvNCHWc stage in the group"
    winograd = find_stage(s, (f"{TAG}.winograd",))
    if winograd is not None:
        from ember.ops.conv_winograd import schedule_winograd

        return schedule_winograd(s, outs, conv, target, k)
    pad = find_stage(s, (f"{TAG}.pad",))
    conv_shape = shape_of(conv.op.outputs[0])
    if len(outs) != 1 or shape_of(outs[0]) != conv_shape:
        # unusual group (several outputs): the convolution whole, then each output
        conv.compute_root()
        _schedule_direct(s, conv, conv, pad, target, k, root=True)
        for t in outs:
            schedule_flat(s[t], target, str(t.dtype))
        return s
    if k.k_chunk:
        _schedule_chunked(s, s[outs[0]], conv, pad, target, k)
    else:
        _schedule_direct(s, s[outs[0]], conv, pad, target, k)
    return s


def _schedule_chunked(s: Schedule, out: Stage, conv: Stage, pad: Stage | None,
                      target: Target, k: ConvKnobs) -> None:
    """k_chunk > 0 (direct only): per (image, output-channel tile), in parallel, the
    reduction in chunks of k_chunk input-channel blocks, each chunk over every row and
    column tile of the channel tile (the register tile as in _schedule_direct), the partial
    sums in the conv stage's buffer of the tile's output; then the epilogue over it."""
    n, o, h, v, i = out.op.axis  # type: ignore[attr-defined]
    oo, oi = out.split(o, k.oc_tile)
    out.reorder(n, oo, oi, h, v, i)
    outer = out.fuse(n, oo)
    out.parallel(outer)
    out.vectorize(i)
    if pad is not None:
        pad.compute_root()  # materialized once: no bounds checks in the inner loop
        schedule_flat(pad, target)
    conv.compute_at(out, outer)
    _, co, ch, cv, ci = conv.op.axis  # type: ignore[attr-defined]
    rc, rh, rw, ri = conv.op.reduce_axis  # type: ignore[attr-defined]
    rco, rci = conv.split(rc, k.k_chunk)
    cvo, cvi = conv.split(cv, k.ow_tile)
    conv.reorder(rco, ch, cvo, rci, rh, rw, ri, co, cvi, ci)
    _register_tile(conv, k, rw, ri, (co, cvi, ci))


def _schedule_direct(s: Schedule, out: Stage, conv: Stage, pad: Stage | None, target: Target,
                     k: ConvKnobs, root: bool = False) -> None:
    depthwise = len(conv.op.reduce_axis) == 2  # type: ignore[attr-defined]
    n, o, h, v, i = out.op.axis if not root else conv.op.axis  # type: ignore[attr-defined]
    stage = conv if root else out
    oo, oi = stage.split(o, k.oc_tile)
    vo, vi = stage.split(v, k.ow_tile)
    rows = (h, oo) if k.rows_outer else (oo, h)
    stage.reorder(n, *rows, vo, oi, vi, i)
    outer = stage.fuse(n, *rows)
    at = vo
    if k.parallel_columns:
        outer = at = stage.fuse(outer, vo)
    stage.parallel(outer)
    if pad is not None:
        if depthwise and not root:
            # the input rows one output row needs, padded right before use (in cache)
            pad.compute_at(stage, outer)
            pad.vectorize(pad.op.axis[-1])  # type: ignore[attr-defined]
        else:
            pad.compute_root()  # materialized once: no bounds checks in the inner loop
            schedule_flat(pad, target)
    if not root:
        stage.vectorize(i)
        conv.compute_at(stage, at)
        _, co, _, cv, ci = conv.op.axis  # type: ignore[attr-defined]
        inner = [co, cv, ci]
    else:
        inner = [oi, vi, i]
    reduce_axes = list(conv.op.reduce_axis)  # type: ignore[attr-defined]
    if depthwise:
        rh, rw = reduce_axes
        conv.reorder(rh, rw, *inner)
        _register_tile(conv, k, rw, None, inner)
    else:
        rc, rh, rw, ri = reduce_axes
        conv.reorder(rc, rh, rw, ri, *inner)
        _register_tile(conv, k, rw, ri, inner)


def _register_tile(conv: Stage, k: ConvKnobs, rw: object, ri: object | None,
                   inner: Sequence[object]) -> None:
    """The register tile's loops, `inner` = (channel blocks, columns, lanes): the
    kernel-width taps `rw` unrolled with unroll_kw, a block's input channels `ri` (None:
    depthwise) with unroll_ii or where there are at most 4 (an RGB input), the blocks and
    columns unrolled, the lanes vectorized."""
    if k.unroll_kw:
        conv.unroll(rw)  # type: ignore[arg-type]
    if ri is not None and (k.unroll_ii or extent(ri) <= 4):
        conv.unroll(ri)  # type: ignore[arg-type]
    conv.unroll(inner[0])  # type: ignore[arg-type]
    conv.unroll(inner[1])  # type: ignore[arg-type]
    conv.vectorize(inner[2])  # type: ignore[arg-type]


# -- layout transform -----------------------------------------------------------------------
def _infer_layout(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
    x = inputs[0]
    assert x is not None
    src, dst = int(attrs["src_block"]), int(attrs["dst_block"])
    if (len(x.shape) != 5 if src else len(x.shape) != 4):
        raise ShapeError(f"LayoutTransform: input {x.shape} does not match src_block={src}")
    channels = x.shape[1] * x.shape[4] if src else x.shape[1]
    if src and x.shape[4] != src:
        raise ShapeError(f"LayoutTransform: input block {x.shape[4]} != src_block={src}")
    kept = int(attrs.get("channels") or 0)  # blocked -> NCHW: drop the padding channels
    if kept:
        if dst or not 0 < kept <= channels:
            raise ShapeError(f"LayoutTransform: channels={kept} does not fit an input of "
                             f"{channels} channels in blocks of {src} (blocked -> NCHW only)")
        channels = kept
    if dst and channels % dst:
        raise ShapeError(f"LayoutTransform: {channels} channels are no multiple of {dst}")
    n, _, hh, ww = x.shape[:4]
    shape = (n, channels // dst, hh, ww, dst) if dst else (n, channels, hh, ww)
    return [TensorType(shape, x.dtype)]


def _compute_layout(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
    x = inputs[0]
    assert x is not None
    src, dst = int(attrs["src_block"]), int(attrs["dst_block"])
    (out_type,) = _infer_layout(attrs, [TensorType(shape_of(x), x.dtype)])  # type: ignore

    def read(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        return x[n, c // src, h, w, c % src] if src else x[n, c, h, w]

    if dst:
        def fblocked(n: Expr, co: Expr, h: Expr, w: Expr, ci: Expr) -> Expr:
            return read(n, co * dst + ci, h, w)

        fcompute = fblocked
    else:
        fcompute = read  # type: ignore[assignment]
    return [te.compute(out_type.shape, fcompute, name="layout",  # type: ignore[list-item]
                       tag="LayoutTransform")]


@dataclass(frozen=True)
class LayoutKnobs(Knobs):
    """parallel: run the (batch, channel block, row) loop of a LayoutTransform on the
    threads (by default when it has at least two rows per thread)."""

    parallel: bool = True

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"parallel": (False, True)})

    @classmethod
    def default(cls, task: Task) -> LayoutKnobs:
        out = shape_of(task.outs[0])
        rows = out[0] * out[1] * out[2] if len(out) >= 3 else 1
        if len(out) == 4 and task.find("LayoutTransform") is not None:
            src = shape_of(task.find("LayoutTransform").input_tensors()[0])  # type: ignore
            rows = out[0] * -(-out[1] // src[-1]) * out[2]
        return cls(parallel=rows >= 2 * task.threads)


def schedule_layout(outs: Sequence[Tensor], target: Target,
                    knobs: Knobs | None = None) -> Schedule:
    """A LayoutTransform group: parallel over (batch, channel block, row); within a row the
    channel block is the inner loop, unrolled, so neither side needs a gather or scatter and
    no index needs a division (measured faster than vectorizing either side)."""
    k = resolve_knobs(LayoutKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s)
    out = s[outs[0]]
    axes = list(out.op.axis)  # type: ignore[attr-defined]
    stage = find_stage(s, ("LayoutTransform",))
    if len(outs) != 1 or len(axes) not in (4, 5) or stage is None:
        for t in outs:
            schedule_flat(s[t], target, str(t.dtype))
        return s
    if len(axes) == 5:
        n, co, h, w, ci = axes
    else:
        n, c, h, w = axes
        src = shape_of(stage.op.input_tensors()[0])[-1]  # type: ignore[attr-defined]
        co, ci = out.split(c, src)
        out.reorder(n, co, h, w, ci)
    outer = out.fuse(n, co, h)
    out.unroll(ci)
    if k.parallel:
        out.parallel(outer)
    return s


# -- numpy helpers (compile-time packing, tests) --------------------------------------------
def to_blocked(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW -> NCHW[block]c."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    """NCHW[x]c -> NCHW."""
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def pack_direct(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """OIHW weights -> [OC/ob, IC/ib, KH, KW, ib, ob]."""
    oc, ic, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(oc // ob, ob, ic // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise(w: np.ndarray, block: int) -> np.ndarray:
    """[C, 1, KH, KW] depthwise weights -> [C/block, KH, KW, block]."""
    c, _, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(c // block, block, kh, kw).transpose(0, 2, 3, 1))


OPS: dict[str, OpDef] = {
    "ConvNCHWc": OpDef("ConvNCHWc", ("X", "W", "B"), _infer_conv_nchwc, _compute_conv_nchwc,
                       Pattern.OUT_FUSABLE, schedule_conv_nchwc, knobs=ConvKnobs,
                       attrs={"kernel_shape": REQUIRED, "strides": (1, 1),
                              "dilations": (1, 1), "pads": (0, 0, 0, 0),
                              "algorithm": "direct"}),
    "LayoutTransform": OpDef("LayoutTransform", ("X",), _infer_layout, _compute_layout,
                             Pattern.INJECTIVE, schedule_layout, knobs=LayoutKnobs,
                             attrs={"src_block": 0, "dst_block": 0, "channels": 0}),
}

__all__ = ["ALGORITHMS", "OPS", "ConvKnobs", "LayoutKnobs", "conv_tile", "direct_tile_score",
           "first_tile_stall", "from_blocked",
           "pack_depthwise", "pack_direct", "schedule_conv_nchwc", "to_blocked", "vector_lanes"]
