"""Register and cache budgets that knob defaults derive from a target's facts.

Each function is one rule, stated once, so every family sizes its register tile and cache
blocks the same way. The rules were fitted on Zen 4 (32 zmm registers, one 512-bit FMA a
cycle, 32 KiB L1d, 1 MiB L2), where they give the constants the schedules used before, and
they scale with what another CPU has (tests/ops/test_default_knobs.py pins both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.target_facts import TargetFacts

if TYPE_CHECKING:
    from ember.target import Target


def accumulator_budget(facts: TargetFacts) -> int:
    """Accumulator registers a direct-convolution tile may hold: three quarters of the vector
    registers (24 of 32, 12 of 16). The rest hold the tile's weight vectors (up to 4), the
    broadcast input and what LLVM's register allocator needs so as not to spill."""
    return facts.vector_registers * 3 // 4


def narrow_budget(facts: TargetFacts) -> int:
    """Accumulators of a tile whose channel block is narrower than a vector (half-width
    registers): all registers but the (up to 6) weight vectors and one broadcast."""
    return max(1, facts.vector_registers - 7)


def depthwise_budget(facts: TargetFacts) -> int:
    """Output columns of a depthwise tile: half the registers, since each column also needs
    its input vector (there is no broadcast to share)."""
    return max(1, facts.vector_registers // 2)


def column_budget(facts: TargetFacts, vectors_per_column: int) -> int:
    """Output columns of a tile where each column is `vectors_per_column` accumulators and
    one weight vector per block is live: all registers but 4 (weights, broadcast, address
    arithmetic), shared among the column's vectors (28 columns of one zmm on Zen 4)."""
    return max(1, (facts.vector_registers - 4) // max(1, vectors_per_column))


def row_tile(facts: TargetFacts, vectors_per_row: int) -> int:
    """Rows of a GEMM register tile whose rows are `vectors_per_row` vector accumulators
    (a broadcast of A times a row of B vectors each k step).

    Enough rows that twice the FMA pipes' latency x throughput is in flight (independent
    accumulators hide the FMA latency, twice that leaves room for the loads), but no more
    than fill half the registers (the other half holds the B vectors and the broadcast):
    8 rows on Zen 4 (4 x 1 x 2 = 8; 16 / 2 zmm a row = 8), 2 on an AVX2 core for a 32-column
    panel (16 / 2 / 4 ymm)."""
    vectors = max(1, vectors_per_row)
    return max(1, min(2 * facts.latency_accumulators, facts.vector_registers // 2 // vectors))


# vector loads a core issues a cycle: two on every x86 core since Haswell and on Zen, and on
# the Arm cores ember targets (Neoverse V1/N2 issue three; two is the safe count)
LOADS_PER_CYCLE = 2


# bytes a core moves from its L2 into L1 a cycle while a tile streams its weights: 90% of
# one 32-byte ymm on Zen 3, 1 thread (benchmarks/tile_rules.py): at 1.0 ResNet-50's 14x14
# 1x1 convs took 2 columns x 4 blocks (weights from L2), 1.13-1.20x slower than 5 x 2 (from
# L1); at 0.75 squeezenet's 125-block classifier left 2 x 5 for a 7 x 1 8% slower; 0.9 gets
# both right. The port is wider on Zen 4 and Sapphire Rapids (64 bytes) but streams about
# as many bytes: on the Intel Xeon, a 3 x 8 zmm tile of 512->2048 at 7x7 (8 blocks of
# weights from L2 a step) ran 1.13-1.28x slower than 7 x 2 (a 3x3 conv 2.45x), which 0.9
# zmm a cycle called equal
L2_BYTES_PER_CYCLE = 0.9 * 32


# cycles a register tile's step takes beyond the FMA latency: with exactly latency x pipes
# accumulators (8 on an AVX2 core) every FMA waits on the one before it and any late load
# stalls the pipes; two more cycles make an AVX2 tile hold 12 (3 columns x 4 blocks, 2 x 6)
# instead of 8 or 10. Zen 3, 1 thread, each changed task's old and new tile in turn, best of
# 2 rounds (benchmarks/tile_rules.py --constant FMA_SLACK --values 0 1, then 1 2): at 1,
# ResNet-50's 14 changed convs weighted 44.3 -> 43.2 ms, ResNet-18 8.30 -> 7.62,
# MobileNetV2 5.49 -> 5.51 (its 2 x 5 tiles 0.92-0.96x); at 2 rather than 1, MobileNetV2
# 4.26 -> 3.90, ResNet-18 4.01 -> 3.81, ResNet-50 37.1 -> 37.2. Zen 4 and Sapphire
# Rapids tiles, which hold 14-16 accumulators, are unchanged.
FMA_SLACK = 2

# the same where the pipes retire 1024 bits of FMAs a cycle (two 512-bit pipes, Sapphire
# Rapids class): a step of 8 x 2 zmm (8 cycles), 7 x 2 (7) or 10 x 2 (10) leaves the pipes
# idle that 24 accumulators keep busy: 11 cycles takes 6 x 4 at 56 and 28 columns, 5 x 4 at
# 14 (6 x 4 would waste 4 of 18 columns there), 7 x 2 at 7. Intel Xeon, each task's two
# tiles in turn in one worker, then the model both ways in turns (benchmarks/tile_rules.py
# --constant WIDE_FMA_SLACK --values 2 7 --whole 20): ResNet-50 1.024-1.068x at 1 thread,
# 1.029-1.057x at 2 (its 6 x 4 tiles 1.04-1.12x each over 10 x 2, the slack of 6);
# ResNet-18 1.017-1.030x, MobileNetV2 1.000x, squeezenet 0.99x (its tasks 0.97-1.06x)
WIDE_FMA_SLACK = 7


# bytes a core pulls a cycle from beyond its L2 (L3 or memory) while a kernel streams weights
# the rest of the model pushed out: the rate past which a channel tile's first register tile,
# which brings in the tile's weights, stops keeping the FMA pipes busy
# (conv_blocked.first_tile_stall). Intel Xeon (two 512-bit pipes), ResNet-50 in model order,
# 1 thread: with weights streamed once (k_chunk) its 7x7 convs (18 bytes a cycle asked over
# 7 register tiles) and its Winograd GEMMs of 49 tiles ran 5-15% faster, its 14x14 convs
# (26 over 42) and Winograd GEMMs of 196 tiles 0-11% slower: any value from 5 to 10 with
# conv_blocked.CHUNK_STALL at 0.1 calls all of them right
MEMORY_BYTES_PER_CYCLE = 8


def fma_slack(facts: TargetFacts) -> int:
    """Cycles beyond the FMA latency a tile's step should take (FMA_SLACK, WIDE_FMA_SLACK)."""
    wide = facts.vector_fmas_per_cycle * facts.vector_bits >= 1024
    return WIDE_FMA_SLACK if wide else FMA_SLACK


def tile_efficiency(facts: TargetFacts, fmas: int, loads: int, l2_loads: int = 0) -> float:
    """The fraction of the FMA pipes' peak a register tile reaches when each step of its
    reduction issues `fmas` vector FMAs (one per accumulator) and `loads` vector or broadcast
    loads, `l2_loads` of them from L2 (weights that do not stay in L1 from one tile to the
    next): a step takes the longest of the FMA pipes' time, the load ports' time, L2's time
    and the FMA latency plus `fma_slack` (an accumulator waits for its previous FMA). On Zen 4
    (one 512-bit FMA a cycle) 14 columns x 1 block are FMA-bound; with two 512-bit FMA pipes
    (Sapphire Rapids) the same tile's 15 loads take longer than its 14 FMAs, and a step
    should take 11 cycles: 6 x 4, not 8 x 2. With two 256-bit FMA pipes, a tile of
    1 column x 8 blocks whose weights come from L2 waits 8.9 cycles for what its FMAs do
    in 4."""
    rate = facts.vector_fmas_per_cycle
    l2_rate = L2_BYTES_PER_CYCLE / (facts.vector_bits / 8)
    cycles = max(fmas / rate, loads / LOADS_PER_CYCLE, l2_loads / l2_rate,
                 facts.fma_latency + fma_slack(facts), 1e-9)
    return fmas / rate / cycles


def vectors(columns: int, lanes: int) -> int:
    """Vector registers one row of `columns` elements takes at `lanes` elements a register."""
    return max(1, -(-columns // max(1, lanes)))


def snap(value: int, allowed: Sequence[int]) -> int:
    """The largest of `allowed` (ascending) not above `value`, else the smallest: a block size
    computed from a cache size, as a point of a knob space."""
    below = [a for a in allowed if a <= value]
    return below[-1] if below else allowed[0]


def power_of_two_below(value: int) -> int:
    """The largest power of two <= value (1 for value < 1)."""
    return 1 << max(0, int(value).bit_length() - 1)


def prefetches(target: Target) -> bool:
    """Whether a schedule adds cache hints (te's Stage.prefetch) on `target`: native code for
    an x86 or Arm CPU. WebAssembly and the C back end have no hint to give; GPU schedules
    stage their tiles in shared memory instead."""
    return target.kind == "llvm" and target.facts.arch in ("x86", "arm")


__all__ = ["FMA_SLACK", "L2_BYTES_PER_CYCLE", "LOADS_PER_CYCLE", "MEMORY_BYTES_PER_CYCLE",
           "WIDE_FMA_SLACK",
           "accumulator_budget", "column_budget", "depthwise_budget", "fma_slack", "narrow_budget",
           "power_of_two_below", "prefetches", "row_tile", "snap", "tile_efficiency", "vectors"]

