"""verify: well-formed programs pass; each kind of fault is reported with the IR around it."""

import pytest

from ember import dtype as dt
from ember.errors import VerifyError
from ember.tir import (
    Add, Allocate, Broadcast, Call, CommReducer, For, ForKind, IfThenElse, IterVar, Load,
    LetStmt, PrimFunc, Ramp, Range, Reduce, Store, Var, buffer, const, seq,
)
from ember.tir.verify import verify


def _loop(body, var=None):
    var = Var("i") if var is None else var
    return For(var, const(0), const(8), ForKind.SERIAL, body)


def test_well_formed_program_passes():
    A, B = buffer("A", (8, 8)), buffer("B", (8, 8))
    T = buffer("T", (8,), scope="local")
    i, j, x, n = Var("i"), Var("j"), Var("x", "float32"), Var("n")
    body = Allocate(T, seq(
        For(i, const(0), n, ForKind.SERIAL, For(j, const(0), const(8), ForKind.SERIAL,
            LetStmt(x, A.load(i, j), IfThenElse(x > 0.0, Store(B, x, (i, j)))))),
        Store(T, Load(A, (const(0), Ramp(const(0), const(1), 8))), (Ramp(const(0), const(1), 8),))))
    verify(PrimFunc("ok", (A, B, n), body))


def test_undefined_variable_names_it_and_prints_statement():
    A = buffer("A", (8,))
    i, k = Var("i"), Var("k")
    f = PrimFunc("f", (A,), _loop(Store(A, const(1.0), (k,)), i))
    with pytest.raises(VerifyError, match=r"(?s)variable 'k' is used but not defined.*"
                                          r"inside for i.*A\[k\] = 1.0"):
        verify(f)


def test_undefined_buffer():
    A, B = buffer("A", (8,)), buffer("B", (8,))
    i = Var("i")
    with pytest.raises(VerifyError, match="buffer 'B' is used but neither"):
        verify(PrimFunc("f", (A,), _loop(Store(A, B.load(i), (i,)), i)))


def test_loop_variable_used_outside_its_loop():
    A = buffer("A", (8,))
    i = Var("i")
    body = seq(_loop(Store(A, const(1.0), (i,)), i), Store(A, const(2.0), (i,)))
    with pytest.raises(VerifyError, match="variable 'i'"):
        verify(PrimFunc("f", (A,), body))


def test_index_count_mismatch():
    A = buffer("A", (8, 8))
    i = Var("i")
    with pytest.raises(VerifyError, match="1 indices, the buffer has 2 dimensions"):
        verify(PrimFunc("f", (A,), _loop(Store(A, const(1.0), (i,)), i)))


def test_binary_operand_dtype_mismatch():
    A = buffer("A", (8,))
    i, x = Var("i"), Var("x", "int64")
    bad = object.__new__(Add)
    object.__setattr__(bad, "a", i)
    object.__setattr__(bad, "b", x)
    with pytest.raises(VerifyError, match="operands of Add differ in dtype: int32 vs int64"):
        verify(PrimFunc("f", (A, x), _loop(Store(A, const(1.0), (bad,)), i)))


def test_store_lanes_and_dtype_mismatch():
    A = buffer("A", (16,))
    ramp = Ramp(const(0), const(1), 8)
    with pytest.raises(VerifyError, match="value has 1 lanes but the index has 8"):
        verify(PrimFunc("f", (A,), Store(A, const(1.0), (ramp,))))
    with pytest.raises(VerifyError, match="value is int32x8, buffer holds float32"):
        verify(PrimFunc("f", (A,), Store(A, Broadcast(const(1), 8), (ramp,))))


def test_float_loop_extent_rejected():
    A = buffer("A", (8,))
    i = Var("i")
    f = PrimFunc("f", (A,), For(i, const(0), const(8.0), ForKind.SERIAL,
                                Store(A, const(1.0), (i,))))
    with pytest.raises(VerifyError, match="extent must be a scalar integer, got float32"):
        verify(f)


def test_reduce_left_over_rejected():
    A, B = buffer("A", (8,)), buffer("B", (1,))
    k = IterVar(Var("k"), Range.from_extent(8))
    x, y = Var("x", "float32"), Var("y", "float32")
    comb = CommReducer((x,), (y,), (x + y,), (const(0.0),))
    red = Reduce(comb, (A.load(k.var),), (k,), const(True))
    with pytest.raises(VerifyError, match="Reduce node is left"):
        verify(PrimFunc("f", (A, B), Store(B, red, (const(0),))))


def test_call_argument_dtype_and_predicate_lanes():
    A = buffer("A", (8,))
    i = Var("i")
    bad_call = Call(dt.float32, "exp", (Load(A, (i,)).astype("float64"),))
    with pytest.raises(VerifyError, match="exp: argument is float64, the call is float32"):
        verify(PrimFunc("f", (A,), _loop(Store(A, bad_call, (i,)), i)))
    ramp = Ramp(const(0), const(1), 8)
    with pytest.raises(VerifyError, match="predicate of the access to 'A' is bool, expected"):
        verify(PrimFunc("f", (A,), Store(A, Load(A, (ramp,)), (ramp,), const(True))))


def test_long_statements_are_truncated():
    A = buffer("A", (8,))
    i, k = Var("i"), Var("k")
    stmts = [Store(A, const(float(n)), (const(n % 8),)) for n in range(40)]
    body = For(i, const(0), k, ForKind.SERIAL, seq(*stmts))  # fault in the loop header
    with pytest.raises(VerifyError) as info:
        verify(PrimFunc("f", (A,), body))
    assert "..." in str(info.value) and len(str(info.value).splitlines()) < 30
