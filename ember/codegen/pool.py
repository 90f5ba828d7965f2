"""The thread pool's code: its LLVM IR (the template pool.ll), compiled once per process for
the JIT, or into an exported library; and the controls of the JIT's pool.

Generated code calls `ember_parallel_launch(worker, closure, n)`; see ember/runtime/threadpool.py
for the thread count it reads and pool.ll for how the pool shares a launch among its workers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from pathlib import Path
from string import Template
from typing import Any

import llvmlite.binding as llvm

from ember.errors import EmberError
from ember.runtime import cpu, threadpool

_TEMPLATE = Template((Path(__file__).parent / "pool.ll").read_text())

# the CPU's spin-wait hint per architecture family (none where LLVM has no intrinsic)
_RELAX = {
    "x86_64": ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"),
    "aarch64": ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"),
    "arm": ("declare void @llvm.arm.hint(i32)", "call void @llvm.arm.hint(i32 1)"),
}
# families whose C long / size_t / pthread_t is 32 bits
_WORD32 = ("arm", "i386", "wasm32", "riscv32")

_pool: dict[str, Any] = {}


def pool_ir(triple: str, machine: str, futex: int, spin: int, pin: bool | None = None) -> str:
    """The pool module's LLVM IR for `triple` (`machine`: its architecture name as
    platform.machine() spells it; `futex`: the SYS_futex number; `pin`: keep workers off
    the launcher's CPU, default EMBER_PIN_THREADS)."""
    arch = cpu.family(machine)
    decl, call = _RELAX.get(arch, ("", ""))
    pin = threadpool.pin_workers() if pin is None else pin
    word32 = arch in _WORD32
    return _TEMPLATE.substitute(triple=triple, futex=futex, spin=spin,
                                join_spin=threadpool.JOIN_SPIN, relax_decl=decl,
                                relax_call=call, pin=int(pin), word="i32" if word32 else "i64",
                                to_word="trunc" if word32 else "bitcast")


def register_pool() -> None:
    """Compile the pool module once and publish `ember_parallel_launch` (and the heap block
    cache) to the JIT."""
    if _pool:
        return
    threadpool.load_openmp()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=2, jit=True)
    path = ctypes.util.find_library("gomp")
    if path is not None:
        llvm.load_library_permanently(path)  # GOMP_parallel for gomp_launch
    text = pool_ir(llvm.get_process_triple(), platform.machine(),
                   threadpool.futex_syscall() or 0, threadpool.DEFAULT_SPIN)
    module = llvm.parse_assembly(text)
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    kind = threadpool.pool_kind()
    launch = engine.get_function_address("pool_launch" if kind == "ember" else "gomp_launch")
    _pool.update(engine=engine, module=module, kind=kind, launch=launch,
                 spin=engine.get_global_value_address("pool_spin"),
                 join_spin=engine.get_global_value_address("pool_join_spin"),
                 reset=engine.get_function_address("pool_reset_after_fork"),
                 workers=engine.get_global_value_address("pool_workers"),
                 pin=engine.get_global_value_address("pool_pin"))
    llvm.add_symbol(threadpool.LAUNCH_SYMBOL, launch)
    for symbol in (threadpool.ALLOC_SYMBOL, threadpool.FREE_SYMBOL):
        llvm.add_symbol(symbol, engine.get_function_address(symbol))
    reset = ctypes.CFUNCTYPE(None)(_pool["reset"])
    _pool["reset_fn"] = reset
    os.register_at_fork(after_in_child=reset)  # the child has none of the parent's threads


def active_pool() -> str:
    """Which pool runs parallel loops in this process ('ember' or 'gomp')."""
    register_pool()
    return str(_pool["kind"])


def set_spin(iterations: int, join: int | None = None) -> None:
    """Pause-loop iterations an idle worker spins before sleeping (0: sleep at once), and
    (`join`) the launcher spins waiting for the workers before it sleeps."""
    if iterations < 0 or (join is not None and join < 0):
        raise EmberError(f"set_spin: expected non-negative counts, got {iterations}, {join}")
    register_pool()
    ctypes.c_int32.from_address(_pool["spin"]).value = iterations
    if join is not None:
        ctypes.c_int32.from_address(_pool["join_spin"]).value = join


def set_pinning(on: bool) -> None:
    """Keep the workers off the launching thread's CPU (True, the EMBER_PIN_THREADS default)
    or leave their placement to the OS from the next launch on (workers already kept off
    stay so until then)."""
    register_pool()
    ctypes.c_int32.from_address(_pool["pin"]).value = int(bool(on))


def pool_workers() -> int:
    """Worker threads the ember pool has started so far (the caller is not counted)."""
    register_pool()
    return ctypes.c_int32.from_address(_pool["workers"]).value


def parallel_launch_address() -> int:
    """Address of `ember_parallel_launch` (for linking generated code by hand)."""
    register_pool()
    return int(_pool["launch"])
