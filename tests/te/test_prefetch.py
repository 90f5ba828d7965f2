"""Stage.prefetch: cache hints for what a later iteration of an outer loop reads; the numbers
stay the same on every back end, the hints go where the schedule says, bad use is refused."""

import numpy as np
import pytest

import ember
from ember import te
from ember.errors import LoweringError, ScheduleError
from ember.ops.budgets import prefetches
from ember.target import Target

RNG = np.random.default_rng(0)
M, K, N, NR, ROWS = 24, 40, 96, 32, 4


def _panel_product(hint: bool = True, offset: int = 1):
    """C = A @ B with B in [N / NR, K, NR] panels: (schedule, args, k axis, panel axis)."""
    A = te.placeholder((M, K), name="A")
    P = te.placeholder((N // NR, K, NR), name="P")
    k = te.reduce_axis((0, K), name="k")
    mm = te.compute((M, N), lambda i, j: te.sum(A[i, k] * P[j // NR, k, j % NR], axis=k),
                    name="mm")
    out = te.compute((M, N), lambda i, j: mm[i, j] * 2.0, name="out")
    s = te.create_schedule(out.op)
    i, j = out.op.axis
    jo, ji = s[out].split(j, NR)
    io, ii = s[out].split(i, ROWS)
    s[out].reorder(jo, io, ii, ji)
    s[out].vectorize(ji)
    s[mm].compute_at(s[out], io)
    mi, mj = mm.op.axis
    s[mm].reorder(k, mi, mj)
    s[mm].unroll(mi)
    s[mm].vectorize(mj)
    if hint:
        s[mm].prefetch(k, jo, offset)
    return s, [A, P, out], k, jo, mm


def _arrays():
    a = RNG.standard_normal((M, K)).astype("float32")
    b = RNG.standard_normal((K, N)).astype("float32")
    panels = np.ascontiguousarray(b.reshape(K, N // NR, NR).transpose(1, 0, 2))
    return a, b, panels


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("offset", [1, 2, 7])
def test_hints_leave_the_numbers_alone(target, offset):
    a, b, panels = _arrays()
    s, args, *_ = _panel_product(offset=offset)
    out = np.zeros((M, N), "float32")
    ember.build(s, args, target=target)(a, panels, out)
    np.testing.assert_allclose(out, 2 * (a @ b), rtol=1e-4, atol=1e-4)


def test_one_hint_per_cache_line_of_the_next_panel():
    s, args, *_ = _panel_product()
    text = str(ember.lower(s, args))
    hints = [line.strip() for line in text.splitlines() if "prefetch(" in line]
    # 32 floats of the panel row a k step reads span two 64-byte lines; the rows (unrolled)
    # do not move the address, so two hints, clamped to the last panel
    assert len(hints) == 2, text
    assert all("min(" in h and "+ 1" in h for h in hints), hints
    loop_k = text.index("for k in")
    assert loop_k < text.index("prefetch(") < text.index("for i in", loop_k)


def test_no_hints_without_prefetch_and_none_for_reads_that_stay():
    s, args, *_ = _panel_product(hint=False)
    assert "prefetch(" not in str(ember.lower(s, args))
    # looking ahead on the row loop: B does not move with it, A does
    s, args, k, _, mm = _panel_product(hint=False)
    io = s[args[2]].leaf_iter_vars[1]
    s[mm].prefetch(k, io)
    hinted = [line for line in str(ember.lower(s, args)).splitlines() if "prefetch(" in line]
    assert hinted and all("A[" in line for line in hinted), hinted


def test_hints_reach_the_machine_code():
    s, args, *_ = _panel_product()
    f = ember.build(s, args, target="llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3")
    assert "prefetcht1" in f.get_source("asm")


def test_bad_prefetch_is_refused():
    s, args, k, jo, mm = _panel_product(hint=False)
    with pytest.raises(ScheduleError, match="offset"):
        s[mm].prefetch(k, jo, 0)
    with pytest.raises(ScheduleError, match="axis"):
        s[mm].prefetch(k, "jo")
    with pytest.raises(ScheduleError, match="prefetch"):
        s[mm].prefetch(jo, jo)          # `at` must be a loop of this stage
    other = te.reduce_axis((0, 3), name="elsewhere")
    s[mm].prefetch(k, other)            # not a loop around `at`: found when lowering
    with pytest.raises(LoweringError, match="elsewhere"):
        ember.lower(s, args)


def test_which_targets_get_hints():
    assert prefetches(Target("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"))
    assert prefetches(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"))
    assert not prefetches(Target("c"))
