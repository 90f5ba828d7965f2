"""partition_loops: guard-free main loops plus guarded tails; numbers unchanged."""

from ember.tir import (
    For, ForKind, IfThenElse, PrimFunc, Store, Var, Visitor, buffer, const, seq,
    structural_equal,
)
from ember.tir.transform.partition import decide, partition_loops
from ember.tir.transform.remove_no_ops import remove_no_ops
from ember.tir.verify import verify
from tests.tir import interp


def _ifs(stmt):
    found = []

    class _Find(Visitor):
        def visit_IfThenElse(self, s):
            found.append(s)
            self.generic_visit(s)

    _Find().visit(stmt)
    return found


def _tiled(n, factor, kind=ForKind.SERIAL):
    A, B = buffer("A", (n,)), buffer("B", (n,))
    io, ii = Var("io"), Var("ii")
    idx = io * factor + ii
    outer = -(-n // factor)
    f = PrimFunc("tile", (A, B), For(io, const(0), const(outer), kind,
                 For(ii, const(0), const(factor), ForKind.SERIAL,
                     IfThenElse(idx < n, Store(B, A.load(idx) + 1.0, (idx,))))))
    return f, A, B, io, ii


def test_outer_loop_split_into_main_and_tail():
    f, A, B, io, ii = _tiled(1000, 32)
    out = remove_no_ops(partition_loops(f))
    idx = io * 32 + ii
    tail_idx = const(31) * 32 + ii
    expected = PrimFunc("tile", (A, B), seq(
        For(io, const(0), const(31), ForKind.SERIAL,
            For(ii, const(0), const(32), ForKind.SERIAL, Store(B, A.load(idx) + 1.0, (idx,)))),
        For(ii, const(0), const(8), ForKind.SERIAL,
            Store(B, A.load(tail_idx) + 1.0, (tail_idx,)))))
    assert structural_equal(out, expected), out
    verify(out)
    interp.assert_same_results(f, out)


def test_parallel_loop_and_other_sizes_keep_numbers():
    for n, factor in ((100, 16), (64, 16), (7, 4), (3, 8)):
        f, *_ = _tiled(n, factor, ForKind.PARALLEL)
        out = remove_no_ops(partition_loops(f))
        verify(out)
        assert not _ifs(out.body), out
        interp.assert_same_results(f, out)


def test_lower_bound_guard_splits_prefix():
    # padding-style guard: i - 2 >= 0 and i - 2 < 10
    A, B = buffer("A", (10,)), buffer("B", (14,))
    i = Var("i")
    f = PrimFunc("pad", (A, B), For(i, const(0), const(14), ForKind.SERIAL, IfThenElse(
        (i - 2 >= 0) & (i - 2 < 10), Store(B, A.load(i - 2), (i,)), Store(B, const(0.0), (i,)))))
    out = remove_no_ops(partition_loops(f))
    verify(out)
    assert not _ifs(out.body)
    assert len(out.body.stmts) == 3
    interp.assert_same_results(f, out)


def test_unprovable_guard_is_left_alone():
    A, B = buffer("A", (16,)), buffer("B", (16,))
    i, n = Var("i"), Var("n")
    f = PrimFunc("dyn", (A, B, n), For(i, const(0), const(16), ForKind.SERIAL,
                 IfThenElse(i < n, Store(B, A.load(i), (i,)))))
    assert partition_loops(f) is f


def test_decide_uses_ranges():
    i, j = Var("i"), Var("j")
    assert decide(i * 4 + j < 16, {i: (0, 3), j: (0, 3)}) is True
    assert decide(i * 4 + j < 16, {i: (4, 5), j: (0, 3)}) is False
    assert decide(i * 4 + j < 16, {i: (3, 4), j: (0, 3)}) is None
    assert decide(i // 2 < 3, {i: (0, 5)}) is True
