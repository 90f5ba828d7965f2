"""unroll_loops: copies of the body with the variable substituted."""

from ember.tir import (
    For, ForKind, PrimFunc, Store, Var, buffer, const, seq, structural_equal,
)
from ember.tir.transform.unroll import unroll_loops
from ember.tir.verify import verify
from tests.tir import interp


def test_unroll_constant_loop():
    A, B = buffer("A", (8, 3)), buffer("B", (8, 3))
    i, j = Var("i"), Var("j")
    f = PrimFunc("u", (A, B), For(i, const(0), const(8), ForKind.SERIAL,
                 For(j, const(0), const(3), ForKind.UNROLLED,
                     Store(B, A.load(i, j) * 2.0, (i, j)))))
    out = unroll_loops(f)
    expected = PrimFunc("u", (A, B), For(i, const(0), const(8), ForKind.SERIAL, seq(
        *[Store(B, A.load(i, const(k)) * 2.0, (i, const(k))) for k in range(3)])))
    assert structural_equal(out, expected)
    verify(out)
    interp.assert_same_results(f, out)


def test_unroll_nonzero_begin_and_nested():
    A = buffer("A", (6, 6))
    i, j = Var("i"), Var("j")
    f = PrimFunc("n", (A,), For(i, const(2), const(2), ForKind.UNROLLED,
                 For(j, const(1), const(3), ForKind.UNROLLED, Store(A, A.load(i, j) + 1.0,
                                                                    (i, j)))))
    out = unroll_loops(f)
    assert len(out.body.stmts) == 6
    assert structural_equal(out.body.stmts[0].indices, (const(2), const(1)))
    interp.assert_same_results(f, out)


def test_unroll_too_long_or_symbolic_becomes_serial():
    A = buffer("A", (100,))
    i = Var("i")
    f = PrimFunc("l", (A,), For(i, const(0), const(100), ForKind.UNROLLED,
                 Store(A, A.load(i) + 1.0, (i,))))
    out = unroll_loops(f, max_extent=64)
    assert out.body.kind == ForKind.SERIAL
    n = Var("n")
    g = PrimFunc("s", (A, n), For(i, const(0), n, ForKind.UNROLLED,
                 Store(A, A.load(i) + 1.0, (i,))))
    assert unroll_loops(g).body.kind == ForKind.SERIAL
