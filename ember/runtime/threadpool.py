"""Threads for PARALLEL loops: libgomp's pool, sized by EMBER_NUM_THREADS (default: all cores).

Generated code calls `GOMP_parallel(fn, closure, n, 0)` with `n = min(ember_num_threads,
extent)`, where `ember_num_threads` is an int32 the runtime owns (this module's, for code
JIT-compiled in this process). libgomp keeps its threads alive between calls; export
OMP_WAIT_POLICY=PASSIVE on shared machines so idle workers sleep instead of spinning.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from ember.errors import EmberError

NUM_THREADS_SYMBOL = "ember_num_threads"
PARALLEL_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")


def default_num_threads() -> int:
    """EMBER_NUM_THREADS if set, else the number of cores this process may run on."""
    text = os.environ.get("EMBER_NUM_THREADS", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise EmberError(f"EMBER_NUM_THREADS must be a positive integer, got {text!r}")
        return int(text)
    return len(os.sched_getaffinity(0))


_num_threads = ctypes.c_int32(default_num_threads())
_openmp: ctypes.CDLL | None = None


def num_threads() -> int:
    """How many threads the next parallel loop uses at most."""
    return _num_threads.value


def set_num_threads(count: int) -> None:
    """Use at most `count` threads in parallel loops from now on (1 = run serially)."""
    if count < 1:
        raise EmberError(f"set_num_threads: expected a positive thread count, got {count}")
    _num_threads.value = count


def num_threads_address() -> int:
    """Address of the int32 the generated code reads as `ember_num_threads`."""
    return ctypes.addressof(_num_threads)


def load_openmp() -> str:
    """Load libgomp into the process (once) with its symbols global; returns its path."""
    global _openmp
    path = ctypes.util.find_library("gomp")
    if path is None:
        raise EmberError("parallel loops need libgomp (the GNU OpenMP runtime), which was "
                         "not found; install libgomp1 or remove the parallel schedule")
    if _openmp is None:
        _openmp = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return path


def openmp_thread_count() -> int:
    """omp_get_max_threads() of the loaded libgomp (for diagnostics)."""
    load_openmp()
    assert _openmp is not None
    return int(_openmp.omp_get_max_threads())
