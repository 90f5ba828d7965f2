"""llvmlite.binding: target machines, the O3 pipeline, in-process JIT and object files.

    mod = build_llvm(func, Target("llvm"))      # compile once, call many times
    mod(a, b, c)
    obj = emit_object([func], "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
"""

from __future__ import annotations

import ctypes.util
import functools
import threading
from typing import Any

import llvmlite.binding as llvm

from ember.codegen.llvm import codegen_llvm
from ember.codegen.llvm_target import check_llvm_target, check_runs_here
from ember.errors import CodegenError
from ember.codegen.pool import register_pool
from ember.runtime import threadpool
from ember.codegen.params import params_of
from ember.runtime.module import Module
from ember.target import Target
from ember.tir.function import PrimFunc
from ember.tir.structural import structural_hash

_CACHE: dict[tuple[str, ...], dict[str, Module]] = {}
_LOCK = threading.Lock()


@functools.cache
def _initialize_native() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def _initialize_all() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def _runtime_symbols() -> None:
    """Make libgomp, libgcc's helpers (e.g. double -> half) and `ember_num_threads` visible
    to JIT-compiled code (an unresolved symbol would jump to address 0)."""
    llvm.load_library_permanently(threadpool.load_openmp())
    register_pool()
    libgcc = ctypes.util.find_library("gcc_s")
    if libgcc is not None:
        llvm.load_library_permanently(libgcc)
    llvm.add_symbol(threadpool.NUM_THREADS_SYMBOL, threadpool.num_threads_address())


def target_machine(target: Target, jit: bool = False) -> llvm.TargetMachine:
    """An LLVM TargetMachine for `target` at -O3 (`jit=True` for in-process execution)."""
    if target.kind not in ("llvm", "wasm", "cuda", "rocm"):
        raise CodegenError(f"target '{target}' is not generated through LLVM")
    check_llvm_target(target)  # an unknown CPU can end the process inside LLVM
    if jit:
        check_runs_here(target)  # code for a CPU with more than this one's would die here
    if target.is_host:
        _initialize_native()
    else:
        _initialize_all()
    try:
        llvm_target = llvm.Target.from_triple(target.llvm_triple)
    except RuntimeError as error:
        raise CodegenError(f"target '{target}': LLVM cannot generate code for triple "
                           f"'{target.triple}': {error}") from None
    reloc = "default" if jit else "pic"
    return llvm_target.create_target_machine(cpu=target.cpu, features=",".join(target.features),
                                             opt=3, reloc=reloc, codemodel="jitdefault",
                                             jit=jit)


def optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> None:
    """Run LLVM's O3 pipeline (with loop and SLP vectorization) on `module` in place.

    Not SLP for WebAssembly code with float16 vectors: it would fuse the lane-by-lane half
    compares the code generator writes there back into a vector compare, which LLVM's
    WebAssembly back end then loops forever legalizing."""
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = not (machine.triple.startswith("wasm")
                                     and " x half>" in str(module))
    options.loop_unrolling = True
    options.loop_interleaving = True
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)


def parse_verified(text: str, what: str = "LLVM IR") -> llvm.ModuleRef:
    """LLVM's module for generated IR text, verified; invalid IR is our bug, shown whole."""
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as error:
        raise CodegenError(f"generated {what} is invalid ({error}); IR:\n{text}") from None
    return module


def parse_module(funcs: list[PrimFunc], target: Target,
                 machine: llvm.TargetMachine) -> llvm.ModuleRef:
    """The functions' LLVM IR, parsed and verified for `machine` (not yet optimized)."""
    ir_module = codegen_llvm(funcs, target)
    ir_module.data_layout = str(machine.target_data)
    module = parse_verified(str(ir_module))
    module.triple = target.llvm_triple
    module.data_layout = str(machine.target_data)
    return module


def compile_llvm(funcs: list[PrimFunc], target: Target | str | None = None) -> dict[str, Module]:
    """JIT-compile `funcs` for this machine into one Module per function, by name.

    Structurally equal kernels with the same names and target compile once per process.
    """
    target = Target(target if target is not None else "llvm")
    if not target.is_host:
        raise CodegenError(f"cannot run code for '{target}' on this machine "
                           f"({llvm.get_process_triple()}); use emit_object instead")
    key = (str(target),) + tuple(f"{f.name}:{structural_hash(f)}" for f in funcs)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        compiled = _compile(funcs, target)
        _CACHE[key] = compiled
        return compiled


def build_llvm(func: PrimFunc, target: Target | str | None = None) -> Module:
    """JIT-compile one PrimFunc: `build_llvm(func, "llvm")(a, b, c)`."""
    return compile_llvm([func], target)[func.name]


def _compile(funcs: list[PrimFunc], target: Target) -> dict[str, Module]:
    machine = target_machine(target, jit=True)
    module = parse_module(funcs, target, machine)
    optimize(module, machine)
    sources = {"ll": str(module), "asm": machine.emit_assembly(module)}
    _runtime_symbols()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    keepalive: Any = (engine, module, machine)
    result = {}
    for func in funcs:
        address = engine.get_function_address(func.name)
        if not address:
            raise CodegenError(f"JIT produced no symbol for function '{func.name}'")
        result[func.name] = Module(func.name, params_of(func), address, sources, keepalive)
    return result


def _compile_for(funcs: list[PrimFunc], target: Target | str) -> tuple[llvm.ModuleRef,
                                                                      llvm.TargetMachine]:
    target = Target(target)
    machine = target_machine(target, jit=False)
    module = parse_module(funcs, target, machine)
    optimize(module, machine)
    return module, machine


def emit_object(funcs: list[PrimFunc], target: Target | str) -> bytes:
    """An object file (ELF, Mach-O, COFF or wasm per the triple) defining `funcs`."""
    module, machine = _compile_for(funcs, target)
    return bytes(machine.emit_object(module))


def emit_assembly(funcs: list[PrimFunc], target: Target | str) -> str:
    """Assembly text for `funcs`; for nvptx64-nvidia-cuda this is PTX."""
    module, machine = _compile_for(funcs, target)
    return str(machine.emit_assembly(module))


def emit_llvm_ir(funcs: list[PrimFunc], target: Target | str) -> str:
    """Optimized LLVM IR text for `funcs` on `target`."""
    module, _ = _compile_for(funcs, target)
    return str(module)


def clear_cache() -> None:
    """Forget compiled kernels (their code stays alive while Modules reference it)."""
    with _LOCK:
        _CACHE.clear()
