"""flatten_buffers: flat indices, strides, allocations; numbers unchanged."""

import numpy as np

from ember.tir import (
    Allocate, Buffer, For, ForKind, PrimFunc, Ramp, Store, Var, buffer, const, seq,
    structural_equal,
)
from ember.tir.transform.flatten import flatten_buffers
from ember.tir.verify import verify
from tests.tir import interp


def _copy_2d(A, B, n, m):
    i, j = Var("i"), Var("j")
    return PrimFunc("copy", (A, B), For(i, const(0), const(n), ForKind.SERIAL,
                    For(j, const(0), const(m), ForKind.SERIAL,
                        Store(B, A.load(i, j) + 1.0, (i, j)))))


def test_flatten_matches_expected_and_keeps_params():
    A, B = buffer("A", (4, 6)), buffer("B", (4, 6))
    f = _copy_2d(A, B, 4, 6)
    out = flatten_buffers(f)
    assert out.params == f.params  # params keep their static shapes for params_of
    i, j = Var("i"), Var("j")
    Af = Buffer("A", (const(24),), A.dtype, A.data)
    Bf = Buffer("B", (const(24),), B.dtype, B.data)
    expected = PrimFunc("copy", (A, B), For(i, const(0), const(4), ForKind.SERIAL,
                        For(j, const(0), const(6), ForKind.SERIAL,
                            Store(Bf, Af.load(i * 6 + j) + 1.0, (i * 6 + j,)))))
    assert structural_equal(out, expected)
    verify(out)
    interp.assert_same_results(f, out)


def test_flatten_shares_data_var_with_param():
    A, B = buffer("A", (3, 5)), buffer("B", (3, 5))
    out = flatten_buffers(_copy_2d(A, B, 3, 5))
    store = out.body.body.body
    assert store.buffer.data is B.data and store.buffer.shape[0].value == 15
    assert store.value.a.buffer.data is A.data


def test_flatten_respects_explicit_strides_and_allocation_size():
    A, B = buffer("A", (4, 5)), buffer("B", (4, 5))
    T = Buffer("T", (const(4), const(5)), A.dtype, strides=(const(8), const(1)))
    i, j = Var("i"), Var("j")
    i2, j2 = Var("i2"), Var("j2")
    body = Allocate(T, seq(
        For(i, const(0), const(4), ForKind.SERIAL, For(j, const(0), const(5), ForKind.SERIAL,
            Store(T, A.load(i, j) * 3.0, (i, j)))),
        For(i2, const(0), const(4), ForKind.SERIAL, For(j2, const(0), const(5), ForKind.SERIAL,
            Store(B, T.load(i2, j2), (i2, j2))))))
    f = PrimFunc("padded", (A, B), body)
    out = flatten_buffers(f)
    assert out.body.buffer.shape[0].value == 32  # 4 rows of 8, padding included
    first_store = out.body.body.stmts[0].body.body
    assert structural_equal(first_store.indices[0], i * 8 + j)
    verify(out)
    interp.assert_same_results(f, out)


def test_flatten_vector_index_becomes_ramp():
    A, B = buffer("A", (4, 8)), buffer("B", (4, 8))
    i = Var("i")
    ramp = Ramp(const(0), const(1), 8)
    f = PrimFunc("v", (A, B), For(i, const(0), const(4), ForKind.SERIAL,
                 Store(B, A.load(i, ramp), (i, ramp))))
    out = flatten_buffers(f)
    index = out.body.body.indices[0]
    assert structural_equal(index, Ramp(i * 8, const(1), 8))
    verify(out)
    interp.assert_same_results(f, out)


def test_flatten_three_dims_numbers():
    A, B = buffer("A", (2, 3, 4)), buffer("B", (4, 3, 2))
    i, j, k = Var("i"), Var("j"), Var("k")
    f = PrimFunc("t", (A, B), For(i, const(0), const(2), ForKind.SERIAL,
                 For(j, const(0), const(3), ForKind.SERIAL, For(k, const(0), const(4),
                     ForKind.SERIAL, Store(B, A.load(i, j, k), (k, j, i))))))
    out = flatten_buffers(f)
    a = np.arange(24, dtype="float32").reshape(2, 3, 4)
    b = np.zeros((4, 3, 2), "float32")
    interp.run(out, a, b)
    np.testing.assert_array_equal(b, a.transpose(2, 1, 0))
