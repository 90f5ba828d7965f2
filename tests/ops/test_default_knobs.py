"""Machine-aware knob defaults: pinned for Zen 4, in the space and within the register file
for other CPUs, different where the facts differ, and correct when one target's choice runs
on another (the host)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ember.graph.ir import Node, Value, tensor_type
from ember.lowering.kernel import group_knobs, run_op
from ember.ops.budgets import (FMA_SLACK, WIDE_FMA_SLACK, fma_slack, row_tile, snap,
                               tile_efficiency, vectors)
from ember.ops.conv import ConvNCHWKnobs
from ember.ops.conv_blocked import (CHUNK_STALL, ConvKnobs, conv_tile, first_tile_stall,
                                    from_blocked, pack_direct, to_blocked)
from ember.ops.dense import DenseKnobs
from ember.ops.knobs import Knobs, Task
from ember.ops.matmul import MatmulKnobs, matmul, schedule_matmul_x86
from ember.ops.registry import get_op
from ember.ops.rnn import RNNKnobs
from ember.target import Target

ZEN4 = "llvm -mcpu=znver4 -num-cores=2"
OTHERS = {
    "sapphirerapids": "llvm -mcpu=sapphirerapids -num-cores=2",
    "skylake": "llvm -mcpu=skylake -num-cores=2",
    "cortex-a72": "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -num-cores=2",
    "x86-64-v2": "llvm -mcpu=x86-64-v2 -num-cores=2",
}
RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def zeros(*shape: int) -> np.ndarray:
    return np.zeros(shape, "float32")


def task_of(op: str, arrays: list[np.ndarray], attrs: dict[str, Any], target: str
            ) -> tuple[Task, type[Knobs]]:
    """The Task (and knob family) of a one-node group `op` on arrays of these shapes."""
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs, op)
    values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(arrays)]
    outs = [Value(f"y{i}", t) for i, t in enumerate(opdef.infer(full, [v.type for v in values]))]
    return group_knobs([Node(op, "n", tuple(values), tuple(outs), full)], values, outs, target)


def conv_group(cin: int, cout: int, size: int, kernel: int, block: int, algorithm: str = "direct"
               ) -> tuple[str, list[np.ndarray], dict[str, Any]]:
    """A blocked convolution (blocks of `block` channels) with same padding, by shape."""
    pad = kernel // 2
    if algorithm == "depthwise":
        weights = zeros(cout // block, kernel, kernel, block)
    else:
        weights = zeros(cout // block, cin // block, kernel, kernel, block, block)
    attrs = {"kernel_shape": (kernel, kernel), "pads": (pad,) * 4, "algorithm": algorithm}
    return "ConvNCHWc", [zeros(1, cin // block, size, size, block), weights], attrs


# representative groups by shape: ResNet / MobileNet convolutions, BERT and classifier dense
GROUPS = {
    "conv3x3_64x56": lambda lanes: conv_group(64, 64, 56, 3, lanes),
    "conv3x3_512x7": lambda lanes: conv_group(512, 512, 7, 3, lanes),
    "conv1x1_256x14": lambda lanes: conv_group(256, 256, 14, 1, lanes),
    "depthwise_32x112": lambda lanes: conv_group(32, 32, 112, 3, lanes, "depthwise"),
    "dense_128x768x768": lambda lanes: ("MatMul", [zeros(128, 768), zeros(768, 768)], {}),
    "dense_20x16x40": lambda lanes: ("MatMul", [zeros(20, 16), zeros(16, 40)], {}),
    "conv_nchw_16x9": lambda lanes: ("Conv", [zeros(1, 8, 5, 9), zeros(16, 8, 3, 3)],
                                     {"pads": [1] * 4}),
    "lstm_8x16": lambda lanes: ("LSTM", [zeros(4, 2, 8), zeros(1, 64, 8), zeros(1, 64, 16)],
                                {"hidden_size": 16}),
}

# the Zen 4 defaults the schedules were fitted with (and that kernels were hashed with)
ZEN4_DEFAULTS: dict[str, dict[str, Any]] = {
    "conv3x3_64x56": {"ow_tile": 14, "oc_tile": 1},
    "conv3x3_512x7": {"ow_tile": 7, "oc_tile": 2},
    "conv1x1_256x14": {"ow_tile": 14, "oc_tile": 1},
    "depthwise_32x112": {"ow_tile": 16, "oc_tile": 1},
    "dense_128x768x768": {"rows": 8, "cols": 32, "parallel_rows": False},
    "dense_20x16x40": {"rows": 5, "cols": 32, "parallel_rows": False},
    "conv_nchw_16x9": {"ow_tile": 9, "parallel_rows": True},
    "lstm_8x16": {"rows": 8},
}


def defaults(name: str, target: str) -> tuple[Task, Knobs]:
    lanes = Target(target).vector_lanes("float32")
    task, family = task_of(*GROUPS[name](lanes), target)
    return task, family.default(task)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_zen4_defaults_are_pinned(name: str) -> None:
    """A fixed Zen 4 target (not the host, so this holds on any CI CPU) keeps the defaults
    the schedules were tuned with."""
    _, knobs = defaults(name, ZEN4)
    got = {k: v for k, v in knobs.to_dict().items() if k in ZEN4_DEFAULTS[name]}
    assert got == ZEN4_DEFAULTS[name]


def test_zen4_matmul_and_winograd_defaults_are_pinned() -> None:
    for nr in (16, 32):
        c = matmul(256, 512, 1024, nr=nr)[3]
        knobs = MatmulKnobs.default(Task((c,), Target(ZEN4)))
        assert (knobs.mr, knobs.kc, knobs.mc, knobs.nc, knobs.parallel) == (8, 512, 128, 512,
                                                                           True)
    op, arrays, attrs = conv_group(64, 64, 14, 3, 16, "winograd")
    arrays[1] = zeros(16, 4, 4, 16, 16)  # [16, OC/ob, IC/ib, ib, ob] transformed weights
    task, family = task_of(op, arrays, attrs, ZEN4)
    knobs = family.default(task)  # 49 tiles of 2x2: the direct tile rule's 7 x 2
    assert (knobs.ow_tile, knobs.oc_tile) == (7, 2)
    task, family = task_of(op, arrays, attrs, OTHERS["sapphirerapids"])
    knobs = family.default(task)  # two 512-bit pipes: 6 tiles x 4 blocks, as a 1x1 conv
    assert (knobs.ow_tile, knobs.oc_tile, knobs.unroll_ii) == (6, 4, True)


def test_weights_stream_once_where_the_first_tile_would_wait() -> None:
    """k_chunk where a channel tile's first register tile would wait for its weights more
    than CHUNK_STALL of the time: 7x7 outputs and Winograd GEMMs of 49 tiles on two 512-bit
    pipes (18-21 bytes a cycle asked over 7-9 register tiles), chunks whose weights fill at
    most a quarter of L1d; not at 14x14 (42 register tiles) nor for 196 Winograd tiles, nor
    on one 512-bit pipe (Zen 4) or two 256-bit ones."""
    spr, zen4 = Target(OTHERS["sapphirerapids"]).facts, Target(ZEN4).facts
    assert first_tile_stall(spr, 7, 7) > CHUNK_STALL > first_tile_stall(spr, 5, 14 * 3)
    assert first_tile_stall(spr, 6, 9) > CHUNK_STALL > first_tile_stall(spr, 6, 33)
    assert first_tile_stall(zen4, 7, 7) < CHUNK_STALL
    assert first_tile_stall(Target(OTHERS["skylake"]).facts, 7, 7) < CHUNK_STALL
    cases = {(512, 512, 7, 3): 1, (2048, 512, 7, 1): 4, (1024, 256, 14, 1): 0}
    for (cin, cout, size, kernel), want in cases.items():
        task, family = task_of(*conv_group(cin, cout, size, kernel, 16),
                               OTHERS["sapphirerapids"])
        knobs = family.default(task)
        assert knobs.k_chunk == want, (cin, cout, size, kernel)
        assert family.space(task).contains(knobs.to_dict())
        weights = knobs.oc_tile * knobs.k_chunk * kernel * kernel * 16 * 16 * 4
        assert want == 1 or weights <= spr.l1d_bytes // 4
        task, family = task_of(*conv_group(cin, cout, size, kernel, 16), ZEN4)
        assert family.default(task).k_chunk == 0
    for size, want in ((14, 2), (56, 0)):  # 49 and 196 tiles of 2x2 (F(2,3) weights here)
        op, arrays, attrs = conv_group(256, 256, size, 3, 16, "winograd")
        arrays[1] = zeros(16, 16, 16, 16, 16)
        task, family = task_of(op, arrays, attrs, OTHERS["sapphirerapids"])
        assert family.default(task).k_chunk == want, size


def accumulators(task: Task, knobs: Knobs) -> int:
    """Vector registers the default's register tile keeps as accumulators."""
    lanes = task.target.vector_lanes("float32")
    out = [int(d.value) for d in task.outs[0].shape]  # type: ignore[attr-defined]
    if isinstance(knobs, ConvKnobs):
        return knobs.ow_tile * knobs.oc_tile * vectors(out[-1], lanes)
    if isinstance(knobs, DenseKnobs):
        return knobs.rows * vectors(knobs.cols, lanes)
    if isinstance(knobs, ConvNCHWKnobs):
        return knobs.ow_tile * vectors(out[1] if len(out) == 4 else out[-1], lanes)
    assert isinstance(knobs, RNNKnobs)
    return knobs.rows * vectors(32, lanes)


@pytest.mark.parametrize("cpu", sorted(OTHERS))
@pytest.mark.parametrize("name", sorted(GROUPS))
def test_defaults_fit_the_target(name: str, cpu: str) -> None:
    """On each target the default is a point of its space and its register tile fits the
    target's vector registers (leaving room for at least one operand)."""
    task, knobs = defaults(name, OTHERS[cpu])
    assert type(knobs).space(task).contains(knobs.to_dict())
    knobs.check(task)
    assert accumulators(task, knobs) < task.target.facts.vector_registers


def test_defaults_differ_where_the_facts_differ() -> None:
    """16 registers (AVX2, SSE) shrink the tiles that fill 32; Sapphire Rapids' 2 MiB L2
    grows the GEMM's cache blocks; equal register files keep the conv tile."""
    zen4_conv = defaults("conv3x3_512x7", ZEN4)[1]
    for cpu in ("skylake", "x86-64-v2"):
        task, knobs = defaults("conv3x3_512x7", OTHERS[cpu])
        assert accumulators(task, knobs) < accumulators(*defaults("conv3x3_512x7", ZEN4))
        assert defaults("dense_128x768x768", OTHERS[cpu])[1].rows < 8
        assert defaults("lstm_8x16", OTHERS[cpu])[1].rows < 8
    spr_conv = defaults("conv3x3_512x7", OTHERS["sapphirerapids"])[1]
    # the same tile (7 columns: one tile a row), the channel loop unrolled with two 512-bit
    # pipes
    assert (spr_conv.ow_tile, spr_conv.oc_tile) == (zen4_conv.ow_tile, zen4_conv.oc_tile)
    assert spr_conv.unroll_ii and not zen4_conv.unroll_ii
    # 14 columns x 1 block: 15 loads a step are more than 14 FMAs on two pipes take; 8 x 2 (8
    # cycles a step) leaves the pipes idle that 6 x 4 (12 cycles) keeps busy
    spr_56 = defaults("conv3x3_64x56", OTHERS["sapphirerapids"])[1]
    assert (spr_56.ow_tile, spr_56.oc_tile) == (6, 4)
    # at 28 columns 6 x 4 too; at 14 columns 5 x 4 (10 cycles, a 4-column tail) where 6 x 4
    # would waste 4 of 18 columns and 3 x 8 reads 8 blocks of weights (16 KiB each: 256
    # input channels) from L2; at 7 columns 7 x 2 (one tile a row)
    spr = Target(OTHERS["sapphirerapids"]).facts
    for shape, tile in (((1, 16, 28, 28, 16), (6, 4)), ((1, 64, 14, 14, 16), (5, 4)),
                        ((1, 128, 7, 7, 16), (7, 2))):
        assert conv_tile(shape, False, 16, spr, 16 * 1024) == tile, shape
    # B panels of two vectors: 32 columns x 8 rows on Zen 4 (a k step: 16 cycles on one
    # 512-bit pipe); where half the registers' rows take under three FMA latencies a step,
    # the tile takes the accumulator budget, with a tail: AVX2 (16 ymm, two pipes) 6 rows x 2
    # ymm (128 = 21 x 6 + 2), NEON 6 rows x 4 q registers (16 columns; 4 rows took 8 cycles
    # of a 21-cycle latency), two 512-bit pipes 12 rows x 2 zmm (8 rows: 8 cycles)
    assert (defaults("dense_128x768x768", ZEN4)[1].rows,
            defaults("dense_128x768x768", ZEN4)[1].cols) == (8, 32)
    for cpu, rows, cols in (("skylake", 6, 16), ("cortex-a72", 6, 16),
                            ("sapphirerapids", 12, 32)):
        dense = defaults("dense_128x768x768", OTHERS[cpu])[1]
        assert (dense.rows, dense.cols) == (rows, cols), cpu
    assert defaults("dense_128x768x768", "llvm -mcpu=znver3")[1].rows == 6
    c = matmul(256, 512, 1024, nr=32)[3]
    zen4 = MatmulKnobs.default(Task((c,), Target(ZEN4)))
    spr = MatmulKnobs.default(Task((c,), Target(OTHERS["sapphirerapids"])))
    skl = MatmulKnobs.default(Task((c,), Target(OTHERS["skylake"])))
    assert (spr.mc, spr.nc) == (2 * zen4.mc, 2 * zen4.nc)
    assert skl.mr * vectors(32, 8) <= 16 / 2 and skl.nc < zen4.nc
    for spec in OTHERS.values():  # the register tile and the B micro-panel fit
        target = Target(spec)
        knobs = MatmulKnobs.default(Task((c,), target))
        assert MatmulKnobs.space(Task((c,), target)).contains(knobs.to_dict())
        lanes = target.vector_lanes("float32")
        assert knobs.mr * vectors(32, lanes) <= target.facts.vector_registers // 2
        assert knobs.kc * 32 * 4 <= target.facts.l2_bytes // 4
    one = MatmulKnobs.default(Task((c,), Target("llvm -mcpu=znver4 -num-cores=1")))
    assert not one.parallel


def test_rows_outer_rule() -> None:
    """Rows outside the channel tiles where the input overflows half of L2 and the weights
    fit it: 256->512 at 56x56 (3.2 MB in, 0.5 MB of weights); not with 8 MB of weights
    (1024->2048) nor with an input that fits (64 channels at 14x14)."""
    spr = OTHERS["sapphirerapids"]
    cases = {(256, 512, 56): True, (1024, 2048, 14): False, (64, 64, 14): False}
    for (cin, cout, size), want in cases.items():
        task, family = task_of(*conv_group(cin, cout, size, 1, 16), spr)
        assert family.default(task).rows_outer is want, (cin, cout, size)


def test_tile_efficiency_rule() -> None:
    """A reduction step takes the longest of its FMAs on the pipes, its loads on two ports
    and the FMA latency plus FMA_SLACK cycles (WIDE_FMA_SLACK with two 512-bit pipes)."""
    zen4, spr = Target(ZEN4).facts, Target(OTHERS["sapphirerapids"]).facts
    assert fma_slack(zen4) == FMA_SLACK and fma_slack(spr) == WIDE_FMA_SLACK
    assert fma_slack(Target(OTHERS["skylake"]).facts) == FMA_SLACK  # two 256-bit pipes
    # 14 columns x 1 block: 14 FMAs, 15 loads (14 broadcasts, 1 weight vector)
    assert tile_efficiency(zen4, 14, 15) == 1.0          # 14 cycles of FMAs, 7.5 of loads
    # two 512-bit pipes: 7 cycles of FMAs, 7.5 of loads, against 4 + 7 a step should take
    assert tile_efficiency(spr, 14, 15) == pytest.approx(7 / (4 + WIDE_FMA_SLACK))
    assert tile_efficiency(spr, 16, 10) == pytest.approx(8 / 11)  # 8 x 2: 8 cycles
    assert tile_efficiency(spr, 20, 9) == pytest.approx(10 / 11)  # 5 x 4: 10 cycles
    assert tile_efficiency(spr, 24, 10) == 1.0           # 6 x 4: 12 cycles, 5 of loads
    # the latency and the slack: 4 + 2 cycles for 2 FMAs
    assert tile_efficiency(zen4, 2, 3) == pytest.approx(2 / (4 + FMA_SLACK))
    # 512 -> 1008 (padded 1000) classes at 13x13: 13x1 (load-bound, 0.93) ties 7x3 (FMA-bound,
    # a 7-column tail tile: 13/14 useful); the tile with spare load slots wins
    assert conv_tile((1, 63, 13, 13, 16), False, 16, spr) == (7, 3)
    assert conv_tile((1, 63, 13, 13, 16), False, 16, zen4) == (13, 1)
    # AVX2 (12 ymm accumulators, two FMA pipes), 1000 classes = 125 full blocks of 8: no
    # divisor 2-4, so 5 blocks x 2 columns (7 loads a step, FMA-bound) beat 7 x 1 (8 loads
    # for 7 FMAs, load-bound)
    skylake = Target(OTHERS["skylake"]).facts
    assert conv_tile((1, 125, 13, 13, 8), False, 8, skylake) == (2, 5)


def test_avx2_tiles_keep_12_accumulators_and_fit_the_registers() -> None:
    """With two FMA pipes of latency 4, 8 accumulators leave no slack: 3 columns x 4 blocks
    (12) where 4 x 2 was (ResNet-50's and ResNet-18's 28- and 56-wide convs); 6 x 2 has 12
    too but spills (12 accumulators + 6 broadcasts + a weight > 16 ymm), so it never comes."""
    skylake = Target(OTHERS["skylake"]).facts
    for shape in ((1, 16, 28, 28, 8), (1, 32, 56, 56, 8), (1, 64, 7, 7, 8)):
        assert conv_tile(shape, False, 8, skylake) == (3, 4)
    for ocb in (2, 16, 64):
        w, oc = conv_tile((1, ocb, 56, 56, 8), False, 8, skylake)
        assert w * oc + w + 1 <= 16


def test_weights_from_l2_rule() -> None:
    """A tile whose blocks' weights overflow half of L1 reads them from L2 for every column
    tile, 0.9 x 32 bytes a cycle (0.9 ymm, 0.45 zmm): on AVX2, 2048->512 at 7x7 (64 KiB of weights a
    block) would take 8 from L2 for 8 FMAs with 1 column x 8 blocks; at 14x14 with 12 blocks, 2 x 6
    (a divisor of 14) while the weights stay in L1, 3 x 4 (4 weight vectors a step, not 6) once they
    come from L2; Zen 4's single FMA pipe keeps its tile either way."""
    skylake, zen4 = Target(OTHERS["skylake"]).facts, Target(ZEN4).facts
    assert tile_efficiency(skylake, 8, 9, 8) == pytest.approx(4 / (8 / 0.9))
    assert tile_efficiency(skylake, 12, 8, 6) == pytest.approx(6 / (6 / 0.9))
    assert tile_efficiency(skylake, 12, 7, 4) == 1.0
    assert conv_tile((1, 12, 14, 14, 8), False, 8, skylake, 1024) == (2, 6)
    assert conv_tile((1, 12, 14, 14, 8), False, 8, skylake, 64 * 1024) == (3, 4)
    # 125 blocks of 8 at 13x13 with 16 KiB each: 2 x 5 from L2 still beats 7 x 1
    assert conv_tile((1, 125, 13, 13, 8), False, 8, skylake, 16 * 1024) == (2, 5)
    assert (conv_tile((1, 32, 7, 7, 16), False, 16, zen4, 128 * 1024)
            == conv_tile((1, 32, 7, 7, 16), False, 16, zen4))
    # two 512-bit pipes at 7x7 with 32 KiB of weights a block: 3 columns x 8 blocks (24
    # accumulators, 8 zmm from L2 a step: 17.8 cycles at 0.45 zmm a cycle) stays out
    spr = Target(OTHERS["sapphirerapids"]).facts
    assert tile_efficiency(spr, 24, 11, 8) == pytest.approx(12 / (8 / 0.45))
    assert conv_tile((1, 128, 7, 7, 16), False, 16, spr, 32 * 1024) == (7, 2)
    # through the task: ResNet-50's last 1x1 conv (2048 -> 512 at 7x7) on AVX2
    task, family = task_of(*conv_group(2048, 512, 7, 1, 8), OTHERS["skylake"])
    knobs = family.default(task)
    assert (knobs.ow_tile, knobs.oc_tile) == (3, 4)


def test_row_tile_rule() -> None:
    """Rows: twice the FMA latency x throughput, capped at half the registers."""
    facts = Target(ZEN4).facts
    assert row_tile(facts, 1) == 8 and row_tile(facts, 2) == 8 and row_tile(facts, 4) == 4
    spr = Target(OTHERS["sapphirerapids"]).facts
    assert row_tile(spr, 1) == 16  # two 512-bit FMA pipes: 8 accumulators in flight
    assert row_tile(Target(OTHERS["x86-64-v2"]).facts, 8) == 1
    assert snap(700, (64, 128, 512, 1024)) == 512 and snap(10, (64, 128)) == 64


def conv_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """Direct NCHW convolution (stride 1) in numpy."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), "float32")
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


CONV_ATTRS = {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1), "algorithm": "direct"}


def _conv_case():
    """A blocked 3x3 conv: its input, packed weights and (task, knob family) on the host."""
    x, w = rand(1, 16, 6, 7), rand(16, 16, 3, 3)
    arrays = [to_blocked(x, 8), pack_direct(w, 8, 8)]
    return x, w, arrays, task_of("ConvNCHWc", arrays, CONV_ATTRS, "llvm")


def _dense_case():
    a, b = rand(20, 16), rand(16, 40)
    return a, b, task_of("MatMul", [a, b], {}, "llvm")


def test_targets_facts_choose_other_defaults() -> None:
    """A 512-bit target with 32 registers and a 256-bit one with 16 choose other conv and
    dense tiles for the same task (whatever the host is)."""
    for task, family in (_conv_case()[-1], _dense_case()[-1]):
        wide, narrow = (family.default(Task(task.outs, Target(OTHERS[cpu]), task.op,
                                            task.attrs))
                        for cpu in ("sapphirerapids", "skylake"))
        assert wide != narrow, task.op


@pytest.mark.parametrize("cpu", ["sapphirerapids", "skylake", "x86-64-v2"])
def test_another_targets_conv_default_runs_right_on_the_host(cpu: str) -> None:
    x, w, arrays, (task, family) = _conv_case()
    other = family.default(Task(task.outs, Target(OTHERS[cpu]), task.op, task.attrs))
    out = from_blocked(run_op("ConvNCHWc", arrays, CONV_ATTRS, knobs=other)[0])
    np.testing.assert_allclose(out, conv_reference(x, w, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu", ["sapphirerapids", "skylake", "x86-64-v2"])
def test_another_targets_dense_default_runs_right_on_the_host(cpu: str) -> None:
    a, b, (task, family) = _dense_case()
    other = family.default(Task(task.outs, Target(OTHERS[cpu]), task.op, task.attrs))
    out = run_op("MatMul", [a, b], {}, constant=(1,), knobs=other)[0]
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_another_targets_matmul_default_runs_right_on_the_host() -> None:
    from ember.lowering.build import build

    a_t, b_t, packed, c_t = matmul(24, 40, 36, nr=16)
    a, b = rand(24, 36), rand(36, 40)
    other = MatmulKnobs.default(Task((c_t,), Target(OTHERS["skylake"])))
    assert other != MatmulKnobs.default(Task((c_t,), Target(ZEN4)))
    module = build(schedule_matmul_x86(c_t, packed, "llvm", other), [a_t, b_t, c_t])
    c = np.zeros((24, 40), "float32")
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
