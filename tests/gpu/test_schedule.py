"""te/tir for GPUs: bind, shared-memory bounds, barriers, the bound-or-small loop check."""

import numpy as np
import pytest

import ember
from ember import te
from ember.lowering.build import lower_gpu
from ember.errors import ScheduleError
from ember.tir import stmt as S
from ember.tir.functor import post_order_visit

N, K, T = 32, 24, 8


def tiled_matmul():
    A = te.placeholder((N, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    BS = s.cache_read(B, "shared", [C])
    i, j = C.op.axis
    bi, bj, ti, tj = s[C].tile(i, j, T, T)
    ko, ki = s[C].split(C.op.reduce_axis[0], T)
    s[C].reorder(bi, bj, ti, tj, ko, ki)
    for axis, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"),
                      (tj, "threadIdx.x")):
        s[C].bind(axis, tag)
    for cached in (AS, BS):
        s[cached].compute_at(s[C], ko)
        a, b = s[cached].op.axis
        s[cached].bind(a, "threadIdx.y")
        s[cached].bind(b, "threadIdx.x")
    return s, A, B, C


def nodes(func, kind):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, kind) else None)
    return found


def test_shared_tile_covers_the_block():
    s, A, B, C = tiled_matmul()
    func = lower_gpu(s, [A, B, C], "mm")
    shared = [a.buffer for a in nodes(func, S.Allocate) if a.buffer.scope == "shared"]
    # each shared tile holds the block's T x T slice, not one thread's row
    assert sorted(b.name for b in shared) == ["A_shared", "B_shared"]
    assert all(int(b.shape[0].value) == T * T for b in shared)


def test_barriers_around_reused_shared_tiles():
    s, A, B, C = tiled_matmul()
    func = lower_gpu(s, [A, B, C], "mm")
    loop = next(f for f in nodes(func, S.For) if f.var.name == "k.outer")
    body = loop.body
    while not isinstance(body, S.Seq):
        body = body.body
    kinds = [type(x).__name__ for x in body.stmts]
    # before the first fill (the previous step still reads), between fills and reads
    assert kinds == ["Barrier", "For", "Barrier", "For", "Barrier", "For"]


def test_no_barrier_without_shared_memory():
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], 16)
    s[B].bind(bo, "blockIdx.x")
    s[B].bind(bi, "threadIdx.x")
    assert nodes(lower_gpu(s, [A, B]), S.Barrier) == []


def test_unbound_loop_is_rejected_with_stage_and_axis():
    A = te.placeholder((64, 64), "float32", name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[1], "threadIdx.x")
    with pytest.raises(ScheduleError, match="stage 'B' axis 'i' .*bind it to a thread axis"):
        lower_gpu(s, [A, B])


def test_never_bound_stage_is_rejected():
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="stage 'B' axis 'i'.*no axis is bound"):
        ember.build(s, [A, B], target="opencl")


def test_parallel_loop_is_rejected_on_gpu():
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    with pytest.raises(ScheduleError, match="parallel loop is for CPU threads"):
        lower_gpu(s, [A, B])


def test_small_serial_outer_loop_is_allowed():
    A = te.placeholder((4, 64), "float32", name="A")
    B = te.compute((4, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[1], "threadIdx.x")
    lower_gpu(s, [A, B])  # 4 iterations each thread repeats: fine


def test_bind_errors():
    A = te.placeholder((64,), "float32", name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="unknown thread axis 'threadIdx.w'"):
        s[B].bind(B.op.axis[0], "threadIdx.w")
    with pytest.raises(ScheduleError, match="cannot bind reduction axis 'k'"):
        s[B].bind(k, "threadIdx.x")
    with pytest.raises(ScheduleError, match="bind target must be a te.thread_axis"):
        s[B].bind(B.op.axis[0], 3)


def test_tiled_matmul_runs_on_opencl(opencl):
    s, A, B, C = tiled_matmul()
    f = ember.build(s, [A, B, C], target="opencl", name="mm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((N, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in f.get_source("opencl")
    assert "__local float A_shared[64];" in f.get_source("opencl")


def test_missing_barrier_would_change_the_result(opencl):
    """The barriers matter: without them threads read tiles others have not written yet."""
    from ember.runtime.devices import default_device

    if "Portable Computing Language" not in default_device("opencl").device.platform.name:
        pytest.skip("only PoCL runs a work-group's threads in a fixed order without barriers")
    from ember.lowering.build import build_gpu
    from ember.target import Target
    from ember.tir.pipeline import PASSES, run_passes
    from ember.te.lower import lower_schedule

    s, A, B, C = tiled_matmul()
    func = run_passes(lower_schedule(s, [A, B, C], "mm_nobarrier", gpu=True), PASSES[3])
    assert nodes(func, S.Barrier) == []
    f = build_gpu(func, Target("opencl"))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((N, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((N, N), "float32")
    f(a, b, c)
    # PoCL runs a work-group's threads one after another between barriers, so without them
    # every thread but the last reads a tile only partly filled
    assert not np.allclose(c, a @ b, atol=1e-3)
