"""Thread pool for parallel loops: thread counts, EMBER_NUM_THREADS, both pools, idle sleep,
concurrent and forked callers."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp loads; idle threads sleep

import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ember.errors import EmberError  # noqa: E402
from ember.codegen import pool  # noqa: E402
from ember.runtime import threadpool  # noqa: E402


def test_set_num_threads_round_trip_and_errors() -> None:
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(3)
        assert threadpool.num_threads() == 3
        with pytest.raises(EmberError,
                           match="expected a positive thread count in \\[1, 257\\], got 0"):
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
    import ctypes
    import numpy as np
    from ember.codegen import pool
    from ember.codegen.jit import build_llvm
    from ember.runtime import threadpool
    from ember.tir import Call, Evaluate, For, ForKind, PrimFunc, Seq, Store, Var, buffer, const
    out = buffer("tid", (64,), "int32")
    i = Var("i")
    # each iteration sleeps 1 ms, so every thread of the team is up before the work is gone
    body = Seq((Evaluate(Call(out.dtype, "usleep", (const(1000, "int32"),))),
                Store(out, Call(out.dtype, "gettid", ()), (i,))))
    f = PrimFunc("tids", (out,), For(i, const(0), const(64), ForKind.PARALLEL, body))
    ids = np.full(64, -1, "int32")
    build_llvm(f)(ids)
    me = ctypes.CDLL(None).gettid()
    print(pool.active_pool(), threadpool.num_threads(), len(set(ids.tolist())),
          int(me in ids.tolist()))  # the calling thread takes part
""")


@pytest.mark.parametrize("pool", ["ember", "gomp"])
@pytest.mark.parametrize("count,expected", [("1", "1 1 1"), ("2", "2 2 1"), ("3", "3 3 1")])
def test_ember_num_threads_environment(pool: str, count: str, expected: str) -> None:
    env = dict(os.environ, EMBER_NUM_THREADS=count, OMP_WAIT_POLICY="PASSIVE",
               EMBER_THREAD_POOL=pool)
    result = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{pool} {expected}"


def test_unknown_pool_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_THREAD_POOL", "tbb")
    with pytest.raises(EmberError, match="EMBER_THREAD_POOL must be one of ember, gomp"):
        threadpool.pool_kind()
    with pytest.raises(EmberError, match="non-negative"):
        pool.set_spin(-1)


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


def _square_kernel(n: int):  # type: ignore[no-untyped-def]
    from ember.codegen.jit import build_llvm
    from ember.tir import For, ForKind, Load, PrimFunc, Store, Var, buffer, const

    a, b = buffer("A", (n,), "float64"), buffer("B", (n,), "float64")
    i = Var("i")
    return build_llvm(PrimFunc(f"sq{n}", (a, b), For(i, const(0), const(n), ForKind.PARALLEL,
                                                     Store(b, Load(a, (i,)) * 2.0, (i,)))))


def test_idle_workers_sleep() -> None:
    import time

    mod = _square_kernel(4096)
    x, out = np.arange(4096.0), np.zeros(4096)
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(2)
        for _ in range(200):
            mod(x, out)
        np.testing.assert_array_equal(out, 2 * x)
        time.sleep(0.05)  # longer than the spin
        start = time.process_time()
        time.sleep(0.3)
        assert time.process_time() - start < 0.05  # nobody spins while there is no work
    finally:
        threadpool.set_num_threads(previous)


def test_concurrent_callers_from_python_threads() -> None:
    import threading

    n = 20000
    mod = _square_kernel(n)
    x = np.random.default_rng(3).random(n)
    failures: list[str] = []

    def hammer() -> None:
        out = np.zeros(n)
        for _ in range(200):
            out[:] = 0
            mod(x, out)  # the pool may be busy with the other thread: then serial
            if not np.array_equal(out, 2 * x):
                failures.append("wrong result")
                return

    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(2)
        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads) and not failures
    finally:
        threadpool.set_num_threads(previous)


def test_forked_child_gets_a_fresh_pool() -> None:
    import time

    mod = _square_kernel(5000)
    x = np.arange(5000.0)
    previous = threadpool.num_threads()
    threadpool.set_num_threads(2)
    try:
        mod(x, np.zeros(5000))  # the parent's workers exist now
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            out = np.zeros(5000)
            mod(x, out)
            os._exit(0 if np.array_equal(out, 2 * x) else 1)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                pytest.fail("the forked child hung in a parallel loop")
            time.sleep(0.01)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        threadpool.set_num_threads(previous)


_PIN_SCRIPT = textwrap.dedent("""
    import os
    import numpy as np
    from ember.codegen import pool
    from ember.codegen.jit import build_llvm
    from ember.runtime import threadpool
    from ember.tir import Call, Evaluate, For, ForKind, PrimFunc, Seq, Store, Var, buffer, const
    out = buffer("tid", (32,), "int32")
    i = Var("i")
    body = Seq((Evaluate(Call(out.dtype, "usleep", (const(1000, "int32"),))),
                Store(out, Call(out.dtype, "gettid", ()), (i,))))
    f = build_llvm(PrimFunc("tids", (out,), For(i, const(0), const(32), ForKind.PARALLEL, body)))
    ids = np.full(32, -1, "int32")
    f(ids)
    f(ids)
    import ctypes
    me = ctypes.CDLL(None).gettid()
    workers = sorted(set(ids.tolist()) - {me})
    allowed = sorted(os.sched_getaffinity(0))
    for tid in workers:
        text = open(f"/proc/self/task/{tid}/status").read()
        line = [x for x in text.splitlines() if x.startswith("Cpus_allowed_list")][0]
        print(line.split(":")[1].strip(), ",".join(map(str, allowed)))
""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("pin", ["1", "0"])
def test_workers_are_kept_off_the_launchers_cpu(pin: str) -> None:
    env = dict(os.environ, EMBER_NUM_THREADS="2", EMBER_THREAD_POOL="ember",
               EMBER_PIN_THREADS=pin)
    result = subprocess.run([sys.executable, "-c", _PIN_SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 1  # one worker took part

    def cpus(text: str) -> set[int]:
        out: set[int] = set()
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
        return out

    worker, allowed = (cpus(t) for t in lines[0].split())
    if pin == "1":  # every allowed CPU but the one the launcher ran on
        assert worker < allowed and len(worker) == len(allowed) - 1
    else:
        assert worker == allowed


def test_pin_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_PIN_THREADS", "sometimes")
    with pytest.raises(EmberError, match="EMBER_PIN_THREADS must be 0 or 1"):
        threadpool.pin_workers()
    monkeypatch.setenv("EMBER_PIN_THREADS", "0")
    assert not threadpool.pin_workers()
