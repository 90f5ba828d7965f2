"""structural_equal / structural_hash: bound variables match by position, free ones by identity."""

import ember
from ember import te
from ember.tir import For, ForKind, Store, Var, buffer, const, structural_equal, structural_hash


def test_free_variables_compare_by_identity():
    i, j = Var("i"), Var("j")
    assert structural_equal(i + 1, i + 1)
    assert not structural_equal(i + 1, j + 1)
    assert structural_equal(i + 1, j + 1, map_free_vars=True)
    assert not structural_equal(i + 1, i + 2)


def test_bound_loop_variables_compare_by_position():
    A = buffer("A", (8,))

    def loop(name):
        v = Var(name)
        return For(v, const(0), const(8), ForKind.SERIAL, Store(A, A.load(v) * 2.0, (v,)))

    assert structural_equal(loop("i"), loop("k"))
    assert structural_hash(loop("i")) == structural_hash(loop("k"))
    other = Var("x")
    different = For(other, const(0), const(9), ForKind.SERIAL, Store(A, A.load(other), (other,)))
    assert not structural_equal(loop("i"), different)


def _lowered(n):
    X = te.placeholder((n,), name="X")
    Y = te.compute((n,), lambda i: X[i] + 1.0, name="Y")
    return ember.lower(te.create_schedule(Y.op), [X, Y])


def test_independently_lowered_kernels_hash_alike():
    assert structural_hash(_lowered(16)) == structural_hash(_lowered(16))
    assert structural_hash(_lowered(16)) != structural_hash(_lowered(17))
