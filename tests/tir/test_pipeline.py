"""run_passes: every opt level keeps the numbers and yields what code generators expect."""

import numpy as np
import pytest

from ember import dtype as dt
from ember.errors import EmberError, VerifyError
from ember.tir import (
    Allocate, Call, For, ForKind, IfThenElse, PrimFunc, Store, Var, Visitor, buffer, const, seq,
)
from ember.tir.pipeline import PASSES, PassError, run_passes
from ember.tir.transform.vectorize import vectorize_loops
from tests.tir import interp


def _matmul_tiled(n=13, m=10, k=7, tile=4):
    """C = A @ B with i, j tiled by `tile` (non-divisible: guards), vectorized ji, an unrolled
    ii, and a local accumulator."""
    A, B, C = buffer("A", (n, k)), buffer("B", (k, m)), buffer("C", (n, m))
    acc = buffer("acc", (tile, tile), scope="local")
    io, jo, ii, ji, r = Var("io"), Var("jo"), Var("ii"), Var("ji"), Var("r")
    ii2, ji2 = Var("ii2"), Var("ji2")
    i, j = io * tile + ii, jo * tile + ji
    i2, j2 = io * tile + ii2, jo * tile + ji2
    init = For(ii, const(0), const(tile), ForKind.UNROLLED,
               For(ji, const(0), const(tile), ForKind.VECTORIZED,
                   Store(acc, const(0.0), (ii, ji))))
    update = For(r, const(0), const(k), ForKind.SERIAL,
                 For(ii, const(0), const(tile), ForKind.UNROLLED,
                     For(ji, const(0), const(tile), ForKind.VECTORIZED,
                         IfThenElse((i < n) & (j < m), Store(
                             acc, acc.load(ii, ji) + A.load(i, r) * B.load(r, j), (ii, ji))))))
    write = For(ii2, const(0), const(tile), ForKind.SERIAL,
                For(ji2, const(0), const(tile), ForKind.VECTORIZED,
                    IfThenElse((i2 < n) & (j2 < m), Store(C, acc.load(ii2, ji2), (i2, j2)))))
    outer = For(io, const(0), const(-(-n // tile)), ForKind.PARALLEL,
                For(jo, const(0), const(-(-m // tile)), ForKind.SERIAL,
                    Allocate(acc, seq(init, update, write))))
    return PrimFunc("matmul", (A, B, C), outer)


def _softmax_like(n=37):
    A, B = buffer("A", (n,)), buffer("B", (n,))
    i = Var("i")
    e = Call(dt.float32, "exp", (A.load(i),))
    t = Call(dt.float32, "tanh", (A.load(i),))
    return PrimFunc("ew", (A, B), For(i, const(0), const(n), ForKind.VECTORIZED,
                                     Store(B, e * Call(dt.float32, "sigmoid", (t,)), (i,))))


def _post_conditions(func):
    class _Check(Visitor):
        def visit_For(self, loop):
            assert loop.kind != ForKind.VECTORIZED
            self.generic_visit(loop)

        def visit_Load(self, e):
            assert len(e.indices) == 1 and e.buffer.ndim == 1
            self.generic_visit(e)

        def visit_Store(self, s):
            assert len(s.indices) == 1 and s.buffer.ndim == 1
            self.generic_visit(s)

    _Check().visit(func.body)


@pytest.mark.parametrize("opt_level", sorted(PASSES))
@pytest.mark.parametrize("make", [_matmul_tiled, _softmax_like])
def test_levels_keep_numbers_and_contract(opt_level, make):
    f = make()
    out = run_passes(f, opt_level=opt_level, verify_each=True)
    _post_conditions(out)
    assert out.params == f.params
    interp.assert_same_results(f, out, rtol=3e-6, atol=1e-6)
    if make is _matmul_tiled:
        a, b = interp.random_args(f)[:2]
        c = np.zeros((13, 10), "float32")
        interp.run(out, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_partition_removes_guards_from_bulk_at_opt_level_3():
    out = run_passes(_matmul_tiled(n=16, m=10), opt_level=3, verify_each=True)
    # the io loop has no tail (16 % 4 == 0); each jo loop gets a guard-free main part
    guards = []

    class _Ifs(Visitor):
        def visit_IfThenElse(self, s):
            guards.append(s)

        def visit_Store(self, s):
            if s.predicate is not None:
                guards.append(s)
            self.generic_visit(s)

    _Ifs().visit(out.body)
    stmts = str(out)
    assert "jo in range(2)" in stmts, stmts
    # no if left; only the j-tail (jo == 2: 4 unrolled updates + 1 write) is predicated
    assert not any(isinstance(g, IfThenElse) for g in guards)
    assert len(guards) == 5, stmts
    interp.assert_same_results(_matmul_tiled(n=16, m=10), out, rtol=1e-5)


def test_failures_name_the_pass():
    def broken_pass(func):
        raise ValueError("boom")

    def ember_failure(func):
        raise EmberError("bad thing")

    f = _softmax_like()
    with pytest.raises(PassError, match="in pass broken_pass: ValueError: boom"):
        run_passes(f, passes=[vectorize_loops, broken_pass])
    with pytest.raises(EmberError, match="in pass ember_failure: bad thing"):
        run_passes(f, passes=[ember_failure])
    with pytest.raises(EmberError, match="opt_level must be one of"):
        run_passes(f, opt_level=7)


def _drop_loop(func):
    """A faulty pass: replaces the body by its loop's body, leaving the loop var unbound."""
    from dataclasses import replace
    return replace(func, body=func.body.body)


def test_verify_each_and_env_catch_a_faulty_pass(monkeypatch):
    f = _softmax_like()
    assert run_passes(f, passes=[_drop_loop]) is not None  # unchecked by default
    with pytest.raises(VerifyError, match="in pass _drop_loop: .*variable 'i'"):
        run_passes(f, passes=[_drop_loop], verify_each=True)
    monkeypatch.setenv("EMBER_VERIFY", "1")
    with pytest.raises(VerifyError, match="in pass _drop_loop"):
        run_passes(f, passes=[_drop_loop])


def test_print_after(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_PRINT_AFTER", "vectorize_loops")
    run_passes(_softmax_like(), opt_level=0)
    err = capsys.readouterr().err
    assert "# IR after vectorize_loops" in err and "ramp(0, 1, 37)" in err
    assert "# IR after flatten_buffers" not in err
    monkeypatch.setenv("EMBER_PRINT_AFTER", "all")
    run_passes(_softmax_like(), opt_level=0)
    assert capsys.readouterr().err.count("# IR after") == len(PASSES[0])


def test_interpreter_catches_out_of_bounds():
    A = buffer("A", (4,))
    i = Var("i")
    f = PrimFunc("oob", (A,), For(i, const(0), const(5), ForKind.SERIAL,
                                  Store(A, const(1.0), (i,))))
    with pytest.raises(interp.InterpError, match="out of bounds"):
        interp.run(f, np.zeros(4, "float32"))
