"""Loop features follow the schedule: counts are per flop (so they do not change with the
task's size), strides, reuse and the register tile follow the loop order and the target."""

import math

import pytest

from ember import te
from ember.autotune.features import LOOP_FEATURE_NAMES, loop_features
from ember.te.lower import lower_schedule
from ember.target import Target

ZEN4 = "llvm -mcpu=znver4 -num-cores=4"      # 32 vector registers of 512 bits
HASWELL = "llvm -mcpu=haswell -num-cores=4"  # 16 of 256 bits


def _features(s, args, target=ZEN4):
    return dict(zip(LOOP_FEATURE_NAMES, loop_features(lower_schedule(s, args, "f"), target)))


def _add(vectorize: bool, parallel: bool, n: int = 1024, target=ZEN4):
    a = te.placeholder((n,), "float32", name="a")
    b = te.placeholder((n,), "float32", name="b")
    c = te.compute((n,), lambda i: a[i] * b[i] + a[i], name="c")
    s = te.create_schedule(c.op)
    outer, inner = s[c].split(c.op.axis[0], 16)
    if vectorize:
        s[c].vectorize(inner)
    if parallel:
        s[c].parallel(outer)
    return _features(s, [a, b, c], target)


def _matmul(n: int, order: str, tile: int = 1, target=ZEN4):
    """C = A @ B, n x n x n, the loops in `order` ("ijk" or "ikj"); `tile` > 1 splits j by
    it, unrolls the tile and moves it innermost."""
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    i, j = c.op.axis
    if tile > 1:
        jo, ji = s[c].split(j, tile)
        s[c].reorder(i, jo, k, ji)
        s[c].unroll(ji)
    elif order == "ikj":
        s[c].reorder(i, k, j)
    return _features(s, [a, b, c], target)


def test_counts_are_per_flop():
    plain = _add(False, False)
    assert plain["float_ops"] == round(math.log2(1 + 2 * 1024), 6)  # one mul, one add each
    assert plain["loads"] == 1.5 and plain["stores"] == 0.5        # 3 loads, 1 store / 2 flops
    assert plain["stride1"] == 1.0 and plain["stride0"] == 0.0
    assert plain["reuse_none"] == pytest.approx(1.0)
    assert plain["loops_serial"] > 0 and plain["loops_parallel"] == 0


def test_features_do_not_grow_with_the_task_but_its_scale():
    small, big = _add(True, True, 1024), _add(True, True, 8192)
    assert big["float_ops"] > small["float_ops"]
    size_bound = {"float_ops", "parallel_per_thread", "task_bytes_over_l2",
                  "body_bytes_over_l1"}
    for name in LOOP_FEATURE_NAMES:
        if name not in size_bound:
            assert small[name] == pytest.approx(big[name], abs=1e-6), name


def test_loop_kinds_parallel_tasks_and_vector_width():
    tuned = _add(True, True)
    assert tuned["loops_vectorized"] == 1 and tuned["vector_extent"] == 16
    assert tuned["vector_fill"] == 1.0                   # 16 float32 lanes of a zmm
    assert _add(True, True, target=HASWELL)["vector_fill"] == 2.0  # two ymm
    assert tuned["loops_parallel"] == 1 and tuned["parallel_per_thread"] == 64 / 4
    assert tuned["parallel_balance"] == 1.0
    three = _add(True, True, target="llvm -mcpu=znver4 -num-cores=3")
    assert three["parallel_balance"] == pytest.approx(64 / (22 * 3), abs=1e-6)


def test_strides_follow_the_loop_order():
    ijk, ikj = _matmul(32, "ijk"), _matmul(32, "ikj")
    # k innermost: B[k, j] jumps a row (far), A[i, k] is contiguous, C[i, j] is reused
    assert ijk["stride_far"] > 0 and ijk["stride0"] > 0
    # j innermost: B and C contiguous, A[i, k] reused
    assert ikj["stride_far"] == 0 and ikj["stride1"] > ijk["stride1"]
    assert ijk["gather"] == 0 and ikj["gather"] == 0


def test_reuse_distance_against_the_caches():
    # i, k, j: A[i, k] is reused across j (distance: one row of B and of C)
    small, big = _matmul(16, "ikj"), _matmul(2048, "ikj")
    assert small["reuse_none"] < 0.05 and big["reuse_none"] < 0.05  # C's zeroing only
    assert small["reuse_far"] == 0 and small["reuse_l2"] == 0
    # the rows of 2048 floats still fit L1d (16 KiB of 32), but B's 16 MiB between
    # two uses of a row of C (its reuse loop is k) exceed L2
    assert big["reuse_far"] > 0
    assert big["body_bytes_over_l1"] > small["body_bytes_over_l1"]


def test_register_tile_against_the_target():
    zen4, haswell = _matmul(64, "ijk", tile=16), _matmul(64, "ijk", tile=16, target=HASWELL)
    assert zen4["register_tile"] == 16 and zen4["unroll_product"] == 16
    assert zen4["tile_over_registers"] == 0.5 and haswell["tile_over_registers"] == 1.0
    assert zen4["tile_over_latency"] == 16 / Target(ZEN4).facts.latency_accumulators
    assert _matmul(64, "ijk")["register_tile"] == 1  # nothing unrolled: one accumulator


def test_register_tile_counts_accumulators_not_unrolled_reductions():
    def tile(unroll_k: bool):
        a = te.placeholder((64, 64), "float32", name="A")
        b = te.placeholder((64, 64), "float32", name="B")
        k = te.reduce_axis((0, 64), name="k")
        c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        s = te.create_schedule(c.op)
        i, j = c.op.axis
        jo, ji = s[c].split(j, 4)
        ko, ki = s[c].split(k, 4)
        s[c].reorder(i, jo, ko, ki, ji)
        s[c].unroll(ji)
        if unroll_k:
            s[c].unroll(ki)
        return _features(s, [a, b, c], HASWELL)

    # four accumulators either way: the unrolled k steps write the same four again
    assert tile(False)["register_tile"] == 4 and tile(True)["register_tile"] == 4
    assert tile(True)["unroll_product"] == 4
    assert _add(True, False)["register_tile"] == 0  # an elementwise store accumulates nothing


def test_tile_estimate_follows_the_pipes_and_the_budget():
    from ember.autotune.features import tile_estimate

    avx2 = Target(HASWELL).facts  # 16 ymm, two FMA pipes: 12 accumulators, the budget, best
    estimates = {t: tile_estimate(avx2, t) for t in (1, 4, 8, 12, 13, 16, 28)}
    assert estimates[1] < estimates[4] < estimates[8] < estimates[12] < 0.0
    assert tile_estimate(Target("llvm -mcpu=znver3").facts, 12) == 0.0  # latency 4: full
    assert estimates[28] < estimates[16] < estimates[13] < estimates[12]  # past 12: spills
    zen4 = Target(ZEN4).facts  # 32 zmm, one FMA a cycle: 6 fill it, 24 fit the budget
    assert tile_estimate(zen4, 6) == tile_estimate(zen4, 24) == 0.0
    assert tile_estimate(zen4, 28) < 0.0 and tile_estimate(zen4, 0) == 0.0


def test_guards_count_tail_tiles():
    def split(factor):
        a = te.placeholder((100,), "float32", name="a")
        c = te.compute((100,), lambda i: a[i] * 2.0, name="c")
        s = te.create_schedule(c.op)
        s[c].split(c.op.axis[0], factor)
        return _features(s, [a, c])

    assert split(10)["guards"] == 0 and split(16)["guards"] > 0


def test_knob_features_tell_apart_what_the_loops_do_not():
    """The knobs enter the features in their family's field order, padded to KNOB_SLOTS:
    two dense candidates whose loop programs count alike (the k-loop unroll is applied by
    the code generator) still differ; text knobs get a stable code."""
    import dataclasses

    from ember.autotune.features import FEATURE_NAMES, KNOB_SLOTS, knob_features
    from ember.errors import TuningError
    from ember.ops.dense import DenseKnobs
    from ember.ops.gpu.conv import GpuConvKnobs

    a = knob_features(DenseKnobs(rows=12, cols=32, parallel_rows=False, unroll_k=4))
    b = knob_features(DenseKnobs(rows=12, cols=32, parallel_rows=True, unroll_k=2))
    assert len(a) == KNOB_SLOTS and a[:4] == (12.0, 32.0, 0.0, 4.0) and a[4:] == (0.0,) * 4
    assert b[2:4] == (1.0, 2.0)
    conv = GpuConvKnobs()
    assert knob_features(conv) == knob_features(dataclasses.replace(conv))
    assert knob_features(conv)[0] != knob_features(dataclasses.replace(conv, algo="x"))[0]
    assert FEATURE_NAMES[-KNOB_SLOTS:] == tuple(f"knob_{i}" for i in range(KNOB_SLOTS))

    @dataclasses.dataclass(frozen=True)
    class Many:
        a: int = 0
        b: int = 0
        c: int = 0
        d: int = 0
        e: int = 0
        f: int = 0
        g: int = 0
        h: int = 0
        i: int = 0

    with pytest.raises(TuningError, match="Many has 9 knobs"):
        knob_features(Many())
