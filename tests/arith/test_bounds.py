"""Interval analysis: bounds contain every value; known cases give tight symbolic bounds."""

from hypothesis import given, settings

from ember.arith import Interval, can_prove, const_bounds, eval_interval, simplify
from ember.arith.bounds import union
from ember.testing_arith import (
    bool_exprs, evaluate, identical, int_exprs, ranges_and_env, vector_exprs,
)
from ember.tir import Broadcast, FloorDiv, FloorMod, IntImm, Max, Min, Ramp, Var, const

R = Interval.from_range


def _lanes(v):
    return v if isinstance(v, list) else [v]


@settings(max_examples=200, deadline=None)
@given(int_exprs(), ranges_and_env())
def test_eval_interval_contains_every_value(e, ranges_env):
    ranges, env = ranges_env
    interval = eval_interval(e, ranges)
    value = evaluate(e, env)
    if interval.lo is not None:
        assert evaluate(interval.lo, env) <= value, (str(e), interval, env)
    if interval.hi is not None:
        assert value <= evaluate(interval.hi, env), (str(e), interval, env)


@settings(max_examples=200, deadline=None)
@given(int_exprs(), ranges_and_env())
def test_const_bounds_contain_every_value(e, ranges_env):
    ranges, env = ranges_env
    lo, hi = const_bounds(e, ranges)
    value = evaluate(e, env)
    assert lo is None or lo <= value
    assert hi is None or value <= hi


@settings(max_examples=150, deadline=None)
@given(vector_exprs(), ranges_and_env())
def test_vector_bounds_contain_every_lane(e, ranges_env):
    ranges, env = ranges_env
    interval = eval_interval(e, ranges)
    lo, hi = const_bounds(e, ranges)
    for value in _lanes(evaluate(e, env)):
        assert lo is None or lo <= value
        assert hi is None or value <= hi
        if interval.lo is not None:
            assert evaluate(interval.lo, env) <= value
        if interval.hi is not None:
            assert value <= evaluate(interval.hi, env)


@settings(max_examples=200, deadline=None)
@given(bool_exprs(), ranges_and_env())
def test_can_prove_only_what_holds(cond, ranges_env):
    ranges, env = ranges_env
    if can_prove(cond, ranges):
        assert evaluate(cond, env) == 1, str(cond)


def test_split_loop_bounds():
    io, ii = Var("io"), Var("ii")
    interval = eval_interval(io * 32 + ii, {ii: R(0, 32)})
    assert identical(interval.lo, io * 32) and identical(interval.hi, io * 32 + 31)
    interval = eval_interval(io * 32 + ii, {ii: R(0, 32), io: R(0, 4)})
    assert interval.lo.value == 0 and interval.hi.value == 127
    assert const_bounds(io * 32 + ii, {ii: R(0, 32), io: R(0, 4)}) == (0, 127)
    assert const_bounds(io * 32 + ii, {ii: R(0, 32)}) == (None, None)


def test_interval_helpers():
    i, n = Var("i"), Var("n")
    assert R(0, 32).hi.value == 31 and R(0, 32).lo.value == 0
    assert identical(R(n, 4).hi, n + 3)
    assert Interval.point(i).is_point() and not R(0, 2).is_point() and R(5, 1).is_point()
    u = union(Interval(IntImm(0), IntImm(3)), Interval(IntImm(2), IntImm(9)))
    assert (u.lo.value, u.hi.value) == (0, 9)
    assert union(Interval(None, IntImm(3)), R(0, 2)).lo is None
    assert "inf" in repr(Interval(None, None))


def test_symbolic_cases():
    i, j, n = Var("i"), Var("j"), Var("n")
    # a variable whose range mentions another ranged variable is bounded through it
    interval = eval_interval(j, {i: R(0, 4), j: Interval(IntImm(0), i)})
    assert (interval.lo.value, interval.hi.value) == (0, 3)
    interval = eval_interval(FloorDiv(i + n * 8, IntImm(8)), {i: R(0, 8)})
    assert identical(interval.lo, n) and identical(interval.hi, n)
    interval = eval_interval(Min(i, n), {i: R(0, 8)})
    assert identical(interval.lo, Min(n, IntImm(0))) and identical(interval.hi, Min(n, IntImm(7)))
    interval = eval_interval(Max(i, n), {i: R(0, 8)})
    assert identical(interval.lo, Max(n, IntImm(0)))
    assert const_bounds(FloorMod(i * 3 + n, IntImm(4)), {i: R(0, 8)}) == (0, 3)
    assert const_bounds(i * i, {i: R(-3, 5)}) == (-3, 9)  # [-3, 1]^2 by interval product
    interval = eval_interval(Ramp(i, const(2), 4), {i: R(0, 8)})
    assert (interval.lo.value, interval.hi.value) == (0, 13)
    interval = eval_interval(Broadcast(n, 4), {i: R(0, 8)})
    assert identical(interval.lo, n)


def test_can_prove():
    i, j = Var("i"), Var("j")
    assert can_prove(i < 64, {i: R(0, 32)})
    assert not can_prove(i < 31, {i: R(0, 32)})
    assert can_prove(i * 32 + j < 128, {i: R(0, 4), j: R(0, 32)})
    assert can_prove(i + 1 > i)
    assert not can_prove(i > 0)
    assert can_prove(j < i, {i: R(1, 10), j: Interval(IntImm(0), simplify(i - 1))})
