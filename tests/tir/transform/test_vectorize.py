"""vectorize_loops: vector code where sound, serial fallback otherwise; numbers unchanged."""

from ember import dtype as dt
from ember.tir import (
    Allocate, Broadcast, Call, For, ForKind, IfThenElse, Load, LetStmt, PrimFunc, Ramp,
    Select, Store, Var, Visitor, buffer, const, seq, structural_equal,
)
from ember.tir.transform.flatten import flatten_buffers
from ember.tir.transform.vectorize import vectorize_loops
from ember.tir.verify import verify
from tests.tir import interp


def _kinds(stmt):
    kinds = []

    class _Loops(Visitor):
        def visit_For(self, loop):
            kinds.append(loop.kind)
            self.generic_visit(loop)

    _Loops().visit(stmt)
    return kinds


def _check(f, **tol):
    out = vectorize_loops(f)
    verify(out)
    assert ForKind.VECTORIZED not in _kinds(out.body)
    interp.assert_same_results(f, out, **tol)
    return out


def test_elementwise_matches_expected():
    A, B = buffer("A", (64,)), buffer("B", (64,))
    io, ii = Var("io"), Var("ii")
    f = PrimFunc("scale", (A, B), For(io, const(0), const(8), ForKind.SERIAL,
                 For(ii, const(0), const(8), ForKind.VECTORIZED,
                     Store(B, A.load(io * 8 + ii) * 2.0, (io * 8 + ii,)))))
    out = _check(f)
    ramp = Ramp(io * 8, const(1), 8)
    expected = PrimFunc("scale", (A, B), For(io, const(0), const(8), ForKind.SERIAL,
                        Store(B, Load(A, (ramp,)) * Broadcast(const(2.0), 8), (ramp,))))
    assert structural_equal(out, expected)


def test_strided_index_and_cast_and_call():
    A, B = buffer("A", (16, 4), "int32"), buffer("B", (4, 16))
    i, j = Var("i"), Var("j")
    value = Call(dt.float32, "sqrt", (A.load(j, i).astype("float32"),))
    f = flatten_buffers(PrimFunc("t", (A, B), For(i, const(0), const(4), ForKind.SERIAL,
                        For(j, const(0), const(16), ForKind.VECTORIZED,
                            Store(B, value, (i, j))))))
    out = _check(f)
    load = out.body.body.value.args[0].value
    assert structural_equal(load.indices[0], Ramp(i, const(4), 16))  # a gather, stride 4


def test_reduction_into_one_location_falls_back_to_serial():
    A, C = buffer("A", (4, 8)), buffer("C", (4,))
    i, k = Var("i"), Var("k")
    f = PrimFunc("rowsum", (A, C), For(i, const(0), const(4), ForKind.SERIAL,
                 For(k, const(0), const(8), ForKind.VECTORIZED,
                     Store(C, C.load(i) + A.load(i, k), (i,)))))
    out = _check(f)
    assert _kinds(out.body) == [ForKind.SERIAL, ForKind.SERIAL]


def test_inner_serial_reduction_loop_keeps_vector_body():
    A, C = buffer("A", (8, 16)), buffer("C", (16,))
    j, k = Var("j"), Var("k")
    body = For(j, const(0), const(16), ForKind.VECTORIZED, seq(
        Store(C, const(0.0), (j,)),
        For(k, const(0), const(8), ForKind.SERIAL, Store(C, C.load(j) + A.load(k, j), (j,)))))
    f = flatten_buffers(PrimFunc("colsum", (A, C), body))
    out = _check(f, rtol=1e-5)
    assert _kinds(out.body) == [ForKind.SERIAL]
    inner = out.body.stmts[1].body
    assert inner.value.dtype.lanes == 16


def test_lane_dependent_guard_becomes_predicate():
    A, B = buffer("A", (10,)), buffer("B", (10,))
    io, ii = Var("io"), Var("ii")
    idx = io * 4 + ii
    f = PrimFunc("tail", (A, B), For(io, const(0), const(3), ForKind.SERIAL,
                 For(ii, const(0), const(4), ForKind.VECTORIZED,
                     IfThenElse(idx < 10, Store(B, A.load(idx) + 1.0, (idx,))))))
    out = _check(f)  # the interpreter raises on out-of-bounds lanes
    store = out.body.body
    assert isinstance(store, Store) and store.predicate is not None
    assert store.value.a.predicate is not None


def test_if_else_with_lane_condition_and_invariant_condition():
    A, B = buffer("A", (32,)), buffer("B", (32,))
    i, n = Var("i"), Var("n")
    body = For(i, const(0), const(32), ForKind.VECTORIZED, IfThenElse(
        i % 2 == 0, Store(B, A.load(i), (i,)), IfThenElse(
            n > 3, Store(B, A.load(i) * 2.0, (i,)), Store(B, const(0.0), (i,)))))
    f = PrimFunc("parity", (A, B, n), body)
    out = vectorize_loops(f)
    verify(out)
    import numpy as np
    for nval in (1, 5):
        a = np.random.default_rng(1).standard_normal(32).astype("float32")
        b1, b2 = np.zeros(32, "float32"), np.zeros(32, "float32")
        interp.run(f, a, b1, nval)
        interp.run(out, a, b2, nval)
        np.testing.assert_array_equal(b1, b2)


def test_floordiv_of_aligned_ramp_becomes_broadcast():
    A, B = buffer("A", (4,)), buffer("B", (64,))
    io, ii = Var("io"), Var("ii")
    idx = io * 16 + ii
    f = PrimFunc("bcast", (A, B), For(io, const(0), const(4), ForKind.SERIAL,
                 For(ii, const(0), const(16), ForKind.VECTORIZED,
                     Store(B, A.load(idx // 16), (idx,)))))
    out = _check(f)
    load = out.body.body.value
    assert isinstance(load.indices[0], Broadcast)


def test_let_becomes_vector_let():
    A, B = buffer("A", (16,)), buffer("B", (16,))
    i, x = Var("i"), Var("x", "float32")
    f = PrimFunc("let", (A, B), For(i, const(0), const(16), ForKind.VECTORIZED,
                 LetStmt(x, A.load(i), Store(B, Select(x > 0.0, x, x * 0.1), (i,)))))
    out = _check(f)
    assert out.body.var.dtype == dt.float32.with_lanes(16)


def test_loop_carried_dependence_falls_back():
    A = buffer("A", (17,))
    i = Var("i")
    f = PrimFunc("shift", (A,), For(i, const(0), const(16), ForKind.VECTORIZED,
                 Store(A, A.load(i) + 1.0, (i + 1,))))
    out = _check(f)
    assert _kinds(out.body) == [ForKind.SERIAL]


def test_allocation_inside_falls_back():
    A, B = buffer("A", (8,)), buffer("B", (8,))
    T = buffer("T", (1,), scope="local")
    i = Var("i")
    f = PrimFunc("alloc", (A, B), For(i, const(0), const(8), ForKind.VECTORIZED,
                 Allocate(T, seq(Store(T, A.load(i), (const(0),)),
                                 Store(B, T.load(const(0)) * 3.0, (i,))))))
    out = _check(f)
    assert _kinds(out.body) == [ForKind.SERIAL]


def test_nested_vectorized_loops_inner_wins():
    A, B = buffer("A", (4, 8)), buffer("B", (4, 8))
    i, j = Var("i"), Var("j")
    f = flatten_buffers(PrimFunc("nest", (A, B), For(i, const(0), const(4), ForKind.VECTORIZED,
                        For(j, const(0), const(8), ForKind.VECTORIZED,
                            Store(B, A.load(i, j) - 1.0, (i, j))))))
    out = _check(f)
    assert _kinds(out.body) == [ForKind.SERIAL]


def test_extent_one_vectorized_loop_is_substituted():
    A = buffer("A", (4,))
    i = Var("i")
    f = PrimFunc("one", (A,), For(i, const(2), const(1), ForKind.VECTORIZED,
                 Store(A, A.load(i) * 2.0, (i,))))
    out = _check(f)
    assert structural_equal(out.body, Store(A, A.load(const(2)) * 2.0, (const(2),)))
