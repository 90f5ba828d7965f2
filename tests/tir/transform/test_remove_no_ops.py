"""remove_no_ops: empty loops, constant ifs, dead lets, self-copies disappear."""

from ember.tir import (
    Allocate, Evaluate, For, ForKind, IfThenElse, LetStmt, Not, PrimFunc, Seq, Store, Var,
    buffer, const, seq, structural_equal,
)
from ember.tir.transform.remove_no_ops import remove_no_ops
from tests.tir import interp


def test_removes_dead_statements_and_keeps_live_ones():
    A = buffer("A", (8,))
    T = buffer("T", (8,), scope="local")
    i, j, x = Var("i"), Var("j"), Var("x")
    live = Store(A, A.load(i) + 1.0, (i,))
    body = seq(
        For(i, const(0), const(8), ForKind.SERIAL, IfThenElse(const(False), live)),
        Evaluate(const(0)),
        For(j, const(0), const(0), ForKind.SERIAL, Store(A, const(1.0), (j,))),
        Allocate(T, LetStmt(x, const(3), For(i, const(0), const(8), ForKind.SERIAL,
                                             IfThenElse(const(True), live)))),
        For(j, const(0), const(8), ForKind.SERIAL, Store(A, A.load(j), (j,))),
        Seq(()))
    f = PrimFunc("f", (A,), body)
    out = remove_no_ops(f)
    expected = PrimFunc("f", (A,), For(i, const(0), const(8), ForKind.SERIAL, live))
    assert structural_equal(out, expected), out
    interp.assert_same_results(f, out)


def test_extent_one_loop_and_empty_then_branch():
    A = buffer("A", (8,))
    i, n = Var("i"), Var("n")
    f = PrimFunc("g", (A, n), For(i, const(3), const(1), ForKind.SERIAL, IfThenElse(
        n > 2, Seq(()), Store(A, const(5.0), (i,)))))
    out = remove_no_ops(f)
    expected = PrimFunc("g", (A, n), IfThenElse(Not(n > 2), Store(A, const(5.0), (const(3),))))
    assert structural_equal(out, expected), out


def test_everything_dead_gives_evaluate_zero():
    A = buffer("A", (8,))
    i = Var("i")
    f = PrimFunc("h", (A,), For(i, const(0), const(8), ForKind.SERIAL, Evaluate(const(1))))
    out = remove_no_ops(f)
    assert structural_equal(out.body, Evaluate(const(0)))
    assert remove_no_ops(out) is out
