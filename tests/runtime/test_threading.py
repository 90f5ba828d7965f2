"""Thread pool for parallel loops: thread counts, EMBER_NUM_THREADS, launch overhead."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp loads; idle threads sleep

import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ember.errors import EmberError  # noqa: E402
from ember.runtime import threadpool  # noqa: E402


def test_set_num_threads_round_trip_and_errors() -> None:
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(3)
        assert threadpool.num_threads() == 3
        with pytest.raises(EmberError, match="expected a positive thread count, got 0"):
            threadpool.set_num_threads(0)
        assert threadpool.num_threads() == 3
    finally:
        threadpool.set_num_threads(previous)


def test_default_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_NUM_THREADS", raising=False)
    assert threadpool.default_num_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("EMBER_NUM_THREADS", "3")
    assert threadpool.default_num_threads() == 3
    monkeypatch.setenv("EMBER_NUM_THREADS", "many")
    with pytest.raises(EmberError, match="EMBER_NUM_THREADS must be a positive integer"):
        threadpool.default_num_threads()


def test_openmp_loads() -> None:
    assert "gomp" in threadpool.load_openmp()
    assert threadpool.openmp_thread_count() >= 1


_SCRIPT = textwrap.dedent("""
    import numpy as np
    from ember.codegen.jit import build_llvm
    from ember.runtime import threadpool
    from ember.tir import Call, For, ForKind, PrimFunc, Store, Var, buffer, const
    out = buffer("tid", (64,), "int32")
    i = Var("i")
    f = PrimFunc("tids", (out,), For(i, const(0), const(64), ForKind.PARALLEL,
                 Store(out, Call(out.dtype, "omp_get_thread_num", ()), (i,))))
    ids = np.full(64, -1, "int32")
    build_llvm(f)(ids)
    print(threadpool.num_threads(), sorted(set(ids.tolist())))
""")


@pytest.mark.parametrize("count,expected", [("1", "1 [0]"), ("2", "2 [0, 1]")])
def test_ember_num_threads_environment(count: str, expected: str) -> None:
    env = dict(os.environ, EMBER_NUM_THREADS=count, OMP_WAIT_POLICY="PASSIVE")
    result = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_parallel_results_match_serial_for_every_thread_count() -> None:
    from ember.codegen.jit import build_llvm
    from ember.tir import For, ForKind, Load, PrimFunc, Store, Var, buffer, const

    n = 1001  # not a multiple of the thread count
    a, b = buffer("A", (n,), "float64"), buffer("B", (n,), "float64")
    i = Var("i")
    f = PrimFunc("sq", (a, b), For(i, const(0), const(n), ForKind.PARALLEL,
                                   Store(b, Load(a, (i,)) * Load(a, (i,)), (i,))))
    mod = build_llvm(f)
    x = np.random.default_rng(1).random(n)
    previous = threadpool.num_threads()
    try:
        for count in (1, 2, 3, 7):
            threadpool.set_num_threads(count)
            out = np.zeros(n)
            mod(x, out)
            np.testing.assert_array_equal(out, x * x)
    finally:
        threadpool.set_num_threads(previous)
