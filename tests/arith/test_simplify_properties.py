"""Property tests: simplify never changes the value of random integer expressions."""


from hypothesis import given, settings
from hypothesis import strategies as st

from ember.arith import Interval, simplify
from ember.testing_arith import (
    VARS, bool_exprs, envs, evaluate, int_exprs, ranges_and_env, vector_exprs,
)
from ember.tir import Add, FloorDiv, FloorMod, IntImm, Mul, Var


@settings(max_examples=400, deadline=None)
@given(int_exprs(), envs())
def test_int_exprs_keep_their_value(e, env):
    assert evaluate(simplify(e), env) == evaluate(e, env), (str(e), str(simplify(e)))


@settings(max_examples=300, deadline=None)
@given(bool_exprs(), envs())
def test_bool_exprs_keep_their_value(e, env):
    assert evaluate(simplify(e), env) == evaluate(e, env), (str(e), str(simplify(e)))


@settings(max_examples=300, deadline=None)
@given(int_exprs(), ranges_and_env())
def test_int_exprs_keep_their_value_under_ranges(e, ranges_env):
    ranges, env = ranges_env
    out = simplify(e, ranges)
    assert evaluate(out, env) == evaluate(e, env), (str(e), str(out), ranges)


@settings(max_examples=300, deadline=None)
@given(bool_exprs(), ranges_and_env())
def test_bool_exprs_keep_their_value_under_ranges(e, ranges_env):
    ranges, env = ranges_env
    out = simplify(e, ranges)
    assert evaluate(out, env) == evaluate(e, env), (str(e), str(out), ranges)


@settings(max_examples=300, deadline=None)
@given(vector_exprs(), ranges_and_env())
def test_vector_exprs_keep_their_value(e, ranges_env):
    ranges, env = ranges_env
    out = simplify(e, ranges)
    assert out.dtype == e.dtype
    assert evaluate(out, env) == evaluate(e, env), (str(e), str(out), ranges)


@settings(max_examples=100, deadline=None)
@given(int_exprs())
def test_simplify_is_idempotent_in_value_and_type(e):
    once = simplify(e)
    twice = simplify(once)
    assert once.dtype == e.dtype == twice.dtype
    assert str(twice) == str(simplify(twice))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(VARS), min_size=1, max_size=4), envs())
def test_sums_of_multiples_cancel(vs, env):
    # sum(v_k * 2^k) - sum(v_k * 2^k), shuffled, always cancels to 0
    total = IntImm(0)
    for k, v in enumerate(vs):
        total = Add(total, Mul(v, IntImm(1 << k)))
    for k, v in reversed(list(enumerate(vs))):
        total = total - v * (1 << k)
    out = simplify(total)
    assert isinstance(out, IntImm) and out.value == 0


def _index_expr(depth):
    """A 50-ish node index expression like the ones lowering produces."""
    i, j, k = Var("i"), Var("j"), Var("k")
    e = i * 64 + j * 8 + k
    for d in range(depth):
        e = FloorDiv(e, IntImm(2)) * 2 + FloorMod(e, IntImm(2)) + (i * (d + 1) - i * (d + 1))
    return e, {i: Interval.from_range(0, 4), j: Interval.from_range(0, 8),
               k: Interval.from_range(0, 8)}


def _count_visits(monkeypatch) -> list[int]:
    """Count the simplifier's node visits that miss its memo (the work it does)."""
    from ember.arith import simplifier

    calls = [0]
    original = simplifier.Simplifier.visit

    def counting(self, e):
        if id(e) not in self._memo:
            calls[0] += 1
        return original(self, e)

    monkeypatch.setattr(simplifier.Simplifier, "visit", counting)
    return calls


def test_simplifier_work_is_linear_on_index_expressions(monkeypatch):
    e, ranges = _index_expr(4)
    calls = _count_visits(monkeypatch)
    out = simplify(e, ranges)
    assert str(out) == "i * 64 + j * 8 + k"
    small = calls[0]
    calls[0] = 0
    simplify(_index_expr(8)[0], ranges)
    assert calls[0] <= 4 * small, (small, calls[0])  # twice the depth: about twice the work


def test_deep_expressions_do_not_blow_up(monkeypatch):
    x = Var("x")
    e = x
    for n in range(200):  # shared subtrees: 2^200 paths, 200 distinct nodes
        e = Add(e, e) if n % 2 else FloorMod(Add(e, IntImm(1)), IntImm(7))
    calls = _count_visits(monkeypatch)
    simplify(e)
    assert calls[0] < 200 * 50, calls[0]
