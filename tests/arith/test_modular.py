"""Modular analysis: every value of an expression lies in its modular set."""

from hypothesis import given, settings

from ember.arith import Interval, ModularSet, modular_set
from ember.testing_arith import evaluate, int_exprs, ranges_and_env, vector_exprs
from ember.tir import FloorDiv, FloorMod, IntImm, Max, Ramp, Select, Var, const


@settings(max_examples=200, deadline=None)
@given(int_exprs(), ranges_and_env())
def test_values_lie_in_the_modular_set(e, ranges_env):
    ranges, env = ranges_env
    m = modular_set(e, ranges)
    assert m.contains(evaluate(e, env)), (str(e), m, env)


@settings(max_examples=150, deadline=None)
@given(vector_exprs(), ranges_and_env())
def test_every_lane_lies_in_the_modular_set(e, ranges_env):
    ranges, env = ranges_env
    m = modular_set(e, ranges)
    assert all(m.contains(v) for v in evaluate(e, env))


def test_known_sets():
    i, j = Var("i"), Var("j")
    assert modular_set(i * 8 + 4) == ModularSet(8, 4)
    assert modular_set(i * 8 - 3) == ModularSet(8, 5)
    assert modular_set(i * 8 + j * 12) == ModularSet(4, 0)
    assert modular_set(IntImm(7)) == ModularSet(0, 7)
    assert modular_set(FloorDiv(i * 16 + 4, IntImm(4))) == ModularSet(4, 1)
    assert modular_set(FloorMod(i * 6 + 1, IntImm(4))) == ModularSet(2, 1)
    assert modular_set(Max(i * 8, j * 8 + 4)) == ModularSet(4, 0)
    assert modular_set(Select(i < j, i * 6, IntImm(3))) == ModularSet(3, 0)
    assert modular_set(Ramp(i * 16, const(4), 4)) == ModularSet(4, 0)
    assert modular_set(i * 4 + j, {j: Interval.point(2)}) == ModularSet(4, 2)
    assert modular_set(i) == ModularSet(1, 0)
    assert ModularSet(8, 12).base == 4
