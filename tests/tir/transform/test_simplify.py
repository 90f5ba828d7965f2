"""The simplify pass on whole functions: before/expected, and the same stores when run."""

import numpy as np

from ember.testing_arith import run_stmt
from ember.tir import (
    FloorDiv, FloorMod, For, ForKind, IfThenElse, IntImm, PrimFunc, Store, Var, buffer,
    structural_equal,
)
from ember.tir.transform.simplify import simplify


def _for(var, extent, body, kind=ForKind.SERIAL):
    return For(var, IntImm(0), IntImm(extent), kind, body)


def _split_copy(guard_extent):
    """B[i] = A[i] over a loop split by 32, with the guard a non-divisible split leaves."""
    A, B = buffer("A", (128,), "int32"), buffer("B", (128,), "int32")
    io, ii = Var("io"), Var("ii")
    index = FloorDiv(io * 32 + ii, IntImm(32)) * 32 + FloorMod(ii + io * 32, IntImm(32))
    store = Store(B, A.load(index), (index,))
    body = IfThenElse(io * 32 + ii < guard_extent, store)
    func = PrimFunc("copy", (A, B), _for(io, 4, _for(ii, 32, body), ForKind.PARALLEL))
    return func, A, B, io, ii


def test_split_copy_before_after():
    before, A, B, io, ii = _split_copy(128)
    expected = PrimFunc("copy", (A, B), _for(io, 4, _for(
        ii, 32, Store(B, A.load(io * 32 + ii), (io * 32 + ii,))), ForKind.PARALLEL))
    after = simplify(before)
    assert structural_equal(after, expected), str(after)
    assert str(after) == str(expected)


def _run(func):
    rng = np.random.default_rng(0)
    memory = {func.params[0]: dict(enumerate(rng.integers(-100, 100, 128).tolist()))}
    run_stmt(func.body, {}, memory)
    return memory.get(func.params[1], {})


def test_same_stores_when_run():
    for extent in (100, 128, 200):
        before = _split_copy(extent)[0]
        after = simplify(before)
        assert _run(after) == _run(before)
    assert "if" in str(simplify(_split_copy(100)[0]))


def test_unchanged_function_is_returned_as_is():
    before = simplify(_split_copy(128)[0])
    assert simplify(before) is before
