"""Every illegal schedule and bad te input raises a clear ember error."""

import numpy as np
import pytest

import ember
from ember import te
from ember.errors import ArgumentError, EmberError, LoweringError, ScheduleError, ShapeError


def matmul(M=8, N=8, K=8):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_split_axis_of_other_stage():
    A, B, C = matmul()
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="stage 'D': cannot split axis 'i'"):
        s[D].split(C.op.axis[0], 4)


def test_split_twice():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i = C.op.axis[0]
    s[C].split(i, 4)
    with pytest.raises(ScheduleError, match="already split or fused away"):
        s[C].split(i, 2)


def test_split_bad_factor():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="positive integer"):
        s[C].split(C.op.axis[0], 0)
    with pytest.raises(ScheduleError, match="exactly one of"):
        s[C].split(C.op.axis[0], factor=2, nparts=2)


def test_vectorize_reduction_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="cannot vectorize reduction axis 'k'"):
        s[C].vectorize(C.op.reduce_axis[0])
    with pytest.raises(ScheduleError, match="cannot parallel reduction axis 'k'"):
        s[C].parallel(C.op.reduce_axis[0])


def test_compute_at_non_consumer():
    A, B, C = matmul()
    E = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="E")
    F = te.compute((8, 8), lambda i, j: C[i, j] + E[i, j], name="F")
    s = te.create_schedule(F.op)
    with pytest.raises(ScheduleError, match="'C' does not consume it"):
        s[E].compute_at(s[C], C.op.axis[0])


def test_compute_at_axis_of_other_stage():
    A, B, C = matmul()
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="not a loop of stage 'D'"):
        s[C].compute_at(s[D], C.op.axis[0])


def test_inline_reduction_and_output():
    A, B, C = matmul()
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="only element-wise"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match="is an output"):
        s[D].compute_inline()


def test_fuse_non_adjacent():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(ScheduleError, match="adjacent"):
        s[C].fuse(j, i)
    with pytest.raises(ScheduleError, match="spatial and reduction"):
        s[C].fuse(j, C.op.reduce_axis[0])


def test_reorder_duplicate():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(ScheduleError, match="twice"):
        s[C].reorder(i, i)


def test_rfactor_spatial_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="needs a reduction axis"):
        s.rfactor(C, C.op.axis[0])


def test_cache_write_after_split():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], 2)
    with pytest.raises(ScheduleError, match="before splitting"):
        s.cache_write(C, "local")


def test_bad_scope_and_storage_align():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="unknown scope"):
        s.cache_read(A, "texture", [C])
    with pytest.raises(ScheduleError, match="storage_align"):
        s[C].storage_align(C.op.reduce_axis[0], 4, 0)


def test_shape_errors():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(ShapeError, match="tensor 'A' has 2 dimensions, indexed with 1"):
        te.compute((4,), lambda i: A[i], name="bad")
    with pytest.raises(ShapeError, match="function takes 1 indices but the shape has 2"):
        te.compute((4, 4), lambda i: A[i, i], name="bad2")
    with pytest.raises(ShapeError, match="non-negative integer"):
        te.placeholder((4, -1), name="neg")


def test_reduce_not_outermost():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(EmberError, match="outermost expression"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0, name="bad")


def test_expression_truth_value():
    i = te.Var("i")
    with pytest.raises(EmberError, match="no truth value"):
        if i < 3:
            pass


def test_missing_argument():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(LoweringError, match="placeholder 'B' is read but not passed"):
        ember.lower(s, [A, C])
    with pytest.raises(LoweringError, match="output tensor 'C' is not among the arguments"):
        ember.lower(s, [A, B])


def test_call_with_wrong_arrays():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    f = ember.build(s, [A, B, C])
    a = np.zeros((8, 8), "float32")
    with pytest.raises(ArgumentError, match="argument 'B' of 'main': expected dtype float32, "
                                            "got float64"):
        f(a, np.zeros((8, 8)), a.copy())
    with pytest.raises(ArgumentError, match=r"argument 'C' of 'main': expected shape \(8, 8\)"):
        f(a, a, np.zeros((8, 9), "float32"))
    with pytest.raises(ArgumentError, match="C-contiguous"):
        f(a, a, np.zeros((8, 8), "float32", order="F"))
    with pytest.raises(ArgumentError, match="takes 3 arguments"):
        f(a, a)


def test_kernel_name_colliding_with_libm():
    from ember.errors import TargetError

    A, B, C = matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(TargetError, match="kernel name 'expf' collides"):
        ember.build(s, [A, B, C], name="expf")
