"""Worker processes for compiling kernels: they die with the compiling process, and a process
that may not have children (a daemonic worker of a serving framework) compiles in-process.

    pool = worker_pool(4)        # None: compile here, serially
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
from concurrent.futures import Executor, ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def may_have_children() -> bool:
    """False inside a daemonic multiprocessing process, which may not start processes."""
    return not multiprocessing.current_process().daemon


def worker_pool(workers: int) -> Executor | None:
    """Forked worker processes (they start with ember already imported) that end when this
    process ends, even by SIGKILL; None where worker processes cannot be had."""
    if workers <= 1 or not may_have_children():
        return None
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return None
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=die_with_parent, initargs=(os.getpid(),))


def die_with_parent(parent: int) -> None:
    """Worker initializer: ask the kernel for SIGKILL when the parent dies (Linux), and leave
    at once if it already has (then this process was re-parented before the request).
    A killed compile otherwise leaves workers holding its stdout and stderr for minutes."""
    if sys.platform.startswith("linux"):
        libc_name = ctypes.util.find_library("c")
        if libc_name is not None:
            libc = ctypes.CDLL(libc_name, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
