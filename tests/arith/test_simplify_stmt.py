"""simplify_stmt: loop ranges reach the expressions; constant branches and trivial loops go."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ember.arith import simplify_stmt
from ember.arith.statement import is_no_op
from ember.testing_arith import VARS, identical, int_exprs, run_stmt
from ember.tir import (
    Evaluate, FloorDiv, FloorMod, For, ForKind, IfThenElse, IntImm, LetStmt, Ramp, Seq, Store,
    Var, buffer, const,
)

SERIAL = ForKind.SERIAL


def _loop(var, extent, body, begin=0):
    return For(var, IntImm(begin), IntImm(extent), SERIAL, body)


def test_loop_ranges_simplify_indices():
    A = buffer("A", (128,), "int32")
    io, ii = Var("io"), Var("ii")
    index = FloorDiv(io * 32 + ii, IntImm(32)) * 32 + FloorMod(io * 32 + ii, IntImm(32))
    body = Store(A, IntImm(1), (index,))
    out = simplify_stmt(_loop(io, 4, _loop(ii, 32, body)))
    assert str(out.body.body.indices[0]) == "io * 32 + ii"


def test_guard_is_removed_when_proven():
    A = buffer("A", (128,), "int32")
    io, ii = Var("io"), Var("ii")
    guarded = IfThenElse(io * 32 + ii < 128, Store(A, IntImm(1), (io * 32 + ii,)))
    out = simplify_stmt(_loop(io, 4, _loop(ii, 32, guarded)))
    assert isinstance(out.body.body, Store)
    # not divisible: 100 elements in 4 x 32, the guard stays
    guarded = IfThenElse(io * 32 + ii < 100, Store(A, IntImm(1), (io * 32 + ii,)))
    out = simplify_stmt(_loop(io, 4, _loop(ii, 32, guarded)))
    assert isinstance(out.body.body, IfThenElse)


def test_false_branch_and_empty_loops_disappear():
    A = buffer("A", (8,), "int32")
    i = Var("i")
    store = Store(A, IntImm(1), (i,))
    assert is_no_op(simplify_stmt(_loop(i, 0, store)))
    assert is_no_op(simplify_stmt(_loop(i, 8, IfThenElse(i > 10, store))))
    kept = simplify_stmt(_loop(i, 8, IfThenElse(i > 10, store, Store(A, IntImm(2), (i,)))))
    assert isinstance(kept.body, Store) and kept.body.value.value == 2
    out = simplify_stmt(Seq((store, Evaluate(const(0)), _loop(i, 0, store))))
    assert out is not None and isinstance(out, Store)


def test_extent_one_loop_is_substituted():
    A = buffer("A", (8,), "int32")
    i, j = Var("i"), Var("j")
    out = simplify_stmt(_loop(j, 8, _loop(i, 1, Store(A, IntImm(1), (j + i * 4,)), begin=3)))
    assert isinstance(out.body, Store)
    assert identical(out.body.indices[0], j + 12)
    # a thread-bound loop of one trip still sets the launch shape: it stays
    bound = For(i, IntImm(0), IntImm(1), ForKind.THREAD_BINDING, Store(A, IntImm(1), (i,)),
                thread_tag="threadIdx.x")
    assert isinstance(simplify_stmt(bound), For)


def test_condition_narrows_the_variable_in_the_branch():
    A = buffer("A", (64,), "int32")
    i = Var("i")
    inner = IfThenElse(i < 10, Store(A, IntImm(1), (i,)),
                       IfThenElse(i < 5, Store(A, IntImm(2), (i,))))
    out = simplify_stmt(_loop(i, 64, IfThenElse(i < 20, inner)))
    # i < 10 cannot be decided, but in its else branch i >= 10 makes i < 5 false
    assert isinstance(out.body, IfThenElse) and isinstance(out.body.then_case, IfThenElse)
    assert out.body.then_case.else_case is None


def test_let_stmt_binds_a_range():
    A = buffer("A", (64,), "int32")
    i, t = Var("i"), Var("t")
    body = LetStmt(t, FloorMod(i, IntImm(8)), IfThenElse(t < 8, Store(A, IntImm(1), (t,))))
    out = simplify_stmt(_loop(i, 64, body))
    assert isinstance(out.body, LetStmt) and isinstance(out.body.body, Store)


def test_vector_store_index():
    A = buffer("A", (64,), "int32")
    i = Var("i")
    index = Ramp(i * 8, const(1), 8) // 8 * 8 + Ramp(i * 8, const(1), 8) % 8
    out = simplify_stmt(_loop(i, 8, Store(A, IntImm(1), (index,))))
    assert str(out.body.indices[0]) == "ramp(i * 8, 1, 8)"


@settings(max_examples=60, deadline=None)
@given(int_exprs(depth=3), int_exprs(depth=3), st.integers(1, 6), st.integers(0, 5),
       st.integers(-3, 3))
def test_random_loop_nests_store_the_same_values(index, cond_expr, extent_x, extent_y, begin):
    x, y, z = VARS  # the variables int_exprs draws from
    A = buffer("A", (1,), "int32")
    index = FloorMod(index, IntImm(32))
    body = IfThenElse(cond_expr < 3, Store(A, cond_expr, (index,)),
                      Store(A, index, (FloorMod(cond_expr, IntImm(32)),)))
    nest = _loop(x, extent_x, _loop(y, extent_y, body, begin=begin))
    stmt = LetStmt(z, IntImm(2), nest)
    expected, actual = {}, {}
    run_stmt(stmt, {}, expected)
    run_stmt(simplify_stmt(stmt), {}, actual)
    assert expected == actual
