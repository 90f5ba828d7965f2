"""Compile workers die with the compiling process; daemonic processes compile in-process;
a worker's failure names the fused group."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

from ember.errors import EmberError
from ember.graph.ir import GraphBuilder
from ember.lowering import compile as lowering_compile
from ember.lowering.workers import may_have_children, worker_pool

ORPHAN_SCRIPT = """
import os, sys, time
from ember.lowering.workers import worker_pool
pool = worker_pool(2)
pid = pool.submit(os.getpid).result()
open(sys.argv[1], "w").write(str(pid))
os.kill(os.getpid(), 9)      # the compile is killed; its worker must not outlive it
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for init to reap it is dead too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_with_a_killed_parent(tmp_path) -> None:
    pid_file = tmp_path / "worker.pid"
    done = subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT, str(pid_file)],
                          capture_output=True, timeout=120, cwd=os.getcwd())
    assert done.returncode == -9, done.stderr
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), f"worker {worker} outlived its parent"


def _two_kernel_graph():
    b = GraphBuilder("two")
    x = b.input("x", (4, 16), "float32")
    y, = b.add("Relu", [x])
    s, = b.add("ReduceSum", [y], {"axes": (1,), "keepdims": 0})
    t, = b.add("Tanh", [s])
    return b.finish([t])


def _compile_in_daemon(queue) -> None:
    import ember

    lowering_compile.PARALLEL_MIN_KERNELS = 1
    try:
        assert not may_have_children() and worker_pool(4) is None
        model = ember.compile(_two_kernel_graph(), cache=False, jobs=4)
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
        queue.put(("ok", model.run({"x": x})[0].tolist(), model.stats["compiled"]))
    except BaseException as error:  # noqa: BLE001 (reported to the test)
        queue.put(("error", f"{type(error).__name__}: {error}", 0))


def test_compile_inside_a_daemonic_process_falls_back_to_in_process() -> None:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=_compile_in_daemon, args=(queue,), daemon=True)
    worker.start()
    status, value, compiled = queue.get(timeout=120)
    worker.join(30)
    assert status == "ok", value
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    np.testing.assert_allclose(value, np.tanh(np.maximum(x, 0).sum(1)), rtol=1e-5)
    assert compiled == 1  # jobs=4 and a one-kernel threshold: the pool path, in a daemon


class _Group:
    name = "fused_relu_3"

    def describe(self) -> str:
        return "Relu"


@pytest.mark.parametrize("error,match", [
    (BrokenProcessPool("gone"), "fused group 'fused_relu_3' \\(Relu\\): the worker process "
                                "compiling it died"),
    (KeyError("x"), "fused group 'fused_relu_3' \\(Relu\\): compiling it in a worker process "
                    "failed: KeyError"),
])
def test_worker_failures_name_the_group(error, match) -> None:
    future: Future[bytes] = Future()
    future.set_exception(error)
    with pytest.raises(EmberError, match=match):
        lowering_compile._worker_result(_Group(), future)  # type: ignore[arg-type]
