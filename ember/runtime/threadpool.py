"""Threads for PARALLEL loops: ember's own persistent pool (or libgomp), sized by
EMBER_NUM_THREADS (default: all cores this process may run on).

Generated code calls `ember_parallel_launch(worker, closure, n)` with `n = min(
ember_num_threads, extent)`; the pool runs `worker(closure, tid, n)` on the calling thread
(tid 0) and on each of the n - 1 workers that is ready before the caller has finished, and
returns when all those are done; `worker` takes chunks of iterations from a counter in the
closure, so a late or descheduled worker never holds up a launch. The pool is LLVM IR
(ember/codegen/pool.ll) compiled once per process by
ember.codegen.pool: worker threads are created on first
use, spin for a short while after each job (so the next kernel of a model starts without a
wake-up) and then sleep on a futex, using no CPU while idle. A launch from inside a running
job (nested parallelism) or from a second Python thread while the pool is busy runs serially
on the caller. Workers are kept off the launching thread's CPU (EMBER_PIN_THREADS=0: not):
woken from sleep, a worker is otherwise often placed on the launcher's own CPU, and the two
take turns on one core for milliseconds while the other core idles.

EMBER_THREAD_POOL=gomp routes the same calls through libgomp's GOMP_parallel instead
(OMP_WAIT_POLICY / GOMP_SPINCOUNT then decide how its idle threads wait).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import numbers
import os
import platform

from ember.errors import ArgumentError, EmberError
from ember.runtime import cpu

NUM_THREADS_SYMBOL = "ember_num_threads"
LAUNCH_SYMBOL = "ember_parallel_launch"
# heap buffers of kernels (too big for the stack): a small cache of freed blocks in front of
# aligned_alloc / free, so a kernel run on every inference does not map and fault in fresh
# pages each time (glibc serves blocks over its mmap threshold with mmap/munmap)
ALLOC_SYMBOL = "ember_alloc"
FREE_SYMBOL = "ember_free"
PARALLEL_SYMBOLS = (LAUNCH_SYMBOL,)
POOLS = ("ember", "gomp")
# pause-loop iterations (about 25 ns each on Zen 4) a worker spins after a job before it
# sleeps, and the launcher spins waiting for the workers before it sleeps
DEFAULT_SPIN = 30000
JOIN_SPIN = 5000


# the pool's IR keeps 256 worker handles; a team is the launcher plus at most that many
MAX_THREADS = 257


def check_thread_count(count: object, where: str = "set_num_threads") -> int:
    """`count` as a thread count in [1, MAX_THREADS]; bools, floats and the like are refused
    (True would silently mean 1 and 1 << 40 would wrap in the pool's int32)."""
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise ArgumentError(f"{where}: expected an int thread count, got "
                            f"{type(count).__name__} {count!r}")
    if not 1 <= int(count) <= MAX_THREADS:
        raise ArgumentError(f"{where}: expected a positive thread count in [1, {MAX_THREADS}], "
                            f"got {int(count)}")
    return int(count)


def default_num_threads() -> int:
    """EMBER_NUM_THREADS if set, else the number of cores this process may run on."""
    text = os.environ.get("EMBER_NUM_THREADS", "").strip()
    if text:
        if not text.isdigit() or not 1 <= int(text) <= MAX_THREADS:
            raise EmberError(f"EMBER_NUM_THREADS must be a positive integer in [1, {MAX_THREADS}], "
                             f"got {text!r}")
        return int(text)
    return min(len(os.sched_getaffinity(0)), MAX_THREADS)


def pin_workers() -> bool:
    """EMBER_PIN_THREADS (default 1): keep the pool's workers off the CPU of the thread that
    launches parallel loops (0: leave placement to the OS)."""
    text = os.environ.get("EMBER_PIN_THREADS", "1").strip().lower()
    if text not in ("0", "1", "true", "false", "yes", "no", ""):
        raise EmberError(f"EMBER_PIN_THREADS must be 0 or 1, got {text!r}")
    return text not in ("0", "false", "no")


def pool_kind() -> str:
    """EMBER_THREAD_POOL ('ember', the default, or 'gomp')."""
    kind = os.environ.get("EMBER_THREAD_POOL", "ember").strip().lower() or "ember"
    if kind not in POOLS:
        raise EmberError(f"EMBER_THREAD_POOL must be one of {', '.join(POOLS)}, got {kind!r}")
    if kind == "ember" and futex_syscall() is None:
        return "gomp"  # no futex on this system: libgomp's pool
    return kind


_num_threads = ctypes.c_int32(default_num_threads())
_openmp: ctypes.CDLL | None = None

# SYS_futex of Linux per architecture family (the pool sleeps on a futex); 32-bit ARM: EABI
FUTEX_SYSCALLS = {"x86_64": 202, "aarch64": 98, "arm": 240}


def futex_number(arch: str) -> int | None:
    """SYS_futex of Linux for the architecture `arch` (a triple's or platform.machine()'s
    name: x86_64, aarch64, arm64, armv7a, armv7l, ...), None where the pool has none."""
    return FUTEX_SYSCALLS.get(cpu.family(arch))


def futex_syscall() -> int | None:
    """SYS_futex on this Linux machine, None elsewhere."""
    if platform.system() != "Linux":
        return None
    return futex_number(platform.machine())


def num_threads() -> int:
    """How many threads the next parallel loop uses at most."""
    return _num_threads.value


def set_num_threads(count: int) -> None:
    """Use at most `count` threads in parallel loops from now on (1 = run serially)."""
    _num_threads.value = check_thread_count(count)


def num_threads_address() -> int:
    """Address of the int32 the generated code reads as `ember_num_threads`."""
    return ctypes.addressof(_num_threads)


def load_openmp() -> str:
    """Load libgomp into the process (once; the C back end and EMBER_THREAD_POOL=gomp use
    it) and return its path."""
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
